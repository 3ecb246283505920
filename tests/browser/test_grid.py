"""The assignment grid in real Chromium (issue 19): tick topics and assessors, deal them
round-robin (the preview swaps in under the grid, then applies), click a cell and move a
half-judged topic (previewed: judged documents stay judged); the same steps work without
JavaScript as plain forms.

With POOLJUDGE_SCREENS set to a directory, the grid's panels are saved there at 1440x900 and
390x844 (docs/screens/grid-*.png)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from assess.models import Assignment, AssignmentItem
from campaigns.members import add_member
from campaigns.models import Assessor, Judgment
from tests.conftest import PASSWORD
from tests.factories import judge, make_documents, make_pool, make_run, make_topics

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIZES = {"101": 6, "102": 5, "103": 4, "104": 3, "105": 2, "106": 1}


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
        user = get_user_model().objects.create_user(name, password=PASSWORD)
        add_member(campaign=campaign, user=user, role="assessor")
        people.append(Assessor.objects.get(campaign=campaign, user=user))
    return pool, people


def shoot(page, name: str) -> None:
    folder = os.environ.get("POOLJUDGE_SCREENS")
    if folder:
        size = page.viewport_size
        page.screenshot(path=str(Path(folder) / f"{name}-{size['width']}x{size['height']}.png"))


@pytest.mark.parametrize("javascript", [True, False], ids=["htmx", "no-js"])
def test_deal_round_robin_then_move_a_half_judged_topic(
    live_server, login, organiser, campaign, setup, javascript
):
    _, people = setup
    page = login(organiser, javascript=javascript, viewport={"width": 1440, "height": 900})
    page.goto(live_server.url + reverse("assess:assessors", args=[campaign.slug]))
    for topic_id in SIZES:
        page.get_by_label(f"Deal topic {topic_id}").check()
    for person in people:
        page.get_by_label(f"Deal to {person.name}").check()
    page.get_by_role("button", name="Deal the ticked topics round-robin…").click()
    page.wait_for_selector("#grid-deal")
    preview = page.inner_text("#grid-deal")
    assert "101, 106" in preview
    assert "102, 105" in preview
    assert "103, 104" in preview
    assert not Assignment.objects.exists()  # a preview only
    if javascript:
        assert "/assessors/" in page.url  # swapped in place, under the grid
        page.locator("#grid-deal").scroll_into_view_if_needed()
        shoot(page, "grid-deal")
    page.get_by_role("button", name="Apply the deal").click()
    page.wait_for_selector(".messages")
    assert "Dealt 6 topics over 3 assessors." in page.inner_text(".messages")
    held = {
        a.assessor.name: sorted(a.topics.values_list("topic_id", flat=True))
        for a in Assignment.objects.filter(active=True)
    }
    assert held == {"amy": ["101", "106"], "bea": ["102", "105"], "cal": ["103", "104"]}

    # Cal judges half of topic 103, then the organiser moves it to amy from its cell.
    work = Assignment.objects.get(assessor=people[2])
    for item in work.items.filter(topic__topic_id="103").order_by("position")[:2]:
        judge(item, 1)
    page.reload()
    page.locator("a.ow-cell-link[title='Give, move or end: topic 103, cal']").click()
    page.wait_for_selector("#grid-cell")
    page.select_option("#grid-move-to", label="amy")
    page.get_by_role("button", name="Move…").click()
    page.wait_for_selector(".ow-preview")
    summary = page.inner_text(".ow-preview")
    assert "2 unjudged documents move; the 2 judged stay judged, with cal" in summary
    if javascript:
        shoot(page, "grid-move")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_selector(".messages")
    assert "Move topic 103 from cal to amy" in page.inner_text(".messages")
    assert Judgment.objects.filter(assessor=people[2], topic__topic_id="103").count() == 2
    assert (
        AssignmentItem.objects.filter(
            assignment__assessor=people[0], topic__topic_id="103", withdrawn=False
        ).count()
        == 2
    )


def test_on_a_phone_the_grid_and_its_panel_fit(live_server, login, organiser, campaign, setup):
    page = login(organiser, viewport={"width": 390, "height": 844})
    page.goto(live_server.url + reverse("assess:assessors", args=[campaign.slug]))
    page.get_by_label("Deal topic 101").check()
    page.get_by_label("Deal topic 102").check()
    page.get_by_label("Deal to amy").check()
    page.get_by_label("Deal to bea").check()
    page.get_by_role("button", name="Deal the ticked topics round-robin…").click()
    page.wait_for_selector("#grid-deal")
    page.locator("#grid-deal").scroll_into_view_if_needed()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shoot(page, "grid-deal")
