"""Adjudication (issue 19): an organiser or adjudicator opens a pair two assessors disagree on,
reads the document and every verdict, and records an adjudicated label with a reason. The label
is the campaign's adjudicated assessor's judgment: the qrels policy ``adjudicated`` prefers it,
every other policy and every agreement figure ignores it."""

from __future__ import annotations

import io
import re
import uuid

import pytest
from django.core.management import call_command
from django.urls import reverse

from campaigns.members import add_member
from campaigns.models import Assessor, Judgment, JudgmentRevision
from qrels.adjudication import adjudicate
from qrels.agreement_data import agreement_data
from qrels.policies import campaign_qrels
from tests.conftest import PASSWORD
from tests.factories import make_documents, make_topics
from tests.reports import login

pytestmark = pytest.mark.django_db

# (topic, document, ann's label, ben's label)
SHARED = [
    ("1", "d1", 0, 0),
    ("1", "d2", 1, 2),
    ("1", "d3", 2, 0),
    ("2", "d1", 0, 1),
    ("2", "d2", 1, 1),
    ("2", "d3", -1, 1),
]


@pytest.fixture
def judges(campaign, organiser):
    make_topics(campaign, ["1", "2"])
    make_documents(campaign, ["d1", "d2", "d3"], body="the-document-text")
    ann = Assessor.objects.create(campaign=campaign, name="ann")
    ben = Assessor.objects.create(campaign=campaign, name="ben")
    rubric = campaign.current_rubric()
    for topic_id, doc, a, b in SHARED:
        topic = campaign.topics.get(topic_id=topic_id)
        for who, label in ((ann, a), (ben, b)):
            Judgment.objects.create(
                campaign=campaign,
                topic=topic,
                doc_id=doc,
                assessor=who,
                label=label,
                rubric_version=rubric,
                note=f"{who.name}-note-{topic_id}-{doc}",
                seconds_on_screen=14.0,
            )
    return ann, ben


@pytest.fixture
def adjudicator(campaign):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username="adele", password=PASSWORD)
    add_member(campaign=campaign, user=user, role="adjudicator")
    return user


def page_url(campaign, topic_id: str, doc: str, **query) -> str:
    topic = campaign.topics.get(topic_id=topic_id)
    url = reverse("qrels:adjudicate", args=[campaign.slug, topic.pk, doc])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def post(client, url, *, label, reason="the narrative excludes it", version=0, submission=None):
    return client.post(
        url,
        {
            "label": str(label),
            "reason": reason,
            "version": str(version),
            "submission_id": str(submission or uuid.uuid4()),
        },
    )


def settled(campaign) -> list[Judgment]:
    return list(
        Judgment.objects.filter(campaign=campaign, assessor__kind=Assessor.Kind.ADJUDICATED)
    )


def figures(campaign, binary=False):
    report = agreement_data(campaign=campaign, binary=binary)
    return report.assessors, [
        (p.a, p.b, p.n, p.negative, p.cohen_kappa, p.observed, p.per_topic.keys())
        for p in report.pairs
    ]


class TestAdjudicating:
    def test_the_page_shows_the_document_and_every_verdict(
        self, client, organiser, campaign, judges
    ):
        login(client, organiser)
        response = client.get(page_url(campaign, "1", "d3"))
        assert response.status_code == 200
        html = response.content.decode()
        assert "the-document-text" in html
        assert "ann-note-1-d3" in html
        assert "ben-note-1-d3" in html
        assert "14 s" in html
        assert [v.label for v in response.context["verdicts"]] == [2, 0]

    def test_a_models_label_is_shown_marked_and_the_adjudicated_one_is_not_a_verdict(
        self, client, organiser, campaign, judges
    ):
        topic = campaign.topics.get(topic_id="1")
        model = Assessor.objects.create(campaign=campaign, name="gpt", kind=Assessor.Kind.MODEL)
        Judgment.objects.create(
            campaign=campaign, topic=topic, doc_id="d3", assessor=model, label=1
        )
        login(client, organiser)
        assert post(client, page_url(campaign, "1", "d3"), label=2).status_code == 302
        page = client.get(page_url(campaign, "1", "d3"))
        shown = [(v.assessor, v.kind, v.label) for v in page.context["verdicts"]]
        assert shown == [("ann", "person", 2), ("ben", "person", 0), ("gpt", "model", 1)]
        assert page.context["current"].label == 2

    def test_a_label_with_a_reason_is_recorded_as_the_adjudicated_assessors_judgment(
        self, client, organiser, campaign, judges
    ):
        login(client, organiser)
        back = reverse("qrels:agreement_pairs", args=[campaign.slug, judges[0].pk, judges[1].pk])
        response = post(client, page_url(campaign, "1", "d3", next=back), label=1)
        assert response.status_code == 302
        assert response["Location"] == back
        (judgment,) = settled(campaign)
        assert (judgment.topic.topic_id, judgment.doc_id, judgment.label) == ("1", "d3", 1)
        assert judgment.note == "the narrative excludes it"
        assert judgment.assessor.user is None
        assert judgment.assessor.name == "adjudicated"
        (revision,) = judgment.revisions.all()
        assert revision.by == organiser
        # The assessors' own verdicts are untouched.
        assert sorted(
            Judgment.objects.filter(topic=judgment.topic, doc_id="d3")
            .exclude(pk=judgment.pk)
            .values_list("label", flat=True)
        ) == [0, 2]

    def test_a_reason_is_required_and_nothing_is_stored_without_one(
        self, client, organiser, campaign, judges
    ):
        login(client, organiser)
        response = post(client, page_url(campaign, "1", "d3"), label=1, reason="   ")
        assert response.status_code == 400
        assert "reason" in response.content.decode().lower()
        assert settled(campaign) == []
        assert not Assessor.objects.filter(kind=Assessor.Kind.ADJUDICATED).exists()

    def test_a_label_off_the_rubric_is_refused(self, client, organiser, campaign, judges):
        login(client, organiser)
        assert post(client, page_url(campaign, "1", "d3"), label=7).status_code == 400
        assert settled(campaign) == []

    def test_readjudicating_makes_a_revision_and_a_stale_form_is_refused_losing_nothing(
        self, client, organiser, adjudicator, campaign, judges
    ):
        login(client, organiser)
        url = page_url(campaign, "1", "d3")
        assert post(client, url, label=1, version=0).status_code == 302
        # Another tab, opened before: version 0 is stale now.
        stale = post(client, url, label=2, version=0, reason="my second thoughts")
        assert stale.status_code == 409
        html = stale.content.decode()
        assert "my second thoughts" in html  # the reader's reason is kept in the form
        assert (settled(campaign)[0].label, settled(campaign)[0].version) == (1, 1)
        # Submitted again from the refreshed form (version 1): a second revision, by another.
        login(client, adjudicator)
        assert post(client, url, label=2, version=1, reason="on reflection").status_code == 302
        (judgment,) = settled(campaign)
        assert (judgment.label, judgment.version, judgment.note) == (2, 2, "on reflection")
        history = list(judgment.revisions.order_by("version").values_list("label", "by__username"))
        assert history == [(1, "olivia"), (2, "adele")]
        page = client.get(url).content.decode()
        # The history names who settled it.
        assert "olivia" in page
        assert "adele" in page

    def test_a_double_submitted_form_records_once(self, client, organiser, campaign, judges):
        login(client, organiser)
        url, submission = page_url(campaign, "1", "d3"), uuid.uuid4()
        assert post(client, url, label=1, submission=submission).status_code == 302
        assert post(client, url, label=1, submission=submission).status_code == 302
        assert JudgmentRevision.objects.filter(judgment__in=settled(campaign)).count() == 1

    def test_a_pair_nobody_judged_has_no_page(self, client, organiser, campaign, judges):
        login(client, organiser)
        assert client.get(page_url(campaign, "1", "nothere")).status_code == 404
        assert post(client, page_url(campaign, "1", "nothere"), label=1).status_code == 404

    def test_next_never_leads_off_the_agreement_pages(self, client, organiser, campaign, judges):
        login(client, organiser)
        home = reverse("qrels:agreement", args=[campaign.slug])
        for outside in ("https://evil.example/", "//evil.example/", "/c/robust04/settings/"):
            page = client.get(page_url(campaign, "1", "d2", next=outside))
            assert page.context["back_url"] == home
        response = post(
            client, page_url(campaign, "1", "d2", next="https://evil.example/"), label=1
        )
        assert response["Location"] == home


class TestWhatAnAdjudicationChanges:
    def test_agreement_figures_stay_as_they_were(self, campaign, organiser, judges):
        before = figures(campaign), figures(campaign, binary=True)
        topic = campaign.topics.get(topic_id="1")
        for doc, label in (("d2", 2), ("d3", 0)):
            adjudicate(
                campaign=campaign,
                topic=topic,
                doc_id=doc,
                label=label,
                reason="settled",
                by=organiser,
                expected_version=0,
            )
        assert (figures(campaign), figures(campaign, binary=True)) == before
        assert "adjudicated" not in figures(campaign)[0]

    def test_the_adjudicated_policy_prefers_it_and_no_other_policy_sees_it(
        self, campaign, organiser, judges
    ):
        policies = ("majority", "max", "min", "mean", "first", "primary")
        before = {p: campaign_qrels(campaign=campaign, policy=p) for p in policies}
        adjudicate(
            campaign=campaign,
            topic=campaign.topics.get(topic_id="1"),
            doc_id="d3",
            label=1,
            reason="settled",
            by=organiser,
            expected_version=0,
        )
        assert {p: campaign_qrels(campaign=campaign, policy=p) for p in policies} == before
        adjudicated = campaign_qrels(campaign=campaign, policy="adjudicated")
        assert adjudicated["1"]["d3"] == 1
        # Elsewhere: the default policy (majority here: ties to the higher label).
        assert {k: v for k, v in adjudicated["1"].items() if k != "d3"} == {
            k: v for k, v in before["majority"]["1"].items() if k != "d3"
        }
        assert adjudicated["2"] == before["majority"]["2"]
        binary = campaign_qrels(campaign=campaign, policy="adjudicated", binary=True)
        assert campaign.relevance_threshold == 1
        assert binary["1"]["d3"] == 1
        # refuse still refuses on ann and ben's disagreement: an adjudication settles it only
        # for the adjudicated policy.
        from qrels.policies import PolicyConflict

        with pytest.raises(PolicyConflict) as raised:
            campaign_qrels(campaign=campaign, policy="refuse")
        assert all("adjudicated" not in c.labels for c in raised.value.conflicts)

    def test_export_qrels_with_policy_adjudicated_writes_the_label(
        self, campaign, organiser, judges, tmp_path
    ):
        adjudicate(
            campaign=campaign,
            topic=campaign.topics.get(topic_id="1"),
            doc_id="d2",
            label=0,
            reason="off topic after all",
            by=organiser,
            expected_version=0,
        )
        out = tmp_path / "bundle"
        call_command(
            "export_qrels",
            campaign.slug,
            "--policy",
            "adjudicated",
            "--out",
            str(out),
            stdout=io.StringIO(),
        )
        lines = (out / "qrels.txt").read_text().splitlines()
        assert "1 0 d2 0" in lines
        majority = tmp_path / "majority"
        call_command(
            "export_qrels",
            campaign.slug,
            "--policy",
            "majority",
            "--out",
            str(majority),
            stdout=io.StringIO(),
        )
        assert "1 0 d2 2" in (majority / "qrels.txt").read_text().splitlines()
        # The sidecar keeps the adjudicated row, with its reason, beside the assessors' own.
        sidecar = (out / "judgments.tsv").read_text().splitlines()
        rows = [line.split("\t") for line in sidecar if line.startswith("1\td2\t")]
        assert sorted(row[2] for row in rows) == ["0", "1", "2"]
        (row,) = [row for row in rows if row[2] == "0"]
        assert "off topic after all" in row
        # The sidecar's source column is the assessor's kind: the adjudicated row says so.
        header = sidecar[0].split("\t")
        assert row[header.index("source")] == "adjudicated"
        assert sorted(r[header.index("source")] for r in rows) == [
            "adjudicated",
            "person",
            "person",
        ]


class TestWhoMayAdjudicate:
    def test_an_adjudicator_reads_agreement_and_adjudicates_but_administers_nothing(
        self, client, adjudicator, campaign, judges
    ):
        ann, ben = judges
        login(client, adjudicator)
        slug = campaign.slug
        for url in (
            reverse("qrels:agreement", args=[slug]),
            reverse("qrels:agreement_pair", args=[slug, ann.pk, ben.pk]),
            reverse("qrels:agreement_pairs", args=[slug, ann.pk, ben.pk]),
            page_url(campaign, "1", "d3"),
        ):
            assert client.get(url).status_code == 200, url
        assert post(client, page_url(campaign, "1", "d3"), label=2).status_code == 302
        assert settled(campaign)[0].revisions.get().by == adjudicator
        for name in (
            "campaigns:settings",
            "campaigns:rubric",
            "campaigns:files",
            "assess:assessors",
            "assess:progress",
            "qrels:export",
            "qrels:reports",
            "pooling:pools",
        ):
            assert client.get(reverse(name, args=[slug])).status_code == 404, name
        # The campaign's page sends an adjudicator to the agreement page; home lists it.
        detail = client.get(reverse("campaigns:detail", args=[slug]))
        assert detail["Location"] == reverse("qrels:agreement", args=[slug])
        assert reverse("qrels:agreement", args=[slug]) in client.get("/").content.decode()

    @pytest.mark.parametrize("who", ["assessor_a", "outsider", "other_organiser"])
    def test_assessors_and_outsiders_cannot_reach_it(self, client, campaign, judges, who, request):
        login(client, request.getfixturevalue(who))
        url = page_url(campaign, "1", "d3")
        assert client.get(url).status_code == 404
        assert post(client, url, label=1).status_code == 404
        assert settled(campaign) == []

    def test_the_adjudicator_role_can_be_given_from_the_command_line(self, campaign, db):
        from django.contrib.auth import get_user_model

        get_user_model().objects.create_user(username="carl", password=PASSWORD)
        out = io.StringIO()
        call_command("add_member", campaign.slug, "carl", "--role", "adjudicator", stdout=out)
        assert "adjudicator" in out.getvalue()
        assert campaign.role_of(get_user_model().objects.get(username="carl")) == "adjudicator"


class TestThePairsList:
    def test_each_pair_links_to_its_adjudication_and_shows_the_settled_label(
        self, client, organiser, campaign, judges
    ):
        ann, ben = judges
        login(client, organiser)
        url = reverse("qrels:agreement_pairs", args=[campaign.slug, ann.pk, ben.pk])
        html = client.get(url, {"distance": 1}).content.decode()
        assert html.count(">Adjudicate</a>") == 3  # 1/d2, 1/d3, 2/d1
        post(client, page_url(campaign, "1", "d3"), label=1)
        html = client.get(url, {"distance": 1}).content.decode()
        assert html.count(">Adjudicate</a>") == 2
        assert ">revise</a>" in html

    def test_negative_and_same_label_counts_link_to_their_pairs(
        self, client, organiser, campaign, judges
    ):
        ann, ben = judges
        login(client, organiser)
        slug = campaign.slug
        pair_page = client.get(reverse("qrels:agreement_pair", args=[slug, ann.pk, ben.pk]))
        html = pair_page.content.decode()
        negative = re.search(r'<a href="([^"]*show=negative[^"]*)"', html)
        assert negative, "the negative count is a link"
        listed = client.get(negative.group(1).replace("&amp;", "&")).context["page"]
        assert [(p.topic, p.doc_id, p.a.label) for p in listed.pairs] == [("2", "d3", -1)]
        same = re.findall(r'<a href="([^"]*show=same[^"]*)"', html)
        assert len(same) == 2  # one per topic
        counts = {}
        for href in same:
            page = client.get(href.replace("&amp;", "&")).context["page"]
            assert all(p.a.label == p.b.label for p in page.pairs)
            counts[page.pairs[0].topic] = page.total
        assert counts == {"1": 1, "2": 1}  # 1/d1 (0, 0) and 2/d2 (1, 1)
        matrix = client.get(reverse("qrels:agreement", args=[slug])).content.decode()
        assert "show=negative" in matrix
