"""Adaptive order in the judging loop (pooling/adaptive.py and the queue claim in assess/judging).

The hand-worked example of tests/pooling/test_adjudication.py, imported as three real runs: an
assessor in queue mode is served exactly the order worked out there by hand.
"""

from __future__ import annotations

import random
import threading

import pytest
from django.db import connection, connections

from assess.assignments import assign
from assess.judging import next_item
from campaigns.models import JudgmentRevision
from pooling import adaptive
from pooling.adjudication import AdjudicationError, Adjudicator
from pooling.models import AdaptiveTopic, Pool
from pooling.pools import PoolDefinitionError, normalise_params
from tests.conftest import require
from tests.factories import judge, make_documents, make_pool, make_run, make_topics
from tests.pooling.test_adjudication import QRELS, RUNS


def _example(campaign, **adjudication) -> Pool:
    make_topics(campaign, ["t1"])
    make_documents(campaign, sorted(QRELS))
    for tag, docs in RUNS.items():
        make_run(campaign, tag, {"t1": [(doc, 10.0 - i) for i, doc in enumerate(docs)]})
    options = {"order": "bandit", "burn_in": 0, **adjudication}
    return make_pool(campaign, depth=5, adjudication=options)


def _serve_all(assignment, labels: dict[str, int]) -> list[str]:
    served = []
    while (item := next_item(assignment)) is not None:
        served.append(item.doc_id)
        judge(item, labels[item.doc_id])
    return served


def _labels(campaign) -> dict[str, int]:
    """The example's labels on this campaign's scale (relevant = its threshold)."""
    return {doc: campaign.relevance_threshold * label for doc, label in QRELS.items()}


def test_a_queue_assessor_is_served_the_hand_worked_bandit_order(campaign, assessor_a):
    pool = _example(campaign)
    assert pool.params["adjudication"]["order"] == "bandit"
    assert "adaptive bandit order" in pool.describe()
    [assignment] = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        mode="queue",
    )
    served = _serve_all(assignment, _labels(campaign))
    assert served == ["d1", "d2", "d6", "d3", "d4", "d5", "d7", "d9", "d10", "d8"]
    # Which run's turn chose each document is kept for the organiser, never shown.
    row = AdaptiveTopic.objects.get(pool=pool)
    tags = dict(pool.runs.values_list("pk", "tag"))
    assert {doc: tags[int(run)] for doc, run in row.chosen_by.items()}["d10"] == "C"


def test_move_to_front_in_the_judging_loop(campaign, assessor_a):
    pool = _example(campaign, order="mtf")
    [assignment] = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        mode="queue",
    )
    served = _serve_all(assignment, _labels(campaign))
    assert served == ["d1", "d2", "d6", "d9", "d3", "d10", "d4", "d5", "d7", "d8"]


def test_a_revision_changes_the_next_choice(campaign, assessor_a):
    pool = _example(campaign)
    [assignment] = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        mode="queue",
    )
    relevant = campaign.relevance_threshold
    first = next_item(assignment)
    judge(first, 0)  # d1, A's turn
    second = next_item(assignment)
    assert second.doc_id == "d2"
    judge(second, relevant)
    assert next_item(assignment).doc_id == "d6"  # B (2/3) keeps its turn
    # d2 revised to non-relevant: B falls to 1/4 and A to 1/4; C (1/2) is now the best run.
    judge(second, 0)
    row = AdaptiveTopic.objects.get(pool=pool)
    with adaptive._lock:
        state = adaptive._folded(pool, campaign.topics.get(), row.chosen_by)
    assert (state.rel, state.judged) == ([0, 0, 0], [2, 1, 0])


def test_budget_stops_serving_the_topic(campaign, assessor_a):
    pool = _example(campaign, budget=4)
    [assignment] = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        mode="queue",
    )
    assert len(_serve_all(assignment, _labels(campaign))) == 4


def test_the_organisers_estimates(campaign, assessor_a):
    pool = _example(campaign, budget_fraction=0.5)
    [assignment] = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        mode="queue",
    )
    _serve_all(assignment, _labels(campaign))
    [state] = adaptive.topic_states(pool)
    assert (state.pool_size, state.budget, state.estimate.judged) == (10, 5, 5)
    assert state.estimate.relevant == 3  # d2, d3, d4 among d1 d2 d6 d3 d4
    assert state.estimate.remaining > 0


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"order": "depth"}, "must be mtf or bandit"),
        ({"order": "mtf", "burn_in": -2}, "burn-in depth must be at least 0"),
        ({"order": "mtf", "burn_in": "five"}, "must be a whole number"),
        ({"order": "bandit", "budget": 0}, "budget must be at least 1"),
        ({"order": "bandit", "budget_fraction": 1.5}, "above 0 and at most 1"),
        ({"order": "bandit", "credit": "all"}, "Credit must be prefix or pulled"),
    ],
)
def test_bad_adaptive_options_are_refused(raw, message):
    with pytest.raises(AdjudicationError, match=message):
        adaptive.normalise(raw)
    with pytest.raises(PoolDefinitionError, match=message):
        normalise_params("depth", {"depth": 5, "adjudication": raw}, [])


def test_static_pools_are_untouched():
    assert normalise_params("depth", {"depth": 5}, []) == {
        "order": "trec_eval",
        "residual": False,
        "depth": 5,
    }
    assert adaptive.normalise({"order": ""}) is None


def test_an_adaptive_claim_costs_few_queries(campaign, assessor_a, django_assert_max_num_queries):
    pool = _example(campaign)
    [assignment] = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        mode="queue",
    )
    judge(next_item(assignment), 0)
    # A static claim is 7 (open items, savepoint, candidate, claim, last position, create,
    # release). Adaptive adds 5: the assignment's topics, the topic's row (locked), the revisions
    # since the last fold, the pending claims, and the run whose turn chose the document.
    with django_assert_max_num_queries(12):
        item = next_item(assignment)
    assert item.doc_id == "d2"


@pytest.mark.django_db(transaction=True)
def test_eight_threads_on_one_adaptive_topic(campaign, transactional_db):
    """Eight assessors in queue mode on one topic never get the same document, and the state
    the judgments leave equals a sequential replay of the same labels."""
    require(connection.vendor == "postgresql", "SKIP LOCKED claims need PostgreSQL")
    from django.contrib.auth import get_user_model

    from campaigns.members import add_member

    rng = random.Random(15)
    docs = [f"x{i:03d}" for i in range(60)]
    relevant = set(rng.sample(docs, 20))
    make_topics(campaign, ["501"])
    make_documents(campaign, docs)
    for r in range(5):
        ranked = rng.sample(docs, 30)
        make_run(campaign, f"run{r}", {"501": [(d, 100.0 - i) for i, d in enumerate(ranked)]})
    pool = make_pool(campaign, depth=30, adjudication={"order": "bandit", "burn_in": 1})
    topic = campaign.topics.get()
    assignments = []
    for i in range(8):
        user = get_user_model().objects.create_user(f"q{i}", password="x")
        add_member(campaign=campaign, user=user, role="assessor")
        [a] = assign(campaign=campaign, pool=pool, user=user, topics=[topic], mode="queue")
        assignments.append(a)
    served: list[list[str]] = [[] for _ in range(8)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)
    threshold = campaign.relevance_threshold

    def work(index: int) -> None:
        try:
            barrier.wait()
            while (item := next_item(assignments[index])) is not None:
                served[index].append(item.doc_id)
                judge(item, threshold if item.doc_id in relevant else 0)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    everything = [doc for docs_ in served for doc in docs_]
    assert len(everything) == len(set(everything))  # nobody got a document twice
    lists = adaptive.topic_lists(pool, topic)
    assert set(everything) == {doc for ranked in lists.values() for doc in ranked}
    # The state equals a sequential replay of the labels in the order they were given.
    row = AdaptiveTopic.objects.get(pool=pool, topic=topic)
    with adaptive._lock:
        state = adaptive._folded(pool, topic, row.chosen_by)
    replayed = Adjudicator(lists, order="bandit", burn_in=1, relevant_from=threshold)
    for doc, label in JudgmentRevision.objects.order_by("pk").values_list(
        "judgment__doc_id", "label"
    ):
        replayed.judge(doc, label, run=row.chosen_by.get(doc))
    assert (state.rel, state.judged, state.cursor, state.labels) == (
        replayed.rel,
        replayed.judged,
        replayed.cursor,
        replayed.labels,
    )


def _qrels_file(tmp_path, campaign) -> str:
    path = tmp_path / "qrels.txt"
    path.write_text(
        "".join(f"t1 0 {doc} {label}\n" for doc, label in _labels(campaign).items()),
        encoding="utf-8",
    )
    return str(path)


def test_the_replay_command_counts_what_was_worked_by_hand(campaign, tmp_path):
    import json
    from io import StringIO

    from django.core.management import call_command

    _example(campaign)
    out = StringIO()
    call_command(
        "replay", campaign.slug, "--qrels", _qrels_file(tmp_path, campaign), "--json", stdout=out
    )
    report = json.loads(out.getvalue())["orders"]
    # 4 relevant: 50 % is 2 of them, 80 to 95 % all 4 (see test_adjudication's hand counts).
    needed = {order: list(report[order]["needed"].values()) for order in report}
    assert needed["depth"] == [5, 8, 8, 8]
    assert needed["mtf"] == [5, 7, 7, 7]
    assert needed["bandit"] == [4, 9, 9, 9]
    # Without A, bandit over B and C serves d2 d6 d7 d9 d1 d8 d3 d10 d4 and has all four relevant:
    # A's top (d1-d5) is judged but for d5.
    assert report["bandit"]["leave_one_run_out_top10"] == {"A": 0.8, "B": 0.4, "C": 0.6}
    text = StringIO()
    call_command(
        "replay",
        campaign.slug,
        "--qrels",
        _qrels_file(tmp_path, campaign),
        "--order",
        "mtf",
        stdout=text,
    )
    assert "gain curve" in text.getvalue()


def test_the_replay_command_refuses_bad_input(campaign, tmp_path):
    from django.core.management import CommandError, call_command

    _example(campaign)
    bad = tmp_path / "bad.txt"
    bad.write_text("t1 0 d1 1\nt1 0 d2\n", encoding="utf-8")
    with pytest.raises(CommandError, match="line 2"):
        call_command("replay", campaign.slug, "--qrels", str(bad))
    other = tmp_path / "other.txt"
    other.write_text("zz 0 d1 1\n", encoding="utf-8")
    with pytest.raises(CommandError, match="judge none of pool v1's topics"):
        call_command("replay", campaign.slug, "--qrels", str(other))
    with pytest.raises(CommandError, match="No built pool v9"):
        call_command("replay", campaign.slug, "--qrels", str(other), "--pool", "9")


def test_the_organisers_page_compares_orders_and_shows_estimates(
    client, campaign, organiser, assessor_a
):
    pool = _example(campaign, burn_in=1)
    [assignment] = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        mode="queue",
    )
    _serve_all(assignment, _labels(campaign))
    client.force_login(organiser)
    response = client.get(f"/c/{campaign.slug}/pools/{pool.version}/adaptive/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "adaptive order: bandit (MaxMean), burn-in 1" in page
    assert 'id="gain-plot-desc"' in page
    assert "Move-to-front" in page
    assert "Depth-k" in page
    # Judgments on every pooled document: the topic is done.
    assert ">done<" in page
    # Assessors get a 404, like every organiser page.
    client.force_login(assessor_a)
    assert client.get(f"/c/{campaign.slug}/pools/{pool.version}/adaptive/").status_code == 404


def test_the_build_form_records_an_adaptive_order(client, campaign, organiser):
    make_topics(campaign, ["t1"])
    make_run(campaign, "A", {"t1": [("d1", 2.0), ("d2", 1.0)]})
    client.force_login(organiser)
    run = campaign.runs.get()
    form = {"strategy": "depth", "depth": 2, "order": "trec_eval", "runs": [run.pk]}
    bad = client.post(
        f"/c/{campaign.slug}/pools/build/", {**form, "judging_order": "bandit", "burn_in": -1}
    )
    assert bad.status_code == 400
    assert not campaign.pools.exists()
    good = client.post(
        f"/c/{campaign.slug}/pools/build/",
        {**form, "judging_order": "mtf", "burn_in": 2, "judging_fraction": 0.5},
    )
    assert good.status_code == 302
    assert campaign.pools.get().params["adjudication"] == {
        "order": "mtf",
        "credit": "prefix",
        "burn_in": 2,
        "budget": None,
        "budget_fraction": 0.5,
        "target": 0.8,
    }
