"""Judging later: a skipped document waits at the end of its topic, comes back in the order it
was skipped, keeps its topic open, and the skip is on record."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection, connections

from assess.assignments import assign, end_assignment, reassign
from assess.judging import next_item, open_items, progress
from assess.models import Assignment, AssignmentItem, Skip
from assess.skips import (
    SkipRefused,
    next_after,
    next_after_skip,
    skip,
    skipped_open,
    topic_is_done,
)
from tests.conftest import require
from tests.factories import judge, small_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(campaign):
    return small_campaign(campaign, docs=5)


@pytest.fixture
def primary(campaign, pool, assessor_a) -> Assignment:
    [assignment] = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all()), seed=3
    )
    return assignment


def _order(assignment: Assignment) -> list[tuple[str, str]]:
    return list(assignment.items.order_by("position").values_list("topic__topic_id", "doc_id"))


def _positions(assignment: Assignment) -> list[int]:
    return list(assignment.items.order_by("position").values_list("position", flat=True))


class TestSkip:
    def test_a_skipped_document_moves_to_the_end_of_its_topic_not_of_the_order(self, primary):
        before = _order(primary)
        first = next_item(primary)
        outcome = skip(item=first)
        after = _order(primary)
        topic = first.topic.topic_id
        block = [pair for pair in before if pair[0] == topic]
        assert after[: len(block)] == [*block[1:], block[0]]
        assert after[len(block) :] == before[len(block) :]  # the next topic is where it was
        assert _positions(primary) == list(range(1, len(before) + 1))
        assert outcome.recorded
        assert outcome.moved
        assert (outcome.skip.from_position, outcome.skip.to_position) == (1, len(block))

    def test_the_skip_is_recorded_with_who_what_and_when(self, primary):
        first = next_item(primary)
        skip(item=first)
        record = Skip.objects.get()
        assert record.item_id == first.pk
        assert record.assessor_id == primary.assessor_id
        assert record.skipped_at is not None

    def test_skip_two_of_five_judge_the_rest_the_skipped_come_back_in_order(self, primary):
        topic = next_item(primary).topic
        served = [
            doc for t, doc in _order(primary) if t == topic.topic_id
        ]  # the assessor's order for the first topic
        to_skip = [served[0], served[2]]
        judged = []
        while (item := next_item(primary)) is not None and item.topic_id == topic.pk:
            if item.doc_id in to_skip and not Skip.objects.filter(item=item).exists():
                skip(item=item)
                assert not topic_is_done(primary, topic=topic)
                continue
            judge(item)
            judged.append(item.doc_id)
            if item.doc_id == served[-1]:
                # Every document of the topic but the skipped ones is judged: not done yet.
                assert not topic_is_done(primary, topic=topic)
                assert [e.item.doc_id for e in skipped_open(primary, topic=topic)] == to_skip
        assert judged == [served[1], served[3], served[4], served[0], served[2]]
        assert topic_is_done(primary, topic=topic)
        assert progress(primary, topic=topic)[0].judged == 5
        assert skipped_open(primary, topic=topic) == []

    def test_the_judgment_of_a_skipped_document_records_where_it_was_judged(self, primary):
        first = next_item(primary)
        skip(item=first)
        first.refresh_from_db()
        judgment = judge(first)
        assert judgment.position == first.position == 5

    def test_skipping_the_last_open_document_of_a_topic_keeps_it_there(self, primary):
        topic = next_item(primary).topic
        items = list(primary.items.filter(topic=topic).order_by("position"))
        for item in items[:-1]:
            judge(item)
        outcome = skip(item=items[-1])
        assert outcome.recorded
        assert not outcome.moved
        assert next_after_skip(assignment=primary, skip=outcome.skip).pk == items[-1].pk
        assert not topic_is_done(primary, topic=topic)

    def test_after_a_skip_the_next_document_is_the_one_that_followed(self, primary):
        first, following = list(open_items(primary).order_by("position")[:2])
        outcome = skip(item=first)
        assert next_after_skip(assignment=primary, skip=outcome.skip).pk == following.pk

    def test_interleaved_orders_keep_the_other_topics_in_place(self, campaign, pool, assessor_b):
        [mixed] = assign(
            campaign=campaign,
            pool=pool,
            user=assessor_b,
            topics=list(campaign.topics.all()),
            seed=11,
            interleave=True,
        )
        before = _order(mixed)
        first = next_item(mixed)
        skip(item=first)
        after = _order(mixed)
        last_of_topic = max(i for i, pair in enumerate(before) if pair[0] == first.topic.topic_id)
        assert after[last_of_topic] == (first.topic.topic_id, first.doc_id)
        assert after[:last_of_topic] == before[1 : last_of_topic + 1]
        assert after[last_of_topic + 1 :] == before[last_of_topic + 1 :]

    def test_a_replayed_skip_moves_nothing_more(self, primary):
        first = next_item(primary)
        submission = uuid.uuid4()
        skip(item=first, submission_id=submission)
        order = _order(primary)
        again = skip(item=first, submission_id=submission)
        assert not again.recorded
        assert _order(primary) == order
        assert Skip.objects.count() == 1

    def test_a_skip_form_reused_for_another_document_is_refused(self, primary):
        first, second = list(open_items(primary).order_by("position")[:2])
        submission = uuid.uuid4()
        skip(item=first, submission_id=submission)
        with pytest.raises(SkipRefused, match="another document"):
            skip(item=second, submission_id=submission)
        assert Skip.objects.count() == 1

    def test_a_judged_document_cannot_be_skipped(self, primary):
        first = next_item(primary)
        judge(first)
        order = _order(primary)
        with pytest.raises(SkipRefused, match="judged already"):
            skip(item=first)
        assert _order(primary) == order
        assert not Skip.objects.exists()

    def test_a_document_taken_away_cannot_be_skipped(self, campaign, primary, assessor_b):
        first = next_item(primary)
        reassign(assignment=primary, topics=[first.topic], to_user=assessor_b)
        with pytest.raises(SkipRefused, match="no longer yours"):
            skip(item=first)

    def test_nothing_of_an_ended_assignment_can_be_skipped(self, primary):
        first = next_item(primary)
        end_assignment(assignment=primary)
        with pytest.raises(SkipRefused, match="ended"):
            skip(item=first)


class TestSharedQueue:
    def test_a_skip_in_a_queue_claims_the_next_document_and_moves_on(
        self, campaign, pool, assessor_a
    ):
        [queue] = assign(
            campaign=campaign,
            pool=pool,
            user=assessor_a,
            topics=list(campaign.topics.all()),
            mode="queue",
        )
        first = next_item(queue)
        outcome = skip(item=first)
        assert outcome.moved
        following = next_after_skip(assignment=queue, skip=outcome.skip)
        assert following.pk != first.pk
        assert queue.items.count() == 2
        judge(following)
        assert next_item(queue).pk == first.pk  # nothing else claimed: the skipped one is next


class TestNextAfter:
    def test_next_goes_past_the_current_document_and_wraps_round(self, primary):
        items = list(primary.items.order_by("position"))
        assert next_after(item=items[0]).pk == items[1].pk
        judge(items[1])
        assert next_after(item=items[0]).pk == items[2].pk
        # From the last document, round to the first open one.
        assert next_after(item=items[-1]).pk == items[0].pk

    def test_next_from_a_judged_document_is_the_next_open_one(self, primary):
        items = list(primary.items.order_by("position"))
        judge(items[0])
        assert next_after(item=items[0]).pk == items[1].pk

    def test_next_is_none_when_nothing_else_is_open(self, primary):
        items = list(primary.items.order_by("position"))
        for item in items[1:]:
            judge(item)
        assert next_after(item=items[0]) is None
        judge(items[0])
        assert next_after(item=items[0]) is None


def test_two_skips_of_one_order_at_once_keep_every_position_unique(campaign, transactional_db):
    """Two tabs of one assessor skip two documents at the same moment: the rotations are
    serialised on the assignment row, so the order ends with both at the end of the topic and
    every position still held once (PostgreSQL: a real lock)."""
    require(connection.vendor == "postgresql", "row locks need PostgreSQL")
    from campaigns.members import add_member
    from tests.conftest import _user

    pool = small_campaign(campaign, docs=5)
    user = _user("concurrent")
    add_member(campaign=campaign, user=user, role="assessor")
    [assignment] = assign(
        campaign=campaign, pool=pool, user=user, topics=list(campaign.topics.all()), seed=5
    )
    first, second = list(open_items(assignment).order_by("position")[:2])
    barrier = threading.Barrier(2)
    errors = []

    def run(item):
        try:
            barrier.wait()
            skip(item=AssignmentItem.objects.select_related("assignment", "topic").get(pk=item.pk))
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(item,)) for item in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    positions = _positions(assignment)
    assert positions == list(range(1, len(positions) + 1))
    topic_docs = [doc for t, doc in _order(assignment) if t == first.topic.topic_id]
    assert set(topic_docs[-2:]) == {first.doc_id, second.doc_id}
    assert Skip.objects.count() == 2
