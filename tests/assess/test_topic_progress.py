"""The judged / total counters the judging answer reads (assess.models.TopicProgress), kept by
database triggers: after every kind of write to assignment items they equal a count of the
items, on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from django.db.models import Count, Q, Sum

from assess import repeats
from assess.assignments import assign, end_assignment, reassign_topic
from assess.judging import claim_next, next_item, panel_reads, progress
from assess.models import Assignment, AssignmentItem, QueueItem, QueueProgress, TopicProgress
from campaigns.members import add_member
from tests.conftest import _user
from tests.factories import judge, make_pool, small_campaign

pytestmark = pytest.mark.django_db


def _counted() -> dict[tuple[int, int], tuple[int, int]]:
    rows = (
        AssignmentItem.objects.filter(withdrawn=False)
        .values_list("assignment_id", "topic_id")
        .annotate(total=Count("pk"), judged=Count("pk", filter=Q(judgment__isnull=False)))
        .order_by()
    )
    return {(a, t): (total, judged) for a, t, total, judged in rows}


def _kept() -> dict[tuple[int, int], tuple[int, int]]:
    return {
        (p.assignment_id, p.topic_id): (p.total, p.judged)
        for p in TopicProgress.objects.filter(total__gt=0)
    }


def test_the_counters_follow_every_write(campaign, assessor_a, assessor_b):
    import uuid

    pool = small_campaign(campaign, docs=12)
    topics = list(campaign.topics.all())
    primary, overlap = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=topics,
        overlap=0.5,
        partner=assessor_b,
        seed=3,
        repeat_rate=0.2,
    )
    assert _kept() == _counted()
    for _ in range(8):  # verdicts (the one-statement write on PostgreSQL)
        judge(next_item(primary), 1)
    judge(next_item(overlap), 2)
    assert _kept() == _counted()
    # A planted repeat's verdict closes its item.
    for item in primary.items.filter(repeat_of__isnull=True, judgment__isnull=True):
        judge(item, 0)
    repeat = next_item(primary)
    assert repeat is not None
    assert repeat.repeat_of_id is not None
    repeats.record(
        item=repeat,
        label=1,
        submission_id=uuid.uuid4(),
        served_at=None,
        seconds_on_screen=None,
        active_seconds=None,
    )
    assert _kept() == _counted()
    # Work moved to another assessor: withdrawn here, given there.
    carol = _user("carol")
    add_member(campaign=campaign, user=carol, role="assessor")
    reassign_topic(pool=pool, topic=topics[1], from_user=assessor_b, to_user=carol)
    assert _kept() == _counted()
    # Queue claims (each creates an item in the claimer's assignment).
    queue_pool = make_pool(campaign, depth=12)
    (qa,) = assign(campaign=campaign, pool=queue_pool, user=carol, topics=topics, mode="queue")
    (qb,) = assign(campaign=campaign, pool=queue_pool, user=assessor_b, topics=topics, mode="queue")
    judge(claim_next(qa), 1)
    claim_next(qb)
    assert _kept() == _counted()
    end_assignment(assignment=overlap)
    assert _kept() == _counted()
    # The answer's read gives the kept numbers.
    item = primary.items.filter(judgment__isnull=False).first()
    panel = panel_reads(primary, after=0, also_topic=item.topic)
    total, judged = _counted()[(primary.pk, item.topic_id)]
    counts = panel.counts[item.topic_id]
    assert (counts.total, counts.judged) == (total, judged)
    # Deleting an assignment's items (its deletion) leaves no stale count behind.
    Assignment.objects.filter(pk=qb.pk).delete()
    assert _kept() == _counted()


def _queue_counted() -> dict[tuple[int, int], tuple[int, int]]:
    rows = (
        QueueItem.objects.values_list("pool_id", "topic_id")
        .annotate(total=Count("pk"), done=Count("pk", filter=Q(done=True)))
        .order_by()
    )
    return {(p, t): (total, done) for p, t, total, done in rows}


def _queue_kept() -> dict[tuple[int, int], tuple[int, int]]:
    rows = (
        QueueProgress.objects.values_list("pool_id", "topic_id")
        .annotate(total=Sum("total"), done=Sum("done"))
        .order_by()
    )
    return {(p, t): (total, done) for p, t, total, done in rows if total}


def test_the_queue_counters_follow_every_write(campaign, assessor_a, assessor_b):
    """A shared queue's done / total per topic (QueueProgress), after builds, claims, verdicts,
    ends, moves and deletes, equal a count of the queue; each assessor's verdicts write their
    own row, so concurrent verdicts on one queue share none."""
    pool = small_campaign(campaign, docs=12)
    topics = list(campaign.topics.all())
    (qa,) = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue")
    assert _queue_kept() == _queue_counted()
    assert set(QueueProgress.objects.filter(done__gt=0).values_list("slot", flat=True)) == set()
    (qb,) = assign(campaign=campaign, pool=pool, user=assessor_b, topics=topics, mode="queue")
    for _ in range(3):
        judge(claim_next(qa), 1)
    judge(claim_next(qb), 0)
    claimed = claim_next(qb)  # claimed, not judged: counts nowhere yet
    assert _queue_kept() == _queue_counted()
    slots = dict(QueueProgress.objects.filter(done__gt=0).values_list("slot").annotate(Sum("done")))
    assert slots == {qa.assessor_id: 3, qb.assessor_id: 1}
    # The answer's read, and progress(), give the kept numbers.
    totals = _queue_counted()
    panel = panel_reads(qb, item=claimed)
    counts = panel.counts[claimed.topic_id]
    assert (counts.total, counts.judged) == totals[(pool.pk, claimed.topic_id)]
    assert [(p.total, p.judged) for p in progress(qb)] == [
        totals[(pool.pk, t.pk)] for t in qb.topics.all()
    ]
    # Writes outside the judging loop: an entry reopened, one handed to another claimer after it
    # was done, one moved to another topic, one deleted.
    done = list(QueueItem.objects.filter(done=True).order_by("pk"))
    QueueItem.objects.filter(pk=done[0].pk).update(done=False)
    QueueItem.objects.filter(pk=done[1].pk).update(claimed_by_id=qb.assessor_id)
    open_entry = QueueItem.objects.filter(done=False, topic=topics[0]).order_by("pk").first()
    QueueItem.objects.filter(pk=open_entry.pk).update(topic=topics[1], doc_id="moved-doc")
    QueueItem.objects.filter(pk=done[2].pk).delete()
    assert _queue_kept() == _queue_counted()


def test_a_lost_trigger_is_put_back_and_its_counters_recounted(campaign, assessor_a):
    """SQLite rebuilds a table to alter a column and the rebuilt table has no triggers: after
    ``migrate`` the missing ones are back and the counters equal a count again, whatever was
    written while they were gone."""
    from django.core.management import call_command
    from django.db import connection

    from assess.counters import ensure_triggers

    pool = small_campaign(campaign, docs=6)
    topics = list(campaign.topics.all())
    (primary,) = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, seed=2)
    (queue,) = assign(
        campaign=campaign,
        pool=make_pool(campaign, depth=6),
        user=assessor_a,
        topics=topics,
        mode="queue",
    )
    drop = (
        ["DROP TRIGGER assess_item_progress_update", "DROP TRIGGER assess_queue_progress_update"]
        if connection.vendor == "sqlite"
        else [
            "DROP TRIGGER assess_item_progress_update ON assess_assignmentitem",
            "DROP TRIGGER assess_queue_progress_update ON assess_queueitem",
        ]
    )
    with connection.cursor() as cursor:
        for statement in drop:
            cursor.execute(statement)
    judge(next_item(primary), 1)
    judge(claim_next(queue), 1)
    assert _kept() != _counted()
    assert _queue_kept() != _queue_counted()
    call_command("migrate", verbosity=0)
    assert _kept() == _counted()
    assert _queue_kept() == _queue_counted()
    assert ensure_triggers() == []  # all present now: nothing to repair


def test_a_bulk_write_writes_each_counter_once_a_statement(campaign, assessor_a, assessor_b):
    """An assignment's items and a queue's entries are inserted (and deleted) by the thousand
    in one statement. On PostgreSQL each counter is written once a statement, not once an item:
    every write of one row leaves a version the next must walk until the transaction ends, so
    per-item writes made inserting n items of a topic quadratic in n (8,000 items 1.6 s, 20,000
    a queue 15 s; assess migration 0012). SQLite updates rows in place and counts per row."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's statement triggers (CI runs them).")

    def writes(table: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT COALESCE(SUM(n_tup_ins + n_tup_upd + n_tup_del), 0) "
                "FROM pg_stat_xact_user_tables WHERE relname = %s",
                [table],
            )
            return cursor.fetchone()[0]

    pool = small_campaign(campaign, docs=300)
    topics = list(campaign.topics.all())
    before = writes("assess_topicprogress"), writes("assess_queueprogress")
    (primary,) = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, seed=1)
    assign(campaign=campaign, pool=pool, user=assessor_b, topics=topics, mode="queue")
    after = writes("assess_topicprogress"), writes("assess_queueprogress")
    assert primary.items.count() >= 300 * len(topics)
    # One counter per (assignment, topic) and per (pool, topic): one write each.
    assert after[0] - before[0] == len(topics)
    assert after[1] - before[1] == len(topics)
    assert _kept() == _counted()
    assert _queue_kept() == _queue_counted()
    Assignment.objects.filter(pk=primary.pk).delete()
    assert writes("assess_topicprogress") - after[0] <= 2 * len(topics)
    assert _kept() == _counted()
