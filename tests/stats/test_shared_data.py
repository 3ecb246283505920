"""evaluate_runs on real TREC-COVID round-1 runs and qrels, against pytrec_eval run directly.

The data lives beside the checkout (``../shared/data``); without it the module is skipped. The
files carry the traps of real submissions: tabs, 0-based and reversed rank columns, tied scores,
and a ``0.5`` iteration column in the qrels.
"""

from __future__ import annotations

import time
from pathlib import Path

import ir_measures
import pytest
import pytrec_eval

from qrels.evaluation import evaluate_runs, trec_eval_measure_names

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "trec-covid-round1"

pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is absent"),
]

FIVE = ("AP", "nDCG@10", "P@10", "Rprec", "bpref")


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            topic, _iteration, doc, label = line.split()
            qrels.setdefault(topic, {})[doc] = int(label)
    return qrels


def read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            topic, _q0, doc, _rank, score, _tag = line.split()
            docs = run.setdefault(topic, {})
            assert doc not in docs, f"{path.name}: {doc} twice in topic {topic}"
            docs[doc] = float(score)
    return run


@pytest.fixture(scope="module")
def qrels():
    return read_qrels(DATA / "qrels" / "qrels-rnd1.txt")


@pytest.fixture(scope="module")
def run_paths():
    return sorted((DATA / "runs").iterdir())


@pytest.mark.parametrize("threshold", [1, 2])
def test_a_sample_of_runs_scores_as_pytrec_eval_does(qrels, run_paths, threshold):
    sample = run_paths[::14]  # 11 runs spread over the alphabet
    runs = {path.name: read_run(path) for path in sample}
    measures = [*FIVE, "infAP"]
    keys = trec_eval_measure_names(measures)
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels,
        {"map", "ndcg_cut.10", "P.10", "Rprec", "bpref", "infAP"},
        relevance_level=threshold,
    )
    for scores in evaluate_runs(qrels, runs, measures=measures, relevance_threshold=threshold):
        direct = evaluator.evaluate(runs[scores.run])
        assert set(scores.per_topic) == set(direct) & set(qrels)
        for topic, values in scores.per_topic.items():
            for measure, key in keys.items():
                assert round(values[measure], 4) == round(direct[topic][key], 4)
        for measure, key in keys.items():
            mean = sum(direct[t][key] for t in scores.per_topic) / len(qrels)
            assert round(scores.mean[measure], 4) == round(mean, 4), (scores.run, measure)
        assert 0.0 <= scores.unjudged_at_10 <= 1.0


def test_judged_at_10_agrees_with_ir_measures(qrels, run_paths):
    # The round-1 qrels have no negative labels, so the two definitions coincide wherever no tie
    # straddles rank 10 (ir_measures breaks ties by document id ascending, trec_eval descending).
    runs = {path.name: read_run(path) for path in run_paths[::14]}
    measure = ir_measures.parse_measure("Judged@10")
    compared = 0
    for scores in evaluate_runs(qrels, runs, measures=["Judged@10"]):
        run = runs[scores.run]
        expected = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}
        for topic, values in scores.per_topic.items():
            ranked = sorted(run[topic].values(), reverse=True)
            if len(ranked) > 10 and ranked[9] == ranked[10]:
                continue
            assert values["Judged@10"] == pytest.approx(expected[topic])
            compared += 1
    assert compared > 200


def test_time_all_runs_against_pytrec_eval(qrels, run_paths, capsys):
    runs = {path.name: read_run(path) for path in run_paths}
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"map", "ndcg_cut.10", "P.10", "Rprec", "bpref"}, relevance_level=1
    )
    start = time.perf_counter()
    for run in runs.values():
        evaluator.evaluate(run)
    direct = time.perf_counter() - start
    start = time.perf_counter()
    scores = evaluate_runs(qrels, runs, measures=FIVE)
    ours = time.perf_counter() - start
    assert len(scores) == len(run_paths)
    with capsys.disabled():
        print(
            f"\n{len(runs)} TREC-COVID runs, five measures: evaluate_runs {ours:.2f} s, "
            f"pytrec_eval directly {direct:.2f} s ({ours / direct:.2f}x)"
        )
