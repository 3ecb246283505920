"""Stopping estimates (pooling/stopping.py) against values worked by hand.

The example of tests/pooling/test_adjudication.py (three runs, ten documents) and a two-run one
small enough to follow one sweep of the fit on paper.
"""

from __future__ import annotations

import math

import pytest

from pooling import stopping
from pooling.adjudication import Adjudicator, replay
from pooling.stopping import StoppingError, estimate, sigmoid
from tests.pooling.test_adjudication import QRELS, RUNS

A = 60 / 61  # the fusion feature of rank 1: K / (K + 1), K = 60
B = 60 / 62  # of rank 2


def test_one_sweep_of_the_fusion_fit_by_hand(monkeypatch):
    # Runs A: x y and B: y z; x judged relevant, z not. From all-zero weights, one sweep:
    # intercept: gradient (1 - 1/2) + (0 - 1/2) = 0, so it stays 0;
    # A's weight (it holds x at rank 1): gradient (1 - 1/2) A, curvature 1 + A^2/4 (prior 1);
    # B's weight (z at rank 2): gradient (0 - 1/2) B, curvature 1 + B^2/4.
    # y (A's rank 2, B's rank 1) is the only unjudged document.
    monkeypatch.setattr(stopping, "SWEEPS", 1)
    adjudicator = Adjudicator({"A": ["x", "y"], "B": ["y", "z"]})
    adjudicator.judge("x", 1)
    adjudicator.judge("z", 0)
    w_a = (A / 2) / (1 + A * A / 4)
    w_b = -(B / 2) / (1 + B * B / 4)
    chance_y = 1 / (1 + math.exp(-(w_a * B + w_b * A)))
    result = estimate(adjudicator, "fusion")
    assert result.remaining == pytest.approx(chance_y, rel=1e-12)
    assert result.recall == pytest.approx(1 / (1 + chance_y), rel=1e-12)
    assert (result.judged, result.relevant, result.unjudged) == (2, 1, 1)


def test_the_fit_reaches_the_prior_s_stationary_point():
    # Converged, every weight's gradient is zero: sum over its judged documents of
    # (label - chance) * feature = prior * weight; the intercept's: sum (label - chance) =
    # 0.1 * intercept.
    adjudicator = Adjudicator(RUNS)
    for doc in ("d1", "d2", "d9", "d6", "d3"):
        adjudicator.judge(doc, QRELS[doc])
    for _ in range(60):
        estimate(adjudicator, "fusion")
    model = adjudicator._stopping_models["fusion"]
    judged = {adjudicator.index[doc]: QRELS[doc] for doc in ("d1", "d2", "d9", "d6", "d3")}
    residual = {d: y - model.chance(d) for d, y in judged.items()}
    assert sum(residual.values()) == pytest.approx(
        stopping.INTERCEPT_PRIOR * model.intercept, abs=1e-9
    )
    for r in range(3):
        gradient = sum(residual[d] * x for d in judged for run, x in model.features[d] if run == r)
        assert gradient == pytest.approx(stopping.FUSION_PRIOR * model.weights[r], abs=1e-9)


def test_the_first_estimate_by_hand():
    # d1 judged not relevant: A's cursor moves past it (judged 1, relevant 0); B and C have no
    # evidence. Topic rate b = (0 + 1) / (1 + 2) = 1/3; A gives (0 + 2/3) / 3 = 2/9 to its next
    # unjudged document, B and C give (0 + 2/3) / 2 = 1/3; each next one 0.83 times less (B skips
    # d1, judged, without a step). A document's chance is the mean over the runs holding it.
    adjudicator = Adjudicator(RUNS)
    adjudicator.judge("d1", 0)
    a, b, q = 2 / 9, 1 / 3, 0.83
    expected = (
        (a + b) / 2  # d2: A 1st unjudged, B 1st
        + (a * q + b * q) / 2  # d3: A 2nd, C 2nd
        + (a * q**2 + b * q**4) / 2  # d4: A 3rd, C 5th
        + a * q**3  # d5: A 4th
        + (b * q + b * q**3) / 2  # d6: B 2nd, C 4th
        + b * q**2  # d7: B 3rd
        + b * q**3  # d8: B 4th
        + b  # d9: C 1st
        + b * q**2  # d10: C 3rd
    )
    result = estimate(adjudicator, "decay")
    assert result.remaining == pytest.approx(expected, rel=1e-12)
    assert result.recall == 0.0


@pytest.mark.parametrize("method", stopping.METHODS)
def test_a_topic_judged_through_is_done(method):
    adjudicator = Adjudicator(RUNS)
    for doc, label in QRELS.items():
        adjudicator.judge(doc, label)
    result = estimate(adjudicator, method)
    assert (result.remaining, result.recall, result.unjudged) == (0.0, 1.0, 0)
    assert result.suggests_stop(0.99)


def test_a_revision_changes_the_estimate():
    adjudicator = Adjudicator(RUNS)
    for doc in ("d1", "d2", "d9"):
        adjudicator.judge(doc, QRELS[doc])
    before = estimate(adjudicator, "fusion")
    adjudicator.judge("d2", 0)  # d2 revised: not relevant after all
    after = estimate(adjudicator, "fusion")
    assert (before.relevant, after.relevant) == (1, 0)
    assert after.remaining < before.remaining


def test_rrf_ranks_documents_by_their_fused_rank():
    # With d2 relevant and d9 not, the fused-rank model gives a document the runs rank higher
    # a higher chance: d3 (A 3rd, C 2nd) beats d8 (B 5th only).
    adjudicator = Adjudicator(RUNS)
    adjudicator.judge("d2", 1)
    adjudicator.judge("d9", 0)
    estimate(adjudicator, "rrf")
    model = adjudicator._stopping_models["rrf"]
    assert model.chance(adjudicator.index["d3"]) > model.chance(adjudicator.index["d8"])


def test_an_unknown_method_is_refused():
    with pytest.raises(StoppingError, match="choose one of fusion, rrf, decay"):
        estimate(Adjudicator(RUNS), "oracle")


def test_sigmoid_does_not_overflow():
    assert sigmoid(-1000.0) == 0.0
    assert sigmoid(1000.0) == 1.0
    assert sigmoid(0.0) == 0.5


def test_the_replay_records_the_estimate_where_the_rule_said_stop():
    runs = {key: {"t": docs} for key, docs in RUNS.items()}
    for method in stopping.METHODS:
        (topic,) = replay(runs, {"t": QRELS}, order="bandit", stopping_method=method)
        assert topic.stop_at is not None
        assert topic.stop_estimate is not None
        assert topic.stop_estimate >= 0.8


def test_the_estimate_is_asked_as_often_as_the_replay_says():
    # Ten documents: every 0.5 % of the pool is every judgment; every 30 % is every third, so the
    # stop lands on a multiple of 3 and no earlier than where asking every time puts it.
    runs = {key: {"t": docs} for key, docs in RUNS.items()}
    (often,) = replay(runs, {"t": QRELS}, order="depth", stopping_method="decay")
    (rarely,) = replay(runs, {"t": QRELS}, order="depth", stopping_method="decay", check_every=0.3)
    assert rarely.stop_at % 3 == 0
    assert often.stop_at <= rarely.stop_at < often.stop_at + 3
