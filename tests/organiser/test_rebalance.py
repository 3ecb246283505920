"""Moving work mid-campaign: rebalancing, moving a topic, ending an assignment. Whatever moves,
every judgment stays, a judged document is never served again to anyone who did not judge it,
and nothing is served twice."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth import get_user_model

from assess.assignments import (
    AssignmentError,
    assign,
    end_assignment,
    reassign_topic,
    rebalance,
)
from assess.judging import next_item, submit
from assess.models import Assignment, AssignmentItem, QueueItem
from campaigns.judgments import Timing
from campaigns.members import add_member
from campaigns.models import Judgment
from tests.factories import small_campaign


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # Accounts are made for every test; the production hasher's cost is not what is tested here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(campaign):
    return small_campaign(campaign, docs=9)


@pytest.fixture
def carol(campaign):
    user = get_user_model().objects.create_user("carol", password="x")
    add_member(campaign=campaign, user=user, role="assessor")
    return user


@pytest.fixture
def topic(campaign):
    return campaign.topics.get(topic_id="301")


def _judge(item: AssignmentItem, label: int = 1) -> Judgment:
    judgment, _ = submit(
        item=item,
        label=label,
        rubric_version=item.assignment.campaign.current_rubric(),
        submission_id=uuid.uuid4(),
        # A document served twice to one assessor would arrive without its judgment: the
        # expected version 0 then fails as stale, and the test with it.
        expected_version=item.judgment.version if item.judgment else 0,
        timing=Timing(),
    )
    return judgment


def _judge_some(assignment: Assignment, n: int) -> list[str]:
    docs = []
    for _ in range(n):
        item = next_item(assignment)
        docs.append(item.doc_id)
        _judge(item)
    return docs


def _work_through(campaign) -> list[tuple[str, str]]:
    """Every active assignment judges until it has nothing left: (assessor, doc) per serve."""
    served = []
    for assignment in Assignment.objects.filter(campaign=campaign, active=True):
        while (item := next_item(assignment)) is not None:
            served.append((assignment.assessor.name, item.doc_id))
            _judge(item)
    return served


def _open_holders(topic) -> dict[str, list[str]]:
    holders: dict[str, list[str]] = {}
    rows = AssignmentItem.objects.filter(
        topic=topic, judgment__isnull=True, withdrawn=False, assignment__active=True
    ).values_list("doc_id", "assignment__assessor__name")
    for doc, name in rows:
        holders.setdefault(doc, []).append(name)
    return holders


class TestRebalance:
    def test_it_splits_the_remaining_documents_evenly_and_keeps_every_judgment(
        self, campaign, pool, topic, assessor_a, assessor_b, carol
    ):
        [primary] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=[topic], seed=4)
        judged = _judge_some(primary, 3)
        before = list(Judgment.objects.values_list("pk", "label", "version"))

        shares = rebalance(pool=pool, topic=topic, users=[assessor_a, assessor_b, carol])

        assert shares == {"alice": 2, "bob": 2, "carol": 2}
        assert list(Judgment.objects.values_list("pk", "label", "version")) == before
        holders = _open_holders(topic)
        assert all(len(names) == 1 for names in holders.values())  # one holder per document
        assert not set(holders) & set(judged)  # judged documents are given to nobody
        assert primary.items.filter(judgment__isnull=False, withdrawn=False).count() == 3
        served = _work_through(campaign)
        assert len(served) == len(set(served)) == 6
        assert not {doc for _, doc in served} & set(judged)
        # Nothing lost: every pooled document of the topic now has exactly one primary verdict.
        assert Judgment.objects.filter(topic=topic).count() == 9

    def test_it_moves_as_little_as_it_can(self, campaign, pool, topic, assessor_a, assessor_b):
        [primary] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=[topic], seed=4)
        kept_first = set(primary.items.values_list("doc_id", flat=True))
        rebalance(pool=pool, topic=topic, users=[assessor_a, assessor_b])
        still_alice = set(_open_holders(topic)) - {
            doc for doc, names in _open_holders(topic).items() if names != ["alice"]
        }
        assert len(still_alice) == 5
        assert still_alice <= kept_first
        assert primary.items.filter(withdrawn=True).count() == 4

    def test_a_document_judged_as_an_overlap_copy_goes_only_to_whoever_judged_it(
        self, campaign, pool, topic, assessor_a, assessor_b, carol
    ):
        primary, overlap = assign(
            campaign=campaign,
            pool=pool,
            user=assessor_a,
            topics=[topic],
            overlap=0.5,
            partner=assessor_b,
            seed=8,
        )
        overlap_docs = set(overlap.items.values_list("doc_id", flat=True))
        judged_by_bob = set(_judge_some(overlap, 2))
        open_copies_of_bob = overlap_docs - judged_by_bob

        rebalance(pool=pool, topic=topic, users=[assessor_b, carol])  # alice leaves the topic

        # Bob's two verdicts now stand for the primary work too: nothing new to serve for them.
        bob_primary = Assignment.objects.get(assessor__user=assessor_b, mode="primary")
        linked = bob_primary.items.filter(doc_id__in=judged_by_bob)
        assert linked.count() == 2
        assert all(item.judgment_id for item in linked)
        # Bob's open overlap copies go to carol, never a second time to bob.
        holders = _open_holders(topic)
        for doc in open_copies_of_bob:
            assert sorted(holders[doc]) == ["bob", "carol"]  # bob's copy and carol's primary
        served = _work_through(campaign)
        assert len(served) == len(set(served))
        served_to_carol = {doc for name, doc in served if name == "carol"}
        assert not served_to_carol & judged_by_bob
        assert next_item(primary) is None  # alice keeps nothing

    def test_documents_judged_by_nobody_chosen_stay_with_their_holder(
        self, campaign, pool, topic, assessor_a, assessor_b, carol
    ):
        _primary, overlap = assign(
            campaign=campaign,
            pool=pool,
            user=assessor_a,
            topics=[topic],
            overlap=0.5,
            partner=assessor_b,
            seed=8,
        )
        judged_by_bob = set(_judge_some(overlap, 2))
        rebalance(pool=pool, topic=topic, users=[carol])
        holders = _open_holders(topic)
        for doc in judged_by_bob:
            assert holders[doc] == ["alice"]
        served_to_carol = {doc for doc, names in holders.items() if "carol" in names}
        assert len(served_to_carol) == 7
        assert not served_to_carol & judged_by_bob

    def test_rebalancing_twice_changes_nothing_the_second_time(
        self, campaign, pool, topic, assessor_a, assessor_b
    ):
        assign(campaign=campaign, pool=pool, user=assessor_a, topics=[topic], seed=4)
        first = rebalance(pool=pool, topic=topic, users=[assessor_a, assessor_b])
        holders = _open_holders(topic)
        assert rebalance(pool=pool, topic=topic, users=[assessor_a, assessor_b]) == first
        assert _open_holders(topic) == holders

    def test_giving_work_back_serves_it_again_rather_than_losing_it(
        self, campaign, pool, topic, assessor_a, assessor_b
    ):
        [primary] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=[topic], seed=4)
        rebalance(pool=pool, topic=topic, users=[assessor_b])
        assert next_item(primary) is None
        rebalance(pool=pool, topic=topic, users=[assessor_a])  # alice's withdrawn items return
        assert sum(len(v) for v in _open_holders(topic).values()) == 9
        served = _work_through(campaign)
        assert len(served) == len(set(served)) == 9

    def test_it_refuses_when_there_is_nothing_to_deal(
        self, campaign, pool, topic, assessor_a, assessor_b
    ):
        with pytest.raises(AssignmentError, match="no unjudged documents"):
            rebalance(pool=pool, topic=topic, users=[assessor_a])
        assign(campaign=campaign, pool=pool, user=assessor_a, topics=[topic], mode="queue")
        with pytest.raises(AssignmentError, match="queues balance themselves"):
            rebalance(pool=pool, topic=topic, users=[assessor_a, assessor_b])

    def test_only_assessors_of_the_campaign_can_share_a_topic(
        self, campaign, pool, topic, assessor_a, outsider
    ):
        assign(campaign=campaign, pool=pool, user=assessor_a, topics=[topic])
        with pytest.raises(AssignmentError, match="not an assessor"):
            rebalance(pool=pool, topic=topic, users=[assessor_a, outsider])
        assert AssignmentItem.objects.filter(withdrawn=True).count() == 0


class TestMovingATopic:
    def test_moving_keeps_judgments_and_moving_back_loses_nothing(
        self, campaign, pool, topic, assessor_a, assessor_b
    ):
        [primary] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=[topic], seed=1)
        judged_by_alice = _judge_some(primary, 3)
        assert reassign_topic(pool=pool, topic=topic, from_user=assessor_a, to_user=assessor_b) == 6
        assert Judgment.objects.filter(assessor__user=assessor_a).count() == 3
        assert next_item(primary) is None
        bob = Assignment.objects.get(assessor__user=assessor_b)
        _judge_some(bob, 2)
        # ... and back: alice's earlier (withdrawn) items are served again, not skipped.
        assert reassign_topic(pool=pool, topic=topic, from_user=assessor_b, to_user=assessor_a) == 4
        served = _work_through(campaign)
        assert len(served) == len(set(served)) == 4
        assert not {doc for _, doc in served} & set(judged_by_alice)
        assert Judgment.objects.filter(topic=topic).count() == 9

    def test_the_overlap_cannot_move_to_the_assessor_it_doubles(
        self, campaign, pool, topic, assessor_a, assessor_b
    ):
        assign(
            campaign=campaign,
            pool=pool,
            user=assessor_a,
            topics=[topic],
            overlap=0.5,
            partner=assessor_b,
        )
        with pytest.raises(AssignmentError, match="third assessor"):
            reassign_topic(pool=pool, topic=topic, from_user=assessor_b, to_user=assessor_a)

    def test_work_the_target_already_holds_as_an_overlap_copy_is_refused(
        self, campaign, pool, topic, assessor_a, assessor_b
    ):
        assign(
            campaign=campaign,
            pool=pool,
            user=assessor_a,
            topics=[topic],
            overlap=0.5,
            partner=assessor_b,
        )
        with pytest.raises(AssignmentError, match="serve them twice"):
            reassign_topic(pool=pool, topic=topic, from_user=assessor_a, to_user=assessor_b)
        assert AssignmentItem.objects.filter(withdrawn=True).count() == 0

    def test_nothing_to_move_is_a_sentence(self, campaign, pool, topic, assessor_a, assessor_b):
        with pytest.raises(AssignmentError, match="nothing left to judge"):
            reassign_topic(pool=pool, topic=topic, from_user=assessor_a, to_user=assessor_b)


class TestEndingAnAssignment:
    def test_its_open_documents_are_withdrawn_and_its_judgments_stay(
        self, campaign, pool, topic, assessor_a
    ):
        [primary] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=[topic])
        _judge_some(primary, 2)
        assert end_assignment(assignment=primary) == 7
        primary.refresh_from_db()
        assert not primary.active
        assert next_item(primary) is None
        assert Judgment.objects.count() == 2
        assert primary.items.filter(judgment__isnull=False, withdrawn=False).count() == 2
        assert end_assignment(assignment=primary) == 0  # a second click changes nothing

    def test_queue_claims_are_released_for_the_others(
        self, campaign, pool, topic, assessor_a, assessor_b
    ):
        [qa] = assign(campaign=campaign, pool=pool, user=assessor_a, topics=[topic], mode="queue")
        [qb] = assign(campaign=campaign, pool=pool, user=assessor_b, topics=[topic], mode="queue")
        claimed = next_item(qa)
        end_assignment(assignment=qa)
        assert QueueItem.objects.get(pk=claimed.queue_item_id).claimed_by is None
        served = _work_through(campaign)
        assert sorted(doc for _, doc in served) == sorted(
            QueueItem.objects.values_list("doc_id", flat=True)
        )
        assert {name for name, _ in served} == {"bob"}
        assert qb.active
