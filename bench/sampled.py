"""Replay benchmark: xinfAP (qrels.sampled) against trec_eval's infAP on stratified samples of
TREC-COVID round 1, both against AP on the full judgments.

    .venv/bin/python bench/sampled.py [--seeds 10] [--resamples 1000] [--settings NAME,…]

The round-1 qrels (``../shared/data/trec-covid-round1``) are taken as complete truth over the
pairs they judge: every one of the 143 runs is restricted to its judged documents (order kept),
so that the pool of the restricted runs is exactly the judged pairs that some run retrieved.
For each setting, ``pooling.strategies.sample_pool`` draws a stratified sample of that pool
(strata by a document's best rank over the runs) with each seed, and every run is scored:

  truth    trec_eval's AP (pytrec_eval) on the full labels of the pooled pairs
  xinfAP   qrels.sampled on the sample (sample_eval's conventions), mean over topics
  infAP    trec_eval's infAP (pytrec_eval) on the same sample, the unsampled pairs as -1

Printed per setting and estimator: the share of the pool judged; the mean bias over runs and
seeds (estimate - truth) and the RMSE; Kendall's tau and tau_AP (Yilmaz, Aslam & Robertson
2008) between the estimated ranking of the 143 runs and the true one, averaged over seeds; and
the coverage of the 95 % topic-bootstrap interval (the share of (run, seed) whose true MAP lies
in it). Also the time xinfAP takes for all 143 unrestricted runs (1,000 documents a topic).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pytrec_eval  # noqa: E402
import scipy.stats  # noqa: E402

from pooling.strategies import Stratum, sample_pool  # noqa: E402
from qrels.sampled import SampledEvaluator, pool_sample_qrels, topic_bootstrap  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "trec-covid-round1"

# Restricted to the judged pairs, the runs' ranks are compressed: 23 % of the pool has a best
# rank of 1, 40 % of at most 2, 53 % of at most 3 and 92 % of at most 10. The strata below
# sample those top ranks densely and the rest sparsely, at about 10 and 30 % in all,
# beside uniform samples of the same size.
SETTINGS = {
    "uniform 10%": [Stratum(1, 1000, 0.1)],
    "1:0.3, 2-1000:0.05": [Stratum(1, 1, 0.3), Stratum(2, 1000, 0.05)],
    "uniform 30%": [Stratum(1, 1000, 0.3)],
    "1:1, 2-1000:0.1": [Stratum(1, 1, 1.0), Stratum(2, 1000, 0.1)],
    "1-2:0.5, 3-1000:0.15": [Stratum(1, 2, 0.5), Stratum(3, 1000, 0.15)],
}


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    labels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            topic, _iteration, doc, label = line.split()
            labels.setdefault(topic, {})[doc] = int(label)
    return labels


def read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            topic, _q0, doc, _rank, score, _tag = line.split()
            run.setdefault(topic, {})[doc] = float(score)
    return run


def tau_ap(estimated: list[str], truth: list[str]) -> float:
    """tau_AP of an estimated ranking against the true one (both best first): errors near the
    top cost more than errors near the bottom."""
    position = {run: i for i, run in enumerate(truth)}
    total = 0.0
    for i in range(1, len(estimated)):
        correct = sum(position[above] < position[estimated[i]] for above in estimated[:i])
        total += correct / i
    return 2 * total / (len(estimated) - 1) - 1


def ranking(means: dict[str, float]) -> list[str]:
    return sorted(means, key=lambda run: (-means[run], run))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--settings", help="Comma-separated subset of the settings' names.")
    args = parser.parse_args()

    labels = read_qrels(DATA / "qrels" / "qrels-rnd1.txt")
    full_runs = {path.name: read_run(path) for path in sorted((DATA / "runs").iterdir())}
    runs = {
        name: {
            topic: {doc: score for doc, score in docs.items() if doc in labels.get(topic, {})}
            for topic, docs in run.items()
        }
        for name, run in full_runs.items()
    }
    ordered = {
        name: {
            topic: sorted(docs, key=lambda d, docs=docs: (docs[d], d), reverse=True)
            for topic, docs in run.items()
        }
        for name, run in runs.items()
    }
    pooled = {(t, d) for run in runs.values() for t, docs in run.items() for d in docs}
    truth_qrels: dict[str, dict[str, int]] = {}
    for topic, doc in pooled:
        truth_qrels.setdefault(topic, {})[doc] = labels[topic][doc]
    judged_pairs = sum(map(len, labels.values()))
    print(
        f"{len(runs)} runs, {len(truth_qrels)} topics; {len(pooled):,} of {judged_pairs:,} "
        "judged pairs retrieved by some run (the pool; the rest are left out of the truth)."
    )
    truth_eval = pytrec_eval.RelevanceEvaluator(truth_qrels, {"map"})
    truth = {}
    for name, run in runs.items():
        per_topic = truth_eval.evaluate(run)
        truth[name] = sum(per_topic.get(t, {}).get("map", 0.0) for t in truth_qrels) / len(
            truth_qrels
        )
    true_order = ranking(truth)

    chosen = SETTINGS
    if args.settings:
        chosen = {name: SETTINGS[name.strip()] for name in args.settings.split(",")}
    header = (
        f"{'setting':34} {'estimator':8} {'judged':>7} {'bias':>8} {'RMSE':>7} "
        f"{'tau':>6} {'tau_AP':>6} {'cover':>6}"
    )
    print(f"\n{args.seeds} seeds per setting; intervals from {args.resamples} resamples.\n")
    print(header)
    print("-" * len(header))
    for setting, strata in chosen.items():
        figures = {"xinfAP": [], "infAP": []}  # per seed: (errors, tau, tau_ap, covered)
        shares = []
        for seed in range(args.seeds):
            pool = sample_pool(ordered, strata=strata, seed=seed)
            entries = [(t, e.doc_id, e.stratum, e.sampled) for t, es in pool.items() for e in es]
            shares.append(sum(e[3] for e in entries) / len(entries))
            sample = pool_sample_qrels(entries, labels)
            xinf = SampledEvaluator(sample)
            inf_qrels = {t: {d: p.label for d, p in docs.items()} for t, docs in sample.items()}
            inf_eval = pytrec_eval.RelevanceEvaluator(inf_qrels, {"infAP"})
            estimates: dict[str, dict[str, dict[str, float]]] = {"xinfAP": {}, "infAP": {}}
            for name, run in runs.items():
                answered = {t: docs for t, docs in run.items() if docs and t in sample}
                estimates["xinfAP"][name] = {
                    t: v["xinfAP"] for t, v in xinf.evaluate(name, answered).per_topic.items()
                }
                inf = inf_eval.evaluate(answered)
                estimates["infAP"][name] = {t: v["infAP"] for t, v in inf.items()}
            for estimator, per_run in estimates.items():
                means = {
                    name: sum(per_topic.values()) / len(truth_qrels)
                    for name, per_topic in per_run.items()
                }
                errors = [means[name] - truth[name] for name in runs]
                covered = 0
                for name, per_topic in per_run.items():
                    # Topics the run missed count 0, as in the truth's mean.
                    full = {t: per_topic.get(t, 0.0) for t in truth_qrels}
                    interval = topic_bootstrap(full, resamples=args.resamples, seed=seed)
                    covered += interval.low <= truth[name] <= interval.high
                order = ranking(means)
                tau = scipy.stats.kendalltau(
                    [truth[n] for n in runs], [means[n] for n in runs]
                ).statistic
                figures[estimator].append(
                    (errors, tau, tau_ap(order, true_order), covered / len(runs))
                )
        for estimator, rows in figures.items():
            errors = [e for row in rows for e in row[0]]
            bias = statistics.fmean(errors)
            rmse = math.sqrt(statistics.fmean(e * e for e in errors))
            print(
                f"{setting:34} {estimator:8} {statistics.fmean(shares):7.1%} {bias:+8.4f} "
                f"{rmse:7.4f} {statistics.fmean(r[1] for r in rows):6.3f} "
                f"{statistics.fmean(r[2] for r in rows):6.3f} "
                f"{statistics.fmean(r[3] for r in rows):6.1%}"
            )

    # Speed: the full runs (1,000 documents a topic) on the last setting's last sample.
    started = time.perf_counter()
    for name, run in full_runs.items():
        xinf.evaluate(name, run)
    elapsed = time.perf_counter() - started
    documents = sum(len(docs) for run in full_runs.values() for docs in run.values())
    print(
        f"\nxinfAP/infNDCG/iP@k of all {len(full_runs)} unrestricted runs ({documents:,} "
        f"ranked documents): {elapsed:.2f} s"
    )


if __name__ == "__main__":
    main()
