"""The judging round trip's statement budget (issue 13), counted at the connection: every
statement Django sends (session, user, savepoints included) goes through the execute wrapper.
A judgment POST and the judging page each cost at most 5, for primary, overlap and queue items
(static and adaptive order: the claim of the next document folds into the answer's read), with
htmx and without. PostgreSQL only: the write is one statement there (assess.judging._SUBMIT_SQL);
on SQLite the same write runs as several ORM statements."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.db import connection
from django.urls import reverse

from assess import hybrid
from assess.assignments import assign
from assess.judging import next_item
from campaigns.models import JudgmentRevision
from tests.factories import make_pool, model_labels, small_campaign

pytestmark = pytest.mark.django_db
BUDGET = 5


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("The one-statement write is PostgreSQL's (CI runs it).")


class Counter:
    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        self.statements.append(sql)
        return execute(sql, params, many, context)


def _counted(call, *args, **kwargs):
    counter = Counter()
    with connection.execute_wrapper(counter):
        response = call(*args, **kwargs)
    return response, counter.statements


@pytest.fixture
def assignments(campaign, assessor_a, assessor_b):
    pool = small_campaign(campaign, docs=6)
    primary, overlap = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        overlap=0.5,
        partner=assessor_b,
        seed=7,
    )
    # Shared queues on the same campaign: a static pool's, and an adaptive (bandit) pool's.
    topics = list(campaign.topics.all())
    (queue,) = assign(
        campaign=campaign,
        pool=make_pool(campaign, depth=6),
        user=assessor_a,
        topics=topics,
        mode="queue",
        seed=3,
    )
    adaptive_pool = make_pool(campaign, depth=6, adjudication={"order": "bandit", "burn_in": 1})
    (adaptive,) = assign(
        campaign=campaign, pool=adaptive_pool, user=assessor_b, topics=topics, mode="queue", seed=4
    )
    # A shared queue under a hybrid budget (assess/hybrid.py): routed by a model's labels.
    hybrid_pool = make_pool(campaign, depth=6)
    hybrid.set_budget(
        pool=hybrid_pool,
        model=model_labels(hybrid_pool),
        budgets={t: hybrid.Share(percent=Decimal(100)) for t in topics},
    )
    (routed,) = assign(
        campaign=campaign, pool=hybrid_pool, user=assessor_a, topics=topics, mode="queue", seed=5
    )
    return {
        "primary": (primary, assessor_a),
        "overlap": (overlap, assessor_b),
        "queue": (queue, assessor_a),
        "adaptive queue": (adaptive, assessor_b),
        "hybrid queue": (routed, assessor_a),
    }


KINDS = ["primary", "overlap", "queue", "adaptive queue", "hybrid queue"]


def _budget(kind: str) -> int:
    """An adaptive pool's order reads its state in the statement that finds nothing open, then
    claims its choice: one statement more than a static queue (issue 15's selection budget)."""
    return BUDGET + 1 if kind == "adaptive queue" else BUDGET


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "no-js"])
def test_the_judging_page_and_a_judgment_cost_at_most_five_statements(
    postgres, client, assignments, kind, htmx
):
    assignment, user = assignments[kind]
    client.force_login(user)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    # Once per login and per worker, not per request: the session's first refresh and the
    # rubric version's labels (then cached: a version never changes).
    client.get(
        reverse("assess:start", args=[assignment.campaign.slug, assignment.token]), follow=True
    )
    for _ in range(3):  # a new judgment, then the next document's, then a revision below
        item = next_item(assignment)
        url = reverse("assess:judge", args=[assignment.campaign.slug, assignment.token, item.token])
        page, statements = _counted(client.get, url, **headers)
        assert page.status_code == 200
        assert len(statements) <= BUDGET, " | ".join(" ".join(s.split())[:70] for s in statements)
        html = page.content.decode()
        form = dict(re.findall(r'name="(submission|version|served)" value="([^"]*)"', html))
        answer, statements = _counted(client.post, url, {**form, "label": "1"}, **headers)
        assert answer.status_code == (200 if htmx else 302)
        assert len(statements) <= _budget(kind), " | ".join(
            " ".join(s.split())[:70] for s in statements
        )
    if "queue" in kind:  # each answer claimed the next document of the queue (nothing was open)
        assert assignment.items.count() == 4
    # A revision of the last one, from its page.
    page = client.get(url, **headers).content.decode()
    form = dict(re.findall(r'name="(submission|version|served)" value="([^"]*)"', page))
    assert form["version"] == "1"
    answer, statements = _counted(client.post, url, {**form, "label": "2"}, **headers)
    assert answer.status_code == (200 if htmx else 302)
    assert len(statements) <= _budget(kind), " | ".join(
        " ".join(s.split())[:70] for s in statements
    )
    assert JudgmentRevision.objects.filter(judgment__assessor__user=user).count() == 4


@pytest.mark.parametrize("kind", ["primary", "overlap"])  # a queue claims one at a time
def test_the_slim_answer_to_a_prefetching_page_costs_at_most_five_statements(
    postgres, client, assignments, kind
):
    """The page posts ``upcoming`` (the prefetched document it moved on to): the answer is the
    slim one, and the prefetched document's first time on screen is written with the verdict."""
    assignment, user = assignments[kind]
    client.force_login(user)
    client.get(
        reverse("assess:start", args=[assignment.campaign.slug, assignment.token]), follow=True
    )
    item = next_item(assignment)
    url = reverse("assess:judge", args=[assignment.campaign.slug, assignment.token, item.token])
    html = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    form = dict(re.findall(r'name="(submission|version|served)" value="([^"]*)"', html))
    following = next_item(assignment, after=item.position)
    assert following.first_served_at is None
    data = {**form, "label": "1", "upcoming": following.token}
    answer, statements = _counted(client.post, url, data, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    assert len(statements) <= BUDGET, " | ".join(" ".join(s.split())[:70] for s in statements)
    following.refresh_from_db()
    assert following.first_served_at is not None
