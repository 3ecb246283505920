"""Disagreements in real Chromium: from the kappa matrix's n and a heat-map cell of the pair page
to the pairs behind them, on to a document as assessors see it (the adjudication page); on a
phone the list fits the screen's width."""

from __future__ import annotations

import pytest
from django.urls import reverse

from campaigns.models import Assessor, Judgment
from tests.factories import make_documents, make_topics

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# (topic, document, ann's label, ben's label)
SHARED = [
    ("1", "d1", 0, 0),
    ("1", "d2", 1, 2),
    ("1", "d3", 2, 0),
    ("2", "d1", 0, 1),
    ("2", "d3", 2, 0),
    ("2", "d4", 1, 1),
]


@pytest.fixture
def pair(campaign):
    make_topics(campaign, ["1", "2"])
    make_documents(campaign, ["d1", "d2", "d3", "d4"])
    rubric = campaign.current_rubric()
    ann = Assessor.objects.create(campaign=campaign, name="ann", kind=Assessor.Kind.PERSON)
    ben = Assessor.objects.create(campaign=campaign, name="ben", kind=Assessor.Kind.PERSON)
    topics = {t.topic_id: t for t in campaign.topics.all()}
    for topic, doc, a, b in SHARED:
        for who, label in ((ann, a), (ben, b)):
            Judgment.objects.create(
                campaign=campaign,
                topic=topics[topic],
                doc_id=doc,
                assessor=who,
                label=label,
                rubric_version=rubric,
                note=f"{who.name} on {topic}/{doc}, a note long enough to wrap on a phone screen",
                seconds_on_screen=20.0,
            )
    return ann, ben


def rows(page) -> list[tuple[str, str]]:
    cells = page.locator("table.pair-list tbody tr")
    return [
        (
            cells.nth(i).locator("th .mono").inner_text(),
            cells.nth(i).locator("td[data-label=Document] a.mono").inner_text(),
        )
        for i in range(cells.count())
    ]


def test_the_organiser_goes_from_a_count_to_its_pairs_and_a_document(
    live_server, login, organiser, campaign, pair
):
    page = login(organiser)
    page.goto(live_server.url + reverse("qrels:agreement", args=[campaign.slug]))
    page.locator(".kappa-matrix a.kappa-n").first.click()
    page.wait_for_selector("table.pair-list")
    assert len(rows(page)) == len(SHARED)

    page.goto(
        live_server.url
        + reverse("qrels:agreement_pair", args=[campaign.slug, *[a.pk for a in pair]])
    )
    # ann 2, ben 0: the heat map's cell in row 2, column 0.
    page.locator("a.heatmap-link[href*='a_label=2'][href*='b_label=0']").click()
    page.wait_for_selector("table.pair-list")
    assert rows(page) == [("1", "d3"), ("2", "d3")]
    assert "ann on 1/d3" in page.inner_text("table.pair-list")

    page.get_by_role("link", name="d3").first.click()
    page.wait_for_selector(".card")
    assert "/adjudicate/" in page.url
    assert "The text of document d3." in page.inner_text("body")


def test_on_a_phone_the_list_fits_the_screen(live_server, login, organiser, campaign, pair):
    page = login(organiser, viewport={"width": 390, "height": 844})
    url = reverse("qrels:agreement_pairs", args=[campaign.slug, *[a.pk for a in pair]])
    page.goto(live_server.url + url + "?distance=1")
    page.wait_for_selector("table.pair-list")
    assert len(rows(page)) == 4
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert (
        page.evaluate("document.querySelector('table.pair-list').getBoundingClientRect().right")
        <= 390
    )
