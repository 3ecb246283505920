"""The assessor-flow pages in real Chromium: hostile documents stay inert with term
highlighting on, and the revise list and keys page work without JavaScript."""

from __future__ import annotations

import pytest

from assess.assignments import assign
from assess.judging import next_item
from campaigns.models import Document, Topic
from campaigns.sanitize import render_body
from tests.browser.test_xss import BODY, _assert_inert, _watch
from tests.factories import judge, small_campaign

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Words the payloads are made of: highlighting marks text right beside and inside them.
TERMS = "script alert onerror img javascript xss window payload link iframe style"


@pytest.fixture
def hostile(campaign, assessor_a):
    pool = small_campaign(campaign, docs=3)
    html, is_html = render_body(BODY)
    Document.objects.filter(campaign=campaign).update(
        title="A <b>script</b> title", body=BODY, body_html=html, is_html=is_html
    )
    Topic.objects.filter(campaign=campaign).update(title=TERMS, description=TERMS)
    campaign.highlight_terms = True
    campaign.save(update_fields=["highlight_terms"])
    [assignment] = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all())
    )
    return assignment


def test_hostile_documents_stay_inert_with_highlighting_on(live_server, login, organiser, hostile):
    page = login(organiser)
    dialogs, outside = _watch(page, live_server)
    slug = hostile.campaign.slug
    page.goto(f"{live_server.url}/c/{slug}/highlighting/")
    page.wait_for_load_state("networkidle")
    body = page.locator(".doc-body")
    assert body.locator("mark.term").count() > 5
    assert body.locator("script, img, iframe, svg, style, a, form, input").count() == 0
    assert body.inner_text().startswith("Readable start.")
    marked = {text.lower() for text in body.locator("mark.term").all_inner_texts()}
    assert marked <= set(TERMS.split())
    _assert_inert(page, dialogs, outside)


def test_hostile_titles_run_nothing_on_the_assessors_flow_pages(
    live_server, login, assessor_a, hostile
):
    first = next_item(hostile)
    judge(first, 1)
    page = login(assessor_a)
    dialogs, outside = _watch(page, live_server)
    base = f"{live_server.url}/c/{hostile.campaign.slug}/judge/{hostile.token}"
    for path in (f"/topics/{first.topic_id}/", "/keys/"):
        page.goto(base + path)
        page.wait_for_load_state("networkidle")
        _assert_inert(page, dialogs, outside)
    assert page.context.cookies()


def test_without_javascript_the_revise_list_and_keys_page_work(
    live_server, login, campaign, assessor_a
):
    pool = small_campaign(campaign, docs=3)
    [work] = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all())
    )
    first = next_item(work)
    judge(first, 2)
    page = login(assessor_a, javascript=False)
    page.goto(f"{live_server.url}/c/{campaign.slug}/judge/")
    page.get_by_role("link", name=first.topic.title).click()
    assert page.get_by_role("heading", name=first.topic.title).is_visible()
    assert page.locator(".flow-judged li").count() == 1
    assert "Highly relevant" in page.locator(".flow-judged").inner_text()
    page.get_by_role("link", name=f"Document {first.doc_id}").click()
    assert page.url.endswith(f"/{first.token}/")
    assert page.locator(".label-button.chosen").inner_text().find("Highly relevant") >= 0
    page.goto(f"{live_server.url}/c/{campaign.slug}/judge/{work.token}/keys/?item={first.token}")
    assert page.locator("dl.keys-list kbd", has_text="s").count() >= 1
    page.get_by_role("link", name="Back to judging").click()
    assert page.url.endswith(f"/{first.token}/")
