"""qrels.evaluation: trec_eval's numbers (via pytrec_eval), its run order and its conventions."""

from __future__ import annotations

import ir_measures
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from qrels.evaluation import (
    MEASURES,
    RunScores,
    evaluate_runs,
    leave_one_out,
    rank_runs,
    trec_eval_measure_names,
    trec_eval_order,
    unjudged_fractions,
)

TREC_MEASURES = [m for m in MEASURES if not m.startswith("Judged")]

# Graded labels, a pooled-but-unjudged -1, a topic the run misses, a topic with no relevant.
QRELS = {
    "1": {"d1": 2, "d2": 0, "d3": -1, "d4": 1, "d5": 0, "d6": 2},
    "2": {"d1": 0, "d7": 1, "d8": -1},
    "3": {"d9": 1},
    "4": {"d1": 0, "d2": 0},
}
RUN = {
    # d2, d4 and d5 tie: trec_eval puts d5 first (ties by document id descending).
    "1": {"d3": 3.0, "d2": 2.0, "d4": 2.0, "d5": 2.0, "x1": 1.5, "d1": 1.0, "d6": 0.5},
    "2": {"d8": 1.0, "d7": 1.0, "x2": 0.9},
    "4": {"d1": 1.0},
    "99": {"d1": 1.0},  # not a qrels topic: ignored
}


def pytrec(qrels, run, threshold=1):
    measures = {"map", "ndcg_cut.10", "P.10", "Rprec", "bpref", "infAP"}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=threshold)
    return evaluator.evaluate(run)


def assert_matches_pytrec(scores: RunScores, qrels, run, threshold=1):
    direct = pytrec(qrels, run, threshold)
    keys = trec_eval_measure_names(TREC_MEASURES)
    answered = {t for t in qrels if run.get(t)}
    assert set(scores.per_topic) == answered
    for topic in answered:
        for measure, key in keys.items():
            assert scores.per_topic[topic][measure] == pytest.approx(direct[topic][key], abs=5e-5)
    for measure, key in keys.items():
        mean = sum(direct[t][key] for t in answered) / len(qrels)  # trec_eval -c
        assert scores.mean[measure] == pytest.approx(mean, abs=5e-5)


@pytest.mark.parametrize("threshold", [1, 2])
def test_scores_are_pytrec_evals_at_the_threshold(threshold):
    [scores] = evaluate_runs(QRELS, {"r": RUN}, relevance_threshold=threshold)
    assert scores.run == "r"
    assert_matches_pytrec(scores, QRELS, RUN, threshold)


def test_ties_are_broken_by_document_id_descending():
    assert trec_eval_order(RUN["1"]) == ["d3", "d5", "d4", "d2", "x1", "d1", "d6"]
    qrels = {"1": {"a": 1, "b": 0}}
    [scores] = evaluate_runs(qrels, {"r": {"1": {"a": 1.0, "b": 1.0}}}, measures=["P@1"])
    assert scores.mean["P@1"] == 0.0  # b ranks first
    [scores] = evaluate_runs(qrels, {"r": {"1": {"b": 1.0, "a": 1.0}}}, measures=["P@1"])
    assert scores.mean["P@1"] == 0.0  # whatever the file order


def test_a_topic_missing_from_the_run_counts_zero_in_the_mean():
    [scores] = evaluate_runs(QRELS, {"r": RUN})
    assert set(scores.per_topic) == {"1", "2", "4"}
    assert scores.mean["AP"] == pytest.approx(sum(t["AP"] for t in scores.per_topic.values()) / 4)


def test_negative_labels_are_no_gain_and_not_relevant():
    [with_minus] = evaluate_runs({"1": {"a": -1, "b": 1}}, {"r": {"1": {"a": 2.0, "b": 1.0}}})
    [without] = evaluate_runs({"1": {"a": 0, "b": 1}}, {"r": {"1": {"a": 2.0, "b": 1.0}}})
    assert with_minus.mean["nDCG@10"] == without.mean["nDCG@10"] == pytest.approx(0.6309, 1e-4)
    assert with_minus.mean["AP"] == without.mean["AP"] == 0.5
    # bpref and infAP are where "pooled but unjudged" differs from "judged nonrelevant".
    assert with_minus.mean["bpref"] == 1.0
    assert without.mean["bpref"] == 0.0
    assert with_minus.mean["infAP"] > without.mean["infAP"]
    assert with_minus.mean["Judged@10"] == 0.5
    assert without.mean["Judged@10"] == 1.0


def test_judged_at_10_counts_verdicts_in_trec_order():
    [scores] = evaluate_runs(QRELS, {"r": RUN})
    # Topic 1: top 7 are d3(-1) d5 d4 d2 x1(absent) d1 d6 -> 5 of 7 have a verdict.
    assert scores.per_topic["1"]["Judged@10"] == pytest.approx(5 / 7)
    assert scores.per_topic["2"]["Judged@10"] == pytest.approx(1 / 3)
    assert scores.per_topic["4"]["Judged@10"] == 1.0
    assert scores.unjudged_at_10 == pytest.approx(((2 / 7) + (2 / 3) + 0) / 3)


judged_cases = st.tuples(
    st.dictionaries(st.sampled_from([f"d{i}" for i in range(30)]), st.integers(0, 2)),
    st.lists(st.sampled_from([f"d{i}" for i in range(30)]), min_size=1, unique=True),
)


@given(judged_cases)
@settings(max_examples=100, deadline=None)
def test_judged_at_10_agrees_with_ir_measures_without_negative_labels(case):
    labels, ranked = case
    # Distinct scores, so that ir_measures' tie order (document id ascending) cannot differ.
    run = {"1": {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}}
    qrels = {"1": labels or {"other": 0}}
    [scores] = evaluate_runs(qrels, {"r": run}, measures=["Judged@10", "Judged@5"])
    for cutoff in (10, 5):
        [expected] = ir_measures.iter_calc(
            [ir_measures.parse_measure(f"Judged@{cutoff}")], qrels, run
        )
        assert scores.per_topic["1"][f"Judged@{cutoff}"] == pytest.approx(expected.value)


def test_measure_names_follow_ir_measures_and_trec_eval():
    assert trec_eval_measure_names(MEASURES) == {
        "AP": "map",
        "nDCG@10": "ndcg_cut_10",
        "P@10": "P_10",
        "Rprec": "Rprec",
        "bpref": "bpref",
        "infAP": "infAP",
        "Judged@10": "Judged@10",
    }
    [scores] = evaluate_runs(QRELS, {"r": RUN}, measures=["Bpref", "bpref", "P@5", "R@100"])
    assert scores.mean["Bpref"] == scores.mean["bpref"]
    for bad in ["AP(rel=2)", "Judged", "P", "nonsense", "ERR@10"]:
        with pytest.raises(ValueError, match="measure"):
            evaluate_runs(QRELS, {"r": RUN}, measures=[bad])
    with pytest.raises(ValueError, match="threshold"):
        evaluate_runs(QRELS, {"r": RUN}, relevance_threshold=0)


qrels_and_runs = st.fixed_dictionaries(
    {
        "qrels": st.dictionaries(
            st.sampled_from(["1", "2", "3"]),
            st.dictionaries(
                st.sampled_from([f"d{i}" for i in range(12)]), st.integers(-1, 2), min_size=1
            ),
            min_size=1,
        ),
        "run": st.dictionaries(
            st.sampled_from(["1", "2", "3", "4"]),
            st.dictionaries(
                st.sampled_from([f"d{i}" for i in range(15)]),
                st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.25]),  # plenty of ties
                min_size=1,
            ),
        ),
        "threshold": st.integers(1, 2),
    }
)


@given(qrels_and_runs)
@settings(max_examples=150, deadline=None)
def test_random_qrels_and_runs_match_pytrec_eval(case):
    [scores] = evaluate_runs(
        case["qrels"], {"r": case["run"]}, relevance_threshold=case["threshold"]
    )
    assert_matches_pytrec(scores, case["qrels"], case["run"], case["threshold"])


@given(st.dictionaries(st.sampled_from([f"d{i:02d}" for i in range(40)]), st.integers(0, 5)))
def test_trec_eval_order_top_k_is_the_head_of_the_full_order(ranking):
    ranking = {doc: float(score) for doc, score in ranking.items()}
    full = sorted(ranking, key=lambda doc: (-ranking[doc], [-ord(c) for c in doc]))
    assert trec_eval_order(ranking) == full
    for depth in (1, 3, 10, 50):
        assert trec_eval_order(ranking, depth) == full[:depth]


def test_trec_eval_order_compares_scores_as_trec_eval_does_in_32_bit_floats():
    ranking = {"aaa": 0.40868028804263584, "zzz": 0.4086802880426358, "mmm": 0.5}
    assert trec_eval_order(ranking) == ["mmm", "zzz", "aaa"]
    assert trec_eval_order(ranking, 2) == ["mmm", "zzz"]


def test_judged_at_k_counts_the_top_k_pytrec_eval_evaluates():
    # Ordered as 64-bit floats, "aaa" would be the top document, and it is judged.
    run = {"1": {"aaa": 0.40868028804263584, "zzz": 0.4086802880426358}}
    qrels = {"1": {"aaa": 1}}
    [scores] = evaluate_runs(qrels, {"r": run}, measures=["P@1", "Judged@1"])
    assert scores.per_topic["1"] == {"P@1": 0.0, "Judged@1": 0.0}


def test_rank_runs_best_first_ties_by_name():
    scores = [
        RunScores("b", {}, {"AP": 0.3}, 0.0),
        RunScores("a", {}, {"AP": 0.3}, 0.0),
        RunScores("c", {}, {"AP": 0.5}, 0.0),
    ]
    assert rank_runs(scores, "AP") == ["c", "a", "b"]


# --- leave one out --------------------------------------------------------------------------------

LOO_QRELS = {
    "1": {"shared": 1, "mine": 1, "theirs": 0, "deep": 1},
    "2": {"solo": 1},
}
LOO_RUNS = {
    "alpha": {"1": {"mine": 3.0, "shared": 2.0, "deep": 0.1}, "2": {"solo": 1.0}},
    "beta": {"1": {"shared": 3.0, "theirs": 2.0, "deep": 1.0}},
    "late": {"1": {"shared": 2.0, "mine": 1.0}},  # not a contributor
}


def test_leave_one_out_removes_only_what_the_run_alone_contributed():
    rows = leave_one_out(LOO_QRELS, LOO_RUNS, pool_depth=2, contributors={"alpha", "beta"})
    assert [row.run for row in rows] == ["alpha", "beta"]
    alpha, beta = rows
    # alpha's top 2 in topic 1 is mine, shared; beta has shared: only "mine" goes, and "solo".
    assert (alpha.removed, alpha.removed_relevant) == (2, 2)
    reduced = {"1": {"shared": 1, "theirs": 0, "deep": 1}}
    [direct] = evaluate_runs(reduced, {"alpha": LOO_RUNS["alpha"]}, measures=["AP"])
    # Topic 2 lost its only judgment but still counts (0) in the mean over the full topics.
    assert alpha.score_loo == pytest.approx(direct.per_topic["1"]["AP"] / 2)
    assert alpha.score_full == pytest.approx(
        evaluate_runs(LOO_QRELS, {"a": LOO_RUNS["alpha"]}, measures=["AP"])[0].mean["AP"]
    )
    assert alpha.drop == pytest.approx(alpha.score_full - alpha.score_loo)
    assert alpha.drop > 0
    # beta's top 2 is shared, theirs: "theirs" (judged nonrelevant) is its only contribution.
    assert (beta.removed, beta.removed_relevant) == (1, 0)


def test_leave_one_out_ranks_among_all_runs():
    rows = leave_one_out(LOO_QRELS, LOO_RUNS, pool_depth=2, contributors={"alpha", "beta"})
    full = evaluate_runs(LOO_QRELS, LOO_RUNS, measures=["AP"])
    order = rank_runs(full, "AP")
    for row in rows:
        assert row.rank_full == order.index(row.run) + 1
    alpha = rows[0]
    others = sorted(s.mean["AP"] for s in full if s.run != "alpha")
    assert alpha.rank_loo == 1 + sum(score > alpha.score_loo for score in others)


def test_leave_one_out_refuses_unknown_contributors():
    with pytest.raises(ValueError, match="gamma"):
        leave_one_out(LOO_QRELS, LOO_RUNS, pool_depth=2, contributors={"gamma"})


# --- unjudged fractions ---------------------------------------------------------------------------


def test_unjudged_fractions_per_depth_and_contributor_flag():
    rows = unjudged_fractions(
        QRELS, {"r": RUN, "s": {"3": {"new": 1.0}}}, depths=(1, 10), contributors={"r"}
    )
    r, s = rows
    assert (r.run, r.contributor, s.contributor) == ("r", True, False)
    # Depth 1: d3 (-1, unjudged), d8 (-1), d1 (judged) -> mean of 1, 1, 0 over three topics.
    assert r.unjudged[1] == pytest.approx(2 / 3)
    [scores] = evaluate_runs(QRELS, {"r": RUN})
    assert r.unjudged[10] == pytest.approx(scores.unjudged_at_10)
    assert r.topics == 3
    assert (s.unjudged, s.topics) == ({1: 1.0, 10: 1.0}, 1)
