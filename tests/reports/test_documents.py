"""The organisers' Documents page (issue 19): search a campaign's documents by id or words, open
one as assessors see it (sanitised, terms marked as the judging screen marks them), and read
every verdict on it, under every topic, by kind, with its revisions. Organisers and
adjudicators only; on PostgreSQL the search reads its indexes."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.db import connection, transaction
from django.urls import reverse

from campaigns.judgments import Timing, record_judgment
from campaigns.members import add_member
from campaigns.models import Assessor, Document
from campaigns.sanitize import render_body
from qrels.adjudication import adjudicate
from qrels.views.documents import DOCUMENTS_PER_PAGE
from tests.conftest import _user
from tests.factories import make_documents, make_topics
from tests.reports import login

pytestmark = pytest.mark.django_db


def add_document(campaign, doc_id: str, title: str, body: str) -> Document:
    html, is_html = render_body(body)
    return Document.objects.create(
        campaign=campaign, doc_id=doc_id, title=title, body=body, body_html=html, is_html=is_html
    )


@pytest.fixture
def library(campaign, other_campaign):
    add_document(campaign, "LA-0001", "Whales of the Atlantic", "Humpback whales sing in winter.")
    add_document(campaign, "LA-0002", "Atlantic storms", "Winter storms batter the coast.")
    add_document(campaign, "LA-0010", "Desert plants", "Cacti keep WATER in their stems.")
    add_document(campaign, "LA", "A short id", "Nothing about the sea.")
    add_document(campaign, "FT-9", "Markets", "<p>Stocks <script>alert(1)</script>rose.</p>")
    # Another campaign's document holding every word: never found from this one.
    add_document(other_campaign, "LA-0003", "Whales in winter storms", "whales winter storms")
    return campaign


def search_ids(client, campaign, **query) -> list[str]:
    return search(client, campaign, **query)


def search(client, campaign, **query) -> list[str]:
    response = client.get(reverse("qrels:documents", args=[campaign.slug]), query)
    assert response.status_code == 200, response.content[:500]
    return [row["document"].doc_id for row in response.context["rows"]]


class TestSearch:
    def test_an_exact_id_comes_first_then_the_ids_it_begins(self, client, organiser, library):
        login(client, organiser)
        assert search(client, library, q="LA") == ["LA", "LA-0001", "LA-0002", "LA-0010"]
        assert search(client, library, q="LA-000") == ["LA-0001", "LA-0002"]
        assert search(client, library, q="LA-0010") == ["LA-0010"]

    def test_words_must_all_be_in_the_title_or_text_any_case(self, client, organiser, library):
        login(client, organiser)
        assert search(client, library, q="winter") == ["LA-0001", "LA-0002"]
        assert search(client, library, q="Atlantic WINTER storms") == ["LA-0002"]
        assert search(client, library, q="water") == ["LA-0010"]  # "WATER" in the text
        assert search(client, library, q="whales desert") == []

    def test_a_word_matches_the_beginning_of_a_word(self, client, organiser, library):
        login(client, organiser)
        assert search(client, library, q="hump") == ["LA-0001"]

    def test_blank_lists_every_document_of_the_campaign_only(self, client, organiser, library):
        login(client, organiser)
        assert search(client, library) == ["FT-9", "LA", "LA-0001", "LA-0002", "LA-0010"]

    def test_only_judged_documents(self, client, organiser, library):
        (topic,) = make_topics(library, ["7"])
        person = Assessor.objects.create(campaign=library, name="ann")
        record_judgment(
            assessor=person, topic=topic, doc_id="LA-0002", label=1, rubric_version=None
        )
        login(client, organiser)
        assert search(client, library, judged="on") == ["LA-0002"]
        assert search(client, library, q="winter", judged="on") == ["LA-0002"]

    def test_it_pages_fifty_at_a_time(self, client, organiser, campaign):
        make_documents(campaign, [f"d{i:03d}" for i in range(DOCUMENTS_PER_PAGE + 3)])
        login(client, organiser)
        url = reverse("qrels:documents", args=[campaign.slug])
        first = client.get(url)
        assert first.context["total"] == DOCUMENTS_PER_PAGE + 3
        assert len(first.context["rows"]) == DOCUMENTS_PER_PAGE
        assert search(client, campaign, page=2) == ["d050", "d051", "d052"]
        assert client.get(url, {"page": 3}).status_code == 404
        assert client.get(url, {"page": "x"}).status_code == 400

    def test_an_overlong_search_is_a_400_with_the_form(self, client, organiser, library):
        login(client, organiser)
        url = reverse("qrels:documents", args=[library.slug])
        response = client.get(url, {"q": "x" * 501})
        assert response.status_code == 400
        assert "at most 500 characters" in unescape(response.content.decode())

    def test_each_row_links_to_the_document_and_counts_its_verdicts(
        self, client, organiser, library
    ):
        topics = make_topics(library, ["7", "8"])
        for name in ("ann", "ben"):
            person = Assessor.objects.create(campaign=library, name=name)
            for topic in topics:
                record_judgment(
                    assessor=person, topic=topic, doc_id="LA-0001", label=1, rubric_version=None
                )
        login(client, organiser)
        response = client.get(reverse("qrels:documents", args=[library.slug]), {"q": "LA-0001"})
        html = response.content.decode()
        assert reverse("qrels:document", args=[library.slug, "LA-0001"]) in html
        (row,) = response.context["rows"]
        assert (row["verdicts"], row["topics"]) == (4, 2)


@pytest.fixture
def judged(campaign, organiser):
    """Document d1 of topics 1 and 2: Ann (revised once, with a note and a flag), Ben, an
    imported source and a model on topic 1, the adjudicated label there; Ann on topic 2."""
    topics = make_topics(campaign, ["1", "2", "3"])
    add_document(
        campaign, "d1", "Whale song", "<p>Whales sing <b>long</b> songs.<script>x()</script></p>"
    )
    rubric = campaign.current_rubric()
    ann = Assessor.objects.create(campaign=campaign, name="ann")
    ben = Assessor.objects.create(campaign=campaign, name="ben")
    qrels = Assessor.objects.create(campaign=campaign, name="trec", kind=Assessor.Kind.IMPORTED)
    model = Assessor.objects.create(campaign=campaign, name="gpt", kind=Assessor.Kind.MODEL)
    first, _ = record_judgment(
        assessor=ann,
        topic=topics[0],
        doc_id="d1",
        label=0,
        rubric_version=rubric,
        note="ann-first-thought",
    )
    record_judgment(
        assessor=ann,
        topic=topics[0],
        doc_id="d1",
        label=2,
        rubric_version=rubric,
        expected_version=first.version,
        note="ann-on-second-reading",
        unsure=True,
        timing=Timing(seconds_on_screen=42.0, active_seconds=30.0),
    )
    record_judgment(assessor=ben, topic=topics[0], doc_id="d1", label=0, rubric_version=rubric)
    record_judgment(assessor=qrels, topic=topics[0], doc_id="d1", label=1, rubric_version=None)
    record_judgment(
        assessor=model, topic=topics[0], doc_id="d1", label=1, rubric_version=None, note="why"
    )
    adjudicate(
        campaign=campaign,
        topic=topics[0],
        doc_id="d1",
        label=2,
        reason="the songs are the point",
        by=organiser,
        expected_version=0,
    )
    record_judgment(assessor=ann, topic=topics[1], doc_id="d1", label=1, rubric_version=rubric)
    return topics


def document_page(client, campaign, doc_id="d1", **query):
    return client.get(reverse("qrels:document", args=[campaign.slug, doc_id]), query)


class TestDocumentPage:
    def test_every_verdict_under_every_topic_marked_by_kind(
        self, client, organiser, campaign, judged
    ):
        login(client, organiser)
        response = document_page(client, campaign)
        assert response.status_code == 200
        groups = [entry["group"] for entry in response.context["groups"]]
        assert [g.topic.topic_id for g in groups] == ["1", "2"]
        one = [(v.assessor, v.kind, v.label) for v in groups[0].verdicts]
        assert one == [
            ("ann", "person", 2),
            ("ben", "person", 0),
            ("trec", "imported", 1),
            ("gpt", "model", 1),
            ("adjudicated", "adjudicated", 2),
        ]
        html = unescape(response.content.decode())
        for text in (
            "ann-on-second-reading",
            "ann-first-thought",  # the earlier revision
            "unsure",
            "42 s (30 s active)",
            "the songs are the point",
            "by olivia",
            ">imported<",
            ">model<",
            ">adjudicated<",
        ):
            assert text in html, text

    def test_the_revisions_of_a_verdict_are_listed_newest_first(
        self, client, organiser, campaign, judged
    ):
        login(client, organiser)
        groups = document_page(client, campaign).context["groups"]
        ann = groups[0]["group"].verdicts[0]
        assert ann.version == 2
        assert [(r.version, r.label, r.note) for r in ann.earlier] == [(1, 0, "ann-first-thought")]

    def test_the_document_is_shown_sanitised_as_on_the_judging_screen(
        self, client, organiser, campaign, judged
    ):
        campaign.highlight_terms = True
        campaign.save(update_fields=["highlight_terms"])
        topic = judged[0]
        topic.title = "whales"
        topic.save(update_fields=["title"])
        login(client, organiser)
        html = document_page(client, campaign, topic=topic.pk).content.decode()
        body = re.search(r'<div class="doc-body" hx-disable>(.*?)</div>', html, re.S)[1]
        assert "<script" not in body
        assert "<b>long</b>" in body
        assert '<mark class="term">Whales</mark>' in body
        assert "The document as assessors see it under topic 1" in html

    def test_another_topic_shows_it_under_that_topic(self, client, organiser, campaign, judged):
        login(client, organiser)
        response = document_page(client, campaign, topic=judged[1].pk)
        assert response.context["topic"] == judged[1]
        # A topic that neither judged nor pooled it is not offered.
        assert document_page(client, campaign, topic=judged[2].pk).status_code == 404
        assert document_page(client, campaign, topic="x").status_code == 404

    def test_each_judged_topic_links_to_its_adjudication(self, client, organiser, campaign, judged):
        login(client, organiser)
        html = unescape(document_page(client, campaign).content.decode())
        adjudicate = reverse("qrels:adjudicate", args=[campaign.slug, judged[0].pk, "d1"])
        assert adjudicate + "?next=" in html
        # The adjudication page leads back here, and here to it.
        page = client.get(
            adjudicate, {"next": reverse("qrels:document", args=[campaign.slug, "d1"])}
        )
        assert page.context["back_url"] == reverse("qrels:document", args=[campaign.slug, "d1"])
        assert "Back to the document" in page.content.decode()
        assert reverse("qrels:document", args=[campaign.slug, "d1"]) in page.content.decode()

    def test_an_unknown_document_is_a_404(self, client, organiser, campaign, judged):
        login(client, organiser)
        assert document_page(client, campaign, doc_id="nope").status_code == 404

    def test_a_document_judged_but_never_imported_shows_its_verdicts(
        self, client, organiser, campaign, judged
    ):
        ann = Assessor.objects.get(campaign=campaign, name="ann")
        record_judgment(assessor=ann, topic=judged[0], doc_id="ghost", label=1, rubric_version=None)
        login(client, organiser)
        response = document_page(client, campaign, doc_id="ghost")
        assert response.status_code == 200
        assert "Text not available" in response.content.decode()

    def test_the_page_costs_the_same_queries_for_few_or_many_verdicts(
        self, client, organiser, campaign, judged, django_assert_max_num_queries
    ):
        login(client, organiser)
        document_page(client, campaign)  # session and caches warm
        with django_assert_max_num_queries(12) as few:
            document_page(client, campaign)
        rubric = campaign.current_rubric()
        for i in range(30):
            person = Assessor.objects.create(campaign=campaign, name=f"p{i:02d}")
            for topic in judged:
                first, _ = record_judgment(
                    assessor=person, topic=topic, doc_id="d1", label=0, rubric_version=rubric
                )
                record_judgment(
                    assessor=person,
                    topic=topic,
                    doc_id="d1",
                    label=1,
                    rubric_version=rubric,
                    expected_version=first.version,
                )
        with django_assert_max_num_queries(len(few.captured_queries)):
            response = document_page(client, campaign)
        assert response.context["verdict_count"] == 6 + 90


class TestWhoMaySeeIt:
    def urls(self, campaign):
        return [
            reverse("qrels:documents", args=[campaign.slug]),
            reverse("qrels:document", args=[campaign.slug, "d1"]),
        ]

    def test_assessors_and_outsiders_get_404(
        self, client, campaign, judged, assessor_a, outsider, other_organiser
    ):
        for user in (assessor_a, outsider, other_organiser):
            login(client, user)
            for url in self.urls(campaign):
                assert client.get(url).status_code == 404, (user, url)

    def test_an_adjudicator_may_search_and_read(self, client, campaign, judged):
        user = _user("ada")
        add_member(campaign=campaign, user=user, role="adjudicator")
        login(client, user)
        for url in self.urls(campaign):
            assert client.get(url).status_code == 200, url
        html = client.get(self.urls(campaign)[0]).content.decode()
        assert 'aria-current="page">Documents</a>' in html


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's indexes")
class TestIndexesOnPostgreSQL:
    """The search's expressions are those of migration 0009's indexes: with sequential scans
    priced out, the planner reads them (an expression the index does not match would still
    scan, whatever the price)."""

    def plan(self, queryset) -> str:
        sql, params = queryset.query.sql_with_params()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + sql, params)
            return "\n".join(row[0] for row in cursor.fetchall())

    def test_words_are_searched_through_the_words_index(self, library):
        # Every campaign's documents: on a table this small the campaign's own index would
        # do, so only the words are left for an index to find.
        assert "document_words_idx" in self.plan(Document.objects.search("winter storms"))

    def test_an_id_prefix_is_searched_through_the_prefix_index(self, library):
        plan = self.plan(library.documents.search("LA-00"))
        assert "document_id_prefix_idx" in plan
        assert "document_words_idx" in self.plan(Document.objects.search("LA-00"))

    def test_a_search_too_slow_to_answer_is_stopped_with_advice(
        self, client, organiser, library, monkeypatch
    ):
        """A word in most documents of a big campaign makes PostgreSQL work out every
        document's words again: the search is stopped at a time limit and says what to do."""
        from campaigns.models import DocumentQuerySet
        from qrels.views import documents

        search = DocumentQuerySet.search
        monkeypatch.setattr(documents, "SEARCH_TIMEOUT", "50ms")
        monkeypatch.setattr(
            DocumentQuerySet,
            "search",
            lambda self, text: search(self, text).extra(where=["pg_sleep(0.2) IS NOT NULL"]),
        )
        login(client, organiser)
        response = client.get(reverse("qrels:documents", args=[library.slug]), {"q": "winter"})
        assert response.status_code == 200
        assert response.context["error"] == documents.TOO_SLOW
        assert "Add a rarer word" in response.content.decode()
        # The session's connection is usable again: the next search answers.
        monkeypatch.setattr(DocumentQuerySet, "search", search)
        assert search_ids(client, library, q="winter") == ["LA-0001", "LA-0002"]
