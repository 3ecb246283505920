"""The adaptive claim without a lock (assess.judging._claiming_panel, PostgreSQL): the order
chooses in-process from what one read returned, and the claim statement takes the chosen queue
entry only while nobody holds it. A choice someone else claimed meanwhile takes nothing and the
order chooses again; after ADAPTIVE_ATTEMPTS such races the choice is made under the topic's
row lock. Either way the assessor gets a document nobody else holds."""

from __future__ import annotations

import pytest
from django.db import connection

from assess import judging
from assess.assignments import assign
from assess.judging import claim_next
from assess.models import AssignmentItem, QueueItem
from pooling import adaptive
from pooling.adjudication import Choice
from tests.factories import make_pool, small_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_claimers(campaign, assessor_a, assessor_b):
    if connection.vendor != "postgresql":
        pytest.skip("The one-statement claim is PostgreSQL's (CI runs it).")
    small_campaign(campaign, docs=6)
    pool = make_pool(campaign, depth=6, adjudication={"order": "bandit", "burn_in": 0})
    topics = list(campaign.topics.all())
    (a,) = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue")
    (b,) = assign(campaign=campaign, pool=pool, user=assessor_b, topics=topics, mode="queue")
    return a, b


def _choosing(taken: AssignmentItem, *, times: int):
    """choose_from as if the order had not seen ``taken``'s claim: its document, ``times``
    times, then the real choice."""
    real = adaptive.choose_from
    calls = []

    def choose(**kwargs):
        calls.append(1)
        if len(calls) <= times:
            return taken.topic, Choice(taken.doc_id, None)
        return real(**kwargs)

    return choose, calls


@pytest.mark.parametrize("races", [1, judging.ADAPTIVE_ATTEMPTS])
def test_a_choice_someone_else_claimed_is_chosen_again(two_claimers, monkeypatch, races):
    a, b = two_claimers
    taken = claim_next(b)
    choose, calls = _choosing(taken, times=races)
    monkeypatch.setattr(adaptive, "choose_from", choose)
    mine = claim_next(a)
    assert mine is not None
    assert (mine.topic_id, mine.doc_id) != (taken.topic_id, taken.doc_id)
    # Each race was a claim that took nothing: b keeps the entry, a holds no copy of it.
    entry = QueueItem.objects.get(pk=taken.queue_item_id)
    assert entry.claimed_by_id == b.assessor_id
    assert not a.items.filter(topic_id=taken.topic_id, doc_id=taken.doc_id).exists()
    assert len(calls) == min(races + 1, judging.ADAPTIVE_ATTEMPTS)
    assert QueueItem.objects.get(pk=mine.queue_item_id).claimed_by_id == a.assessor_id


@pytest.mark.parametrize("locked", [False, True], ids=["one statement", "orm"])
def test_a_queue_never_hands_out_a_pair_its_assessor_judged_elsewhere(campaign, assessor_a, locked):
    """A pair judged through another pool's assignment is not claimed again by the same
    assessor: served as new, its verdict would be refused as stale (409)."""
    from tests.factories import judge

    small_campaign(campaign, topics=("301",), docs=6)
    topics = list(campaign.topics.all())
    (primary,) = assign(
        campaign=campaign, pool=make_pool(campaign, depth=6), user=assessor_a, topics=topics
    )
    judged = set()
    for item in primary.items.order_by("position")[:4]:
        judge(item, 1)
        judged.add(item.doc_id)
    (queue,) = assign(
        campaign=campaign,
        pool=make_pool(campaign, depth=6),
        user=assessor_a,
        topics=topics,
        mode="queue",
    )
    claimed = []
    while (
        item := claim_next(queue, locked=locked or connection.vendor != "postgresql")
    ) is not None:
        claimed.append(item.doc_id)
        judge(item, 0)
    assert len(claimed) == 2
    assert not set(claimed) & judged
