"""Pool strategies: depth pools, stratified samples, fusion pools, residual pools, statistics."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pooling.strategies import (
    Contribution,
    PoolEntry,
    Stratum,
    depth_pool,
    pool_statistics,
    rbp_pool,
    residual,
    rrf_pool,
    sample_pool,
    unique_contributions,
)

# Seed 000's example: three systems contributing their top five documents to one topic.
SEED_RUNS = {
    "A": {"1": ["3", "7", "12", "5", "9"]},
    "B": {"1": ["7", "3", "15", "22", "5"]},
    "C": {"1": ["12", "40", "3", "7", "18"]},
}


def doc_ids(pool, topic="1"):
    return [entry.doc_id for entry in pool[topic]]


def padded(runs, width=3):
    return {
        run: {topic: [doc.zfill(width) for doc in docs] for topic, docs in by_topic.items()}
        for run, by_topic in runs.items()
    }


# --- depth pools ---------------------------------------------------------------------------------


def test_the_seed_example_pools_nine_documents_instead_of_fifteen():
    pool = depth_pool(SEED_RUNS, depth=5)

    assert set(doc_ids(pool)) == {"3", "5", "7", "9", "12", "15", "18", "22", "40"}
    assert len(pool["1"]) == 9
    assert sum(len(docs) for by_topic in SEED_RUNS.values() for docs in by_topic.values()) == 15


def test_leading_zeros_are_kept_and_ids_are_never_numbers():
    pool = depth_pool(padded(SEED_RUNS), depth=5)

    assert doc_ids(pool) == ["003", "005", "007", "009", "012", "015", "018", "022", "040"]


def test_3_and_003_are_two_documents():
    runs = {"A": {"1": ["3", "003"]}, "B": {"1": ["003"]}}

    pool = depth_pool(runs, depth=2)

    assert doc_ids(pool) == ["003", "3"]


def test_entries_are_sorted_by_docid_in_code_point_order():
    pool = depth_pool(SEED_RUNS, depth=5)

    assert doc_ids(pool) == ["12", "15", "18", "22", "3", "40", "5", "7", "9"]


def test_provenance_lists_every_contributing_run_with_its_rank_in_run_key_order():
    entries = {e.doc_id: e for e in depth_pool(SEED_RUNS, depth=5)["1"]}

    assert entries["3"].contributions == [
        Contribution("A", 1),
        Contribution("B", 2),
        Contribution("C", 3),
    ]
    assert entries["7"].contributions == [
        Contribution("A", 2),
        Contribution("B", 1),
        Contribution("C", 4),
    ]
    assert entries["40"].contributions == [Contribution("C", 2)]
    assert entries["7"].best_rank == 1


def test_each_run_can_have_its_own_depth():
    pool = depth_pool(SEED_RUNS, depth={"A": 1, "B": 2, "C": 0})

    entries = {e.doc_id: e for e in pool["1"]}
    assert set(entries) == {"3", "7"}
    assert entries["3"].contributions == [Contribution("A", 1), Contribution("B", 2)]
    assert entries["7"].contributions == [Contribution("B", 1)]


def test_a_depth_mapping_without_a_run_is_refused():
    with pytest.raises(ValueError, match="'C'"):
        depth_pool(SEED_RUNS, depth={"A": 5, "B": 5})


@pytest.mark.parametrize("depth", [-1, 2.5, "5", True])
def test_a_depth_that_is_not_a_non_negative_integer_is_refused(depth):
    with pytest.raises(ValueError, match="depth"):
        depth_pool(SEED_RUNS, depth=depth)


def test_a_run_listing_a_document_twice_is_refused():
    runs = {"A": {"1": ["d1", "d2", "d1"]}}

    with pytest.raises(ValueError, match="twice"):
        depth_pool(runs, depth=3)


def test_a_repeat_below_the_depth_does_not_matter_to_a_depth_pool():
    runs = {"A": {"1": ["d1", "d2", "d1"]}}

    assert doc_ids(depth_pool(runs, depth=2)) == ["d1", "d2"]


def test_a_depth_deeper_than_a_run_takes_the_whole_run():
    runs = {"A": {"1": ["d1", "d2"]}, "B": {"1": ["d3"]}}

    assert doc_ids(depth_pool(runs, depth=100)) == ["d1", "d2", "d3"]


def test_requested_topics_are_kept_in_order_even_when_no_run_ranked_them():
    runs = {"A": {"2": ["d1"], "1": ["d2"], "3": ["d3"]}}

    pool = depth_pool(runs, depth=1, topics=["3", "9", "1"])

    assert list(pool) == ["3", "9", "1"]
    assert pool["9"] == []


def test_without_topics_every_ranked_topic_is_pooled_in_code_point_order():
    runs = {"A": {"9": ["d1"], "10": ["d2"]}, "B": {"2": ["d3"]}}

    assert list(depth_pool(runs, depth=1)) == ["10", "2", "9"]


def test_a_single_string_is_not_taken_for_a_list_of_topics():
    with pytest.raises(TypeError):
        depth_pool(SEED_RUNS, depth=5, topics="1")


def test_the_pool_does_not_depend_on_the_order_of_runs_or_topics():
    reordered = {
        run: dict(reversed(list(by_topic.items())))
        for run, by_topic in reversed(list(SEED_RUNS.items()))
    }

    assert depth_pool(reordered, depth=4) == depth_pool(SEED_RUNS, depth=4)


def test_unique_contributions_in_the_seed_example():
    pool = depth_pool(SEED_RUNS, depth=5)

    assert unique_contributions(pool) == {
        "A": {"1": ["9"]},
        "B": {"1": ["15", "22"]},
        "C": {"1": ["18", "40"]},
    }


# --- pool statistics ------------------------------------------------------------------------------


def test_pool_statistics_count_unique_contributions_per_run_in_the_seed_example():
    stats = pool_statistics(SEED_RUNS, depth_pool(SEED_RUNS, depth=5), depth=5)

    assert {run: s.unique for run, s in stats.per_run.items()} == {"A": 1, "B": 2, "C": 2}
    assert stats.per_run["B"].unique_per_topic == {"1": 2}


def test_pool_statistics_report_the_distinct_share_of_runs_x_k():
    stats = pool_statistics(SEED_RUNS, depth_pool(SEED_RUNS, depth=5), depth=5)

    assert stats.per_topic["1"].pooled == 9
    assert stats.per_topic["1"].proposals == 15
    assert stats.totals.distinct_share == pytest.approx(9 / 15)


def test_pool_statistics_count_judged_and_relevant_documents_in_each_runs_top_k():
    judged = {("1", "3"), ("1", "40"), ("2", "3")}
    relevant = [("1", "9"), ("1", "18"), ("1", "99"), ("2", "3")]

    stats = pool_statistics(
        SEED_RUNS, depth_pool(SEED_RUNS, depth=5), depth=5, judged=judged, relevant=relevant
    )

    assert {run: s.judged_in_top_k for run, s in stats.per_run.items()} == {"A": 1, "B": 1, "C": 2}
    assert {run: s.relevant_in_top_k for run, s in stats.per_run.items()} == {
        "A": 1,
        "B": 0,
        "C": 1,
    }
    assert stats.per_topic["1"].already_judged == 2
    assert stats.totals.new == 7
    # Topic 2 is not in the pool, so its relevant pair is not counted as missed.
    assert stats.totals.relevant_known == 3
    assert stats.totals.relevant_pooled == 2
    assert stats.totals.relevant_found == pytest.approx(2 / 3)


def test_pool_statistics_leave_relevant_fields_empty_without_qrels():
    stats = pool_statistics(SEED_RUNS, depth_pool(SEED_RUNS, depth=5), depth=5)

    assert stats.totals.relevant_found is None
    assert stats.per_run["A"].relevant_in_top_k is None
    assert stats.per_topic["1"].relevant_pooled is None


def test_pool_statistics_serialise_to_json_through_asdict():
    stats = pool_statistics(
        SEED_RUNS, depth_pool(SEED_RUNS, depth={"A": 5, "B": 3, "C": 1}), depth=5
    )

    data = json.loads(json.dumps(dataclasses.asdict(stats)))

    assert data["per_run"]["A"]["unique_per_topic"] == {"1": stats.per_run["A"].unique}
    assert data["totals"]["pooled"] == stats.totals.pooled


def test_pool_statistics_judge_uniqueness_at_each_runs_own_depth():
    pool = depth_pool(SEED_RUNS, depth={"A": 1, "B": 2, "C": 0})

    stats = pool_statistics(SEED_RUNS, pool, depth={"A": 1, "B": 2, "C": 0})

    # "3" is in A's top 1 and B's top 2; "7" only in B's top 2 (A has it at rank 2).
    assert {run: s.unique for run, s in stats.per_run.items()} == {"A": 0, "B": 1, "C": 0}


# --- fusion pools ---------------------------------------------------------------------------------


def test_rrf_scores_are_sums_of_reciprocal_ranks():
    entries = {e.doc_id: e for e in rrf_pool(SEED_RUNS, budget=20)["1"]}

    assert entries["3"].score == pytest.approx(1 / 61 + 1 / 62 + 1 / 63)
    assert entries["40"].score == pytest.approx(1 / 62)
    assert entries["3"].contributions == [
        Contribution("A", 1),
        Contribution("B", 2),
        Contribution("C", 3),
    ]


def test_rrf_keeps_the_budget_best_by_fused_score():
    pool = rrf_pool(SEED_RUNS, budget=3)

    assert doc_ids(pool) == ["12", "3", "7"]


def test_rrf_breaks_a_tie_at_the_budget_boundary_by_keeping_the_greater_docid():
    runs = {"X": {"1": ["top", "d1", "d2"]}, "Y": {"1": ["top", "d2", "d1"]}}

    pool = rrf_pool(runs, budget=2)

    assert doc_ids(pool) == ["d2", "top"]


def test_rrf_ties_are_exact_whatever_the_order_runs_are_summed_in():
    # "a" has ranks 1, 2, 3 and "b" ranks 3, 1, 2: with k = 2, summing in run order gives
    # 0.7833333333333332 for one and 0.7833333333333333 for the other.
    runs = {
        "r1": {"1": ["a", "x", "b"]},
        "r2": {"1": ["b", "a", "x"]},
        "r3": {"1": ["x", "b", "a"]},
    }

    entries = {e.doc_id: e for e in rrf_pool(runs, budget=3, k=2)["1"]}

    assert entries["a"].score == entries["b"].score == entries["x"].score
    assert doc_ids(rrf_pool(runs, budget=1, k=2)) == ["x"]


def test_rrf_only_counts_ranks_within_the_depth():
    entries = {e.doc_id: e for e in rrf_pool(SEED_RUNS, budget=20, depth=2)["1"]}

    assert set(entries) == {"3", "7", "12", "40"}
    assert entries["3"].score == pytest.approx(1 / 61 + 1 / 62)
    assert entries["3"].contributions == [Contribution("A", 1), Contribution("B", 2)]


def test_rbp_sum_weights_each_rank_by_its_rank_biased_precision_contribution():
    entries = {e.doc_id: e for e in rbp_pool(SEED_RUNS, budget=20, p=0.5)["1"]}

    assert entries["3"].score == pytest.approx(0.5 + 0.25 + 0.125)
    assert entries["18"].score == pytest.approx(0.5 * 0.5**4)


def test_rbp_max_takes_the_best_single_weight():
    entries = {e.doc_id: e for e in rbp_pool(SEED_RUNS, budget=20, p=0.5, aggregate="max")["1"]}

    assert entries["3"].score == pytest.approx(0.5)
    assert entries["5"].score == pytest.approx(0.5 * 0.5**3)


def test_rbp_breaks_a_tie_at_the_budget_boundary_by_keeping_the_greater_docid():
    runs = {"X": {"1": ["d1"]}, "Y": {"1": ["d3"]}, "Z": {"1": ["d2"]}}

    pool = rbp_pool(runs, budget=2, aggregate="max")

    assert doc_ids(pool) == ["d2", "d3"]


def test_rbp_breaks_ties_among_weights_that_underflow_to_zero_by_docid_descending():
    runs = {"A": {"1": [f"d{i:04d}" for i in range(1200)]}}
    positive = sum(0.5 * 0.5 ** (rank - 1) > 0 for rank in range(1, 1201))

    pool = rbp_pool(runs, budget=positive + 10, p=0.5)

    zero = sorted(e.doc_id for e in pool["1"] if e.score == 0)
    assert len(pool["1"]) == positive + 10
    assert zero == [f"d{i:04d}" for i in range(1190, 1200)]


@pytest.mark.parametrize("p", [0, 1, 1.5, -0.2])
def test_rbp_refuses_a_persistence_outside_zero_and_one(p):
    with pytest.raises(ValueError, match="persistence"):
        rbp_pool(SEED_RUNS, budget=3, p=p)


def test_rbp_refuses_an_unknown_aggregate():
    with pytest.raises(ValueError, match="aggregate"):
        rbp_pool(SEED_RUNS, budget=3, aggregate="mean")


def test_a_fusion_pool_smaller_than_its_budget_holds_everything():
    assert len(rrf_pool(SEED_RUNS, budget=100)["1"]) == 9


# --- stratified samples ---------------------------------------------------------------------------

STRATA = [Stratum(1, 5, 1.0), Stratum(6, 20, 0.5), Stratum(21, 50, 0.1)]


def many_runs(n_runs=6, length=60, topics=("1", "2")):
    """Runs that overlap a lot at the top and spread out in the tail."""
    return {
        f"r{r}": {
            t: [f"{t}-d{(i * (r + 1)) % 97:03d}" for i in range(length)]
            if r % 2
            else [f"{t}-d{i + 3 * r:03d}" for i in range(length)]
            for t in topics
        }
        for r in range(n_runs)
    }


def by_stratum(entries):
    strata = {}
    for entry in entries:
        strata.setdefault(entry.stratum, []).append(entry)
    return strata


def test_a_document_belongs_to_the_stratum_of_its_best_rank():
    pool = sample_pool(SEED_RUNS, strata=[Stratum(1, 1, 1.0), Stratum(2, 5, 0.5)], seed=1)

    strata = {e.doc_id: e.stratum for e in pool["1"]}
    assert strata == {
        "3": 0,
        "7": 0,
        "12": 0,
        "40": 1,
        "15": 1,
        "22": 1,
        "5": 1,
        "9": 1,
        "18": 1,
    }


def test_every_document_in_a_fully_judged_stratum_is_sampled_with_probability_one():
    pool = sample_pool(many_runs(), strata=STRATA, seed=7)

    for entries in pool.values():
        top = by_stratum(entries)[0]
        assert top
        assert all(e.sampled and e.inclusion_probability == 1.0 for e in top)


def test_inclusion_probabilities_are_the_realised_share_sampled_in_each_stratum():
    pool = sample_pool(many_runs(), strata=STRATA, seed=7)

    for entries in pool.values():
        for index, members in by_stratum(entries).items():
            n = len(members)
            k = sum(e.sampled for e in members)
            assert k == math.ceil(STRATA[index].rate * n)
            assert {e.inclusion_probability for e in members} == {k / n}
            assert k / n >= STRATA[index].rate


def test_the_sample_size_is_not_inflated_by_floating_point():
    runs = {"A": {"1": [f"d{i:02d}" for i in range(30)]}}

    pool = sample_pool(runs, strata=[Stratum(1, 30, 0.1)], seed=3)

    assert sum(e.sampled for e in pool["1"]) == 3  # 0.1 * 30 is 3.0000000000000004 in floats
    assert pool["1"][0].inclusion_probability == pytest.approx(0.1)


def test_a_stratum_with_one_document_at_a_low_rate_still_samples_it():
    runs = {"A": {"1": ["d1", "d2"]}}

    pool = sample_pool(runs, strata=[Stratum(1, 1, 1.0), Stratum(2, 10, 0.05)], seed=3)

    assert [(e.doc_id, e.sampled, e.inclusion_probability) for e in pool["1"]] == [
        ("d1", True, 1.0),
        ("d2", True, 1.0),
    ]


def test_unsampled_documents_stay_in_the_pool_marked_unsampled():
    runs = many_runs()
    pool = sample_pool(runs, strata=STRATA, seed=7)

    for topic, entries in pool.items():
        unsampled = [e for e in entries if not e.sampled]
        assert unsampled
        assert {e.doc_id for e in entries} == {
            e.doc_id for e in depth_pool(runs, depth=50, topics=[topic])[topic]
        }


def test_documents_whose_best_rank_is_beyond_the_last_stratum_are_not_pooled():
    pool = sample_pool(SEED_RUNS, strata=[Stratum(1, 2, 1.0), Stratum(3, 3, 0.5)], seed=1)

    assert set(doc_ids(pool)) == {"3", "7", "12", "40", "15"}


def test_documents_whose_best_rank_is_before_a_tail_stratum_are_not_pooled():
    # Sampling the tail beyond an existing depth-2 pool: what the depth pool holds is left out.
    pool = sample_pool(SEED_RUNS, strata=[Stratum(3, 5, 1.0)], seed=1)

    assert set(doc_ids(pool)) == {"15", "22", "5", "9", "18"}
    assert {e.stratum for e in pool["1"]} == {0}


def test_the_same_seed_gives_the_same_sample():
    runs = many_runs()

    assert sample_pool(runs, strata=STRATA, seed=42) == sample_pool(runs, strata=STRATA, seed=42)


def test_a_different_seed_gives_a_different_sample():
    runs = many_runs()

    def sampled(seed):
        pool = sample_pool(runs, strata=STRATA, seed=seed)
        return {(e.topic_id, e.doc_id) for entries in pool.values() for e in entries if e.sampled}

    assert sampled(1) != sampled(2)


def test_the_sample_does_not_depend_on_run_order():
    runs = many_runs()
    reordered = dict(reversed(list(runs.items())))

    assert sample_pool(reordered, strata=STRATA, seed=5) == sample_pool(runs, strata=STRATA, seed=5)


def test_sampling_topic_by_topic_gives_the_same_sample_as_all_topics_at_once():
    runs = many_runs(topics=("1", "2", "3"))

    whole = sample_pool(runs, strata=STRATA, seed=5)
    one_by_one = {t: sample_pool(runs, strata=STRATA, seed=5, topics=[t])[t] for t in whole}

    assert one_by_one == whole


def test_the_sample_does_not_depend_on_python_hash_randomisation():
    script = (
        "from pooling.strategies import Stratum, sample_pool\n"
        "from tests.strategies.test_strategies import many_runs\n"
        "pool = sample_pool(many_runs(), strata=[Stratum(1, 60, 0.3)], seed=9)\n"
        "print(sorted(e.doc_id for es in pool.values() for e in es if e.sampled))\n"
    )
    root = Path(__file__).resolve().parents[2]

    def sample_with(hash_seed):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert sample_with("1") == sample_with("2")


@pytest.mark.parametrize(
    ("strata", "message"),
    [
        ([], "at least one"),
        ([Stratum(1, 10, 1.0), Stratum(12, 20, 0.5)], "gap"),
        ([Stratum(1, 10, 1.0), Stratum(10, 20, 0.5)], "overlap"),
        ([Stratum(11, 20, 0.5), Stratum(1, 10, 1.0)], "increasing"),
        (["1-10"], "Stratum"),
    ],
)
def test_invalid_strata_are_refused(strata, message):
    with pytest.raises(ValueError, match=message):
        sample_pool(SEED_RUNS, strata=strata, seed=1)


@pytest.mark.parametrize(
    ("first", "last", "rate"),
    [(0, 10, 1.0), (5, 4, 1.0), (1, 10, 0.0), (1, 10, 1.5), (1, 10, math.nan), (1, 10, -0.1)],
)
def test_a_stratum_with_impossible_ranks_or_rate_cannot_be_made(first, last, rate):
    with pytest.raises(ValueError, match="stratum"):
        Stratum(first, last, rate)


# --- residual pools -------------------------------------------------------------------------------

DOCS = [f"d{i}" for i in range(12)]
TOPICS = ["t1", "t2", "t3"]


@st.composite
def random_runs(draw):
    run_keys = draw(st.lists(st.sampled_from(["r1", "r2", "r3", "r4"]), unique=True, max_size=4))
    return {
        run: {
            topic: draw(st.lists(st.sampled_from(DOCS), unique=True, max_size=10))
            for topic in draw(st.lists(st.sampled_from(TOPICS), unique=True))
        }
        for run in run_keys
    }


pairs = st.sets(st.tuples(st.sampled_from(TOPICS), st.sampled_from(DOCS)))

BUILDERS = {
    "depth": lambda runs: depth_pool(runs, depth=3),
    "rrf": lambda runs: rrf_pool(runs, budget=4),
    "rbp": lambda runs: rbp_pool(runs, budget=4, aggregate="max"),
    "sample": lambda runs: sample_pool(
        runs, strata=[Stratum(1, 2, 1.0), Stratum(3, 8, 0.5)], seed=11
    ),
}


@pytest.mark.parametrize("strategy", sorted(BUILDERS))
@settings(deadline=None)
@given(runs=random_runs(), judged=pairs)
def test_a_residual_pool_never_includes_a_judged_pair_and_keeps_every_other(strategy, runs, judged):
    pool = BUILDERS[strategy](runs)

    left = residual(pool, judged)

    assert list(left) == list(pool)
    kept = {(e.topic_id, e.doc_id) for entries in left.values() for e in entries}
    everything = {(e.topic_id, e.doc_id) for entries in pool.values() for e in entries}
    assert not kept & judged
    assert kept == everything - judged


def test_a_residual_pool_accepts_judged_pairs_as_a_list_of_lists():
    left = residual(depth_pool(SEED_RUNS, depth=5), [["1", "3"], ["1", "7"]])

    assert "3" not in doc_ids(left)
    assert len(left["1"]) == 7


def test_a_pool_entry_defaults_describe_a_pair_to_judge():
    entry = PoolEntry("1", "d1", [Contribution("A", 1)])

    assert entry.sampled is True
    assert entry.stratum is entry.inclusion_probability is entry.score is None
