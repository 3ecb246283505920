"""Hostile text in real Chromium (ASVS V1/V3): OWASP and mutation-XSS payloads, htmx attributes
and CSS urls, as document bodies, document titles and topic text, on the assessor's and the
organiser's pages. Nothing may run, open a dialog, or make a request off the page's origin."""

from __future__ import annotations

import pytest

from assess.assignments import assign
from campaigns.models import Document, Topic
from campaigns.sanitize import render_body
from tests.factories import small_campaign

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OUTSIDE = "http://198.51.100.7"
PAYLOADS = [
    "<script>window.__xss='script';alert(1)</script>",
    "<ScRiPt>window.__xss='case'</ScRiPt>",
    f"<img src={OUTSIDE}/img.png onerror=\"window.__xss='onerror';alert(2)\">",
    "<img src=x onerror=alert(3)//",
    "<svg onload=\"window.__xss='svg'\"><script>alert(4)</script></svg>",
    "<svg><animate onbegin=alert(5) attributeName=x dur=1s>",
    "<body onload=alert(6)>",
    '<iframe src="javascript:alert(7)"></iframe>',
    f"<iframe srcdoc=\"<script>parent.__xss='srcdoc'</script>\" src={OUTSIDE}/f></iframe>",
    '<a href="javascript:alert(8)">javascript link</a>',
    '<a href="jav&#x09;ascript:alert(9)">encoded javascript link</a>',
    "<details open ontoggle=\"window.__xss='ontoggle'\">",
    "<input autofocus onfocus=\"window.__xss='onfocus'\">",
    "<video><source onerror=\"window.__xss='source'\"></video>",
    f"<object data={OUTSIDE}/o.swf></object><embed src={OUTSIDE}/e.swf>",
    f"<link rel=stylesheet href={OUTSIDE}/x.css>",
    f"<style>@import '{OUTSIDE}/i.css'; body{{background:url({OUTSIDE}/bg.png)}}</style>",
    f'<p style="background-image:url({OUTSIDE}/p.png)">styled paragraph</p>',
    f'<div style="behavior:url({OUTSIDE}/b.htc)">behaviour</div>',
    f"<form action={OUTSIDE}/steal><button>go</button></form>",
    f'<meta http-equiv=refresh content="0;url={OUTSIDE}/r">',
    f"<base href={OUTSIDE}/>",
    '<div hx-get="/accounts/logout/" hx-trigger="load">hx-get payload</div>',
    '<div data-hx-post="/accounts/logout/" data-hx-trigger="load">data-hx payload</div>',
    "<div hx-on:load=\"window.__xss='hx-on'\">hx-on payload</div>",
    '<div hx-vals=\'js:{a: window.__xss="hx-vals"}\' hx-post="/" hx-trigger="load">x</div>',
    '<noscript><p title="</noscript><img src=x onerror=alert(10)>"></noscript>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(11)>",
    '<svg></p><style><a id="</style><img src=1 onerror=alert(12)>">',
    "<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(13)>",
    "<template><script>alert(14)</script></template>",
    "<!--<img src=x onerror=alert(15)>-->",
    "<![CDATA[<script>alert(16)</script>]]>",
    "<xmp><img src=x onerror=alert(17)></xmp>",
    '"><script>alert(18)</script>',
    "';alert(19);//",
    "{{7*7}} {% debug %} ${alert(20)}",
]
BODY = "<p>Readable start.</p>\n" + "\n".join(PAYLOADS) + "\n<p>Readable end.</p>"
TEXT = " ".join(PAYLOADS[:6] + PAYLOADS[22:26])


@pytest.fixture
def hostile(campaign, assessor_a):
    pool = small_campaign(campaign, docs=3)
    html, is_html = render_body(BODY)
    Document.objects.filter(campaign=campaign).update(
        title=TEXT, body=BODY, body_html=html, is_html=is_html
    )
    Topic.objects.filter(campaign=campaign).update(title=TEXT, description=TEXT, narrative=TEXT)
    [assignment] = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all())
    )
    return assignment


def _watch(page, live_server):
    dialogs, outside = [], []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.on(
        "request",
        lambda request: (
            None
            if request.url.startswith(live_server.url) or request.url.startswith("data:")
            else outside.append(request.url)
        ),
    )
    return dialogs, outside


def _assert_inert(page, dialogs, outside):
    page.wait_for_timeout(400)
    assert dialogs == []
    assert outside == []
    assert page.evaluate("window.__xss") is None


def test_hostile_documents_and_topics_run_nothing_for_the_assessor(
    live_server, login, assessor_a, hostile
):
    page = login(assessor_a)
    dialogs, outside = _watch(page, live_server)
    page.goto(f"{live_server.url}/c/{hostile.campaign.slug}/judge/{hostile.token}/")
    page.wait_for_load_state("networkidle")
    assert page.locator(".doc-body").inner_text().startswith("Readable start.")
    _assert_inert(page, dialogs, outside)
    for _ in range(2):  # the next hostile documents arrive by htmx swaps
        with page.expect_response(lambda response: response.request.method == "POST"):
            page.keyboard.press("1")
        _assert_inert(page, dialogs, outside)
    page.goto(f"{live_server.url}/c/{hostile.campaign.slug}/judge/")
    _assert_inert(page, dialogs, outside)
    assert page.context.cookies()  # still logged in: no hx-get logout fired


def test_hostile_text_runs_nothing_on_the_organisers_pages(live_server, login, organiser, hostile):
    page = login(organiser)
    dialogs, outside = _watch(page, live_server)
    slug = hostile.campaign.slug
    for path in (f"/c/{slug}/", f"/c/{slug}/files/", f"/c/{slug}/guide/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        _assert_inert(page, dialogs, outside)
