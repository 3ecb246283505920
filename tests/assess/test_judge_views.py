"""The judging screen through the client: flows with and without htmx, CSRF, who may see what,
and a crawl of everything an assessor can reach for anything that would unblind them."""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import reverse

from assess.assignments import assign
from assess.judging import next_item
from campaigns.models import Judgment, JudgmentRevision
from tests.factories import (
    GOLD_ITERATION,
    GOLD_NAME,
    MODEL_ITERATION,
    MODEL_NAME,
    MODEL_NOTE,
    gold_qrels,
    make_documents,
    model_labels,
    small_campaign,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(campaign, assessor_a, assessor_b):
    return _setup(campaign, assessor_a, assessor_b)


def _setup(campaign, assessor_a, assessor_b, *, with_gold: bool = False) -> dict:
    pool = small_campaign(campaign, docs=4)
    topics = list(campaign.topics.all())
    options = {}
    if with_gold:
        # Gold items (assess/gold.py): one pair of the pool, three added from outside it.
        make_documents(campaign, ["d05", "d06", "d07"])
        source = gold_qrels(
            campaign, [("301", "d02", 2), ("301", "d05", 0), ("302", "d06", 2), ("302", "d07", 2)]
        )
        options = {"gold_source": source, "gold_count": 4}
    primary, overlap = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=topics,
        overlap=0.5,
        partner=assessor_b,
        seed=5,
        **options,
    )
    if with_gold:
        assert primary.items.filter(gold_only=True).count() == 3
    return {"pool": pool, "a": primary, "b": overlap}


def _skeleton(html: str) -> str:
    """The page without what differs between any two documents of one topic at one point of
    the order: tokens, signed times, form ids, counts, document ids and titles, the prefetch."""
    html = re.sub(r'<a class="button" data-nav="previous"[^>]*>', "<a previous>", html)
    # The prefetched next document, and the topic card when it starts another topic.
    html = re.sub(r'<template id="upcoming[\w-]*".*?</template>', "", html, flags=re.S)
    html = re.sub(r'value="[^"]*"', 'value=""', html)
    html = re.sub(r"/judge/[\w-]+/[\w-]+/", "/judge/T/I/", html)
    html = re.sub(r"item=[\w-]+", "item=I", html)
    html = re.sub(r'data-[\w-]*(token|item|submission|served|url)="[^"]*"', "data-x", html)
    html = re.sub(r"hx-headers=\'[^\']*\'", "", html)
    return re.sub(r"\d+", "N", html)


def _judge_url(assignment, item) -> str:
    return reverse("assess:judge", args=[assignment.campaign.slug, assignment.token, item.token])


def _form(html: str) -> dict[str, str]:
    fields = dict(
        re.findall(r'name="(submission|version|served|csrfmiddlewaretoken)" value="([^"]*)"', html)
    )
    return fields


def test_an_assessor_judges_with_htmx_and_gets_the_next_document(client, assessor_a, setup):
    client.force_login(assessor_a)
    a = setup["a"]
    first = next_item(a)
    page = client.get(_judge_url(a, first))
    assert page.status_code == 200
    form = _form(page.content.decode())
    response = client.post(
        _judge_url(a, first),
        {**form, "label": "2", "active_ms": "4200"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    second = next_item(a)
    assert second.pk != first.pk
    # Posted without the document the page moved on to: the panel of the next one, whole.
    assert f'data-item="{second.token}"' in response.content.decode()
    assert "Saved: Highly relevant" in response.content.decode()
    assert "<html" not in response.content.decode()  # the panel only
    judgment = Judgment.objects.get()
    assert (judgment.label, judgment.position) == (2, first.position)
    assert judgment.active_seconds == pytest.approx(4.2, abs=0.01) or judgment.active_seconds < 4.2
    assert judgment.seconds_on_screen is not None
    assert judgment.served_at is not None


def test_without_javascript_a_post_redirects_to_the_next_document(client, assessor_a, setup):
    client.force_login(assessor_a)
    a = setup["a"]
    first = next_item(a)
    form = _form(client.get(_judge_url(a, first)).content.decode())
    response = client.post(_judge_url(a, first), {**form, "label": "1"})
    assert response.status_code == 302
    assert response["Location"] == _judge_url(a, next_item(a))


def test_a_double_submitted_form_records_one_judgment(client, assessor_a, setup):
    client.force_login(assessor_a)
    a = setup["a"]
    first = next_item(a)
    form = _form(client.get(_judge_url(a, first)).content.decode())
    client.post(_judge_url(a, first), {**form, "label": "1"})
    client.post(_judge_url(a, first), {**form, "label": "1"})
    assert JudgmentRevision.objects.count() == 1


def test_a_stale_tab_gets_409_and_a_clear_message(client, assessor_a, setup):
    client.force_login(assessor_a)
    a = setup["a"]
    first = next_item(a)
    url = _judge_url(a, first)
    client.post(url, {**_form(client.get(url).content.decode()), "label": "1"})
    tab_one = _form(client.get(url).content.decode())
    tab_two = _form(client.get(url).content.decode())
    assert client.post(url, {**tab_one, "label": "2"}).status_code == 302
    stale = client.post(url, {**tab_two, "label": "0"}, HTTP_HX_REQUEST="true")
    assert stale.status_code == 409
    assert "judged in another tab" in stale.content.decode()
    assert list(JudgmentRevision.objects.values_list("label", flat=True)) == [1, 2]


def test_finishing_the_last_document_shows_the_done_panel(client, assessor_b, setup):
    client.force_login(assessor_b)
    b = setup["b"]
    while (item := next_item(b)) is not None:
        url = _judge_url(b, item)
        response = client.post(
            url, {**_form(client.get(url).content.decode()), "label": "0"}, HTTP_HX_REQUEST="true"
        )
    assert "All documents judged" in response.content.decode()


def test_every_post_needs_a_csrf_token(csrf_client, assessor_a, setup):
    csrf_client.force_login(assessor_a)
    a = setup["a"]
    item = next_item(a)
    url = _judge_url(a, item)
    page = csrf_client.get(url)
    form = _form(page.content.decode())
    without = {k: v for k, v in form.items() if k != "csrfmiddlewaretoken"}
    assert csrf_client.post(url, {**without, "label": "1"}).status_code == 403
    assert not Judgment.objects.exists()
    assert csrf_client.post(url, {**form, "label": "1"}).status_code == 302
    assert Judgment.objects.count() == 1


@pytest.mark.parametrize(
    "who", ["anonymous", "outsider", "assessor_b", "organiser", "other_organiser"]
)
def test_nobody_else_reaches_an_assessors_assignment(
    request, client, setup, who, organiser, outsider, other_organiser, assessor_b
):
    users = {
        "outsider": outsider,
        "assessor_b": assessor_b,
        "organiser": organiser,
        "other_organiser": other_organiser,
    }
    if who != "anonymous":
        client.force_login(users[who])
    a = setup["a"]
    item = next_item(a)
    urls = [
        reverse("assess:start", args=[a.campaign.slug, a.token]),
        _judge_url(a, item),
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code in (302, 404)
        if response.status_code == 302:
            assert "/accounts/login/" in response["Location"]
        post = client.post(url, {"label": "1", "submission": str(uuid.uuid4()), "version": "0"})
        assert post.status_code in (302, 403, 404, 405)
    assert not Judgment.objects.exists()


def test_an_assessor_cannot_use_their_token_for_another_assignments_item(client, assessor_b, setup):
    client.force_login(assessor_b)
    a, b = setup["a"], setup["b"]
    foreign = next_item(a)
    url = reverse("assess:judge", args=[b.campaign.slug, b.token, foreign.token])
    assert client.get(url).status_code == 404


@pytest.mark.parametrize("with_gold", [False, True], ids=["plain", "gold"])
def test_a_blinding_crawl_finds_no_run_tags_scores_ranks_or_other_labels(
    client, campaign, assessor_a, assessor_b, with_gold
):
    """Walk every page and fragment assessor A reaches while judging everything; nothing may
    name a run, a score, a rank, pool provenance, assessor B's labels and notes, or a model's
    labels (a model assessor labelled every pair before A starts: issue 20). With gold items
    in A's order (issue 19): nothing says gold, names the gold source or shows a known label,
    and an open gold-only document's page is any open document's page of its topic."""
    from assess.judging import submit
    from campaigns.judgments import Timing

    setup = _setup(campaign, assessor_a, assessor_b, with_gold=with_gold)
    model_labels(setup["pool"])

    b_item = next_item(setup["b"])
    submit(
        item=b_item,
        label=2,
        rubric_version=campaign.current_rubric(),
        submission_id=uuid.uuid4(),
        expected_version=0,
        timing=Timing(),
        note="BOB-PRIVATE-NOTE",
    )
    forbidden = [
        "SECRET-RUN",
        "alpha",
        "beta",
        "100.0",
        "98.663",
        "7.25",
        "7.75",
        "provenance",
        "BOB-PRIVATE-NOTE",
        "rank",
        "score",
        "stratum",
        "inclusion",
        "bob",
        MODEL_NAME,
        MODEL_NOTE,
        MODEL_ITERATION,
        "model",
    ]
    forbidden += [GOLD_NAME, GOLD_ITERATION, "gold"]
    client.force_login(assessor_a)
    a = setup["a"]
    seen = []

    def fetch(url, **kwargs):
        response = client.get(url, **kwargs)
        seen.append((url, response))
        return response

    fetch(reverse("home"))
    fetch(reverse("assess:campaign_home", args=[campaign.slug]))
    fetch(reverse("campaigns:guide", args=[campaign.slug]))
    fetch(reverse("campaigns:detail", args=[campaign.slug]), follow=True)
    open_pages = {}
    for item in a.items.all():
        page = fetch(_judge_url(a, item))
        fetch(_judge_url(a, item), HTTP_HX_REQUEST="true")
        html = page.content.decode()
        # Nothing judged yet: no label is chosen on any page (a known label is never shown).
        assert 'aria-pressed="true"' not in html
        assert re.search(r'name="version" value="0"', html)
        open_pages[item.pk] = _skeleton(html)
    for item in a.items.filter(gold_only=True):
        ordinary = a.items.filter(topic=item.topic, gold_id__isnull=True).first()
        assert open_pages[item.pk] == open_pages[ordinary.pk]
    while (item := next_item(a)) is not None:
        url = _judge_url(a, item)
        response = client.post(
            url, {**_form(fetch(url).content.decode()), "label": "1"}, HTTP_HX_REQUEST="true"
        )
        seen.append((url, response))
    fetch(reverse("assess:start", args=[campaign.slug, a.token]))
    for item in a.items.all():  # judged now: each shows A's own label, as any judged document
        fetch(_judge_url(a, item), HTTP_HX_REQUEST="true")
    for topic in campaign.topics.all():
        fetch(reverse("assess:judged", args=[campaign.slug, a.token, topic.pk]))
    for url, response in seen:
        text = (
            response.content.decode().lower()
            + " ".join(f"{k}: {v}" for k, v in response.items()).lower()
        )
        for needle in forbidden:
            pattern = rf"(?<![a-z0-9]){re.escape(needle.lower())}(?![a-z0-9])"
            assert not re.search(pattern, text), f"{needle!r} leaks on {url}"
        assert "sample" not in url
        assert "pool" not in url
    assert len(seen) > 10


def test_an_item_linked_to_a_models_judgment_shows_the_assessor_nothing_of_it(
    client, campaign, assessor_a, setup
):
    """Blindness is enforced where judgments are read for an assessor: even an item wrongly
    linked to a model's verdict (a bug elsewhere, a hand-edited row) shows neither its label nor
    its note, in the judging page or the list of judged documents, and A's own verdict is a new
    judgment of A's, the model's untouched."""
    model = model_labels(setup["pool"])
    a = setup["a"]
    item = next_item(a)
    theirs = Judgment.objects.get(assessor=model, topic=item.topic, doc_id=item.doc_id)
    a.items.filter(pk=item.pk).update(judgment=theirs)
    client.force_login(assessor_a)
    pages = [
        client.get(_judge_url(a, item)),
        client.get(_judge_url(a, item), HTTP_HX_REQUEST="true"),
        client.get(reverse("assess:judged", args=[campaign.slug, a.token, item.topic_id])),
    ]
    for page in pages:
        assert page.status_code == 200
        assert MODEL_NOTE not in page.content.decode()
    judged_list = pages[2].content.decode()
    assert _judge_url(a, item) not in judged_list
    form = _form(pages[0].content.decode())
    assert form["version"] == "0"  # nothing judged yet, as far as A can tell
    response = client.post(_judge_url(a, item), {**form, "label": "0"})
    assert response.status_code == 302
    mine = Judgment.objects.get(assessor=a.assessor, topic=item.topic, doc_id=item.doc_id)
    assert mine.label == 0
    theirs.refresh_from_db()
    assert (theirs.label, theirs.version, theirs.note) == (2, 1, MODEL_NOTE)
