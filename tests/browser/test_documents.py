"""The organisers' Documents page in real Chromium (issue 19): from the campaign's tabs, search
by words, open a document from the results, read it as assessors see it and every verdict on
it (people's, an imported source's, a model's, the adjudicated label), switch the topic it is
shown under; from there, adjudicate the pair. Both pages fit a phone. The list of
adjudications and the grid's overlap panel are taken too.

With POOLJUDGE_SCREENS set to a directory, the pages are also saved there at 1440x900 and
390x844 (how docs/screens/documents-*.png, adjudications-*.png and grid-overlap-*.png are
made)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from assess.assignments import assign
from campaigns.judgments import Timing, record_judgment
from campaigns.members import add_member
from campaigns.models import Assessor, Document
from campaigns.sanitize import render_body
from qrels.adjudication import adjudicate
from tests.conftest import PASSWORD
from tests.factories import make_documents, make_pool, make_run, make_topics

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}


def shoot(page, name: str) -> None:
    folder = os.environ.get("POOLJUDGE_SCREENS")
    if not folder:
        return
    size = page.viewport_size
    page.screenshot(
        path=str(Path(folder) / f"{name}-{size['width']}x{size['height']}.png"), full_page=False
    )


@pytest.fixture
def library(campaign, organiser):
    topics = make_topics(campaign, ["401", "402"])
    topics[0].title = "Humpback whale song"
    topics[0].save(update_fields=["title"])
    for doc_id, title, body in (
        (
            "FT911-0042",
            "Whales sing longer songs in warmer seas",
            "<p>Humpback whales off Hawaii sang for <b>longer</b> this winter.</p>"
            "<p>Researchers recorded the song on hydrophones.</p><script>alert(1)</script>",
        ),
        ("FT911-0043", "Fishing quotas cut", "<p>Quotas for cod were cut again.</p>"),
        ("LA-0001", "Whale watching boom", "<p>Tourists pay to watch whales.</p>"),
    ):
        html, is_html = render_body(body)
        Document.objects.create(
            campaign=campaign,
            doc_id=doc_id,
            title=title,
            body=body,
            body_html=html,
            is_html=is_html,
        )
    make_documents(campaign, [f"FT911-{i:04d}" for i in range(100, 130)])
    rubric = campaign.current_rubric()
    ann = Assessor.objects.create(campaign=campaign, name="ann")
    ben = Assessor.objects.create(campaign=campaign, name="ben")
    trec = Assessor.objects.create(campaign=campaign, name="trec-1993", kind="imported")
    gpt = Assessor.objects.create(campaign=campaign, name="gpt-judge", kind="model")
    first, _ = record_judgment(
        assessor=ann,
        topic=topics[0],
        doc_id="FT911-0042",
        label=1,
        rubric_version=rubric,
        note="Mentions the song, in passing.",
        timing=Timing(seconds_on_screen=31.0, active_seconds=24.0),
    )
    record_judgment(
        assessor=ann,
        topic=topics[0],
        doc_id="FT911-0042",
        label=2,
        rubric_version=rubric,
        expected_version=first.version,
        note="On a second reading the whole article is about the song.",
        timing=Timing(seconds_on_screen=18.0, active_seconds=15.0),
    )
    record_judgment(
        assessor=ben,
        topic=topics[0],
        doc_id="FT911-0042",
        label=0,
        rubric_version=rubric,
        unsure=True,
        note="About warm seas, not the song itself?",
        timing=Timing(seconds_on_screen=44.0, active_seconds=40.0),
    )
    record_judgment(
        assessor=trec, topic=topics[0], doc_id="FT911-0042", label=1, rubric_version=None
    )
    record_judgment(
        assessor=gpt,
        topic=topics[0],
        doc_id="FT911-0042",
        label=2,
        rubric_version=None,
        note="The article reports the song's length.",
    )
    record_judgment(
        assessor=ann, topic=topics[1], doc_id="FT911-0042", label=0, rubric_version=rubric
    )
    adjudicate(
        campaign=campaign,
        topic=topics[0],
        doc_id="FT911-0042",
        label=2,
        reason="The song is the article's subject: highly relevant.",
        by=organiser,
        expected_version=0,
    )
    # Another pair settled twice (the list shows the first as replaced).
    for version, (label, reason) in enumerate(
        [(1, "Whale watching is close enough."), (0, "Tourism, not whales: the topic is song.")]
    ):
        record_judgment(
            assessor=(ann, ben)[version],
            topic=topics[0],
            doc_id="LA-0001",
            label=version,
            rubric_version=rubric,
        )
        adjudicate(
            campaign=campaign,
            topic=topics[0],
            doc_id="LA-0001",
            label=label,
            reason=reason,
            by=organiser,
            expected_version=version,
        )
    return topics


def test_search_open_and_see_who_judged_it(live_server, login, organiser, campaign, library):
    page = login(organiser, viewport=WIDE)
    page.goto(live_server.url + reverse("campaigns:detail", args=[campaign.slug]))
    page.get_by_role("navigation", name="Campaign sections").get_by_role(
        "link", name="Documents"
    ).click()
    page.wait_for_selector("form.doc-search")
    page.get_by_label("Id or words").fill("whales song")
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector("table.doc-results")
    rows = page.locator("table.doc-results tbody tr")
    assert rows.count() == 1
    assert "6 (2 topics)" in rows.first.inner_text()  # 5 on topic 401, 1 on 402
    shoot(page, "documents-search")

    rows.first.get_by_role("link", name="FT911-0042").click()
    page.wait_for_selector(".doc-verdicts")
    body = page.inner_text("body")
    # As assessors see it: sanitised (no script ran, none is in the page), paragraphs kept.
    assert "Researchers recorded the song on hydrophones." in body
    assert page.locator(".doc-body script").count() == 0
    assert page.locator(".doc-body b", has_text="longer").count() == 1
    # Who judged it and how, each kind marked, with the revision.
    first_topic = page.locator("section.doc-verdicts").first
    table = first_topic.inner_text()
    for text in (
        "ann",
        "On a second reading the whole article is about the song.",
        "Mentions the song, in passing.",
        "ben",
        "unsure",
        "44 s (40 s active)",
        "trec-1993",
        "imported",
        "gpt-judge",
        "model",
        "adjudicated",
        "The song is the article's subject: highly relevant.",
        f"by {organiser.get_username()}",
    ):
        assert text in table, text
    shoot(page, "documents-document")
    page.get_by_role("link", name="Read the text").click()
    shoot(page, "documents-text")

    # Under the other topic the document is the same, the topic beside it changes.
    page.get_by_role("navigation", name="Show the document under another topic").get_by_role(
        "link", name="402"
    ).click()
    page.wait_for_selector(".preview-side")
    assert "Topic 402" in page.inner_text(".preview-side")

    # From the document, the pair's adjudication, and back.
    page.locator("section.doc-verdicts").first.get_by_role(
        "link", name="Revise the adjudication"
    ).click()
    page.wait_for_selector("form.adjudicate-form")
    page.get_by_role("link", name="Back to the document").first.click()
    page.wait_for_selector(".doc-verdicts")
    assert "/documents/FT911-0042" in page.url


def test_an_id_prefix_pages_and_both_pages_fit_a_phone(
    live_server, login, organiser, campaign, library
):
    page = login(organiser, viewport=PHONE)
    page.goto(live_server.url + reverse("qrels:documents", args=[campaign.slug]) + "?q=FT911")
    page.wait_for_selector("table.doc-results")
    assert page.locator("table.doc-results tbody tr").count() == 32
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shoot(page, "documents-search")
    page.goto(live_server.url + reverse("qrels:document", args=[campaign.slug, "FT911-0042"]))
    page.wait_for_selector(".doc-verdicts")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shoot(page, "documents-document")


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["wide", "phone"])
def test_the_list_of_adjudications(live_server, login, organiser, campaign, library, viewport):
    page = login(organiser, viewport=viewport)
    page.goto(live_server.url + reverse("qrels:agreement", args=[campaign.slug]))
    page.get_by_role("link", name="Every adjudication").click()
    page.wait_for_selector("table.adjudication-list")
    text = page.inner_text("table.adjudication-list")
    assert "The song is the article's subject: highly relevant." in text
    assert "FT911-0042" in text
    assert "replaced" in text
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    shoot(page, "adjudications")


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["wide", "phone"])
def test_overlap_from_the_grid(live_server, login, organiser, campaign, viewport):
    topics = make_topics(campaign, ["101", "102", "103"])
    make_documents(campaign, [f"d{i}" for i in range(1, 9)])
    make_run(
        campaign, "run-a", {t.topic_id: [(f"d{i}", 10.0 - i) for i in range(1, 9)] for t in topics}
    )
    pool = make_pool(campaign, depth=8)
    people = []
    for name in ("amy", "bea", "cal"):
        user = get_user_model().objects.create_user(name, password=PASSWORD)
        add_member(campaign=campaign, user=user, role="assessor")
        people.append(user)
    for user, topic in zip(people, topics, strict=True):
        assign(campaign=campaign, pool=pool, user=user, topics=[topic], seed=7)
    page = login(organiser, viewport=viewport)
    page.goto(live_server.url + reverse("assess:assessors", args=[campaign.slug]) + "#grid")
    for topic in topics:
        page.get_by_label(f"Deal topic {topic.topic_id}").check()
    for name in ("amy", "bea", "cal"):
        page.get_by_label(f"Deal to {name}").check()
    page.get_by_label("Overlap", exact=True).fill("25%")
    page.get_by_role("button", name="Overlap the ticked topics…").click()
    page.wait_for_selector("#grid-overlap-panel table")
    preview = page.inner_text("#grid-overlap-panel")
    assert "Overlap of 25%" in preview
    page.locator("#grid-overlap-panel").scroll_into_view_if_needed()
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    shoot(page, "grid-overlap")
    page.get_by_role("button", name="Apply the overlap").click()
    page.wait_for_selector(".messages")
    assert "Overlap of 25% set on 3 topics (3 overlap assignments)." in page.inner_text(".messages")
