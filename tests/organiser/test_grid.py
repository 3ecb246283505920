"""Giving out work from the topic x assessor grid (issue 19): dealing chosen topics round-robin
balanced by pool size, and a cell's give / move / end, each previewed (nothing changes) before
it is applied; moving a half-judged topic keeps its judged documents judged."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from assess.assignments import assign
from assess.grid import plan_deal
from assess.models import Assignment, AssignmentItem
from campaigns.members import add_member
from campaigns.models import Assessor, Judgment
from tests.conftest import PASSWORD
from tests.factories import judge, make_documents, make_pool, make_run, make_topics
from tests.reports import login

pytestmark = pytest.mark.django_db
User = get_user_model()

# Topic -> pool size: 6, 5, 4, 3, 2, 1 documents.
SIZES = {"101": 6, "102": 5, "103": 4, "104": 3, "105": 2, "106": 1}


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def setup(campaign, organiser):
    make_topics(campaign, list(SIZES))
    make_documents(campaign, [f"d{i}" for i in range(1, 7)])
    make_run(
        campaign,
        "run-a",
        {t: [(f"d{i}", 10.0 - i) for i in range(1, n + 1)] for t, n in SIZES.items()},
    )
    pool = make_pool(campaign, depth=10)
    people = []
    for name in ("amy", "bea", "cal"):
        user = User.objects.create_user(name, password=PASSWORD)
        add_member(campaign=campaign, user=user, role="assessor")
        people.append(Assessor.objects.get(campaign=campaign, user=user))
    return pool, people


def _state() -> tuple:
    return (
        list(Assignment.objects.order_by("pk").values_list("pk", "active", "assessor_id")),
        list(AssignmentItem.objects.order_by("pk").values_list("pk", "withdrawn", "judgment_id")),
        Judgment.objects.count(),
    )


def deal_url(campaign, pool) -> str:
    return reverse("assess:grid_deal", args=[campaign.slug, pool.version])


def cell_url(campaign, pool, topic_id, assessor) -> str:
    topic = campaign.topics.get(topic_id=topic_id)
    return reverse("assess:grid_cell", args=[campaign.slug, pool.version, topic.pk, assessor.pk])


class TestDealing:
    def test_six_topics_over_three_assessors_give_two_each_balanced_by_size(self, campaign, setup):
        pool, people = setup
        plan = plan_deal(pool=pool, topics=list(campaign.topics.all()), assessors=people)
        assert [len(share.topics) for share in plan.shares] == [2, 2, 2]
        # 6+1, 5+2, 4+3: the largest topic of each round goes to the lightest load.
        assert [share.documents for share in plan.shares] == [7, 7, 7]
        assert {
            share.assessor.name: [t.topic_id for t in share.topics] for share in plan.shares
        } == {"amy": ["101", "106"], "bea": ["102", "105"], "cal": ["103", "104"]}

    def test_the_preview_changes_nothing_and_confirming_applies_that_plan(
        self, client, organiser, campaign, setup
    ):
        pool, people = setup
        login(client, organiser)
        data = {
            "topics": [t.pk for t in campaign.topics.all()],
            "assessors": [a.pk for a in people],
        }
        before = _state()
        preview = client.post(deal_url(campaign, pool), data)
        assert preview.status_code == 200
        assert _state() == before
        plan = preview.context["plan"]
        html = preview.content.decode()
        assert "Apply the deal" in html
        applied = client.post(
            deal_url(campaign, pool), {**data, "confirm": "1", "signature": plan.signature()}
        )
        assert applied.status_code == 302
        held = {
            a.assessor.name: sorted(a.topics.values_list("topic_id", flat=True))
            for a in Assignment.objects.filter(pool=pool, active=True)
        }
        assert held == {"amy": ["101", "106"], "bea": ["102", "105"], "cal": ["103", "104"]}
        assert AssignmentItem.objects.count() == sum(SIZES.values())

    def test_a_stale_preview_is_shown_again_not_applied(self, client, organiser, campaign, setup):
        pool, people = setup
        login(client, organiser)
        topics = list(campaign.topics.all())
        data = {"topics": [t.pk for t in topics], "assessors": [a.pk for a in people]}
        signature = client.post(deal_url(campaign, pool), data).context["plan"].signature()
        # Meanwhile topic 101 is given to amy: the plan differs now.
        assign(campaign=campaign, pool=pool, user=people[0].user, topics=[topics[0]])
        before = _state()
        stale = client.post(
            deal_url(campaign, pool), {**data, "confirm": "1", "signature": signature}
        )
        assert stale.status_code == 409
        assert _state() == before
        assert "101" in [t.topic_id for t, _ in stale.context["plan"].skipped]

    def test_nothing_chosen_is_a_clear_error(self, client, organiser, campaign, setup):
        pool, _ = setup
        login(client, organiser)
        response = client.post(deal_url(campaign, pool), {"topics": [], "assessors": []})
        assert response.status_code == 400
        assert "Choose at least one" in response.content.decode()

    def test_with_htmx_the_panel_comes_back_alone(self, client, organiser, campaign, setup):
        pool, people = setup
        login(client, organiser)
        data = {"topics": [campaign.topics.first().pk], "assessors": [people[0].pk]}
        response = client.post(deal_url(campaign, pool), data, headers={"HX-Request": "true"})
        assert response.status_code == 200
        assert "<html" not in response.content.decode()
        plan = response.context["plan"]
        applied = client.post(
            deal_url(campaign, pool),
            {**data, "confirm": "1", "signature": plan.signature()},
            headers={"HX-Request": "true"},
        )
        assert applied.status_code == 200
        assert applied["HX-Retarget"] == "#workspace"
        html = applied.content.decode()
        assert 'id="workspace"' in html
        assert "<html" not in html
        assert "Dealt 1 topic over 1 assessor." in html


class TestACell:
    def test_moving_a_half_judged_topic_keeps_the_judged_documents(
        self, client, organiser, campaign, setup
    ):
        pool, (amy, bea, _) = setup
        topic = campaign.topics.get(topic_id="103")  # 4 documents
        [work] = assign(campaign=campaign, pool=pool, user=amy.user, topics=[topic], seed=3)
        items = list(work.items.order_by("position"))
        for item in items[:2]:
            judge(item, 1)
        judged = set(Judgment.objects.filter(assessor=amy).values_list("pk", "doc_id", "label"))
        login(client, organiser)
        url = cell_url(campaign, pool, "103", amy)
        before = _state()
        preview = client.post(url, {"action": "move", "to": bea.pk})
        assert preview.status_code == 200
        assert _state() == before
        plan = preview.context["plan"]
        assert (plan.moving, plan.judged) == (2, 2)
        assert "2 unjudged documents move; the 2 judged stay judged" in preview.content.decode()
        applied = client.post(url, {"action": "move", "to": bea.pk, "confirm": "1"})
        assert applied.status_code == 302
        # Amy's verdicts and their items are as they were; Bea has the two unjudged ones.
        assert set(Judgment.objects.filter(assessor=amy).values_list("pk", "doc_id", "label")) == (
            judged
        )
        assert work.items.filter(judgment__isnull=False).count() == 2
        assert not work.items.filter(judgment__isnull=True, withdrawn=False).exists()
        moved = AssignmentItem.objects.filter(
            assignment__assessor=bea, topic=topic, withdrawn=False, judgment__isnull=True
        )
        assert sorted(moved.values_list("doc_id", flat=True)) == sorted(i.doc_id for i in items[2:])

    def test_giving_and_ending_from_a_cell(self, client, organiser, campaign, setup):
        pool, (amy, bea, _) = setup
        login(client, organiser)
        url = cell_url(campaign, pool, "102", amy)
        page = client.get(url)
        assert page.status_code == 200
        assert "Give 102 to amy" in page.content.decode()
        preview = client.post(url, {"action": "give"})
        assert preview.context["plan"].moving == 5
        assert not Assignment.objects.exists()
        assert client.post(url, {"action": "give", "confirm": "1"}).status_code == 302
        [work] = Assignment.objects.filter(assessor=amy, active=True)
        assert work.items.count() == 5
        judge(work.items.order_by("position").first(), 0)
        # Giving it to bea too is refused: it has a primary assessor; move it instead.
        refused = client.post(cell_url(campaign, pool, "102", bea), {"action": "give"})
        assert refused.status_code == 400
        assert "move it instead" in refused.content.decode()
        preview = client.post(url, {"action": "end"})
        assert (preview.context["plan"].moving, preview.context["plan"].judged) == (4, 1)
        assert client.post(url, {"action": "end", "confirm": "1"}).status_code == 302
        assert work.items.filter(withdrawn=True).count() == 4
        assert work.items.filter(judgment__isnull=False, withdrawn=False).count() == 1
        assert Judgment.objects.filter(assessor=amy).count() == 1

    def test_the_grid_links_each_cell_and_offers_the_deal(self, client, organiser, campaign, setup):
        pool, people = setup
        login(client, organiser)
        html = client.get(reverse("assess:assessors", args=[campaign.slug])).content.decode()
        assert html.count('class="ow-cell-link"') == len(SIZES) * len(people)
        assert cell_url(campaign, pool, "101", people[0]) in html
        assert 'form="grid-deal-form"' in html
        assert "Deal the ticked topics round-robin" in html

    @pytest.mark.parametrize("who", ["assessor_a", "outsider", "other_organiser"])
    def test_only_organisers_reach_it(self, client, campaign, setup, who, request):
        pool, people = setup
        login(client, request.getfixturevalue(who))
        before = _state()
        url = cell_url(campaign, pool, "101", people[0])
        assert client.get(url).status_code == 404
        assert client.post(url, {"action": "give", "confirm": "1"}).status_code == 404
        data = {"topics": [campaign.topics.first().pk], "assessors": [people[0].pk]}
        assert client.post(deal_url(campaign, pool), data).status_code == 404
        assert _state() == before
