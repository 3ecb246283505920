"""Benchmark: the stopping estimates of ``pooling.stopping`` replayed on TREC-COVID round 1.

    .venv/bin/python bench/stopping.py [--data ../shared/data] [--methods fusion rrf decay]
                                       [--orders bandit:0 mtf:0 depth:0 random:0 bandit:5 mtf:5]
                                       [--target 0.8] [--json]

Setting as in ``bench/adjudication.py`` (issue 15): the 143 round-1 runs cut to the judged pairs,
relevant = label >= 1, each topic adjudicated on its own by an assessor answering from the qrels,
through ``pooling.adjudication.replay`` (the code the judging screen and ``manage.py replay``
use). For every order (``ORDER:BURN_IN``) and method: on how many of the 30 topics the rule, told
to stop at the target, stops with true recall in [target - 5, target + 10] points (issue 15's
[75 %, 90 %] for 80 %), split into odd and even topics (a method with a constant chosen on one
half is checked on the other); how many stop early (below) and late (above); the median true
recall at the stop; the judgments made up to the stops, summed; CPU seconds for the order.

Prints figures only; asserts nothing. Each (order, method) takes from a few seconds (decay) to a
couple of minutes (fusion).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from adjudication import load  # noqa: E402

from pooling import adjudication, stopping  # noqa: E402

ORDERS = ["bandit:0", "mtf:0", "depth:0", "random:0", "bandit:5", "mtf:5"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--methods", nargs="+", choices=stopping.METHODS, default=stopping.METHODS)
    parser.add_argument("--orders", nargs="+", default=ORDERS, help="ORDER:BURN_IN, e.g. bandit:5")
    parser.add_argument("--target", type=float, default=stopping.DEFAULT_TARGET)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    runs, qrels = load(args.data)
    low, high = args.target - 0.05, args.target + 0.10
    rows = []
    for spec in args.orders:
        order, _, burn_in = spec.partition(":")
        for method in args.methods:
            started = time.process_time()
            replays = adjudication.replay(
                runs,
                qrels,
                order=order,
                burn_in=int(burn_in or 0),
                target=args.target,
                stopping_method=method,
            )
            seconds = time.process_time() - started
            recall = {t.topic_id: t.recall_at(t.stop_at) if t.stop_at else 1.0 for t in replays}
            within = [t for t, r in recall.items() if low - 1e-9 <= r <= high + 1e-9]
            rows.append(
                {
                    "order": spec,
                    "method": method,
                    "within": len(within),
                    "within_odd": sum(1 for t in within if int(t) % 2),
                    "within_even": sum(1 for t in within if int(t) % 2 == 0),
                    "early": sum(1 for r in recall.values() if r < low - 1e-9),
                    "late": sum(1 for r in recall.values() if r > high + 1e-9),
                    "median_recall": statistics.median(recall.values()),
                    "judged_at_stops": sum(t.stop_at or t.judged for t in replays),
                    "cpu_seconds": round(seconds, 1),
                    "per_topic": {
                        t.topic_id: {
                            "stop_at": t.stop_at,
                            "true_recall": round(recall[t.topic_id], 4),
                            "estimated_recall": (
                                round(t.stop_estimate, 4) if t.stop_estimate is not None else None
                            ),
                        }
                        for t in replays
                    },
                }
            )
            if not args.json:
                row = rows[-1]
                print(
                    f"{spec:<10}{method:<8} in [{low:.0%}, {high:.0%}]: {row['within']:>2}/30"
                    f" (odd {row['within_odd']:>2}, even {row['within_even']:>2})"
                    f"  early {row['early']:>2}  late {row['late']:>2}"
                    f"  median recall {row['median_recall']:.0%}"
                    f"  judged {row['judged_at_stops']:>5,}  {seconds:>5.0f} s CPU",
                    flush=True,
                )
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
