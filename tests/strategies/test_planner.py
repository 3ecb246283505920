"""The depth planner: what a depth pool would hold and cost, without building it."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pooling.strategies import PlannerRow, depth_pool, plan_depths

SEED_RUNS = {
    "A": {"1": ["3", "7", "12", "5", "9"]},
    "B": {"1": ["7", "3", "15", "22", "5"]},
    "C": {"1": ["12", "40", "3", "7", "18"]},
}


def counted(runs, depth, *, judged, relevant, topics, seconds_per_judgment=30.0):
    """The planner row computed the slow, obvious way: build the pool and count."""
    pool = depth_pool(runs, depth=depth, topics=topics)
    sizes = [len(entries) for entries in pool.values()]
    pooled = {(topic, e.doc_id) for topic, entries in pool.items() for e in entries}
    proposals = sum(
        min(depth, len(by_topic.get(topic, ()))) for by_topic in runs.values() for topic in pool
    )
    known = {(topic, doc) for topic, doc in relevant if topic in pool}
    new = len(pooled - set(judged))
    return PlannerRow(
        depth=depth,
        docs_per_topic_mean=sum(sizes) / len(sizes) if sizes else 0.0,
        docs_per_topic_min=min(sizes, default=0),
        docs_per_topic_max=max(sizes, default=0),
        total_docs=len(pooled),
        share_of_runs_x_k=len(pooled) / proposals if proposals else 0.0,
        new_docs=new,
        assessor_hours=new * seconds_per_judgment / 3600,
        relevant_found=len(known & pooled) / len(known) if known else None,
    )


def test_the_planner_reproduces_the_seed_example_depth_by_depth():
    rows = plan_depths(SEED_RUNS, [1, 2, 3, 4, 5])

    assert [row.total_docs for row in rows] == [3, 4, 5, 7, 9]
    assert rows[-1].share_of_runs_x_k == pytest.approx(9 / 15)
    assert rows[0].share_of_runs_x_k == 1.0


def test_relevant_found_is_the_share_of_known_relevant_pairs_inside_the_pool():
    # Best ranks: 3, 7, 12 -> 1; 40 -> 2; 15 -> 3; 5, 22 -> 4; 9, 18 -> 5. "99" no run retrieved.
    relevant = {("1", "9"), ("1", "40"), ("1", "99"), ("1", "5")}

    rows = plan_depths(SEED_RUNS, [1, 2, 4, 5, 100], relevant=relevant)

    assert [row.relevant_found for row in rows] == [0.0, 0.25, 0.5, 0.75, 0.75]


def test_relevant_pairs_of_topics_outside_the_plan_are_not_counted_as_missed():
    relevant = {("1", "3"), ("2", "x"), ("2", "y")}

    (row,) = plan_depths(SEED_RUNS, [1], relevant=relevant)

    assert row.relevant_found == 1.0


def test_relevant_found_is_none_without_qrels():
    assert all(row.relevant_found is None for row in plan_depths(SEED_RUNS, [1, 5]))


def test_new_docs_and_assessor_hours_leave_out_what_is_already_judged():
    judged = [("1", "3"), ("1", "40"), ("2", "7")]

    rows = plan_depths(SEED_RUNS, [1, 2, 5], judged=judged, seconds_per_judgment=36)

    assert [row.new_docs for row in rows] == [2, 2, 7]
    assert rows[-1].assessor_hours == pytest.approx(7 * 36 / 3600)


def test_topics_without_any_run_count_as_empty_pools():
    (row,) = plan_depths(SEED_RUNS, [5], topics=["1", "2"])

    assert row.docs_per_topic_min == 0
    assert row.docs_per_topic_max == 9
    assert row.docs_per_topic_mean == 4.5


def test_no_topics_give_zero_rows_rather_than_an_error():
    (row,) = plan_depths({}, [10])

    assert row.total_docs == 0
    assert row.docs_per_topic_mean == 0.0
    assert row.share_of_runs_x_k == 0.0


def test_rows_come_in_the_order_of_the_depths_asked_for():
    assert [row.depth for row in plan_depths(SEED_RUNS, [5, 1, 3])] == [5, 1, 3]


@pytest.mark.parametrize("depths", [[-1], [2.5], ["10"]])
def test_a_depth_that_is_not_a_non_negative_integer_is_refused(depths):
    with pytest.raises(ValueError, match="depth"):
        plan_depths(SEED_RUNS, depths)


DOCS = [f"d{i}" for i in range(15)]
TOPICS = ["t1", "t2", "t3"]


@st.composite
def random_runs(draw):
    run_keys = draw(st.lists(st.sampled_from(["r1", "r2", "r3", "r4", "r5"]), unique=True))
    return {
        run: {
            topic: draw(st.lists(st.sampled_from(DOCS), unique=True, max_size=12))
            for topic in draw(st.lists(st.sampled_from(TOPICS), unique=True))
        }
        for run in run_keys
    }


pairs = st.sets(st.tuples(st.sampled_from([*TOPICS, "t9"]), st.sampled_from(DOCS)))


@settings(deadline=None, max_examples=200)
@given(
    runs=random_runs(),
    depths=st.lists(st.integers(min_value=0, max_value=14), min_size=1, max_size=5),
    judged=pairs,
    relevant=pairs,
    topics=st.none() | st.lists(st.sampled_from([*TOPICS, "t9"]), unique=True),
)
def test_the_planner_equals_building_each_depth_pool_and_counting(
    runs, depths, judged, relevant, topics
):
    rows = plan_depths(runs, depths, judged=judged, relevant=relevant, topics=topics)

    expected = [
        counted(runs, depth, judged=judged, relevant=relevant, topics=topics) for depth in depths
    ]
    assert [asdict(row) for row in rows] == [pytest.approx(asdict(row)) for row in expected]
