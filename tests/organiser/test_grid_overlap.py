"""Overlap set from the grid (issue 19): tick topics held as primary work and assessors, give a
share, and each topic's share goes to a second assessor (never its own), balanced by documents,
drawn as ``assign(overlap=...)`` draws it; previewed (nothing changes) before it is applied, a
stale preview refused with 409."""

from __future__ import annotations

import pytest
from django.urls import reverse

from assess.assignments import _overlap_sample, add_overlap, assign, pool_pairs
from assess.grid import plan_overlap
from assess.models import Assignment, AssignmentItem
from tests.factories import judge
from tests.organiser import test_grid as grid_tests
from tests.reports import login

pytestmark = pytest.mark.django_db

# The grid tests' campaign: topics 101-106 of 6 to 1 documents, assessors amy, bea and cal.
setup = grid_tests.setup
_state = grid_tests._state


def overlap_url(campaign, pool) -> str:
    return reverse("assess:grid_overlap", args=[campaign.slug, pool.version])


@pytest.fixture
def dealt(campaign, setup):
    """amy holds 101, 104; bea 102, 105; cal 103 (primary); 106 nobody's."""
    pool, (amy, bea, cal) = setup
    topics = {t.topic_id: t for t in campaign.topics.all()}
    assign(
        campaign=campaign, pool=pool, user=amy.user, topics=[topics["101"], topics["104"]], seed=1
    )
    assign(
        campaign=campaign, pool=pool, user=bea.user, topics=[topics["102"], topics["105"]], seed=2
    )
    assign(campaign=campaign, pool=pool, user=cal.user, topics=[topics["103"]], seed=3)
    return pool, (amy, bea, cal), topics


def overlaps(pool) -> dict[str, tuple[str, str, list[str]]]:
    """topic id -> (second assessor, primary assessor, documents given) of active overlaps."""
    found = {}
    for a in Assignment.objects.filter(pool=pool, active=True, mode=Assignment.Mode.OVERLAP):
        for topic in a.topics.all():
            docs = sorted(a.items.filter(topic=topic).values_list("doc_id", flat=True))
            found[topic.topic_id] = (a.assessor.name, a.partner.name, docs)
    return found


class TestPlanning:
    def test_each_topic_goes_to_another_assessor_balanced_by_documents(self, campaign, dealt):
        pool, people, topics = dealt
        plan = plan_overlap(pool=pool, topics=list(topics.values()), assessors=people, fraction=0.5)
        got = {
            s.topic.topic_id: (s.partner.name, s.primary.assessor.name, s.documents)
            for s in plan.shares
        }
        # Half of each, the largest first to the lightest load, never to the topic's own
        # assessor (ties: the order chosen): 101 (3 of 6) bea; 102 (3 of 5) amy; 103 (2 of 4,
        # cal's) amy, 3 before cal's 0 is not allowed; 104 (2 of 3) cal; 105 (1 of 2) cal.
        assert got == {
            "101": ("bea", "amy", 3),
            "102": ("amy", "bea", 3),
            "103": ("amy", "cal", 2),
            "104": ("cal", "amy", 2),
            "105": ("cal", "bea", 1),
        }
        assert [(t.topic_id, why) for t, why in plan.skipped] == [
            ("106", "nobody holds it as primary work: give or deal it first")
        ]

    def test_an_overlapped_topic_is_left_out(self, campaign, dealt):
        pool, (amy, bea, cal), topics = dealt
        assign(
            campaign=campaign,
            pool=pool,
            user=amy.user,
            topics=[topics["106"]],
            overlap=1.0,
            partner=cal.user,
        )
        plan = plan_overlap(pool=pool, topics=[topics["106"]], assessors=[bea], fraction=0.5)
        assert plan.shares == []
        assert plan.skipped[0][1] == "already overlapped with cal"

    @pytest.mark.parametrize("fraction", [None, 0, 1.5, -0.1])
    def test_a_share_outside_0_to_1_is_refused(self, campaign, dealt, fraction):
        pool, people, topics = dealt
        with pytest.raises(ValueError, match="Give the overlap"):
            plan_overlap(pool=pool, topics=[topics["101"]], assessors=people, fraction=fraction)


class TestFromTheGrid:
    def data(self, topics, people, overlap="50%", **extra):
        return {
            "topics": [t.pk for t in topics],
            "assessors": [a.pk for a in people],
            "overlap": overlap,
            **extra,
        }

    def test_the_preview_changes_nothing_and_confirming_gives_the_assign_sample(
        self, client, organiser, campaign, dealt
    ):
        pool, people, topics = dealt
        login(client, organiser)
        data = self.data([topics["101"], topics["102"]], people)
        before = _state()
        preview = client.post(overlap_url(campaign, pool), data)
        assert preview.status_code == 200
        assert _state() == before
        assert "Apply the overlap" in preview.content.decode()
        signature = preview.context["plan"].signature()
        applied = client.post(
            overlap_url(campaign, pool), {**data, "confirm": "1", "signature": signature}
        )
        assert applied.status_code == 302
        got = overlaps(pool)
        assert {t: (who, of) for t, (who, of, _) in got.items()} == {
            "101": ("bea", "amy"),
            "102": ("amy", "bea"),
        }
        # The very documents assign(overlap=0.5) draws with the primary's seed.
        primary = Assignment.objects.get(pool=pool, assessor=people[0], mode="primary")
        pairs = pool_pairs(pool, [topics["101"]])
        expected = _overlap_sample(
            pairs[topics["101"].pk], 0.5, seed=primary.seed, topic=topics["101"]
        )
        assert got["101"][2] == expected
        overlap = Assignment.objects.get(pool=pool, mode="overlap", assessor=people[1])
        assert (overlap.overlap_fraction, overlap.seed) == (0.5, primary.seed)

    def test_a_stale_preview_is_refused_with_409_and_changes_nothing(
        self, client, organiser, campaign, dealt
    ):
        pool, (amy, bea, cal), topics = dealt
        login(client, organiser)
        data = self.data([topics["101"], topics["103"]], [amy, bea, cal])
        signature = client.post(overlap_url(campaign, pool), data).context["plan"].signature()
        # Meanwhile topic 101 gets an overlap another way.
        primary = Assignment.objects.get(pool=pool, assessor=amy, mode="primary")
        add_overlap(primary=primary, topics=[topics["101"]], partner=cal, fraction=0.5)
        before = _state()
        stale = client.post(
            overlap_url(campaign, pool), {**data, "confirm": "1", "signature": signature}
        )
        assert stale.status_code == 409
        assert _state() == before
        assert ("101", "already overlapped with cal") in [
            (t.topic_id, why) for t, why in stale.context["plan"].skipped
        ]

    def test_judged_documents_stay_judged_and_open_ones_are_not_given_twice(
        self, client, organiser, campaign, dealt
    ):
        pool, (amy, bea, _), topics = dealt
        # bea once held 101's work: she judged one document of it and still has two open.
        primary = Assignment.objects.get(pool=pool, assessor=amy, mode="primary")
        earlier = Assignment.objects.create(
            campaign=campaign, pool=pool, assessor=bea, mode="primary", seed=5
        )
        earlier.topics.add(topics["101"])
        docs = sorted(primary.items.filter(topic=topics["101"]).values_list("doc_id", flat=True))
        for i, doc in enumerate(docs[:3], start=1):
            AssignmentItem.objects.create(
                assignment=earlier, topic=topics["101"], doc_id=doc, position=i
            )
        judge(earlier.items.get(doc_id=docs[0]), label=1)
        login(client, organiser)
        data = self.data([topics["101"]], [bea], overlap="1")
        plan = client.post(overlap_url(campaign, pool), data).context["plan"]
        assert (
            client.post(
                overlap_url(campaign, pool), {**data, "confirm": "1", "signature": plan.signature()}
            ).status_code
            == 302
        )
        overlap = Assignment.objects.get(pool=pool, mode="overlap", assessor=bea)
        given = dict(overlap.items.values_list("doc_id", "judgment_id"))
        assert not {docs[1], docs[2]} & set(given)  # open with her already
        assert given[docs[0]] is not None  # judged: arrives judged
        assert set(given) == set(docs) - {docs[1], docs[2]}

    @pytest.mark.parametrize(
        ("overlap", "message"),
        [
            ("", "Give the overlap"),
            ("abc", "Overlap: Enter a fraction"),
            ("150%", "Overlap: The overlap is at most 1"),
        ],
    )
    def test_a_bad_share_is_a_clear_400(self, client, organiser, campaign, dealt, overlap, message):
        pool, people, topics = dealt
        login(client, organiser)
        before = _state()
        response = client.post(
            overlap_url(campaign, pool), self.data([topics["101"]], people, overlap=overlap)
        )
        assert response.status_code == 400
        assert message in response.content.decode()
        assert _state() == before

    def test_with_htmx_the_panel_comes_back_alone_then_the_workspace(
        self, client, organiser, campaign, dealt
    ):
        pool, people, topics = dealt
        login(client, organiser)
        data = self.data([topics["103"]], people)
        response = client.post(overlap_url(campaign, pool), data, headers={"HX-Request": "true"})
        assert response.status_code == 200
        assert "<html" not in response.content.decode()
        signature = response.context["plan"].signature()
        applied = client.post(
            overlap_url(campaign, pool),
            {**data, "confirm": "1", "signature": signature},
            headers={"HX-Request": "true"},
        )
        assert applied["HX-Retarget"] == "#workspace"
        assert "Overlap of 50% set on 1 topic (1 overlap assignment)." in applied.content.decode()

    def test_the_grid_offers_it(self, client, organiser, campaign, dealt):
        pool, _, _ = dealt
        login(client, organiser)
        html = client.get(reverse("assess:assessors", args=[campaign.slug])).content.decode()
        assert f'formaction="{overlap_url(campaign, pool)}"' in html
        assert "Overlap the ticked topics" in html

    @pytest.mark.parametrize("who", ["assessor_a", "outsider", "other_organiser"])
    def test_only_organisers_reach_it(self, client, campaign, dealt, who, request):
        pool, people, topics = dealt
        login(client, request.getfixturevalue(who))
        before = _state()
        data = self.data([topics["101"]], people, confirm="1")
        assert client.post(overlap_url(campaign, pool), data).status_code == 404
        assert _state() == before
