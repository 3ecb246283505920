"""Times qrels.agreement on 100,000 doubly-judged pairs (two assessors, 50 topics, labels 0-2).

Run from the repository root: ``python bench/agreement.py``. Prints seconds for
pairwise_agreement without bootstrap, with bootstrap=1000 (overall and per topic), and
group_agreement for a third assessor on the same pairs. The target is under a second for the
pairwise statistics including the per-topic ones.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qrels.agreement import group_agreement, pairwise_agreement

PAIRS = 100_000
TOPICS = 50
LABELS = [0, 1, 2]


def make_judgments(assessors: int, seed: int = 0) -> dict[str, dict[tuple[str, str], int]]:
    """Assessor "a" labels at random; the others copy a's label 70% of the time."""
    rng = np.random.default_rng(seed)
    first = rng.choice(LABELS, size=PAIRS, p=[0.7, 0.15, 0.15])
    pairs = [(str(1 + i % TOPICS), f"doc{i:07d}") for i in range(PAIRS)]
    judgments = {"a": dict(zip(pairs, first.tolist(), strict=True))}
    for index in range(1, assessors):
        other = np.where(rng.random(PAIRS) < 0.7, first, rng.choice(LABELS, size=PAIRS))
        judgments[chr(ord("a") + index)] = dict(zip(pairs, other.tolist(), strict=True))
    return judgments


def best_of(repeats: int, call) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    two = make_judgments(2)
    three = make_judgments(3)
    plain = best_of(3, lambda: pairwise_agreement(two, labels=LABELS, threshold=1, bootstrap=0))
    booted = best_of(3, lambda: pairwise_agreement(two, labels=LABELS, threshold=1, bootstrap=1000))
    binary = best_of(
        3,
        lambda: pairwise_agreement(two, labels=LABELS, threshold=1, binary=True, bootstrap=1000),
    )
    group = best_of(1, lambda: group_agreement(three, labels=LABELS, threshold=1))
    print(f"pairs={PAIRS} topics={TOPICS} labels={LABELS} (best of 3)")
    print(f"pairwise_agreement bootstrap=0:                {plain:.3f} s")
    print(f"pairwise_agreement bootstrap=1000:             {booted:.3f} s")
    print(f"pairwise_agreement binary, bootstrap=1000:     {binary:.3f} s")
    print(f"group_agreement, 3 assessors (Fleiss, alpha):  {group:.3f} s")


if __name__ == "__main__":
    main()
