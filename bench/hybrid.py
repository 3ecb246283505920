"""Hybrid budget on TREC RAG 2025: people judge B % of each topic, a calibrated model the rest.

Run from the repository root: ``.venv/bin/python bench/hybrid.py`` (``--seeds N``). Reads the
NIST qrels and UMBRELA-v2's labels on the same 10,284 pairs from ``../shared/data/trec-rag/`` and
prints binary Cohen's kappa (label >= 2) of the merged qrels against the NIST qrels for budgets
10-60 %, per routing (``qrels/hybrid.py``), mean of the seeds; then the ceiling of any routing
that only knows the model's label: an oracle that knows each topic's true rate of relevance per
model label, judges the labels with the most expected errors first and fills the rest by majority.
Target: >= 0.70 at 30 % with routing (model alone 0.431; random 30 % about 0.63).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qrels import hybrid  # noqa: E402
from qrels.formats import read_qrels_file  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "trec-rag"
PEOPLE = DATA / "qrels.rag25.test.txt"
MODEL = DATA / "qrels.rag25.test-umbrela2.txt"


def labels(path: Path) -> dict[tuple[str, str], int]:
    return {(j.topic_id, j.doc_id): j.label for j in read_qrels_file(path).judgments}


def oracle_kappa(people, model, budget: float, threshold: int = 2) -> float:
    """Expected kappa of the best label-only routing (approximated as 2 * accuracy - 1, exact
    when the people's relevant share is 1/2; here it is 0.502)."""
    by_topic = defaultdict(Counter)
    for pair, label in people.items():
        by_topic[pair[0]][(model[pair], label >= threshold)] += 1
    errors = 0.0
    for counts in by_topic.values():
        per_pair = []
        for stratum in {m for m, _ in counts}:
            yes, no = counts[(stratum, True)], counts[(stratum, False)]
            per_pair += [min(yes, no) / (yes + no)] * (yes + no)
        per_pair.sort(reverse=True)
        errors += sum(per_pair[math.floor(budget * len(per_pair) / 100) :])
    return 2 * (1 - errors / len(people)) - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    if not DATA.is_dir():
        sys.exit(f"{DATA} is absent")
    people, model = labels(PEOPLE), labels(MODEL)
    start = time.perf_counter()
    points = hybrid.curve(people=people, model=model, seeds=range(args.seeds))
    took = time.perf_counter() - start
    print(
        f"{len(people):,} pairs, {len({t for t, _ in people})} topics, mean of {args.seeds} seeds"
    )
    print(f"model alone: {hybrid.model_alone_kappa(people=people, model=model):.3f}")
    by_key = {(p.budget, p.routing): p for p in points}
    print("budget  " + "  ".join(f"{r:>9}" for r in hybrid.ROUTINGS) + "  label-only oracle")
    for budget in hybrid.DEFAULT_BUDGETS:
        cells = "  ".join(f"{by_key[(budget, r)].mean:>9.3f}" for r in hybrid.ROUTINGS)
        spread = by_key[(budget, "uncertain")].kappas
        print(
            f"{budget:>5} %  {cells}  {oracle_kappa(people, model, budget):>17.3f}"
            f"   (uncertain {min(spread):.3f}-{max(spread):.3f})"
        )
    print(f"{len(points) * args.seeds} simulations in {took:.1f} s")


if __name__ == "__main__":
    main()
