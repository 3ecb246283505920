"""qrels.sampled: xinfAP, infNDCG and iP@k of stratified sampled pools, without perl.

The expected figures of the hand-made fixture were printed by NIST's sample_eval.pl (-q); the
live comparison with the script is in test_sampled_shared_data.py.
"""

from __future__ import annotations

import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from campaigns.textfiles import ParseError
from qrels.sampled import (
    SampledEvaluator,
    SampledPair,
    evaluate_sampled,
    format_sample_qrels,
    parse_sample_qrels,
    pool_sample_qrels,
    topic_bootstrap,
)

HAND_QRELS = """\
1 0 d1 1 1
1 0 d2 1 0
1 0 d3 1 2
1 0 d4 2 -1
1 0 d5 2 1
1 0 d6 2 -1
1 0 d7 2 0
1 0 d8 2 -1
2 0 e1 1 0
2 0 e2 1 0
2 0 e3 2 -1
3 0 f1 1 -1
3 0 f2 2 2
3 0 f3 2 -1
"""
HAND_RUN = {
    "1": {"d3": 5.0, "x1": 4.0, "d4": 4.0, "d5": 3.0, "d1": 2.0, "d2": 2.0, "d8": 1.0},
    "2": {"e1": 3.0, "e3": 2.0},
    "3": {"f1": 3.0, "f3": 2.0, "f2": 2.0},
    "4": {"g1": 1.0},
}
# perl sample_eval.pl -q qrels run, per topic and "all".
SAMPLE_EVAL = {
    "1": {"xinfAP": 0.6944, "infNDCG": 0.9240, "iP@10": 0.5000, "iP@50": 0.1000,
          "iP@1000": 0.0050, "inum_rel_ret": 4.9999, "inum_rel": 4.5, "num_ret": 7},
    "2": {"xinfAP": 0.0, "infNDCG": 0.0, "iP@10": 0.0333, "iP@50": 0.0067,
          "iP@1000": 0.0003, "inum_rel_ret": 0.3333, "inum_rel": 0.0, "num_ret": 2},
    "3": {"xinfAP": 0.5556, "infNDCG": 0.6131, "iP@10": 0.2333, "iP@50": 0.0467,
          "iP@1000": 0.0023, "inum_rel_ret": 2.3333, "inum_rel": 2.0, "num_ret": 3},
    "all": {"xinfAP": 0.4167, "infNDCG": 0.5124, "iP@10": 0.2556, "iP@50": 0.0511,
            "iP@1000": 0.0026},
}  # fmt: skip


def hand_qrels():
    return parse_sample_qrels(HAND_QRELS.splitlines(), source="hand.txt")


def test_the_hand_made_fixture_scores_as_sample_eval_printed():
    estimates = SampledEvaluator(hand_qrels()).evaluate("run", HAND_RUN)
    assert set(estimates.per_topic) == {"1", "2", "3"}  # topic 4 has no qrels
    for topic, measures in estimates.per_topic.items():
        for name, value in measures.items():
            assert value == pytest.approx(SAMPLE_EVAL[topic][name], abs=1e-4), (topic, name)
    for name, value in estimates.mean.items():
        assert value == pytest.approx(SAMPLE_EVAL["all"][name], abs=1e-4), name


def test_an_unsampled_stratum_above_a_relevant_document_counts_a_third_relevant():
    """Topic 3 by hand: f1 (stratum 1, nothing sampled) and f3 (stratum 2, not sampled) sit
    above the one relevant document f2 at rank 3 (f3 before f2: tied scores, document id
    descending). sample_eval's smoothing (0 + 0.00001) / (0 + 0.00003) counts each a third
    relevant, so the precision at f2 is (1 + 2/3) / 3 = 5/9; stratum 2 holds all the estimated
    relevant documents, so xinfAP is 5/9."""
    values = SampledEvaluator(hand_qrels()).evaluate("run", HAND_RUN).per_topic["3"]
    assert values["xinfAP"] == pytest.approx(5 / 9, abs=1e-6)
    assert values["inum_rel"] == 2.0  # 1 relevant of 1 sampled, among 2 pooled


def test_a_stratum_sampled_at_a_lower_rate_weighs_its_relevant_documents_more():
    # Stratum A: 2 pooled, both judged, 1 relevant. Stratum B: 10 pooled, 2 judged, 1 relevant,
    # so an estimated 5 relevant: 6 in all, 1 from A and 5 from B.
    qrels = {"t": {"a1": SampledPair("A", 1), "a2": SampledPair("A", 0)}}
    qrels["t"] |= {f"b{i}": SampledPair("B", -1) for i in range(8)}
    qrels["t"] |= {"b8": SampledPair("B", 1), "b9": SampledPair("B", 0)}
    evaluator = SampledEvaluator(qrels)
    assert evaluator.estimated_relevant("t") == 6.0
    only_a = evaluator.evaluate("a", {"t": {"a1": 1.0}}).per_topic["t"]
    only_b = evaluator.evaluate("b", {"t": {"b8": 1.0}}).per_topic["t"]
    # Precision 1 at the one relevant document retrieved, weighted by its stratum's share.
    assert only_a["xinfAP"] == pytest.approx(1 / 6)
    assert only_b["xinfAP"] == pytest.approx(5 / 6)


def _trec_eval(qrels: dict, run: dict, measure: str) -> dict[str, float]:
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {measure})
    return {topic: values[measure] for topic, values in evaluator.evaluate(run).items()}


docs = st.lists(st.integers(0, 60), min_size=1, max_size=40, unique=True)


@settings(max_examples=150, deadline=None)
@given(
    judged=st.dictionaries(st.integers(0, 60), st.integers(0, 3), min_size=1, max_size=40),
    strata=st.integers(1, 4),
    ranked=docs,
    scores=st.lists(st.integers(0, 8), min_size=40, max_size=40),
)
def test_with_every_stratum_fully_sampled_xinfap_is_ap_and_infndcg_is_ndcg(
    judged, strata, ranked, scores
):
    labels = {f"d{doc}": label for doc, label in judged.items()}
    qrels = {
        "q": {doc: SampledPair(str(int(doc[1:]) % strata), label) for doc, label in labels.items()}
    }
    run = {"q": {f"d{doc}": float(score) for doc, score in zip(ranked, scores, strict=False)}}
    ours = SampledEvaluator(qrels).evaluate("run", run).per_topic["q"]
    trec_qrels = {"q": labels}
    # sample_eval's smoothing leaves a relative error of about 1e-5 at full sampling.
    assert ours["xinfAP"] == pytest.approx(_trec_eval(trec_qrels, run, "map")["q"], abs=1e-4)
    assert ours["infNDCG"] == pytest.approx(_trec_eval(trec_qrels, run, "ndcg")["q"], abs=1e-4)
    assert ours["inum_rel"] == sum(label > 0 for label in labels.values())


def test_a_gain_map_replaces_labels_everywhere_as_sample_evals_G_does():
    qrels = hand_qrels()
    mapped = SampledEvaluator(qrels, gains={1: 0}).evaluate("run", HAND_RUN)
    # Label 1 became nonrelevant: topic 1 keeps d3 (label 2) only, an estimated 1 relevant.
    assert mapped.per_topic["1"]["inum_rel"] == 1.0
    assert mapped.per_topic["1"]["xinfAP"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="gains"):
        SampledEvaluator(qrels, gains={2: -1})


def test_ip_cutoffs_past_the_run_divide_what_it_retrieved_by_k():
    results = evaluate_sampled(hand_qrels(), {"r": HAND_RUN}, cutoffs=(2, 5))
    assert list(results[0].mean) == ["xinfAP", "infNDCG", "iP@2", "iP@5"]
    topic2 = results[0].per_topic["2"]  # two documents retrieved, e3 unsampled: a third relevant
    assert topic2["iP@2"] == pytest.approx(1 / 3 / 2, abs=1e-4)
    assert topic2["iP@5"] == pytest.approx(1 / 3 / 5, abs=1e-4)


def test_the_qrels_format_round_trips_sorted():
    qrels = hand_qrels()
    text = "".join(format_sample_qrels(qrels))
    assert text.splitlines()[0] == "1 0 d1 1 1"
    assert parse_sample_qrels(text.splitlines(), source="again") == qrels


def test_bad_lines_are_reported_with_file_and_line():
    text = "1 0 d1 1 1\n1 0 d2 1\n# a comment\n1 0 d3 1 x\n1 0 d4 1 -2\n1 0 d1 2 0\n"
    with pytest.raises(ParseError) as caught:
        parse_sample_qrels(text.splitlines(), source="pool.txt")
    messages = [str(problem) for problem in caught.value.problems]
    assert messages == [
        "pool.txt line 2: expected 5 columns (topic iteration docid stratum label), found 4",
        "pool.txt line 4: label 'x' is not a whole number >= -1 (-1 = pooled, not sampled)",
        "pool.txt line 5: label '-2' is not a whole number >= -1 (-1 = pooled, not sampled)",
        "pool.txt line 6: document 'd1' of topic '1' is listed twice",
    ]


def test_a_pools_qrels_keep_only_the_samples_labels():
    entries = [("t", "a", 0, True), ("t", "b", 0, True), ("t", "c", 1, False)]
    labels = {"t": {"a": 2, "c": 1}}  # c was judged some other way: not part of the sample
    assert pool_sample_qrels(entries, labels) == {
        "t": {"a": SampledPair("1", 2), "b": SampledPair("1", -1), "c": SampledPair("2", -1)}
    }


def test_the_topic_bootstrap_is_seeded_paired_and_brackets_the_mean():
    values = {str(t): t / 10 for t in range(10)}
    interval = topic_bootstrap(values, resamples=500, seed=3)
    assert interval == topic_bootstrap(values, resamples=500, seed=3)
    assert interval.low < 0.45 < interval.high
    assert interval.low > 0.0
    assert interval.high < 0.9
    # Same topics, same seed: the same resamples, so a run better on every topic by 0.1 has
    # an interval shifted by exactly 0.1.
    shifted = topic_bootstrap({t: v + 0.1 for t, v in values.items()}, resamples=500, seed=3)
    assert shifted.low == pytest.approx(interval.low + 0.1)
    assert shifted.high == pytest.approx(interval.high + 0.1)
    assert topic_bootstrap({}) is None
    with pytest.raises(ValueError, match="level"):
        topic_bootstrap(values, level=1.5)
