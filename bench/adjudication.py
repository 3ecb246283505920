"""Benchmark: adaptive adjudication replayed on TREC-COVID round 1, every order beside depth-k.

    .venv/bin/python bench/adjudication.py [--data ../shared/data] [--loro] [--json]
                                           [--stopping fusion|rrf|decay]

Setting (issue 15): the 143 round-1 runs and the round-1 qrels; the universe is the judged pairs
(each run's list of a topic cut down to the documents the qrels judge, in trec_eval order);
relevant = label >= 1; each topic is adjudicated on its own, by an assessor who answers from the
qrels. Every order is driven through ``pooling.adjudication.Adjudicator``, the code that serves
assessors in an adaptive pool.

Printed per order: judgments needed, summed over the 30 topics, to find 50/80/90/95 % of each
topic's relevant documents; the share of depth-k order's judgments at 80 %; the stopping rule told
to stop at 80 % (how many topics it stops with true recall in [75 %, 90 %], and the median true
recall when it says stop; ``--stopping decay`` gives the first estimate's figure, 10/30 for the
bandit; ``bench/stopping.py`` compares the methods); the selection cost per judgment (next +
judge, CPU, median and 99th percentile). ``--loro`` adds the leave-one-run-out check (each run
left out of the pool in turn: the share of its top-10 judged when the others' order reaches
80 %), which takes a few minutes.

Reads the runs with the project's own parser (``pooling.formats.read_run_file``, about 25 s).
Prints figures only; asserts nothing.
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

from pooling import adjudication, stopping  # noqa: E402
from pooling.formats import read_run_file  # noqa: E402
from qrels.formats import read_qrels_file  # noqa: E402

# (label, order, credit, burn-in): the headline orders at burn-in 0, then the fairness guard.
SETTINGS = [
    ("depth-k", "depth", "prefix", 0),
    ("random", "random", "prefix", 0),
    ("mtf", "mtf", "prefix", 0),
    ("bandit (prefix credit)", "bandit", "prefix", 0),
    ("bandit (pulled credit)", "bandit", "pulled", 0),
    ("mtf, burn-in 1", "mtf", "prefix", 1),
    ("bandit, burn-in 1", "bandit", "prefix", 1),
    ("mtf, burn-in 5", "mtf", "prefix", 5),
    ("bandit, burn-in 5", "bandit", "prefix", 5),
]


def load(data: Path) -> tuple[dict, dict]:
    round1 = data / "trec-covid-round1"
    parsed = read_qrels_file(round1 / "qrels" / "qrels-rnd1.txt")
    qrels: dict[str, dict[str, int]] = {}
    for judgment in parsed.judgments:
        qrels.setdefault(judgment.topic_id, {})[judgment.doc_id] = judgment.label
    runs = {}
    for path in sorted((round1 / "runs").iterdir()):
        for run in read_run_file(path):
            runs[run.tag] = {topic: ranked.docids for topic, ranked in run.topics.items()}
    return adjudication.condense(runs, qrels), qrels


def selection_cost(runs: dict, qrels: dict, order: str, credit: str, burn_in: int) -> list[float]:
    """CPU seconds of next() + judge() for every judgment of every topic."""
    costs = []
    for topic_id in sorted(qrels, key=int):
        lists = {key: t[topic_id] for key, t in runs.items() if topic_id in t}
        adjudicator = adjudication.Adjudicator(lists, order=order, credit=credit, burn_in=burn_in)
        labels = qrels[topic_id]
        while True:
            start = time.process_time()
            choice = adjudicator.next()
            if choice is None:
                break
            adjudicator.judge(choice.doc_id, labels.get(choice.doc_id, 0), run=choice.run)
            costs.append(time.process_time() - start)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--loro", action="store_true", help="add the leave-one-run-out check")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--stopping", choices=stopping.METHODS, default=stopping.DEFAULT_METHOD, help="estimate"
    )
    args = parser.parse_args()

    started = time.perf_counter()
    runs, qrels = load(args.data)
    pairs = sum(len(labels) for labels in qrels.values())
    print(
        f"TREC-COVID round 1: {len(runs)} runs, {len(qrels)} topics, {pairs} judged pairs "
        f"(read in {time.perf_counter() - started:.0f} s)"
    )
    rows = []
    baseline = None
    for name, order, credit, burn_in in SETTINGS:
        replays = adjudication.replay(
            runs,
            qrels,
            order=order,
            credit=credit,
            burn_in=burn_in,
            stopping_method=args.stopping,
        )
        needed = {
            f: sum(t.needed(f) or t.judged for t in replays) for f in adjudication.RECALL_POINTS
        }
        if baseline is None:
            baseline = needed[0.8]
        stops = [t.recall_at(t.stop_at) for t in replays if t.stop_at is not None]
        costs = sorted(selection_cost(runs, qrels, order, credit, burn_in))
        row = {
            "order": name,
            "needed": {f"{round(f * 100)}%": n for f, n in needed.items()},
            "share_of_depth_at_80": needed[0.8] / baseline,
            "stop_within_75_90": sum(1 for r in stops if 0.75 <= r <= 0.9),
            "stop_median_recall": statistics.median(stops) if stops else None,
            "stop_judgments": sum(t.stop_at or t.judged for t in replays),
            "cost_ms_median": 1000 * costs[len(costs) // 2],
            "cost_ms_p99": 1000 * costs[int(len(costs) * 0.99)],
            "judged_total": sum(t.judged for t in replays),
        }
        if args.loro:
            shares = adjudication.leave_one_run_out(
                runs, qrels, order=order, credit=credit, burn_in=burn_in
            )
            row["loro_top10_min"] = min(shares.values())
            row["loro_top10_mean"] = statistics.mean(shares.values())
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    head = f"{'order':<24}{'50%':>6}{'80%':>6}{'90%':>6}{'95%':>6}{'80% vs depth':>14}"
    head += f"{'stop ok/30':>12}{'stop recall':>13}{'ms/judgment':>13}"
    if args.loro:
        head += f"{'LORO top-10 min/mean':>22}"
    print(head)
    for row in rows:
        n = row["needed"]
        line = f"{row['order']:<24}{n['50%']:>6}{n['80%']:>6}{n['90%']:>6}{n['95%']:>6}"
        line += f"{row['share_of_depth_at_80']:>13.0%} {row['stop_within_75_90']:>11}"
        recall = row["stop_median_recall"]
        line += f"{recall:>13.0%}" if recall is not None else f"{'-':>13}"
        line += f"{row['cost_ms_median']:>7.3f}/{row['cost_ms_p99']:.3f}"
        if args.loro:
            line += f"{row['loro_top10_min']:>14.0%} / {row['loro_top10_mean']:.0%}"
        print(line)
    print(
        "judgments needed summed over topics; stop ok = topics where the stopping rule"
        f" (target 80 %, {args.stopping} estimate) stopped with true recall in [75 %, 90 %];"
        " ms/judgment = next()+judge() CPU, median/p99"
    )


if __name__ == "__main__":
    main()
