"""Adjudication in real Chromium (issue 19): the organiser clicks a confusion cell, sees the pairs
two assessors disagree on, opens one, reads the document and both verdicts, and records an
adjudicated label with a reason; the export with policy ``adjudicated`` has that label, the
sidecar marks the row adjudicated, and every agreement figure is as it was.

With POOLJUDGE_SCREENS set to a directory, the pages are also saved there at 1440x900 and
390x844 (how docs/screens/adjudicate-*.png are made)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from campaigns.models import Assessor, Judgment
from qrels.agreement_data import agreement_data
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
                note=f"{who.name} on {topic}/{doc}: the second paragraph decides it",
                seconds_on_screen=20.0,
                active_seconds=16.0,
            )
    return ann, ben


def figures(campaign) -> list:
    result = []
    for binary in (False, True):
        report = agreement_data(campaign=campaign, binary=binary)
        result.append(
            (
                report.assessors,
                [(p.a, p.b, p.n, p.cohen_kappa, p.observed, p.negative) for p in report.pairs],
            )
        )
    return result


def shoot(page, name: str) -> None:
    folder = os.environ.get("POOLJUDGE_SCREENS")
    if not folder:
        return
    size = page.viewport_size
    page.screenshot(
        path=str(Path(folder) / f"{name}-{size['width']}x{size['height']}.png"), full_page=False
    )


def test_the_organiser_settles_a_disagreement_from_a_confusion_cell(
    live_server, login, organiser, campaign, pair, tmp_path
):
    before = figures(campaign)
    ann, ben = pair
    page = login(organiser, viewport={"width": 1440, "height": 900})
    page.goto(
        live_server.url + reverse("qrels:agreement_pair", args=[campaign.slug, ann.pk, ben.pk])
    )
    # The confusion table's cell: ann gave 2, ben 0.
    page.locator("a[title='The pairs ann labelled 2 and ben 0']").click()
    page.wait_for_selector("table.pair-list")
    listed = page.locator("table.pair-list tbody tr")
    assert listed.count() == 2  # 1/d3 and 2/d3
    assert "ann on 1/d3" in page.inner_text("table.pair-list")
    listed.first.get_by_role("link", name="Adjudicate").click()

    page.wait_for_selector("form.adjudicate-form")
    assert "/adjudicate/" in page.url
    body = page.inner_text("body")
    assert "The text of document d3." in body  # the document as assessors saw it
    assert "ann on 1/d3" in body
    assert "ben on 1/d3" in body
    shoot(page, "adjudicate")
    # No reason: the browser's own check keeps the form from leaving.
    page.locator("input[name=label][value='1']").check()
    page.get_by_role("button", name="Record the adjudicated label").click()
    assert "/adjudicate/" in page.url
    assert not Judgment.objects.filter(assessor__kind=Assessor.Kind.ADJUDICATED).exists()
    page.get_by_label("Reason").fill("Only the first paragraph is on topic: partly relevant.")
    page.get_by_role("button", name="Record the adjudicated label").click()

    # Back on the list it came from, the pair shows its adjudicated label.
    page.wait_for_selector("table.pair-list")
    assert "/pairs/" in page.url
    assert "Adjudicated topic 1, document d3: label 1." in page.inner_text(".messages")
    first_row = page.locator("table.pair-list tbody tr").first
    assert first_row.locator("td[data-label=Adjudicated] strong").inner_text() == "1"
    shoot(page, "adjudicate-pairs")
    if os.environ.get("POOLJUDGE_SCREENS"):  # the same list on a phone: one card a pair
        page.set_viewport_size({"width": 390, "height": 844})
        shoot(page, "adjudicate-pairs")
        page.set_viewport_size({"width": 1440, "height": 900})

    settled = Judgment.objects.get(assessor__kind=Assessor.Kind.ADJUDICATED)
    assert (settled.topic.topic_id, settled.doc_id, settled.label) == ("1", "d3", 1)
    assert settled.revisions.get().by == organiser
    assert figures(campaign) == before

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
    assert "1 0 d3 1" in (out / "qrels.txt").read_text().splitlines()
    sidecar = [line.split("\t") for line in (out / "judgments.tsv").read_text().splitlines()]
    header = sidecar[0]
    rows = [dict(zip(header, row, strict=True)) for row in sidecar[1:]]
    settled_rows = [r for r in rows if (r["topic"], r["docid"], r["label"]) == ("1", "d3", "1")]
    assert len(settled_rows) == 1
    # The sidecar's source column is the assessor's kind: it marks the adjudicated row.
    assert settled_rows[0]["source"] == "adjudicated"


def test_on_a_phone_the_adjudication_page_fits(live_server, login, organiser, campaign, pair):
    page = login(organiser, viewport={"width": 390, "height": 844})
    topic = campaign.topics.get(topic_id="1")
    page.goto(live_server.url + reverse("qrels:adjudicate", args=[campaign.slug, topic.pk, "d3"]))
    page.wait_for_selector("form.adjudicate-form")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shoot(page, "adjudicate")
