"""The pairs behind an agreement count (issue 19, disagreements): every confusion cell and every
n of the agreement pages links to the list of the (topic, document) pairs it counts, with both
verdicts; the list filters by topic and label distance, pages, stays within two queries for the
pairs whatever their number, and is the organiser's alone."""

from __future__ import annotations

import io
import json
import re
from html import unescape

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from campaigns.models import Assessor, Judgment
from qrels.views.agreement import PAIRS_PER_PAGE
from tests.factories import make_documents, make_topics
from tests.reports import login

pytestmark = pytest.mark.django_db

# (topic, document, Ann's label, Ben's label); -1 is an imported "pooled, not judged".
SHARED = [
    ("1", "d1", 0, 0),
    ("1", "d2", 1, 2),
    ("1", "d3", 2, 0),
    ("1", "d4", 2, 2),
    ("2", "d1", 0, 1),
    ("2", "d2", 1, 1),
    ("2", "d3", 0, 2),
    ("2", "d5", 2, 1),
    ("3", "d1", 2, 0),
    ("3", "d2", -1, 1),
]


def verdict(campaign, assessor, topic, doc, label, **extra) -> Judgment:
    return Judgment.objects.create(
        campaign=campaign,
        topic=campaign.topics.get(topic_id=topic),
        doc_id=doc,
        assessor=assessor,
        label=label,
        rubric_version=campaign.current_rubric(),
        **extra,
    )


@pytest.fixture
def judges(campaign, organiser):
    make_topics(campaign, ["1", "2", "3"])
    make_documents(campaign, ["d1", "d2", "d3", "d4", "d5", "d9"])
    ann = Assessor.objects.create(campaign=campaign, name="ann", kind=Assessor.Kind.PERSON)
    ben = Assessor.objects.create(campaign=campaign, name="ben", kind=Assessor.Kind.PERSON)
    for topic, doc, a, b in SHARED:
        verdict(
            campaign,
            ann,
            topic,
            doc,
            a,
            note=f"ann-note-{topic}-{doc}",
            unsure=doc == "d3",
            seconds_on_screen=12.0,
            active_seconds=9.0,
        )
        verdict(campaign, ben, topic, doc, b, unreadable=doc == "d5")
    verdict(campaign, ann, "3", "d9", 1)  # Ann alone: in no count
    return ann, ben


def pairs_url(campaign, a, b, **query) -> str:
    url = reverse("qrels:agreement_pairs", args=[campaign.slug, a.pk, b.pk])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def listed(client, url) -> list[tuple[str, str, int, int]]:
    response = client.get(url)
    assert response.status_code == 200, url
    page = response.context["page"]
    assert page.total == len(page.pairs)  # one page in this fixture
    return [(p.topic, p.doc_id, p.a.label, p.b.label) for p in page.pairs]


def shared() -> list[tuple[str, str, int, int]]:
    """The pairs the matrix counts: both labels >= 0."""
    return [(t, d, a, b) for t, d, a, b in SHARED if a >= 0 and b >= 0]


def pair_json(client, campaign, a, b, labels) -> dict:
    url = reverse("qrels:agreement_pair", args=[campaign.slug, a.pk, b.pk])
    (pair,) = json.loads(client.get(url, {"format": "json", "labels": labels}).content)["pairs"]
    return pair


class TestEachCountListsItsPairs:
    @pytest.mark.parametrize("labels", ["graded", "binary"])
    def test_each_confusion_cell_lists_exactly_the_pairs_it_counts(
        self, client, organiser, campaign, judges, labels
    ):
        ann, ben = judges
        login(client, organiser)
        pair = pair_json(client, campaign, ann, ben, labels)

        def value(label: int) -> int:  # as the matrix counts it; the threshold is 1
            return int(label >= 1) if labels == "binary" else label

        assert pair["n"] == 9
        for i, la in enumerate(pair["labels"]):
            for j, lb in enumerate(pair["labels"]):
                got = listed(
                    client, pairs_url(campaign, ann, ben, labels=labels, a_label=la, b_label=lb)
                )
                expected = [row for row in shared() if (value(row[2]), value(row[3])) == (la, lb)]
                assert got == expected, (la, lb)
                assert len(got) == pair["confusion"][i][j]

    def test_n_lists_every_pair_both_judged_and_no_negative_one(
        self, client, organiser, campaign, judges
    ):
        ann, ben = judges
        login(client, organiser)
        assert listed(client, pairs_url(campaign, ann, ben)) == shared()
        # Ben's rows and columns swap when he comes first.
        swapped = listed(client, pairs_url(campaign, ben, ann, a_label=2))
        assert swapped == [("1", "d2", 2, 1), ("1", "d4", 2, 2), ("2", "d3", 2, 0)]

    def test_every_count_link_on_the_pages_leads_to_as_many_pairs(
        self, client, organiser, campaign, judges
    ):
        ann, ben = judges
        login(client, organiser)
        checked = 0
        for labels in ("graded", "binary"):
            pages = [
                reverse("qrels:agreement", args=[campaign.slug]) + f"?labels={labels}",
                reverse("qrels:agreement_pair", args=[campaign.slug, ann.pk, ben.pk])
                + f"?labels={labels}",
            ]
            for page in pages:
                html = client.get(page).content.decode()
                links = re.findall(
                    r'<a[^>]*href="([^"]*/pairs/[^"]*)"[^>]*>(?:<small>n )?(\d+)', html
                )
                assert links, page
                for href, count in links:
                    response = client.get(unescape(href))
                    assert response.context["page"].total == int(count), href
                    checked += 1
            # The heat map's cells link too: each to the table's cell of the same labels.
            heatmap = re.findall(r'<a href="([^"]*/pairs/[^"]*)" class="heatmap-link">', html)
            assert sorted(heatmap) == sorted(
                h for h, _ in links if "b_label" in h and "a_label" in h
            )
        # graded: 9 non-zero cells, 3 rows, 3 columns, n twice, 3 topics; matrix n twice, list n
        assert checked > 30

    def test_each_row_shows_both_verdicts_with_names_notes_flags_and_time(
        self, client, organiser, campaign, judges
    ):
        ann, ben = judges
        login(client, organiser)
        html = client.get(pairs_url(campaign, ann, ben, topic="1", a_label=2, b_label=0)).content
        html = html.decode()
        assert "ann-note-1-d3" in html
        assert "Not relevant" in html
        assert "Highly relevant" in html
        assert "unsure" in html
        assert "12 s (9 s active)" in html
        # The document opens on the adjudication page, as assessors saw it, with both verdicts.
        topic = campaign.topics.get(topic_id="1")
        doc_link = reverse("qrels:adjudicate", args=[campaign.slug, topic.pk, "d3"])
        href = re.search(rf'href="({re.escape(doc_link)}[^"]*)"', html)
        assert href, html
        document = client.get(unescape(href.group(1)))
        assert document.status_code == 200
        assert document.context["document"].doc_id == "d3"
        assert "ann-note-1-d3" in document.content.decode()
        assert "unreadable" in client.get(pairs_url(campaign, ann, ben, topic="2")).content.decode()


class TestFilters:
    def test_topic_and_distance_filters(self, client, organiser, campaign, judges):
        ann, ben = judges
        login(client, organiser)
        assert listed(client, pairs_url(campaign, ann, ben, topic="2")) == [
            row for row in shared() if row[0] == "2"
        ]
        assert listed(client, pairs_url(campaign, ann, ben, distance=2)) == [
            ("1", "d3", 2, 0),
            ("2", "d3", 0, 2),
            ("3", "d1", 2, 0),
        ]
        disagree = [row for row in shared() if row[2] != row[3]]
        assert listed(client, pairs_url(campaign, ann, ben, distance=1)) == disagree
        assert listed(client, pairs_url(campaign, ann, ben, distance=1, topic="1")) == [
            ("1", "d2", 1, 2),
            ("1", "d3", 2, 0),
        ]
        # Binary: 1 and 2 are both relevant, so (1, 2) is no disagreement there.
        assert listed(client, pairs_url(campaign, ann, ben, labels="binary", distance=1)) == [
            row for row in shared() if (row[2] >= 1) != (row[3] >= 1)
        ]

    @pytest.mark.parametrize(
        "query", [{"distance": "-1"}, {"topic": "nope"}, {"a_label": "x"}, {"page": "0"}]
    )
    def test_bad_filters_are_a_400_with_the_form(self, client, organiser, campaign, judges, query):
        ann, ben = judges
        login(client, organiser)
        response = client.get(pairs_url(campaign, ann, ben, **query))
        assert response.status_code == 400
        assert b'class="error"' in response.content


class TestPagesAndQueries:
    @pytest.fixture
    def many(self, campaign, organiser):
        make_topics(campaign, ["1"])
        ann = Assessor.objects.create(campaign=campaign, name="ann", kind=Assessor.Kind.PERSON)
        ben = Assessor.objects.create(campaign=campaign, name="ben", kind=Assessor.Kind.PERSON)
        topic = campaign.topics.get()
        rows = []
        for i in range(250):
            for who, label in ((ann, i % 3), (ben, (i // 3) % 3)):
                rows.append(
                    Judgment(
                        campaign=campaign,
                        topic=topic,
                        doc_id=f"d{i:04d}",
                        assessor=who,
                        label=label,
                    )
                )
        Judgment.objects.bulk_create(rows)
        return ann, ben

    def test_it_pages_a_hundred_at_a_time(self, client, organiser, campaign, many):
        ann, ben = many
        login(client, organiser)
        seen = []
        for number, size in ((1, 100), (2, 100), (3, 50)):
            response = client.get(pairs_url(campaign, ann, ben, page=number))
            page = response.context["page"]
            assert page.total == 250
            assert len(page.pairs) == size
            seen += [p.doc_id for p in page.pairs]
        assert seen == [f"d{i:04d}" for i in range(250)]
        assert PAIRS_PER_PAGE == 100
        assert client.get(pairs_url(campaign, ann, ben, page=4)).status_code == 404

    def test_the_page_costs_the_same_queries_for_9_or_250_pairs(
        self, client, organiser, campaign, many, django_assert_max_num_queries
    ):
        ann, ben = many
        login(client, organiser)
        client.get(pairs_url(campaign, ann, ben))  # the session, warmed
        with django_assert_max_num_queries(QUERIES) as few:
            client.get(pairs_url(campaign, ann, ben, topic="1", distance=1))
        Judgment.objects.filter(doc_id__gte="d0009").delete()
        with django_assert_max_num_queries(QUERIES) as small:
            client.get(pairs_url(campaign, ann, ben, topic="1", distance=1))
        assert len(few.captured_queries) == len(small.captured_queries)
        pair_queries = [q for q in few.captured_queries if "judgment" in q["sql"].lower()]
        # the paired, filtered, counted page; its verdicts; their adjudicated labels
        assert len(pair_queries) == 3


# Session and user, campaign and role, the two assessors, the topics of the filter, the rubric
# and its labels, then the page of pairs, their verdicts and their adjudicated labels.
QUERIES = 11


class TestWhoMaySee:
    @pytest.mark.parametrize("who", ["assessor_a", "outsider", "other_organiser"])
    def test_anyone_but_the_organiser_gets_404(self, client, campaign, judges, who, request):
        ann, ben = judges
        login(client, request.getfixturevalue(who))
        assert client.get(pairs_url(campaign, ann, ben)).status_code == 404

    def test_assessors_of_another_campaign_are_404(
        self, client, organiser, campaign, other_campaign, judges
    ):
        ann, _ = judges
        stranger = Assessor.objects.create(campaign=other_campaign, name="zed")
        login(client, organiser)
        assert client.get(pairs_url(campaign, ann, stranger)).status_code == 404
        assert client.get(pairs_url(other_campaign, ann, stranger)).status_code == 404
        assert client.get(pairs_url(campaign, ann, ann)).status_code == 404

    def test_anonymous_visitors_are_sent_to_log_in(self, client, campaign, judges):
        response = client.get(pairs_url(campaign, *judges))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


class TestCommand:
    """``manage.py disagreements``: the same pairs as the page, for a script."""

    def run(self, *args) -> str:
        out = io.StringIO()
        call_command("disagreements", *args, stdout=out)
        return out.getvalue()

    def test_it_lists_the_disagreements_with_both_verdicts(self, campaign, judges):
        data = json.loads(self.run(campaign.slug, "--assessors", "ann,ben", "--json"))
        assert data["assessors"] == {"a": "ann", "b": "ben"}
        got = [(p["topic"], p["doc_id"], p["a"]["label"], p["b"]["label"]) for p in data["pairs"]]
        assert got == [row for row in shared() if row[2] != row[3]]
        first = data["pairs"][0]
        assert first["a"]["note"] == "ann-note-1-d2"
        assert first["b"]["label_name"] == "Highly relevant"
        assert first["distance"] == 1

    def test_filters_and_text(self, campaign, judges):
        text = self.run(campaign.slug, "--assessors", "ann,ben", "--distance", "2", "--topic", "1")
        assert text.splitlines()[0] == "1 pair (ann / ben)."
        assert "d3" in text
        assert "unsure" in text
        everything = json.loads(
            self.run(campaign.slug, "--assessors", "ann,ben", "--distance", "0", "--json")
        )
        assert len(everything["pairs"]) == 9

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--assessors", "ann"], "Name two assessors"),
            (["--assessors", "ann,zed"], "No assessor 'zed'"),
            (["--assessors", "ann,ben", "--topic", "99"], "No topic '99'"),
            (["--assessors", "ann,ben", "--distance", "-1"], "0 or more"),
        ],
    )
    def test_bad_arguments_say_what_is_wrong(self, campaign, judges, args, message):
        with pytest.raises(CommandError, match=message):
            self.run(campaign.slug, *args)


def test_a_pairs_document_link_opens_a_document_past_the_previews_first(
    client, organiser, campaign
):
    """The highlighting preview lists a topic's first documents; a pair's link may name a later
    one, and it is the one shown."""
    from assess.organiser import PREVIEW_DOCUMENTS

    (topic,) = make_topics(campaign, ["1"])
    ids = [f"d{i:04d}" for i in range(PREVIEW_DOCUMENTS + 5)]
    make_documents(campaign, ids)
    login(client, organiser)
    url = reverse("assess:highlighting", args=[campaign.slug])
    response = client.get(url, {"topic": topic.pk, "doc": ids[-1]})
    assert response.context["document"].doc_id == ids[-1]
    assert f"The text of document {ids[-1]}." in response.content.decode()
    unknown = client.get(url, {"topic": topic.pk, "doc": "nope"})
    assert unknown.context["document"].doc_id == ids[0]
