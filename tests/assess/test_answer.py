"""The judging screen's answers (assess/answer.py, docs/judging-protocol.md): after a verdict the
page's script gets only what changed: an acknowledgement with the status sentence, the judged
count, and the next document to prefetch, with the new topic's card only when the topic changes.
And the page itself: guidelines, keys link, skip button, next-unjudged link, live region."""

from __future__ import annotations

import gzip
import re
import uuid

import pytest
from django.urls import reverse

from assess.assignments import assign
from assess.judging import open_items
from campaigns.models import Judgment
from tests.factories import judge, small_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def work(campaign, assessor_a):
    campaign.guidelines = "Judge each document on its own, <b>never</b> by its source."
    campaign.save(update_fields=["guidelines"])
    pool = small_campaign(campaign, docs=3)
    [assignment] = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all()), seed=2
    )
    return assignment


def _url(assignment, item, name="judge") -> str:
    return reverse(f"assess:{name}", args=[assignment.campaign.slug, assignment.token, item.token])


def _form(html: str) -> dict[str, str]:
    return dict(re.findall(r'name="(submission|version|served)" value="([^"]*)"', html))


def _upcoming(html: str) -> dict[str, str]:
    """The prefetched document's form state, as the page holds it."""
    tag = re.search(r'<template id="upcoming"([^>]*)>', html).group(1)
    return dict(re.findall(r'data-([a-z]+)="([^"]*)"', tag))


def _post(client, assignment, item, html, label="1", **extra):
    return client.post(
        _url(assignment, item),
        {**_form(html), "label": label, **extra},
        HTTP_HX_REQUEST="true",
    )


def test_a_verdict_is_answered_with_what_changed_only(client, assessor_a, work):
    client.force_login(assessor_a)
    first, second, third = list(open_items(work).order_by("position")[:3])
    page = client.get(_url(work, first)).content.decode()
    assert _upcoming(page)["token"] == second.token
    response = _post(client, work, first, page, label="1", upcoming=second.token)
    assert response.status_code == 200
    answer = response.content.decode()
    topic = first.topic.topic_id
    assert f"Saved: Partially relevant — topic {topic}, 1 of 3" in answer
    assert 'data-kind="saved"' in answer
    assert f'data-item="{first.token}"' in answer
    # The document after the one the page now shows, with its own form state ...
    upcoming = _upcoming(answer)
    assert upcoming["token"] == third.token
    assert upcoming["url"] == _url(work, third)
    assert upcoming["skip"] == _url(work, third, "skip")
    assert uuid.UUID(upcoming["submission"])
    assert upcoming["served"]
    # ... and nothing the page already holds: no labels, no topic card, no shell.
    for held in ("label-button", "topic-card", "guidelines", "<html", 'id="judge"'):
        assert held not in answer
    assert Judgment.objects.get().label == 1


def test_a_new_topic_comes_with_its_card_for_the_topic_break(client, assessor_a, work):
    client.force_login(assessor_a)
    items = list(open_items(work).order_by("position"))
    first_topic = [i for i in items if i.topic_id == items[0].topic_id]
    for item in first_topic[:-2]:
        judge(item, 1)
    before_last, last = first_topic[-2:]
    following = items[len(first_topic)]
    assert following.topic_id != last.topic_id
    page = client.get(_url(work, before_last)).content.decode()
    answer = _post(client, work, before_last, page, upcoming=last.token).content.decode()
    assert _upcoming(answer)["token"] == following.token
    assert _upcoming(answer)["topic"] == following.topic.topic_id
    card = re.search(r'<template id="upcoming-topic">(.*?)</template>', answer, re.S).group(1)
    assert following.topic.title in card
    assert following.topic.narrative in card
    assert f"0 of 3 judged in topic {following.topic.topic_id}" in card
    # Within a topic no card travels.
    page = client.get(_url(work, items[0])).content.decode()
    assert 'id="upcoming-topic"' not in page


def test_without_an_upcoming_document_the_answer_is_the_next_panel(client, assessor_a, work):
    client.force_login(assessor_a)
    first, second = list(open_items(work).order_by("position")[:2])
    page = client.get(_url(work, first)).content.decode()
    answer = _post(client, work, first, page, label="2").content.decode()
    assert f'data-item="{second.token}"' in answer
    assert "label-button" in answer
    assert "Saved: Highly relevant" in answer


def test_a_revision_says_so_and_the_last_verdict_brings_the_done_panel(client, assessor_a, work):
    client.force_login(assessor_a)
    items = list(open_items(work).order_by("position"))
    for item in items[:-1]:
        judge(item, 0)
    page = client.get(_url(work, items[0])).content.decode()
    assert 'data-none="1"' in page  # a judged document prefetches nothing
    answer = _post(client, work, items[0], page, label="2").content.decode()
    assert "Revised: Highly relevant" in answer
    last = items[-1]
    page = client.get(_url(work, last)).content.decode()
    assert 'data-none="1"' in page  # nothing else is open
    done = _post(client, work, last, page, label="1").content.decode()
    assert "All documents judged" in done
    assert "Saved: Partially relevant" in done
    # Revise after finishing: a link per topic, and `[` opens the last judged document.
    for topic in work.topics.all():
        assert reverse("assess:judged", args=[work.campaign.slug, work.token, topic.pk]) in done
    assert f'data-last-url="{_url(work, last)}"' in done


def test_the_conflict_notice_names_the_labels(client, assessor_a, work):
    client.force_login(assessor_a)
    first = open_items(work).order_by("position").first()
    url = _url(work, first)
    stale = client.get(url).content.decode()
    judge(first, 2)
    response = _post(client, work, first, stale, label="0")
    assert response.status_code == 409
    html = response.content.decode()
    assert "It is now labelled <em>Highly relevant</em>" in html
    assert "your choice (<em>Not relevant</em>) was not saved" in html


def test_the_page_carries_the_flow_skip_next_keys_guidelines_and_live_region(
    client, assessor_a, work
):
    client.force_login(assessor_a)
    first = open_items(work).order_by("position").first()
    html = client.get(_url(work, first)).content.decode()
    assert f'formaction="{_url(work, first, "skip")}"' in html
    assert f'data-nav="next" href="{_url(work, first, "next")}"' in html
    keys = reverse("assess:keys", args=[work.campaign.slug, work.token])
    assert f'href="{keys}?item={first.token}"' in html  # "? Keys" works without JavaScript
    assert 'id="guidelines"' in html
    assert "never</b> by its source" not in html
    assert "&lt;b&gt;never" in html
    assert 'aria-live="polite"' in html
    # One numbering scope: the topic's count, never the position in the whole assignment.
    assert f"0 of 3 judged in topic {first.topic.topic_id}" in html
    assert "Document " + str(first.position) not in html
    assert 'data-breaks="on"' in html


def test_bytes_per_answer_are_a_fraction_of_the_full_panel(client, assessor_a, work):
    """The slim answer against the whole panel the screen used to get back for every verdict."""
    client.force_login(assessor_a)
    first, second, _third = list(open_items(work).order_by("position")[:3])
    page = client.get(_url(work, first)).content.decode()
    slim = _post(client, work, first, page, upcoming=second.token).content
    page = client.get(_url(work, second)).content.decode()
    full = _post(client, work, second, page).content  # no upcoming: the whole next panel
    assert b'id="judge"' in full
    assert b'id="judge"' not in slim
    assert len(slim) < len(full) / 2
    assert len(gzip.compress(slim)) < len(gzip.compress(full))


def test_the_organiser_can_switch_topic_breaks_off(client, assessor_a, work):
    work.campaign.topic_breaks = False
    work.campaign.save(update_fields=["topic_breaks"])
    client.force_login(assessor_a)
    first = open_items(work).order_by("position").first()
    html = client.get(_url(work, first)).content.decode()
    assert "data-breaks" not in html


def test_a_document_shown_from_the_prefetch_records_when_it_was_first_on_screen(
    client, assessor_a, work
):
    client.force_login(assessor_a)
    first, second = list(open_items(work).order_by("position")[:2])
    page = client.get(_url(work, first)).content.decode()
    _post(client, work, first, page, upcoming=second.token)
    second.refresh_from_db()
    assert second.first_served_at is not None
