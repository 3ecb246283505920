"""The judging screen in real Chromium: keyboard only, revise, resume after reload, no JavaScript,
and hostile documents that must run nothing and fetch nothing."""

from __future__ import annotations

import pytest

from assess.assignments import assign
from assess.judging import next_item
from campaigns.models import Document, Judgment
from campaigns.sanitize import render_body
from tests.factories import small_campaign

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def assignment(campaign, assessor_a):
    pool = small_campaign(campaign, docs=6)
    [primary] = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all()), seed=3
    )
    return primary


def _start(live_server, assignment) -> str:
    return f"{live_server.url}/c/{assignment.campaign.slug}/judge/{assignment.token}/"


def _saved(page) -> None:
    """Wait until the page has sent every verdict it shows as given (they are sent after the
    next document is already on screen)."""
    page.wait_for_function("() => document.body.dataset.unsaved === '0'")


def _labels() -> list[int]:
    return list(Judgment.objects.order_by("position").values_list("label", flat=True))


def test_an_assessor_judges_five_documents_with_the_keyboard_only(
    live_server, login, assessor_a, assignment
):
    page = login(assessor_a)
    page.goto(_start(live_server, assignment))
    seen = []
    for key in "21021":
        seen.append(page.locator("#judge").get_attribute("data-item"))
        page.keyboard.press(key)
        page.wait_for_function(
            "token => document.querySelector('#judge') && "
            "document.querySelector('#judge').dataset.item !== token",
            arg=seen[-1],
        )
    _saved(page)
    assert _labels() == [2, 1, 0, 2, 1]
    assert len(set(seen)) == 5
    # The URL follows the document, so a reload resumes exactly here.
    current = page.locator("#judge").get_attribute("data-item")
    assert page.url.endswith(f"/{current}/")
    judgment = Judgment.objects.order_by("position").first()
    assert judgment.active_seconds is not None
    assert judgment.seconds_on_screen is not None

    page.keyboard.press("[")  # back to the fifth document, to revise it
    page.wait_for_selector(".label-button.chosen")
    assert page.locator(".label-button.chosen").get_attribute("data-key") == "1"
    with page.expect_response(lambda response: response.request.method == "POST"):
        page.keyboard.press("2")
    fifth = Judgment.objects.order_by("position")[4]
    assert fifth.version == 2
    assert list(fifth.revisions.values_list("label", flat=True)) == [1, 2]

    page.reload()
    assert page.locator("#judge").count() == 1
    page.goto(_start(live_server, assignment))  # resume: the first unjudged document
    resumed = page.locator("#judge").get_attribute("data-item")
    assert resumed == next_item(assignment).token

    page.keyboard.press("?")
    assert page.locator("#keys-help").is_visible()
    page.keyboard.press("Escape")


def test_the_same_flow_works_without_javascript(live_server, login, assessor_a, assignment):
    page = login(assessor_a, javascript=False)
    page.goto(_start(live_server, assignment))
    for value in ["1", "0", "2"]:
        before = page.url
        page.click(f'.label-button[value="{value}"]')
        page.wait_for_url(lambda url, before=before: url != before)
    assert _labels() == [1, 0, 2]
    page.click('[data-nav="previous"]')
    page.click('.label-button[value="0"]')
    assert sorted(_labels()) == [0, 0, 1]


XSS_BODY = """<p>Safe text before.</p>
<script>window.__pwned = 1; alert('script')</script>
<img src="http://198.51.100.7/pixel.png" onerror="window.__pwned = 2; alert('onerror')">
<a href="javascript:alert('js-url')">click me</a>
<div hx-get="/accounts/logout/" hx-trigger="load">htmx attack</div>
<div data-hx-post="/accounts/logout/" data-hx-trigger="load">data-hx attack</div>
<p style="background:url(http://198.51.100.7/css.png)">styled</p>
<svg><script>alert('svg')</script></svg>
<iframe src="http://198.51.100.7/frame"></iframe>
<math><mtext><table><mglyph><style><img src=x onerror=alert('mxss')>
</style></mglyph></table></mtext></math>
<p>Safe text after.</p>"""


def test_a_hostile_document_runs_nothing_and_fetches_nothing(
    live_server, login, assessor_a, assignment, campaign
):
    html, is_html = render_body(XSS_BODY)
    Document.objects.filter(campaign=campaign).update(
        body=XSS_BODY, body_html=html, is_html=is_html
    )
    page = login(assessor_a)
    dialogs, outside = [], []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.on(
        "request",
        lambda request: (
            None if request.url.startswith(live_server.url) else outside.append(request.url)
        ),
    )
    page.goto(_start(live_server, assignment))
    page.wait_for_load_state("networkidle")
    assert "Safe text before." in page.content()
    assert "Safe text after." in page.content()
    page.keyboard.press("1")  # the next document is hostile too, and arrives by an htmx swap
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(500)
    assert dialogs == []
    assert outside == []
    assert page.evaluate("window.__pwned") is None
    assert Judgment.objects.count() == 1  # the hx-get logout never fired: still logged in
    assert page.locator("text=htmx attack").count() == 1
