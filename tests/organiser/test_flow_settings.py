"""The organiser's side of the assessor flow: the campaign's judging-screen switches, the
preview of a document with its topic's terms marked, and skipped documents on the progress
page."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse

from assess import dashboard as dash
from assess.assignments import assign
from assess.judging import next_item
from assess.skips import skip
from campaigns.forms import CampaignForm
from campaigns.models import Campaign, Document
from campaigns.sanitize import render_body
from tests.factories import judge, small_campaign

pytestmark = pytest.mark.django_db

XSS_BODY = (
    '<p>Topic 301 title <img src=x onerror="window.__pwned=1"> and text</p>'
    "<script>window.__pwned=1</script>"
    '<a href="javascript:window.__pwned=1" onclick="window.__pwned=1">title link</a>'
    "<p>&lt;script&gt;window.__pwned=1&lt;/script&gt; title</p>"
)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def work(campaign, assessor_a):
    pool = small_campaign(campaign, docs=4)
    [primary] = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all()), seed=2
    )
    return primary


class TestSettings:
    def test_new_campaigns_break_between_topics_and_do_not_highlight(self):
        assert Campaign().topic_breaks is True
        assert Campaign().highlight_terms is False
        form = CampaignForm()
        assert {"topic_breaks", "highlight_terms"} <= set(form.fields)

    def test_the_organiser_switches_them_and_reads_why_highlighting_is_off(
        self, client, campaign, organiser, django_assert_max_num_queries
    ):
        client.force_login(organiser)
        url = reverse("campaigns:settings", args=[campaign.slug])
        client.get(reverse("home"))
        with django_assert_max_num_queries(6):
            page = client.get(url)
        html = page.content.decode()
        assert page.status_code == 200
        assert "can bias judgments" in html
        assert "Buckley" in html
        assert "Scholer" in html
        response = client.post(
            url,
            {
                "title": "Renamed",
                "description": "",
                "guidelines": "Read the narrative.",
                "highlight_terms": "on",
                "slug": "hijacked",
            },
        )
        assert response.status_code == 302
        campaign.refresh_from_db()
        assert (campaign.title, campaign.slug) == ("Renamed", "robust04")
        assert (campaign.topic_breaks, campaign.highlight_terms) == (False, True)
        assert campaign.guidelines == "Read the narrative."

    def test_a_bad_form_is_refused_whole(self, client, campaign, organiser):
        client.force_login(organiser)
        url = reverse("campaigns:settings", args=[campaign.slug])
        response = client.post(url, {"title": "", "highlight_terms": "on"})
        assert response.status_code == 400
        campaign.refresh_from_db()
        assert campaign.highlight_terms is False
        assert campaign.title == "Robust 2004 re-judging"

    @pytest.mark.parametrize("who", ["assessor_a", "outsider", "other_organiser"])
    def test_only_the_campaigns_organisers_reach_it(self, request, client, campaign, who):
        client.force_login(request.getfixturevalue(who))
        url = reverse("campaigns:settings", args=[campaign.slug])
        assert client.get(url).status_code == 404
        assert client.post(url, {"title": "x", "highlight_terms": "on"}).status_code == 404
        campaign.refresh_from_db()
        assert campaign.highlight_terms is False

    def test_the_rubric_page_names_the_screens_command_keys(self, client, campaign, organiser):
        client.force_login(organiser)
        html = client.get(reverse("campaigns:rubric", args=[campaign.slug])).content.decode()
        assert "<kbd>s</kbd> (skip (judge later))" in html


class TestHighlightingPreview:
    def test_it_shows_a_pooled_document_with_its_topics_terms_marked(
        self, client, campaign, organiser, work, django_assert_max_num_queries
    ):
        client.force_login(organiser)
        client.get(reverse("home"))
        topic = campaign.topics.get(topic_id="301")
        url = reverse("assess:highlighting", args=[campaign.slug])
        with django_assert_max_num_queries(9):
            response = client.get(url, {"topic": topic.pk})
        html = response.content.decode()
        assert response.status_code == 200
        assert "Highlighting is <strong>off</strong>" in html
        assert '<mark class="term">title</mark>' in html  # "Topic 301 title" has the term
        assert "Document d01" in html

    def test_an_xss_document_stays_inert_with_highlighting_on(
        self, client, campaign, organiser, work
    ):
        html_body, is_html = render_body(XSS_BODY)
        Document.objects.filter(campaign=campaign, doc_id="d01").update(
            body=XSS_BODY, body_html=html_body, is_html=is_html
        )
        campaign.highlight_terms = True
        campaign.save(update_fields=["highlight_terms"])
        client.force_login(organiser)
        topic = campaign.topics.get(topic_id="301")
        response = client.get(
            reverse("assess:highlighting", args=[campaign.slug]), {"topic": topic.pk, "doc": "d01"}
        )
        page = response.content.decode()
        body = page.split('<div class="doc-body" hx-disable>', 1)[1].split("</div>", 1)[0]
        assert '<mark class="term">title</mark>' in body
        assert '&lt;<mark class="term">script</mark>' not in body  # script is not a term
        for needle in ("<script", "<img", "onerror", "onclick", "javascript:", "href"):
            assert needle not in body, needle
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in body
        # No tag of the document carries an attribute but the marks' class.
        assert set(re.findall(r"<\w+\s[^>]*>", body)) <= {'<mark class="term">'}

    def test_assessors_cannot_open_it(self, client, campaign, assessor_a, work):
        client.force_login(assessor_a)
        url = reverse("assess:highlighting", args=[campaign.slug])
        assert client.get(url).status_code == 404

    def test_a_campaign_without_topics_says_what_to_do(self, client, campaign, organiser):
        client.force_login(organiser)
        html = client.get(reverse("assess:highlighting", args=[campaign.slug])).content.decode()
        assert "No topics yet" in html


class TestSkippedOnProgress:
    def test_the_progress_page_shows_skipped_not_yet_judged_per_topic_and_assessor(
        self, client, campaign, organiser, work
    ):
        first = next_item(work)
        skip(item=first)
        skip(item=next_item(work))
        board = dash.campaign_dashboard(campaign)
        assert board.total.skipped == 2
        assert {row.key: row.skipped for row in board.topics} == {"301": 2, "302": 0}
        assert [row.skipped for row in board.assessors] == [2]
        oldest = board.skipped[0]
        assert (oldest.topic_id, oldest.assessor, oldest.doc_id, oldest.times) == (
            "301",
            "alice",
            first.doc_id,
            1,
        )
        client.force_login(organiser)
        html = client.get(reverse("assess:progress", args=[campaign.slug])).content.decode()
        assert "Skipped, not yet judged" in html
        assert first.doc_id in html
        text = client.get(
            reverse("assess:progress", args=[campaign.slug]), {"format": "csv"}
        ).content.decode()
        rows = list(csv.DictReader(io.StringIO(text)))
        assert {row["id"]: row["skipped_not_judged"] for row in rows} == {
            "301": "2",
            "302": "0",
            "alice": "2",
            "All topics": "2",
        }

    def test_a_skipped_document_once_judged_is_no_longer_listed(self, campaign, work):
        first = next_item(work)
        skip(item=first)
        judge(first)
        board = dash.campaign_dashboard(campaign)
        assert board.total.skipped == 0
        assert board.skipped == []
