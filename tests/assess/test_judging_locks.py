"""No campaign-wide lock while judging (issue 13): while one assessor's revision holds its
transaction open, another assessor's new judgment and queue claim in the same campaign commit
without waiting. PostgreSQL only: SQLite locks the whole database for any writer."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction

from assess.assignments import assign
from assess.judging import claim_next, next_item
from tests.factories import judge, small_campaign

pytestmark = pytest.mark.django_db(transaction=True)

# Longer than any honest commit on a loaded CI machine, far shorter than the revision is held.
LOCK_TIMEOUT_MS = 3000
HOLD_SECONDS = 8.0


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("Row locks are a PostgreSQL matter (SQLite serialises every writer).")


def _hold_a_revision(item, started: threading.Event, release: threading.Event) -> None:
    try:
        with transaction.atomic():
            judge(item, 2)  # a revision: locks A's judgment row
            started.set()
            release.wait(HOLD_SECONDS)
    finally:
        connections.close_all()


def _hold_a_verdict(item, started: threading.Event, release: threading.Event) -> None:
    try:
        with transaction.atomic():
            judge(item, 1)  # a first verdict: the queue entry done, its counter written
            started.set()
            release.wait(HOLD_SECONDS)
    finally:
        connections.close_all()


def _timed(work) -> float:
    """Seconds ``work`` took on a connection of its own that refuses to wait for a lock long."""
    took: list[float] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
            begin = time.monotonic()
            work()
            took.append(time.monotonic() - begin)
        except BaseException as exc:  # re-raised in the test thread
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(HOLD_SECONDS + 5)
    if errors:
        raise errors[0]
    return took[0]


@pytest.mark.parametrize("second", ["new judgment", "queue claim"])
def test_a_revision_in_progress_does_not_block_another_assessor(
    postgres, campaign, assessor_a, assessor_b, second
):
    pool = small_campaign(campaign, docs=4)
    topics = list(campaign.topics.all())
    if second == "queue claim":
        # Both draw from one shared queue: the claim touches the very topic being revised.
        (a,) = assign(
            campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue", seed=1
        )
        (b,) = assign(
            campaign=campaign, pool=pool, user=assessor_b, topics=topics, mode="queue", seed=2
        )
    else:
        (a,) = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics[:1], seed=1)
        (b,) = assign(campaign=campaign, pool=pool, user=assessor_b, topics=topics[1:], seed=2)
    first = next_item(a)
    judge(first, 1)

    started, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_a_revision, args=(first, started, release))
    holder.start()
    try:
        assert started.wait(10), "the revision never started"
        if second == "new judgment":
            took = _timed(lambda: judge(next_item(b), 1))
        else:
            took = _timed(lambda: claim_next(b))
    finally:
        release.set()
        holder.join(15)
    assert took < 1.0, f"{second} waited {took:.2f}s behind another assessor's revision"


def test_two_first_verdicts_on_one_shared_queue_do_not_wait_for_each_other(
    postgres, campaign, assessor_a, assessor_b
):
    """A's first verdict on a queue entry is in its transaction (the entry done, A's progress
    counted); B's first verdict on another entry of the same queue topic commits without
    waiting: the queue's progress counters keep a row per claimer (assess.models.QueueProgress),
    not one row the two verdicts would both update."""
    pool = small_campaign(campaign, docs=4)
    topics = list(campaign.topics.all())[:1]
    (a,) = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue")
    (b,) = assign(campaign=campaign, pool=pool, user=assessor_b, topics=topics, mode="queue")
    a_item, b_item = claim_next(a), claim_next(b)
    assert a_item.topic_id == b_item.topic_id

    started, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_a_verdict, args=(a_item, started, release))
    holder.start()
    try:
        assert started.wait(10), "A's verdict never started"
        took = _timed(lambda: judge(b_item, 1))
    finally:
        release.set()
        holder.join(15)
    assert took < 1.0, f"B's queue verdict waited {took:.2f}s behind A's"


def test_a_verdict_being_written_is_not_moved_to_another_assessor(
    postgres, campaign, assessor_a, assessor_b
):
    """An organiser moves a topic while its assessor's verdict on one of its documents is in
    flight: the judged document stays with its assessor and is not handed out again."""
    from assess.assignments import reassign
    from assess.models import AssignmentItem

    pool = small_campaign(campaign, docs=4)
    topic = campaign.topics.order_by("topic_id").first()
    (a,) = assign(campaign=campaign, pool=pool, user=assessor_a, topics=[topic], seed=1)
    first = next_item(a)

    started, release = threading.Event(), threading.Event()

    def verdict_in_flight() -> None:
        try:
            with transaction.atomic():
                judge(first, 1)  # locks the item inside the write
                started.set()
                release.wait(1.5)
        finally:
            connections.close_all()

    writer = threading.Thread(target=verdict_in_flight)
    writer.start()
    try:
        assert started.wait(10), "the verdict never started"
        moved: list = []
        mover = threading.Thread(
            target=lambda: (
                moved.append(reassign(assignment=a, topics=[topic], to_user=assessor_b)),
                connections.close_all(),
            )
        )
        mover.start()
        time.sleep(0.3)  # the move is now waiting for, or racing with, the verdict's commit
    finally:
        release.set()
        writer.join(15)
    mover.join(15)
    (destination,) = moved

    first.refresh_from_db()
    assert first.judgment_id is not None
    assert not first.withdrawn, "a judged document was withdrawn from its assessor"
    handed = set(
        AssignmentItem.objects.filter(assignment=destination).values_list("doc_id", flat=True)
    )
    assert first.doc_id not in handed, "a document already judged was handed to another assessor"
