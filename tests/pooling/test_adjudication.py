"""Adaptive adjudication orders against hand-worked examples (pooling/adjudication.py).

The example: three runs over ten documents, relevant = {d2, d3, d4, d10}.

    A: d1 d2 d3 d4 d5
    B: d2 d6 d7 d1 d8
    C: d9 d3 d10 d6 d4

Worked by hand (the orders below are derived in the comments of each test, not by running code).
"""

from __future__ import annotations

import pytest

from pooling.adjudication import (
    AdjudicationError,
    Adjudicator,
    condense,
    gain_curve,
    leave_one_run_out,
    replay,
    replay_topic,
)

RUNS = {
    "A": ["d1", "d2", "d3", "d4", "d5"],
    "B": ["d2", "d6", "d7", "d1", "d8"],
    "C": ["d9", "d3", "d10", "d6", "d4"],
}
RELEVANT = {"d2", "d3", "d4", "d10"}
QRELS = {f"d{i}": int(f"d{i}" in RELEVANT) for i in range(1, 11)}


def served(adjudicator: Adjudicator, labels: dict[str, int] = QRELS) -> list[tuple[str, str]]:
    """Every choice until the topic is done: (document, run whose turn chose it or '-')."""
    result = []
    while (choice := adjudicator.next()) is not None:
        result.append((choice.doc_id, choice.run or "-"))
        adjudicator.judge(choice.doc_id, labels[choice.doc_id], run=choice.run)
    return result


def test_depth_order_is_rank_by_rank_across_runs():
    # Rank 1: d1 d2 d9; rank 2: (d2) d6 d3; rank 3: (d3) d7 d10; rank 4: d4 (d1) (d6);
    # rank 5: d5 d8 (d4).
    order = [doc for doc, _ in served(Adjudicator(RUNS, order="depth"))]
    assert order == ["d1", "d2", "d9", "d6", "d3", "d7", "d10", "d4", "d5", "d8"]


def test_move_to_front_by_hand():
    # 1 A d1 N -> A -1.  2 B (top 0) d2 R, stays.  3 B d6 N -> B -1.  4 C d9 N -> C -1.
    # 5 all at -1, C is current and at the top: d3 R.  6 C d10 R.  7 C d4 R; C is exhausted.
    # 8 A and B at -1, first is A: d5 N -> A -2.  9 B d7 N -> B -2.  10 B (current, top) d8.
    assert served(Adjudicator(RUNS, order="mtf")) == [
        ("d1", "A"),
        ("d2", "B"),
        ("d6", "B"),
        ("d9", "C"),
        ("d3", "C"),
        ("d10", "C"),
        ("d4", "C"),
        ("d5", "A"),
        ("d7", "B"),
        ("d8", "B"),
    ]


def test_bandit_max_mean_by_hand_with_prefix_credit():
    # Means (rel + 1) / (judged + 2) over each run's judged prefix, ties to the first run.
    # 1 all 1/2: A d1 N (A 1/3).  2 B d2 R (B 2/3; A's prefix now d1 d2: 2/4).
    # 3 B d6 N (B 2/4).  4 A, B, C at 1/2, A first: d3 R (A 3/5).  5 A d4 R (A 4/6).
    # 6 A d5 N (A exhausted).  7 B, C at 1/2: B d7 N (B's prefix runs on over d1: 2/6).
    # 8 C d9 N (C's prefix runs on over d3: 2/4).  9 C d10 R.  10 B d8.
    assert served(Adjudicator(RUNS, order="bandit")) == [
        ("d1", "A"),
        ("d2", "B"),
        ("d6", "B"),
        ("d3", "A"),
        ("d4", "A"),
        ("d5", "A"),
        ("d7", "B"),
        ("d9", "C"),
        ("d10", "C"),
        ("d8", "B"),
    ]


def test_bandit_with_pulled_credit_by_hand():
    # Only the chosen run learns.  1 A d1 N (A 1/3).  2 B d2 R (B 2/3; A stays 1/3: d2 was
    # B's pull).  3 B d6 N (B 2/4).  4 B and C at 1/2, B first: d7 N (B 2/5).
    # 5 C d9 N (C 1/3).  6 B (2/5 beats 1/3) d8 N (B exhausted: d1 was judged).
    # 7 A and C at 1/3, A first: d3 R (A 2/4).  8 A d4 R (A 3/5).  9 A d5 N.  10 C d10.
    assert served(Adjudicator(RUNS, order="bandit", credit="pulled")) == [
        ("d1", "A"),
        ("d2", "B"),
        ("d6", "B"),
        ("d7", "B"),
        ("d9", "C"),
        ("d8", "B"),
        ("d3", "A"),
        ("d4", "A"),
        ("d5", "A"),
        ("d10", "C"),
    ]


def test_ties_go_to_the_first_run_given():
    twin = {"Y": ["a", "b"], "X": ["b", "a"]}
    assert Adjudicator(twin, order="bandit").next().run == "Y"
    assert Adjudicator(dict(reversed(twin.items())), order="bandit").next().run == "X"
    assert Adjudicator(twin, order="mtf").next().doc_id == "a"


def test_a_revised_label_updates_the_evidence():
    adjudicator = Adjudicator(RUNS, order="bandit")
    for doc, label in [("d1", 0), ("d2", 1), ("d6", 0)]:
        choice = adjudicator.next()
        assert choice.doc_id == doc
        adjudicator.judge(doc, label, run=choice.run)
    assert (adjudicator.rel, adjudicator.judged) == ([1, 1, 0], [2, 2, 0])
    # d2 is revised to non-relevant: both prefixes holding it lose a relevant document.
    adjudicator.judge("d2", 0)
    assert (adjudicator.rel, adjudicator.judged) == ([0, 0, 0], [2, 2, 0])
    assert adjudicator.judged_count == 3
    # The state is what a sequential replay of the final labels gives.
    fresh = Adjudicator(RUNS, order="bandit")
    for doc, label in [("d1", 0), ("d2", 0), ("d6", 0)]:
        fresh.judge(doc, label)
    assert (fresh.rel, fresh.judged, fresh.cursor) == (
        adjudicator.rel,
        adjudicator.judged,
        adjudicator.cursor,
    )
    # With every run at 1/4 or 1/2, C (untouched) now has the highest mean.
    assert adjudicator.next() == adjudicator.next()
    assert adjudicator.next().run == "C"


def test_a_revision_gives_back_the_move_to_front_priority():
    adjudicator = Adjudicator(RUNS, order="mtf")
    adjudicator.judge("d1", 0, run="A")
    assert adjudicator.priority == [-1, 0, 0]
    adjudicator.judge("d1", 1)
    assert adjudicator.priority == [0, 0, 0]
    assert adjudicator.next().doc_id == "d2"  # A keeps its turn: d1 is now relevant


def test_pending_documents_are_never_chosen_twice():
    adjudicator = Adjudicator(RUNS, order="bandit")
    first = adjudicator.next()
    second = adjudicator.next(pending={first.doc_id})
    assert first.doc_id == "d1"
    assert second.doc_id == "d2"  # A's next open document, d1 being judged elsewhere
    third = adjudicator.next(pending={"d1", "d2"})
    assert third.doc_id == "d3"
    everything = set(adjudicator.docs)
    assert adjudicator.next(pending=everything) is None


def test_burn_in_judges_every_runs_top_first_then_adapts():
    adjudicator = Adjudicator(RUNS, order="mtf", burn_in=1)
    order = served(adjudicator)
    assert order[:3] == [("d1", "-"), ("d2", "-"), ("d9", "-")]
    assert all(run != "-" for _, run in order[3:])
    # A burn-in document being judged elsewhere holds adaptive choice back until it is in.
    waiting = Adjudicator(RUNS, order="bandit", burn_in=1)
    waiting.judge("d1", 0)
    waiting.judge("d2", 1)
    assert waiting.next(pending={"d9"}) is None


def test_budget_stops_the_topic():
    adjudicator = Adjudicator(RUNS, order="bandit", budget=3)
    assert len(served(adjudicator)) == 3
    assert adjudicator.exhausted()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"order": "best"}, "Unknown order 'best'"),
        ({"credit": "all"}, "Unknown credit 'all'"),
        ({"burn_in": -1}, "Burn-in depth must be 0 or more"),
        ({"budget": 0}, "at least 1 judgment"),
    ],
)
def test_bad_options_are_refused_with_a_sentence(kwargs, message):
    with pytest.raises(AdjudicationError, match=message):
        Adjudicator(RUNS, **kwargs)


def test_bad_input_is_refused():
    with pytest.raises(AdjudicationError, match="lists document 'd1' twice"):
        Adjudicator({"A": ["d1", "d1"]})
    with pytest.raises(AdjudicationError, match="not in this topic's pool"):
        Adjudicator(RUNS).judge("d99", 1)


def test_replay_counts_on_the_example_equal_the_hand_counts():
    # Judgments needed for 50 % (2 of 4) and 100 % of the relevant documents, from the orders above:
    # depth  N R N N R N R R N N -> 2 relevant after 5, all 4 after 8
    # mtf    N R N N R R R ...   -> 5 and 7
    # bandit N R N R R N N N R N -> 4 and 9
    qrels = {"t": QRELS}
    runs = {key: {"t": docs} for key, docs in RUNS.items()}
    expected = {"depth": (5, 8), "mtf": (5, 7), "bandit": (4, 9)}
    for order, (half, whole) in expected.items():
        (topic,) = replay(runs, qrels, order=order)
        assert (topic.needed(0.5), topic.needed(1.0)) == (half, whole), order
        assert topic.relevant_total == 4
    # Random order is a seeded shuffle: the same seed, the same order.
    first = replay(runs, qrels, order="random", seed=7)[0].gains
    assert first == replay(runs, qrels, order="random", seed=7)[0].gains


def test_condense_keeps_only_judged_documents_in_order():
    runs = {"A": {"t": ["x", "d1", "y", "d2"]}, "B": {"u": ["d1"]}}
    assert condense(runs, {"t": {"d1": 0, "d2": 1}}) == {"A": {"t": ["d1", "d2"]}, "B": {}}


def test_gain_curve_and_stopping_replay():
    runs = {key: {"t": docs} for key, docs in RUNS.items()}
    (topic,) = replay(runs, {"t": QRELS}, order="depth")
    curve = gain_curve([topic], points=10)
    assert curve[0] == (0, 0.0)
    assert curve[-1] == (10, 1.0)
    assert topic.stop_at is not None
    assert topic.recall_at(topic.stop_at) == topic.gains[topic.stop_at - 1] / 4


def test_leave_one_run_out_reports_the_left_out_runs_top():
    runs = {key: {"t": docs} for key, docs in RUNS.items()}
    shares = leave_one_run_out(runs, {"t": QRELS}, top=2, fraction=1.0, order="depth")
    # Without C the pool lacks d9: C's top 2 (d9, d3) is half judged. Without B, depth order
    # over A and C (d1 d9 d2 d3 d10 d4 d6 …) has all four relevant at d4, before B's d6: half.
    # Without A, its d1 and d2 come first in B's and C's depth order: all judged.
    assert shares == {"A": 1.0, "B": 0.5, "C": 0.5}


def test_replay_topic_treats_documents_missing_from_qrels_as_non_relevant():
    topic = replay_topic("t", {"A": ["a", "b"]}, {"b": 2}, order="depth")
    assert topic.gains == [0, 1]
