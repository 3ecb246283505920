"""qrels.agreement: seed 000's worked examples, and equality with the libraries' own results
(scikit-learn, statsmodels, scipy and krippendorff are test-only oracles here)."""

from __future__ import annotations

import math
import warnings
from itertools import combinations

import krippendorff
import numpy as np
import pytest
import scipy.stats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from qrels.agreement import (
    SMALL_N,
    PairAgreement,
    cohen_kappa,
    confusion_matrix,
    group_agreement,
    kendall_tau,
    kendall_tau_scores,
    pairwise_agreement,
    pooled_kappa,
    weighted_kappa,
)
from qrels.agreement import fleiss_kappa as agreement_fleiss_kappa


def two_judges(both: int, first_only: int, second_only: int, neither: int, topics: int = 10):
    """Seed 000's 2x2 tables as Judgments: one synthetic (topic, doc) pair per document."""
    judgments: dict[str, dict[tuple[str, str], int]] = {"judge1": {}, "judge2": {}}
    cells = [((1, 1), both), ((1, 0), first_only), ((0, 1), second_only), ((0, 0), neither)]
    doc = 0
    for (first, second), count in cells:
        for _ in range(count):
            pair = (str(doc % topics + 1), f"doc{doc:04d}")
            judgments["judge1"][pair] = first
            judgments["judge2"][pair] = second
            doc += 1
    return judgments


def only_pair(judgments, **options) -> PairAgreement:
    options = {"labels": [0, 1], "threshold": 1, "bootstrap": 0, **options}
    [result] = pairwise_agreement(judgments, **options)
    return result


def sklearn_kappa(a, b, labels, weights=None) -> float | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns before returning NaN for "undefined"
        value = cohen_kappa_score(a, b, labels=labels, weights=weights)
    return None if math.isnan(value) else float(value)


# --- seed 000 ------------------------------------------------------------------------------------


def test_the_textbook_table_gives_0_776_both_ways():
    result = only_pair(two_judges(300, 20, 10, 70))
    assert result.n == 400
    assert result.observed == pytest.approx(0.925)
    assert round(result.pooled_kappa, 3) == 0.776
    assert round(result.cohen_kappa, 3) == 0.776
    assert result.confusion == [[70, 10], [20, 300]]  # rows judge1, columns judge2, labels 0, 1


def test_judges_with_different_rates_part_company():
    # Judge 1 marks 70 of 400 relevant, judge 2 marks 10, all among judge 1's 70.
    result = only_pair(two_judges(10, 60, 0, 330))
    assert result.observed == pytest.approx(0.85)
    assert round(result.cohen_kappa, 3) == 0.216
    assert round(result.pooled_kappa, 3) == 0.167


def test_rare_relevance_keeps_agreement_but_not_kappa():
    result = only_pair(two_judges(10, 15, 15, 360))
    assert result.observed == pytest.approx(0.925)
    assert round(result.pooled_kappa, 2) == 0.36
    # "Of the 40 documents that either judge called relevant, the judges agreed on only 10."
    assert result.relevant_overlap == pytest.approx(10 / 40)


def test_formula_helpers_agree_with_the_tables():
    assert round(pooled_kappa([[300, 20], [10, 70]]), 3) == 0.776
    assert round(pooled_kappa([[10, 60], [0, 330]]), 3) == 0.167
    assert round(cohen_kappa([[10, 60], [0, 330]]), 3) == 0.216
    assert round(pooled_kappa([[10, 15], [15, 360]]), 2) == 0.36


@pytest.mark.parametrize("table", [(300, 20, 10, 70), (10, 60, 0, 330), (10, 15, 15, 360)])
def test_cohen_kappa_is_sklearns(table):
    judgments = two_judges(*table)
    pairs = sorted(judgments["judge1"])
    a = [judgments["judge1"][p] for p in pairs]
    b = [judgments["judge2"][p] for p in pairs]
    assert only_pair(judgments).cohen_kappa == pytest.approx(sklearn_kappa(a, b, [0, 1]))


def test_one_swapped_pair_among_twelve_systems_is_64_of_66():
    systems = [f"system{i:02d}" for i in range(12)]
    swapped = systems.copy()
    swapped[4], swapped[5] = swapped[5], swapped[4]
    result = kendall_tau(systems, swapped)
    assert (result.swapped, result.pairs, result.n) == (1, 66, 12)
    assert result.tau == pytest.approx(64 / 66)
    assert round(result.tau, 2) == 0.97


# --- what counts as a verdict --------------------------------------------------------------------


def test_negative_labels_are_in_no_statistic_but_are_counted_apart():
    judgments = two_judges(300, 20, 10, 70)
    judgments["judge1"][("1", "pooled-not-judged")] = -1
    judgments["judge2"][("1", "pooled-not-judged")] = 1
    judgments["judge2"][("2", "also-pending")] = -1
    judgments["judge1"][("2", "also-pending")] = -1
    with_negatives, without = only_pair(judgments), only_pair(two_judges(300, 20, 10, 70))
    for figure in ("n", "observed", "cohen_kappa", "pooled_kappa", "confusion"):
        assert getattr(with_negatives, figure) == getattr(without, figure)
    assert (without.negative, without.negative_cells) == (0, [])
    assert with_negatives.negative == 2
    assert with_negatives.negative_cells == [(-1, -1, 1), (-1, 1, 1)]
    assert with_negatives.identical == (300 + 70 + 1) / 402
    assert with_negatives.per_topic["1"].negative == 1


def test_two_copies_of_cranfield_differing_in_their_minus_ones_do_not_agree_silently():
    # Cranfield variant A labels 225 pairs -1 where variant B labels them 1.
    a = {("1", f"d{i}"): 1 + i % 4 for i in range(1612)}
    b = dict(a)
    for i in range(225):
        a[("2", f"m{i}")], b[("2", f"m{i}")] = -1, 1
    (result,) = pairwise_agreement({"A": a, "B": b}, labels=[1, 2, 3, 4], threshold=1, bootstrap=0)
    assert (result.n, result.cohen_kappa) == (1612, 1.0)
    assert (result.negative, result.negative_cells) == (225, [(-1, 1, 225)])
    assert result.identical == 1612 / 1837


def test_assessors_whose_only_common_pairs_are_negative_still_get_a_row():
    judgments = {"nist": {("1", "x"): -1}, "crowd": {("1", "x"): 2}}
    (result,) = pairwise_agreement(judgments, labels=[0, 1, 2], threshold=1, bootstrap=0)
    assert (result.n, result.cohen_kappa, result.negative) == (0, None, 1)


def test_a_pair_one_assessor_did_not_judge_is_not_counted():
    judgments = two_judges(300, 20, 10, 70)
    judgments["judge1"][("1", "only-judge1-saw-it")] = 0
    judgments["judge2"][("1", "only-judge2-saw-it")] = 1
    assert only_pair(judgments).n == 400


def test_assessors_without_common_pairs_get_no_row():
    judgments = {"a": {("1", "x"): 1}, "b": {("1", "y"): 1}, "c": {("1", "x"): 0}}
    results = pairwise_agreement(judgments, labels=[0, 1], threshold=1, bootstrap=0)
    assert [(r.a, r.b) for r in results] == [("a", "c")]


def test_pairs_follow_the_given_assessor_order():
    judgments = {name: {("1", "x"): 1, ("1", "y"): 0} for name in ("ann", "bob", "cy")}
    results = pairwise_agreement(
        judgments, labels=[0, 1], threshold=1, bootstrap=0, assessors=["cy", "ann"]
    )
    assert [(r.a, r.b) for r in results] == [("cy", "ann")]


def test_a_label_outside_the_scale_is_refused():
    judgments = {"a": {("1", "x"): 3}, "b": {("1", "x"): 1}}
    with pytest.raises(ValueError, match="label 3"):
        pairwise_agreement(judgments, labels=[0, 1, 2], threshold=1)


def test_binary_mode_binarises_before_everything():
    graded = {
        "a": {("1", "d1"): 2, ("1", "d2"): 1, ("1", "d3"): 0, ("2", "d4"): 2, ("2", "d5"): 0},
        "b": {("1", "d1"): 1, ("1", "d2"): 2, ("1", "d3"): 0, ("2", "d4"): 0, ("2", "d5"): 0},
    }
    result = only_pair(graded, labels=[0, 1, 2], threshold=1, binary=True)
    binary = {a: {p: int(label >= 1) for p, label in v.items()} for a, v in graded.items()}
    expected = only_pair(binary)
    assert result.labels == [0, 1]
    assert result.confusion == expected.confusion == [[2, 0], [1, 2]]
    assert result.cohen_kappa == expected.cohen_kappa
    assert result.weighted_kappa_linear is None  # two labels: weighting changes nothing


def test_the_confusion_matrix_keeps_unused_labels_in_scale_order():
    judgments = {"a": {("1", "x"): 2, ("1", "y"): 0}, "b": {("1", "x"): 2, ("1", "y"): 2}}
    result = only_pair(judgments, labels=[0, 1, 2], threshold=1)
    assert result.labels == [0, 1, 2]
    assert result.confusion == [[0, 0, 1], [0, 0, 0], [0, 0, 1]]
    assert confusion_matrix([2, 0], [2, 2], [0, 1, 2]) == result.confusion


# --- undefined and small --------------------------------------------------------------------------


def test_one_label_only_gives_none_not_nan():
    judgments = {"a": {("1", f"d{i}"): 0 for i in range(40)}}
    judgments["b"] = dict(judgments["a"])
    result = only_pair(judgments, labels=[0, 1, 2], bootstrap=200)
    assert result.observed == 1.0
    assert result.cohen_kappa is None
    assert result.pooled_kappa is None
    assert result.weighted_kappa_linear is None
    assert result.weighted_kappa_quadratic is None
    assert result.relevant_overlap is None  # nobody marked anything relevant
    assert "cohen_kappa" not in result.ci
    assert result.ci["observed"] == (1.0, 1.0)
    for value in (*vars(result).values(), *vars(result.per_topic["1"]).values()):
        assert not (isinstance(value, float) and math.isnan(value))


def test_no_pairs_and_one_pair():
    assert pairwise_agreement({"a": {}, "b": {}}, labels=[0, 1], threshold=1) == []
    assert pooled_kappa([[0, 0], [0, 0]]) is None
    assert cohen_kappa([[0, 0], [0, 0]]) is None
    disagree = only_pair({"a": {("1", "x"): 0}, "b": {("1", "x"): 1}}, bootstrap=100)
    assert (disagree.n, disagree.observed, disagree.cohen_kappa) == (1, 0.0, 0.0)
    assert disagree.cohen_kappa == sklearn_kappa([0], [1], [0, 1])
    assert disagree.small_n
    agree = only_pair({"a": {("1", "x"): 1}, "b": {("1", "x"): 1}}, bootstrap=100)
    assert (agree.observed, agree.cohen_kappa, agree.pooled_kappa) == (1.0, None, None)
    assert agree.relevant_overlap == 1.0


def test_small_n_is_flagged_below_the_documented_minimum():
    assert only_pair(two_judges(10, 5, 5, SMALL_N - 21)).small_n  # n = SMALL_N - 1
    assert not only_pair(two_judges(10, 5, 5, SMALL_N - 20)).small_n


# --- per topic and bootstrap ----------------------------------------------------------------------


def test_per_topic_statistics_are_the_same_statistics_per_topic():
    rng = np.random.default_rng(3)
    judgments = {"a": {}, "b": {}}
    for i in range(600):
        pair = (str(rng.integers(1, 13)), f"d{i}")
        judgments["a"][pair] = int(rng.integers(0, 3))
        judgments["b"][pair] = int(rng.choice(3, p=[0.5, 0.3, 0.2]))
    result = only_pair(judgments, labels=[0, 1, 2])
    assert list(result.per_topic) == [str(t) for t in range(1, 13)]  # natural order
    assert np.sum([t.confusion for t in result.per_topic.values()], axis=0).tolist() == (
        result.confusion
    )
    for topic, stats in result.per_topic.items():
        pairs = [p for p in judgments["a"] if p[0] == topic]
        a = [judgments["a"][p] for p in pairs]
        b = [judgments["b"][p] for p in pairs]
        assert stats.per_topic == {}
        assert stats.n == len(pairs)
        assert stats.cohen_kappa == pytest.approx(sklearn_kappa(a, b, [0, 1, 2]))
        assert stats.weighted_kappa_quadratic == pytest.approx(
            sklearn_kappa(a, b, [0, 1, 2], "quadratic")
        )


def test_bootstrap_intervals_are_seeded_and_bracket_the_estimate():
    judgments = two_judges(300, 20, 10, 70)
    first = only_pair(judgments, bootstrap=500, seed=7)
    again = only_pair(judgments, bootstrap=500, seed=7)
    other = only_pair(judgments, bootstrap=500, seed=8)
    assert first.ci == again.ci
    assert first.ci != other.ci
    assert set(first.ci) == {"observed", "cohen_kappa", "pooled_kappa", "relevant_overlap"}
    for name, (low, high) in first.ci.items():
        assert low <= getattr(first, name) <= high
    assert first.per_topic["1"].ci  # per-topic intervals too
    assert only_pair(judgments, bootstrap=0).ci == {}


def test_bootstrap_of_the_matrix_matches_resampling_the_pairs():
    # Drawing the confusion matrix from Multinomial(n, shares) is the pair bootstrap; check the
    # intervals against a plain resampling of pair indices.
    judgments = two_judges(60, 15, 10, 115)
    result = only_pair(judgments, bootstrap=4000, seed=1)
    pairs = sorted(judgments["judge1"])
    a = np.array([judgments["judge1"][p] for p in pairs])
    b = np.array([judgments["judge2"][p] for p in pairs])
    rng = np.random.default_rng(2)
    kappas = []
    for _ in range(4000):
        pick = rng.integers(0, len(pairs), len(pairs))
        kappas.append(cohen_kappa(confusion_matrix(a[pick].tolist(), b[pick].tolist(), [0, 1])))
    low, high = np.percentile(kappas, [2.5, 97.5])
    assert result.ci["cohen_kappa"] == pytest.approx((low, high), abs=0.02)


# --- property tests against the libraries --------------------------------------------------------

label_pairs = st.integers(2, 5).flatmap(
    lambda k: st.tuples(
        st.just(k),
        st.lists(st.tuples(st.integers(0, k - 1), st.integers(0, k - 1)), min_size=1, max_size=80),
    )
)


@given(label_pairs)
@settings(max_examples=200, deadline=None)
def test_kappas_equal_sklearn_on_random_labels(case):
    k, pairs = case
    labels = list(range(k))
    judgments = {
        "a": {("1", f"d{i}"): x for i, (x, _) in enumerate(pairs)},
        "b": {("1", f"d{i}"): y for i, (_, y) in enumerate(pairs)},
    }
    result = only_pair(judgments, labels=labels)
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    expected = sklearn_kappa(a, b, labels)
    assert (result.cohen_kappa is None) == (expected is None)
    if expected is not None:
        assert result.cohen_kappa == pytest.approx(expected, abs=1e-12)
    for weights in ("linear", "quadratic"):
        got = getattr(result, f"weighted_kappa_{weights}")
        if k == 2:
            assert got is None
            continue
        expected = sklearn_kappa(a, b, labels, weights)
        assert (got is None) == (expected is None)
        if expected is not None:
            assert got == pytest.approx(expected, abs=1e-12)
            assert weighted_kappa(result.confusion, weights) == pytest.approx(expected, abs=1e-12)


reliability = st.integers(2, 4).flatmap(
    lambda k: st.tuples(
        st.just(k),
        st.lists(
            st.lists(st.one_of(st.none(), st.integers(0, k - 1)), min_size=3, max_size=4),
            min_size=2,
            max_size=40,
        ),
    )
)


def as_judgments(items: list[list[int | None]]):
    judgments: dict[str, dict[tuple[str, str], int]] = {}
    for column, ratings in enumerate(items):
        for rater, label in enumerate(ratings):
            if label is not None:
                judgments.setdefault(f"r{rater}", {})[("1", f"d{column:03d}")] = label
    return judgments


@given(reliability)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_alpha_and_fleiss_equal_the_libraries_on_random_matrices(case):
    k, items = case
    judgments = as_judgments(items)
    result = group_agreement(judgments, labels=list(range(k)), threshold=1)
    # The libraries' view: the items rated at least twice, raters who rated any of them.
    rated = [it for it in items if sum(x is not None for x in it) >= 2]
    raters = sorted({f"r{r}" for it in rated for r, x in enumerate(it) if x is not None})
    if len(raters) < 3:
        assert result is None
        return
    assert result.assessors == raters
    assert result.n_items == len(rated)
    width = max(len(it) for it in items)
    data = np.array(
        [[np.nan if r >= len(it) or it[r] is None else it[r] for it in rated] for r in range(width)]
    )
    data = data[[int(name[1:]) for name in raters]]
    for level in ("nominal", "ordinal"):
        got = getattr(result, f"alpha_{level}")
        values = np.unique(data[~np.isnan(data)])
        if len(values) < 2:
            assert got is None
            continue
        with np.errstate(all="ignore"):
            expected = krippendorff.alpha(
                reliability_data=data, level_of_measurement=level, value_domain=list(range(k))
            )
        if math.isnan(expected):
            assert got is None
        else:
            assert got == pytest.approx(expected, abs=1e-9)
    # Fleiss over the items with the most common number of ratings.
    counts = [sum(x is not None for x in it) for it in rated]
    modal = max(set(counts), key=lambda c: (counts.count(c), c))
    assert (result.fleiss_raters, result.fleiss_items) == (modal, counts.count(modal))
    equal = [[x for x in it if x is not None] for it, c in zip(rated, counts, strict=True)]
    table, _ = aggregate_raters(np.array([row for row in equal if len(row) == modal]), n_cat=k)
    with np.errstate(all="ignore"):
        expected = fleiss_kappa(table)
    if math.isnan(expected):
        assert result.fleiss_kappa is None
    else:
        assert result.fleiss_kappa == pytest.approx(expected, abs=1e-12)


def test_fleiss_kappa_is_the_textbook_example():
    # Fleiss (1971) as worked on Wikipedia's "Fleiss' kappa" page: ten items, fourteen raters,
    # five categories; P_bar = 0.378, P_e = 0.213, kappa = 0.210.
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert round(agreement_fleiss_kappa(table), 3) == 0.210
    assert agreement_fleiss_kappa(table) == pytest.approx(fleiss_kappa(np.array(table)))
    assert agreement_fleiss_kappa([[3, 0], [3, 0]]) is None  # one category only: 0/0
    with pytest.raises(ValueError, match="same number"):
        agreement_fleiss_kappa([[2, 1], [1, 1]])


def test_group_agreement_needs_three_assessors():
    two = {"a": {("1", "x"): 1, ("1", "y"): 0}, "b": {("1", "x"): 1, ("1", "y"): 1}}
    assert group_agreement(two, labels=[0, 1], threshold=1) is None
    # A third assessor who shares no pair with anyone does not make a group.
    two["c"] = {("1", "z"): 1}
    assert group_agreement(two, labels=[0, 1], threshold=1) is None


def test_group_agreement_on_one_label_is_none_not_nan():
    judgments = {name: {("1", "x"): 1, ("1", "y"): 1} for name in "abc"}
    result = group_agreement(judgments, labels=[0, 1, 2], threshold=1)
    assert result is not None
    assert (result.fleiss_kappa, result.alpha_nominal, result.alpha_ordinal) == (None,) * 3


def test_group_agreement_ignores_negative_labels_and_binarises():
    judgments = {
        "a": {("1", "x"): 2, ("1", "y"): 0, ("1", "z"): -1},
        "b": {("1", "x"): 1, ("1", "y"): 0, ("1", "z"): 2},
        "c": {("1", "x"): 2, ("1", "y"): 1},
    }
    result = group_agreement(judgments, labels=[0, 1, 2], threshold=1, binary=True)
    # z has one verdict only (a's -1 is none), so two items; binarised, x is 1/1/1, y is 0/0/1.
    assert result.n_items == 2
    assert result.labels == [0, 1]
    expected = krippendorff.alpha(
        reliability_data=[[1, 0], [1, 0], [1, 1]], level_of_measurement="nominal"
    )
    assert result.alpha_nominal == pytest.approx(expected)


# --- Kendall's tau --------------------------------------------------------------------------------


@given(st.permutations(list(range(9))))
def test_tau_and_swaps_match_scipy_and_a_pair_count(permutation):
    systems = [f"s{i}" for i in range(9)]
    other = [systems[i] for i in permutation]
    result = kendall_tau(systems, other)
    position = {s: i for i, s in enumerate(other)}
    discordant = sum(position[x] > position[y] for x, y in combinations(systems, 2))
    assert result.swapped == discordant
    assert result.tau == pytest.approx(scipy.stats.kendalltau(range(9), permutation).statistic)


@given(st.permutations(list(range(60))))
def test_tau_of_longer_orderings_matches_scipy(permutation):
    systems = [f"s{i:02d}" for i in range(60)]
    result = kendall_tau(systems, [systems[i] for i in permutation])
    assert result.tau == pytest.approx(scipy.stats.kendalltau(range(60), permutation).statistic)


def test_tau_extremes_and_errors():
    systems = list("abcde")
    assert kendall_tau(systems, systems).tau == 1.0
    assert kendall_tau(systems, systems[::-1]) == kendall_tau(systems[::-1], systems)
    assert kendall_tau(systems, systems[::-1]).tau == -1.0
    assert kendall_tau(["a"], ["a"]).tau is None
    with pytest.raises(ValueError, match="different systems"):
        kendall_tau(["a", "b"], ["a", "c"])
    with pytest.raises(ValueError, match="twice"):
        kendall_tau(["a", "a"], ["a", "a"])


def test_tau_from_scores_ranks_descending_with_ties_by_name():
    full = {"bm25": 0.30, "qld": 0.28, "tfidf": 0.28, "coord": 0.10}
    pooled = {"bm25": 0.40, "qld": 0.38, "tfidf": 0.39, "coord": 0.12}
    result = kendall_tau_scores(full, pooled)
    # full order: bm25, qld, tfidf (tie, by name), coord; pooled swaps qld and tfidf.
    assert (result.swapped, result.pairs) == (1, 6)
    assert result.tau == pytest.approx(4 / 6)
