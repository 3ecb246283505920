"""Reveal after deciding in real Chromium (issue 20, assess/reveal.py): the screen shows the
models' labels on a document above the next one once the verdict's answer brings them, never
before; a revision from the judged document's page is flagged post-reveal."""

from __future__ import annotations

import pytest

from assess.assignments import assign
from campaigns.models import JudgmentRevision
from tests.factories import MODEL_NAME, model_labels, small_campaign

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _item(page) -> str:
    return page.locator("#judge").get_attribute("data-item")


def test_the_reveal_shows_after_the_verdict_and_a_change_is_flagged(
    live_server, login, assessor_a, campaign
):
    pool = small_campaign(campaign, docs=3)
    (work,) = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all()), seed=4
    )
    campaign.reveal_models = True
    campaign.save(update_fields=["reveal_models"])
    model_labels(pool)
    page = login(assessor_a)
    page.goto(f"{live_server.url}/c/{campaign.slug}/judge/{work.token}/")
    assert MODEL_NAME not in page.content()
    assert page.locator("#judge-reveal").is_hidden()
    first = _item(page)
    page.keyboard.press("0")
    page.wait_for_selector("#judge-reveal:not([hidden])")
    box = page.locator("#judge-reveal")
    assert MODEL_NAME in box.inner_text()
    assert "Highly relevant" in box.inner_text()
    # The document now on screen is not judged: its own text and form reveal nothing (the box
    # above it is about the document judged before).
    assert _item(page) != first
    assert MODEL_NAME not in page.locator("#judge .doc-view").inner_text()
    assert MODEL_NAME not in page.locator("#judge-form").inner_text()
    # Back to the judged one: the panel reveals; a change there is flagged post-reveal.
    box.get_by_role("link", name="Open it again").click()
    page.wait_for_selector(".reveal-list")
    assert "Revealed after your verdict" in page.locator("#judge").inner_text()
    page.keyboard.press("2")
    page.wait_for_function("() => document.body.dataset.unsaved === '0'")
    page.wait_for_selector("#judge-reveal .badge.warn")
    revision = JudgmentRevision.objects.get(judgment__assessor__user=assessor_a, version=2)
    assert (revision.label, revision.post_reveal) == (2, True)
