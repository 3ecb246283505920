"""Assignments, presentation order, claims, revisions, double submission and timing."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from assess.assignments import AssignmentError, assign, reassign
from assess.judging import claim_next, next_item, open_items, progress, submit
from assess.models import Assignment, AssignmentItem, QueueItem
from campaigns.judgments import StaleJudgment, Timing
from campaigns.members import add_member
from campaigns.models import Judgment, JudgmentRevision
from tests.conftest import require
from tests.factories import small_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(campaign):
    return small_campaign(campaign, docs=8)


def _order(assignment: Assignment) -> list[tuple[str, str]]:
    return list(assignment.items.order_by("position").values_list("topic__topic_id", "doc_id"))


def _judge(item: AssignmentItem, label: int, **kwargs):
    defaults = {
        "rubric_version": item.assignment.campaign.current_rubric(),
        "submission_id": uuid.uuid4(),
        "expected_version": item.judgment.version if item.judgment else 0,
        "timing": Timing(),
    }
    return submit(item=item, label=label, **{**defaults, **kwargs})


class TestPresentationOrder:
    def test_a_primary_assignment_holds_every_pooled_document_once(
        self, campaign, pool, assessor_a
    ):
        [assignment] = assign(
            campaign=campaign,
            pool=pool,
            user=assessor_a,
            topics=list(campaign.topics.all()),
            seed=7,
        )
        order = _order(assignment)
        assert len(order) == 16
        assert len(set(order)) == 16
        assert list(assignment.items.values_list("position", flat=True)) == list(range(1, 17))

    def test_the_same_seed_gives_the_same_order_and_topics_stay_together(
        self, campaign, pool, assessor_a
    ):
        topics = list(campaign.topics.all())
        [first] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, seed=7)
        order = _order(first)
        assert [t for t, _ in order] == ["301"] * 8 + ["302"] * 8
        assert order[:8] != [("301", f"d{i:02d}") for i in range(1, 9)]  # shuffled, not pool order
        first.delete()
        [again] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, seed=7)
        assert _order(again) == order

    def test_different_assessors_see_different_orders(self, campaign, pool, assessor_a, assessor_b):
        [a] = assign(
            campaign=campaign,
            pool=pool,
            user=assessor_a,
            topics=[campaign.topics.get(topic_id="301")],
            seed=7,
        )
        [b] = assign(
            campaign=campaign,
            pool=pool,
            user=assessor_b,
            topics=[campaign.topics.get(topic_id="302")],
            seed=7,
            mode="primary",
        )
        docs_a = [d for _, d in _order(a)]
        docs_b = [d for _, d in _order(b)]
        assert sorted(docs_a) == sorted(docs_b)
        assert docs_a != docs_b

    def test_interleaving_mixes_topics(self, campaign, pool, assessor_a):
        [assignment] = assign(
            campaign=campaign,
            pool=pool,
            user=assessor_a,
            topics=list(campaign.topics.all()),
            seed=3,
            interleave=True,
        )
        topics = [t for t, _ in _order(assignment)]
        assert topics != sorted(topics)

    def test_a_topic_cannot_have_two_primary_assessors(
        self, campaign, pool, assessor_a, assessor_b
    ):
        topics = list(campaign.topics.all())
        assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics)
        with pytest.raises(AssignmentError, match="already have a primary assessor"):
            assign(campaign=campaign, pool=pool, user=assessor_b, topics=topics)

    def test_only_assessors_of_the_campaign_can_be_assigned(self, campaign, pool, outsider):
        with pytest.raises(AssignmentError, match="not an assessor"):
            assign(campaign=campaign, pool=pool, user=outsider, topics=list(campaign.topics.all()))

    def test_overlap_gives_a_share_of_each_topic_to_the_partner(
        self, campaign, pool, assessor_a, assessor_b
    ):
        primary, overlap = assign(
            campaign=campaign,
            pool=pool,
            user=assessor_a,
            topics=list(campaign.topics.all()),
            overlap=0.25,
            partner=assessor_b,
            seed=11,
        )
        assert overlap.mode == Assignment.Mode.OVERLAP
        assert overlap.assessor.user == assessor_b
        assert overlap.items.filter(topic__topic_id="301").count() == 2  # ceil(0.25 * 8)
        assert set(_order(overlap)) <= set(_order(primary))


class TestJudging:
    def test_judging_records_position_rubric_timing_and_history(self, campaign, pool, assessor_a):
        [assignment] = assign(
            campaign=campaign,
            pool=pool,
            user=assessor_a,
            topics=list(campaign.topics.all()),
            seed=1,
        )
        item = next_item(assignment)
        served = timezone.now() - timedelta(seconds=9)
        judgment, recorded = _judge(
            item,
            2,
            timing=Timing(served_at=served, seconds_on_screen=9.0, active_seconds=6.5),
            note="clear answer",
            unsure=True,
        )
        assert recorded
        assert (judgment.label, judgment.position, judgment.version) == (2, item.position, 1)
        assert judgment.rubric_version == campaign.current_rubric()
        assert (judgment.seconds_on_screen, judgment.active_seconds) == (9.0, 6.5)
        assert judgment.served_at == served
        assert judgment.unsure
        assert judgment.note == "clear answer"
        assert next_item(assignment).pk != item.pk

    def test_a_revision_keeps_the_earlier_verdict_in_history(self, campaign, pool, assessor_a):
        [assignment] = assign(
            campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all())
        )
        item = next_item(assignment)
        _judge(item, 0)
        item.refresh_from_db()
        judgment, _ = _judge(item, 2)
        assert (judgment.label, judgment.version) == (2, 2)
        history = list(judgment.revisions.values_list("version", "label"))
        assert history == [(1, 0), (2, 2)]
        assert Judgment.objects.count() == 1

    def test_a_resubmitted_form_records_one_judgment(self, campaign, pool, assessor_a):
        [assignment] = assign(
            campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all())
        )
        item = next_item(assignment)
        submission = uuid.uuid4()
        first, recorded = _judge(item, 1, submission_id=submission, expected_version=0)
        again, recorded_again = _judge(item, 1, submission_id=submission, expected_version=0)
        assert recorded
        assert not recorded_again
        assert first.pk == again.pk
        assert JudgmentRevision.objects.count() == 1

    def test_a_stale_tab_is_refused_and_nothing_is_lost(self, campaign, pool, assessor_a):
        [assignment] = assign(
            campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all())
        )
        item = next_item(assignment)
        _judge(item, 1)
        item.refresh_from_db()
        _judge(item, 2, expected_version=1)  # tab one revises
        with pytest.raises(StaleJudgment) as stale:
            _judge(item, 0, expected_version=1)  # tab two still shows version 1
        assert stale.value.current.label == 2
        assert list(JudgmentRevision.objects.values_list("label", flat=True)) == [1, 2]

    def test_a_second_first_verdict_from_another_tab_is_stale(self, campaign, pool, assessor_a):
        [assignment] = assign(
            campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all())
        )
        item = next_item(assignment)
        _judge(item, 1, expected_version=0)
        with pytest.raises(StaleJudgment):
            _judge(item, 2, expected_version=0)

    def test_progress_counts_judged_per_topic(self, campaign, pool, assessor_a):
        [assignment] = assign(
            campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all())
        )
        for _ in range(3):
            _judge(next_item(assignment), 1)
        counts = {p.topic.topic_id: (p.judged, p.total) for p in progress(assignment)}
        assert counts == {"301": (3, 8), "302": (0, 8)}


class TestQueue:
    def test_a_shared_queue_serves_each_document_to_one_assessor(
        self, campaign, pool, assessor_a, assessor_b
    ):
        topics = [campaign.topics.get(topic_id="301")]
        [qa] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue")
        [qb] = assign(campaign=campaign, pool=pool, user=assessor_b, topics=topics, mode="queue")
        served = []
        for assignment in [qa, qb] * 4:
            item = next_item(assignment)
            served.append(item.doc_id)
            _judge(item, 1)
        assert sorted(served) == [f"d{i:02d}" for i in range(1, 9)]
        assert next_item(qa) is None
        assert next_item(qb) is None

    def test_queue_overlap_copies_go_to_a_second_assessor(
        self, campaign, pool, assessor_a, assessor_b
    ):
        topics = [campaign.topics.get(topic_id="301")]
        [qa] = assign(
            campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue", overlap=0.5
        )
        [qb] = assign(campaign=campaign, pool=pool, user=assessor_b, topics=topics, mode="queue")
        assert QueueItem.objects.filter(replica=1).count() == 4
        judged = {qa.pk: [], qb.pk: []}
        for assignment in [qa, qb] * 12:
            item = next_item(assignment)
            if item is not None:
                judged[assignment.pk].append(item.doc_id)
                _judge(item, 1)
        for docs in judged.values():
            assert len(docs) == len(set(docs))  # nobody judges a document twice
        assert len(judged[qa.pk]) + len(judged[qb.pk]) == 12

    def test_an_abandoned_claim_expires_and_the_first_copy_is_withdrawn(
        self, campaign, pool, assessor_a, assessor_b
    ):
        topics = [campaign.topics.get(topic_id="301")]
        [qa] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue")
        [qb] = assign(campaign=campaign, pool=pool, user=assessor_b, topics=topics, mode="queue")
        abandoned = next_item(qa)
        QueueItem.objects.filter(pk=abandoned.queue_item_id).update(
            claimed_at=timezone.now() - timedelta(hours=2)
        )
        taken = claim_next(qb)
        assert taken.doc_id == abandoned.doc_id
        abandoned.refresh_from_db()
        assert abandoned.withdrawn
        assert next_item(qa).doc_id != abandoned.doc_id


class TestReassign:
    def test_reassigning_moves_only_unjudged_documents_and_keeps_every_judgment(
        self, campaign, pool, assessor_a, assessor_b
    ):
        topics = list(campaign.topics.all())
        [a] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, seed=2)
        judged = []
        for _ in range(3):
            item = next_item(a)
            _judge(item, 2)
            judged.append((item.topic.topic_id, item.doc_id))
        b = reassign(assignment=a, topics=topics, to_user=assessor_b)
        assert Judgment.objects.filter(assessor=a.assessor).count() == 3
        assert next_item(a) is None  # the rest went to B: never served to A again
        moved = set(b.items.values_list("topic__topic_id", "doc_id"))
        assert len(moved) == 13
        assert not moved & set(judged)
        assert b.items.filter(judgment__isnull=False).count() == 0


@pytest.mark.django_db(transaction=True)
def test_thirty_two_threads_claiming_at_once_get_every_document_once(campaign, transactional_db):
    require(connection.vendor == "postgresql", "SKIP LOCKED claims need PostgreSQL")
    from django.contrib.auth import get_user_model

    from tests.factories import make_documents, make_pool, make_run, make_topics

    make_topics(campaign, ["401"])
    docs = [f"x{i:03d}" for i in range(200)]
    make_documents(campaign, docs)
    make_run(campaign, "r", {"401": [(d, float(-i)) for i, d in enumerate(docs)]})
    pool = make_pool(campaign, depth=200)
    topic = campaign.topics.get()
    assignments = []
    for i in range(32):
        user = get_user_model().objects.create_user(f"t{i:02d}", password="x")
        add_member(campaign=campaign, user=user, role="assessor")
        [assignment] = assign(campaign=campaign, pool=pool, user=user, topics=[topic], mode="queue")
        assignments.append(assignment)
    served: list[list[str]] = [[] for _ in range(32)]
    barrier = threading.Barrier(32)

    def work(index: int) -> None:
        try:
            barrier.wait()
            while True:
                item = claim_next(assignments[index])
                if item is None:
                    return
                served[index].append(item.doc_id)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [doc for docs in served for doc in docs]
    print(f"\n32 threads claimed {len(everything)} documents; busiest took {max(map(len, served))}")
    assert sorted(everything) == sorted(docs)  # every document once, none lost
    assert QueueItem.objects.filter(claimed_by__isnull=True).count() == 0


def test_work_moved_away_and_back_is_served_again(campaign, pool, assessor_a, assessor_b):
    topics = list(campaign.topics.all())
    [a] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, seed=4)
    _judge(next_item(a), 1)
    b = reassign(assignment=a, topics=topics, to_user=assessor_b)
    _judge(next_item(b), 2)
    back = reassign(assignment=b, topics=topics, to_user=assessor_a)
    assert back.pk == a.pk
    assert open_items(a).count() == 14  # 16 minus the one A judged and the one B judged
    assert next_item(b) is None
