"""Around adjudication (issue 19): the list of every adjudication of a campaign (page and CSV),
the adjudication page's fixed cost in queries, and ``manage.py disagreements`` showing pairs in
full with their adjudicated label."""

from __future__ import annotations

import csv
import io
import json
from html import unescape

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from campaigns.judgments import record_judgment
from campaigns.models import Assessor
from qrels.adjudication import adjudicate, adjudication_log
from tests.conftest import PASSWORD
from tests.reports import login
from tests.reports import test_adjudication as adjudication_tests

pytestmark = pytest.mark.django_db

# The adjudication tests' campaign: ann and ben on topics 1 and 2, and an adjudicator.
judges = adjudication_tests.judges
adjudicator = adjudication_tests.adjudicator
page_url = adjudication_tests.page_url


def settle(campaign, topic_id, doc, label, reason, by, version=0):
    return adjudicate(
        campaign=campaign,
        topic=campaign.topics.get(topic_id=topic_id),
        doc_id=doc,
        label=label,
        reason=reason,
        by=by,
        expected_version=version,
    )


@pytest.fixture
def settled(campaign, organiser, adjudicator, judges):
    """Three adjudications: 1/d3 by the organiser, then revised by the adjudicator; 1/d2 by
    the adjudicator."""
    settle(campaign, "1", "d3", 1, "first reading: partly", organiser)
    settle(campaign, "1", "d2", 2, "=SUM(A1) the narrative says so", adjudicator)
    settle(campaign, "1", "d3", 0, "second reading: off topic", adjudicator, version=1)
    return campaign


def list_url(campaign, **query):
    url = reverse("qrels:adjudications", args=[campaign.slug])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


class TestTheList:
    def test_every_adjudication_newest_first_with_who_why_and_the_assessors_labels(
        self, client, organiser, settled
    ):
        login(client, organiser)
        response = client.get(list_url(settled))
        assert response.status_code == 200
        got = [
            (e.topic, e.doc_id, e.label, e.by, e.current, e.verdicts)
            for e in (row["entry"] for row in response.context["rows"])
        ]
        assert got == [
            ("1", "d3", 0, "adele", True, [("ann", "person", 2), ("ben", "person", 0)]),
            ("1", "d2", 2, "adele", True, [("ann", "person", 1), ("ben", "person", 2)]),
            ("1", "d3", 1, "olivia", False, [("ann", "person", 2), ("ben", "person", 0)]),
        ]
        html = unescape(response.content.decode())
        assert "second reading: off topic" in html
        assert "first reading: partly" in html
        assert "replaced" in html
        # Each row leads to the pair's adjudication and to the document's page.
        topic = settled.topics.get(topic_id="1")
        assert reverse("qrels:adjudicate", args=[settled.slug, topic.pk, "d2"]) in html
        assert reverse("qrels:document", args=[settled.slug, "d2"]) + f"?topic={topic.pk}" in html

    def test_the_csv_has_every_one_spreadsheet_safe(self, client, organiser, settled):
        login(client, organiser)
        response = client.get(list_url(settled, format="csv"))
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/csv")
        assert "robust04-adjudications.csv" in response["Content-Disposition"]
        rows = list(csv.DictReader(io.StringIO(response.content.decode())))
        assert [(r["topic"], r["doc_id"], r["adjudicated_label"], r["current"]) for r in rows] == [
            ("1", "d3", "0", "yes"),
            ("1", "d2", "2", "yes"),
            ("1", "d3", "1", "no"),
        ]
        assert rows[1]["reason"] == "'=SUM(A1) the narrative says so"
        assert rows[1]["assessor_labels"] == "ann=1; ben=2"
        assert rows[2]["by"] == "olivia"

    def test_a_model_label_is_marked_in_the_csv(self, client, organiser, settled):
        model = Assessor.objects.create(campaign=settled, name="gpt", kind=Assessor.Kind.MODEL)
        topic = settled.topics.get(topic_id="1")
        record_judgment(assessor=model, topic=topic, doc_id="d2", label=1, rubric_version=None)
        login(client, organiser)
        rows = list(
            csv.DictReader(
                io.StringIO(client.get(list_url(settled, format="csv")).content.decode())
            )
        )
        assert rows[1]["assessor_labels"] == "ann=1; ben=2; gpt (model)=1"

    def test_it_is_linked_from_the_agreement_and_adjudication_pages(
        self, client, organiser, settled
    ):
        login(client, organiser)
        for url in (
            reverse("qrels:agreement", args=[settled.slug]),
            page_url(settled, "1", "d3"),
        ):
            assert list_url(settled) in client.get(url).content.decode(), url

    def test_no_adjudication_yet_says_where_to_start(self, client, organiser, judges, campaign):
        login(client, organiser)
        response = client.get(list_url(campaign))
        assert response.status_code == 200
        assert "No adjudication yet" in response.content.decode()
        assert client.get(list_url(campaign, page=2)).status_code == 404
        assert client.get(list_url(campaign, page="x")).status_code == 404

    def test_it_pages_a_hundred_at_a_time(self, campaign, organiser, judges):
        for i in range(105):
            settle(campaign, "1", "d2", i % 3, f"pass {i}", organiser, version=i)
        total, first = adjudication_log(campaign=campaign, limit=100)
        assert (total, len(first)) == (105, 100)
        assert (first[0].reason, first[0].current) == ("pass 104", True)
        _, rest = adjudication_log(campaign=campaign, limit=100, offset=100)
        assert [e.reason for e in rest] == [f"pass {i}" for i in range(4, -1, -1)]

    def test_the_page_costs_the_same_queries_for_one_or_many(
        self, client, organiser, campaign, judges, django_assert_max_num_queries
    ):
        settle(campaign, "1", "d2", 1, "one", organiser)
        login(client, organiser)
        client.get(list_url(campaign))
        with django_assert_max_num_queries(10) as one:
            client.get(list_url(campaign))
        for doc in ("d1", "d3"):
            for version in range(4):
                settle(campaign, "1", doc, version % 3, f"again {version}", organiser, version)
        with django_assert_max_num_queries(len(one.captured_queries)):
            response = client.get(list_url(campaign))
        assert response.context["total"] == 9

    def test_an_adjudicator_reads_it_an_assessor_never(
        self, client, settled, adjudicator, assessor_a, outsider
    ):
        login(client, adjudicator)
        assert client.get(list_url(settled)).status_code == 200
        assert client.get(list_url(settled, format="csv")).status_code == 200
        for user in (assessor_a, outsider):
            login(client, user)
            assert client.get(list_url(settled)).status_code == 404
            assert client.get(list_url(settled, format="csv")).status_code == 404


class TestTheAdjudicationPageCost:
    """The adjudication page reads the pair in a fixed number of queries: more assessors, more
    verdicts, more adjudications of the pair add none."""

    def test_queries_do_not_grow_with_assessors_or_adjudications(
        self, client, organiser, campaign, judges, django_assert_max_num_queries
    ):
        settle(campaign, "1", "d3", 1, "first", organiser)
        login(client, organiser)
        url = page_url(campaign, "1", "d3")
        client.get(url)
        # Session, user, campaign and role; verdicts; the adjudicated assessor and its label;
        # the history; the rubric and its labels (form); the document.
        with django_assert_max_num_queries(14) as few:
            assert client.get(url).status_code == 200
        topic = campaign.topics.get(topic_id="1")
        rubric = campaign.current_rubric()
        user_model = get_user_model()
        for i in range(25):
            person = Assessor.objects.create(campaign=campaign, name=f"p{i:02d}")
            record_judgment(
                assessor=person,
                topic=topic,
                doc_id="d3",
                label=i % 3,
                rubric_version=rubric,
                note=f"n{i}",
            )
        for version in range(1, 6):
            someone = user_model.objects.create_user(username=f"adj{version}", password=PASSWORD)
            settle(campaign, "1", "d3", version % 3, f"pass {version}", someone, version)
        with django_assert_max_num_queries(len(few.captured_queries)):
            response = client.get(url)
        assert len(response.context["verdicts"]) == 27
        assert len(response.context["history"]) == 6


class TestTheCommand:
    def run(self, *args) -> str:
        out = io.StringIO()
        call_command("disagreements", *args, stdout=out)
        return out.getvalue()

    def test_the_table_has_the_adjudicated_label(self, settled, judges):
        lines = self.run(settled.slug, "--assessors", "ann,ben", "--topic", "1").splitlines()
        assert lines[0] == "2 pairs (ann / ben)."
        assert "adjudicated" in lines[1]
        by_doc = {line.split()[1]: line for line in lines[2:] if line.strip()[:1].isdigit()}
        assert by_doc["d2"].split()[-2:] == ["2", "1"]  # adjudicated 2, 1 apart
        assert by_doc["d3"].split()[-2:] == ["0", "2"]

    def test_json_has_the_adjudicated_label_and_reason_or_null(self, settled, judges):
        data = json.loads(self.run(settled.slug, "--assessors", "ann,ben", "--json"))
        got = {(p["topic"], p["doc_id"]): p["adjudicated"] for p in data["pairs"]}
        assert got[("1", "d3")]["label"] == 0
        assert got[("1", "d3")]["reason"] == "second reading: off topic"
        assert got[("1", "d3")]["version"] == 2
        assert got[("2", "d1")] is None

    def test_show_prints_each_pair_in_full_like_the_web_list(self, settled, judges):
        text = self.run(settled.slug, "--assessors", "ann,ben", "--topic", "1", "--show")
        blocks = text.strip().split("\n\n")
        assert blocks[0] == "2 pairs (ann / ben)."
        d2 = blocks[1].splitlines()
        assert d2[0] == "topic 1 · document d2 · 1 apart · Topic 1 title"
        assert d2[1].startswith("  ann: 1 Partially relevant · 14 s · ")
        assert d2[2] == "      ann-note-1-d2"  # the whole note
        assert d2[3].startswith("  ben: 2 Highly relevant · 14 s · ")
        assert d2[4] == "      ben-note-1-d2"
        assert d2[5].startswith("  adjudicated: 2 · ")
        assert d2[6] == "      =SUM(A1) the narrative says so"

    def test_show_says_when_a_pair_has_no_adjudication(self, campaign, judges):
        text = self.run(campaign.slug, "--assessors", "ann,ben", "--topic", "2", "--show")
        assert "  adjudicated: -" in text

    def test_show_and_json_are_one_or_the_other(self, campaign, judges):
        with pytest.raises(Exception, match="not allowed with"):
            self.run(campaign.slug, "--assessors", "ann,ben", "--show", "--json")
