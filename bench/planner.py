"""Time the depth planner and depth pools on synthetic runs of a realistic shape.

    /work/venv/bin/python bench/planner.py [--runs 100] [--topics 50] [--length 1000]

Each topic has its own collection of ~5,000 candidate documents with Zipf-like prior weights
(w_i = 1 / i); each run orders a weighted sample without replacement of `length` of them
(Gumbel-top-k: log w_i + Gumbel noise, sorted), so runs agree on the heavy documents near the top
and diverge in the tail, as submitted runs do. The default shape pools ~2,800 distinct documents per
topic at depth 100, 28% of runs x k; the 143 TREC-COVID round-1 runs give 27% at that depth.

depth_pool allocates a PoolEntry and a list per pooled pair (plus the runs' lists in memory), so
Python's cyclic garbage collector takes a good part of its time; the last line shows the time with
the collector paused, for comparison only (the library never touches the collector).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pooling.strategies import Runs, depth_pool, plan_depths

DEPTHS = (1, 5, 10, 20, 50, 100)


def synthetic_runs(
    *, runs: int, topics: int, length: int, candidates: int = 5000, seed: int = 0
) -> Runs:
    rng = np.random.default_rng(seed)
    log_weights = -np.log(np.arange(1, candidates + 1))
    names = [[f"t{t}-d{i:05d}" for i in range(candidates)] for t in range(topics)]
    data: dict[str, dict[str, list[str]]] = {}
    for r in range(runs):
        by_topic = {}
        for t in range(topics):
            keys = log_weights + rng.gumbel(size=candidates)
            top = np.argpartition(-keys, length)[:length]
            order = top[np.argsort(-keys[top])]
            by_topic[str(t + 1)] = [names[t][i] for i in order.tolist()]
        data[f"run{r:03d}"] = by_topic
    return data


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def set_union_floor(runs: Runs, depth: int) -> dict[str, list[str]]:
    """The least any depth pool can cost: a set union per topic and a sort, no provenance."""
    topics = sorted({t for by_topic in runs.values() for t in by_topic})
    return {
        t: sorted({d for by_topic in runs.values() for d in by_topic.get(t, ())[:depth]})
        for t in topics
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--length", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    start = time.perf_counter()
    runs = synthetic_runs(runs=args.runs, topics=args.topics, length=args.length)
    print(
        f"generated {args.runs} runs x {args.topics} topics x {args.length} docs "
        f"in {time.perf_counter() - start:.1f} s"
    )
    judged = {
        (t, d)
        for by_topic in list(runs.values())[:3]
        for t, ds in by_topic.items()
        for d in ds[:20]
    }

    plan = best_of(args.repeats, lambda: plan_depths(runs, DEPTHS, judged=judged))
    print(f"plan_depths, depths {DEPTHS}: {plan * 1000:.0f} ms (best of {args.repeats})")
    for row in plan_depths(runs, DEPTHS, judged=judged):
        print(
            f"  k={row.depth:>3}  {row.docs_per_topic_mean:8.1f} docs/topic  "
            f"share {row.share_of_runs_x_k:5.1%}  new {row.new_docs:>7}  "
            f"{row.assessor_hours:7.1f} h"
        )

    pool = best_of(args.repeats, lambda: depth_pool(runs, depth=100))
    floor = best_of(args.repeats, lambda: set_union_floor(runs, 100))
    print(f"depth_pool(depth=100): {pool * 1000:.0f} ms; set-union floor: {floor * 1000:.0f} ms")
    gc.disable()
    try:
        paused = best_of(args.repeats, lambda: depth_pool(runs, depth=100))
    finally:
        gc.enable()
    print(f"depth_pool(depth=100) with the garbage collector paused: {paused * 1000:.0f} ms")


if __name__ == "__main__":
    main()
