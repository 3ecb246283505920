"""The assessor's flow on the judging screen itself, in real Chromium (issue 14): a phone's scroll
and reach, skip and come back, revise after finishing, topic breaks, no lost keystroke with a slow
server, term highlighting, and what the live region says."""

from __future__ import annotations

import time

import pytest

from assess import views
from assess.assignments import assign
from assess.judging import open_items
from assess.models import Skip
from assess.skips import topic_is_done
from campaigns.models import Document, Judgment, Topic
from campaigns.sanitize import render_body
from tests.browser.test_xss import BODY, _assert_inert, _watch
from tests.factories import judge, small_campaign

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


def _work(campaign, user, *, docs: int = 5):
    pool = small_campaign(campaign, docs=docs)
    [assignment] = assign(
        campaign=campaign, pool=pool, user=user, topics=list(campaign.topics.all()), seed=4
    )
    return assignment


def _start(live_server, assignment) -> str:
    return f"{live_server.url}/c/{assignment.campaign.slug}/judge/{assignment.token}/"


def _item(page) -> str:
    return page.locator("#judge").get_attribute("data-item")


def _moved_on(page, token: str) -> None:
    page.wait_for_function(
        "token => { const judge = document.querySelector('#judge');"
        " return !judge || judge.dataset.item !== token; }",
        arg=token,
    )


def _press(page, key: str) -> None:
    """Press a key that moves on, and wait until the screen shows another document."""
    token = _item(page)
    page.keyboard.press(key)
    _moved_on(page, token)


def _saved(page) -> None:
    page.wait_for_function("() => document.body.dataset.unsaved === '0'")


def _said(page, text: str) -> None:
    """Wait until the live region says ``text`` (the script sets it a moment after emptying it,
    so that a repeated sentence is announced again)."""
    page.wait_for_function(
        "text => document.getElementById('judge-status').textContent.includes(text)", arg=text
    )


def _listen(page) -> None:
    """Record every sentence the live region says, in order (window.__said)."""
    page.evaluate(
        """() => {
        window.__said = [];
        const status = document.getElementById('judge-status');
        new MutationObserver(() => {
            if (status.textContent) { window.__said.push(status.textContent); }
        }).observe(status, {childList: true, characterData: true, subtree: true});
    }"""
    )


def test_on_a_phone_the_next_document_opens_at_its_title_and_labels_stay_in_reach(
    live_server, login, assessor_a, campaign
):
    work = _work(campaign, assessor_a)
    long_text = "\n\n".join(f"Paragraph {n} of a long document. " * 12 for n in range(60))
    html, _is_html = render_body(long_text)
    Document.objects.filter(campaign=campaign).update(body=long_text, body_html=html)
    page = login(assessor_a, **PHONE)
    page.goto(_start(live_server, work))
    labels = page.locator("#judge-form .labels")
    # On first load the labels are on screen without scrolling the document.
    box = labels.bounding_box()
    assert box["y"] >= 0
    assert box["y"] + box["height"] <= 844
    # Read to the end, then tap a label at the bottom.
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    assert page.evaluate("window.pageYOffset") > 2000
    token = _item(page)
    page.locator('.label-button[value="1"]').tap()
    _moved_on(page, token)
    title = page.locator("#judge .doc-view .doc-title").bounding_box()
    assert 0 <= title["y"] < 100
    box = labels.bounding_box()
    assert box["y"] >= 0
    assert box["y"] + box["height"] <= 844
    # The rubric's descriptions stay one tap away.
    assert not page.locator(".label-desc").first.is_visible()
    page.locator(".rubric-toggle").tap()
    assert page.locator(".label-desc").first.is_visible()
    _saved(page)
    assert Judgment.objects.get().label == 1


def test_skipped_documents_come_back_in_order_and_hold_the_topic_open(
    live_server, login, assessor_a, organiser, campaign
):
    work = _work(campaign, assessor_a)
    topic = Topic.objects.get(campaign=campaign, topic_id="301")
    order = [i.token for i in open_items(work).filter(topic=topic).order_by("position")]
    assert len(order) == 5
    page = login(assessor_a)
    page.goto(_start(live_server, work))
    shown = []
    for key in "s1s20":  # skip the first and the third, judge the others
        shown.append(_item(page))
        _press(page, key)
    # The skipped two come back, in the order they were skipped, before the topic ends.
    _saved(page)
    assert shown == order
    assert _item(page) == order[0]
    assert not topic_is_done(work, topic=topic)
    assert Skip.objects.filter(item__assignment=work).count() == 2
    # The organiser sees them as skipped, not yet judged.
    boss = login(organiser)
    boss.goto(f"{live_server.url}/c/{campaign.slug}/progress/")
    assert "skipped, not yet judged" in boss.locator("main").inner_text().lower()
    _press(page, "2")
    assert _item(page) == order[2]
    token = _item(page)
    page.keyboard.press("0")
    # The last of topic 301: the next document is topic 302's, behind a topic break.
    page.wait_for_selector(".topic-break")
    _saved(page)
    assert token not in {i.token for i in open_items(work)}
    assert topic_is_done(work, topic=topic)
    labels = dict(Judgment.objects.filter(topic=topic).values_list("doc_id", "label").order_by())
    assert sorted(labels.values()) == [0, 0, 1, 2, 2]


def test_revise_after_finishing_from_the_done_panel(live_server, login, assessor_a, campaign):
    work = _work(campaign, assessor_a, docs=2)
    items = list(open_items(work).order_by("position"))
    for item in items[:-1]:
        judge(item, 0)
    page = login(assessor_a)
    page.goto(_start(live_server, work))
    page.keyboard.press("1")
    page.wait_for_selector("#judge.done-panel")
    _said(page, "Saved: Partially relevant")
    # `[` on the done panel opens the last judged document ...
    page.keyboard.press("[")
    page.wait_for_selector(".label-button.chosen")
    assert _item(page) == items[-1].token
    page.go_back()
    # ... and each topic's list of judged documents is a link away.
    page.locator(".revise-links a").first.click()
    page.locator(".flow-judged li a").first.click()
    first = items[0]
    assert _item(page) == first.token
    page.keyboard.press("2")
    page.wait_for_selector("#judge.done-panel")
    judgment = Judgment.objects.get(doc_id=first.doc_id, topic=first.topic)
    assert list(judgment.revisions.order_by("version").values_list("label", flat=True)) == [0, 2]


def test_a_topic_break_waits_for_enter_and_label_keys_do_nothing(
    live_server, login, assessor_a, campaign
):
    work = _work(campaign, assessor_a, docs=2)
    first = open_items(work).order_by("position").first()
    judge(first, 1)
    page = login(assessor_a)
    page.goto(_start(live_server, work))
    page.keyboard.press("2")  # the last document of topic 301
    page.wait_for_selector(".topic-break")
    assert "Topic 302 title" in page.locator(".topic-break").inner_text()
    assert "Relevant documents discuss topic 302." in page.locator(".topic-break").inner_text()
    assert not page.locator("#judge .doc-view").is_visible()
    _saved(page)
    page.keyboard.press("1")
    page.keyboard.press("0")
    page.wait_for_timeout(600)
    assert Judgment.objects.count() == 2  # nothing judged on the break
    assert "Not applied" in page.locator("#judge-queue").inner_text()
    page.locator('.label-button[value="1"]').click(force=True)  # a tap does nothing either
    page.wait_for_timeout(300)
    assert Judgment.objects.count() == 2
    page.keyboard.press("Enter")
    assert page.locator("#judge .doc-view").is_visible()
    assert page.locator(".topic-card h1").inner_text() == "Topic 302 title"
    # The guidelines panel's topic part follows the new topic too.
    guidelines = page.locator("#guidelines .guidelines-topic").text_content()
    assert "For topic 302" in guidelines
    assert "Relevant documents discuss topic 302." in guidelines
    page.keyboard.press("0")
    _saved(page)
    assert Judgment.objects.filter(topic__topic_id="302").get().label == 0


def test_keys_typed_during_a_slow_save_are_applied_in_order(
    live_server, login, assessor_a, campaign, monkeypatch
):
    work = _work(campaign, assessor_a)
    expected = [i.doc_id for i in open_items(work).order_by("position")[:3]]
    real = views.submit

    def slow(**kwargs):
        time.sleep(0.8)  # the server under load: each verdict takes 800 ms
        return real(**kwargs)

    monkeypatch.setattr(views, "submit", slow)
    page = login(assessor_a)
    page.goto(_start(live_server, work))
    page.wait_for_load_state("networkidle")
    started = time.monotonic()
    page.keyboard.type("120")  # no delay between the keys
    assert time.monotonic() - started < 0.5
    # The third key found no document on screen yet: it waits, visibly, for the next one.
    assert "will apply to it" in page.locator("#judge-queue").inner_text()
    _saved(page)
    stored = list(Judgment.objects.order_by("position").values_list("doc_id", "label"))
    assert stored == list(zip(expected, [1, 2, 0], strict=True))
    _said(page, "Saved: Not relevant — topic 301, 3 of 5")


def test_terms_are_marked_toggled_and_remembered_and_hostile_text_stays_inert(
    live_server, login, assessor_a, campaign
):
    work = _work(campaign, assessor_a, docs=3)
    campaign.highlight_terms = True
    campaign.save(update_fields=["highlight_terms"])
    Topic.objects.filter(campaign=campaign).update(
        title="script alert payload", description="window iframe"
    )
    html, is_html = render_body(BODY)
    Document.objects.filter(campaign=campaign).update(body=BODY, body_html=html, is_html=is_html)
    page = login(assessor_a)
    dialogs, outside = _watch(page, live_server)
    page.goto(_start(live_server, work))
    body = page.locator("#judge .doc-view .doc-body")
    marks = body.locator("mark.term")
    assert marks.count() >= 3
    assert {t.lower() for t in marks.all_inner_texts()} <= {
        "script",
        "alert",
        "payload",
        "payloads",
        "window",
        "iframe",
        "iframes",
        "scripts",
    }
    # Marks only ever wrap text: no attribute of any element holds one.
    assert page.evaluate(
        "() => [...document.querySelectorAll('.doc-body *')].every(e =>"
        " [...e.attributes].every(a => !a.value.includes('<mark')))"
    )
    assert page.locator("body.terms-hidden").count() == 0
    page.keyboard.press("h")
    assert page.locator("body.terms-hidden").count() == 1
    page.reload()
    assert page.locator("body.terms-hidden").count() == 1  # remembered
    page.keyboard.press("h")
    _press(page, "1")  # the next hostile document, prefetched, marked too
    assert page.locator("#judge .doc-view mark.term").count() > 0
    _assert_inert(page, dialogs, outside)


def test_the_live_region_says_what_was_saved_and_when_the_topic_changes(
    live_server, login, assessor_a, campaign
):
    work = _work(campaign, assessor_a, docs=2)
    page = login(assessor_a)
    page.goto(_start(live_server, work))
    assert page.locator("#judge-status").get_attribute("aria-live") == "polite"
    _listen(page)
    _press(page, "1")
    _said(page, "Saved: Partially relevant — topic 301, 1 of 2")
    page.keyboard.press("2")
    page.wait_for_selector(".topic-break")
    _saved(page)
    _said(page, "Saved: Highly relevant — topic 301, 2 of 2")
    said = page.evaluate("window.__said")
    assert said == [
        "Saved: Partially relevant — topic 301, 1 of 2",
        "New topic: 302 — Topic 302 title. Press Enter to begin.",
        "Saved: Highly relevant — topic 301, 2 of 2",
    ]
    page.keyboard.press("Enter")
    _said(page, "Topic 302: first document.")


def test_guidelines_open_with_g_and_keys_without_javascript(
    live_server, login, assessor_a, campaign
):
    campaign.guidelines = "Judge the document, not its source."
    campaign.save(update_fields=["guidelines"])
    work = _work(campaign, assessor_a, docs=2)
    page = login(assessor_a)
    page.goto(_start(live_server, work))
    assert not page.locator("#guidelines .guidelines-body").is_visible()
    page.keyboard.press("g")
    assert page.locator("#guidelines .guidelines-body").is_visible()
    assert "not its source" in page.locator("#guidelines").inner_text()
    page.keyboard.press("g")
    assert not page.locator("#guidelines .guidelines-body").is_visible()
    # `]`: the next unjudged document after this one (not this one again).
    upcoming = page.locator("#upcoming").get_attribute("data-token")
    _press(page, "]")
    assert _item(page) == upcoming
    # Without JavaScript: Skip is a button of the form, and "? Keys" a link to the keys page.
    plain = login(assessor_a, javascript=False)
    plain.goto(_start(live_server, work))
    skipped = _item(plain)
    plain.locator(".skip-button").click()
    assert _item(plain) != skipped
    assert Skip.objects.get().item.token == skipped
    plain.locator(".help-toggle").click()
    assert plain.url.split("?")[0].endswith("/keys/")
    assert plain.locator("dl.keys-list").is_visible()


def test_a_save_the_server_did_not_confirm_is_sent_again_and_stored_once(
    live_server, login, assessor_a, campaign
):
    work = _work(campaign, assessor_a, docs=3)
    first = open_items(work).order_by("position").first()
    page = login(assessor_a)
    page.goto(_start(live_server, work))
    _listen(page)
    failed = []

    def flaky(route):
        # The first verdict meets a database failure (503), the retry goes through.
        if route.request.method == "POST" and not failed:
            failed.append(route.request.post_data)
            route.fulfill(status=503, headers={"Retry-After": "0"}, body="")
        else:
            route.continue_()

    page.route("**/judge/**", flaky)
    _press(page, "2")
    _saved(page)
    assert len(failed) == 1
    judgment = Judgment.objects.get()
    assert (judgment.doc_id, judgment.label, judgment.version) == (first.doc_id, 2, 1)
    _said(page, "Saved: Highly relevant")
    said = page.evaluate("window.__said")
    assert said[:2] == [
        "Not confirmed yet: retrying…",
        "Saved: Highly relevant — topic 301, 1 of 3",
    ]
