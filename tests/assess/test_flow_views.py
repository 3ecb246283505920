"""The assessor's flow beside the judging screen, through the client: skip, next, the revise
lists, the keys page, the assignment page's links, what they cost in queries, who reaches them,
and that none of them unblinds or tells an assessor they are the agreement check."""

from __future__ import annotations

import re
import uuid

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from assess.assignments import assign
from assess.judging import next_item, open_items
from assess.models import Skip
from assess.revise import topic_links
from campaigns.models import Judgment, JudgmentRevision, Label
from tests.factories import (
    MODEL_ITERATION,
    MODEL_NAME,
    MODEL_NOTE,
    judge,
    model_labels,
    small_campaign,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(campaign, assessor_a, assessor_b):
    pool = small_campaign(campaign, docs=4)
    topics = list(campaign.topics.all())
    primary, overlap = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=topics,
        overlap=0.5,
        overlap_topics=topics[:1],
        partner=assessor_b,
        seed=5,
    )
    return {"pool": pool, "a": primary, "b": overlap, "topics": topics}


def _url(name, assignment, *extra) -> str:
    return reverse(f"assess:{name}", args=[assignment.campaign.slug, assignment.token, *extra])


def _warm(client) -> None:
    """A first request after logging in writes the session once (pooljudge/middleware.py); the
    budgets below are for the requests after it."""
    client.get(reverse("home"))


def _form(html: str) -> dict[str, str]:
    return dict(
        re.findall(r'name="(submission|version|served|csrfmiddlewaretoken)" value="([^"]*)"', html)
    )


class TestSkip:
    def test_without_javascript_a_skip_answers_303_to_the_next_document(
        self, client, assessor_a, setup
    ):
        client.force_login(assessor_a)
        a = setup["a"]
        first, second = list(open_items(a).order_by("position")[:2])
        response = client.post(_url("skip", a, first.token), {"submission": str(uuid.uuid4())})
        assert response.status_code == 303
        assert response["Location"] == _url("judge", a, second.token)
        assert Skip.objects.get().item_id == first.pk
        # The next document opens, and the skipped one waits at the end of its topic.
        assert client.get(response["Location"]).status_code == 200
        first.refresh_from_db()
        last_of_topic = a.items.filter(topic=first.topic).order_by("-position").first()
        assert last_of_topic.pk == first.pk

    def test_the_screens_script_gets_the_slim_answer_for_a_skip(self, client, assessor_a, setup):
        client.force_login(assessor_a)
        a = setup["a"]
        first, second, third = list(open_items(a).order_by("position")[:3])
        response = client.post(
            _url("skip", a, first.token),
            {"submission": str(uuid.uuid4()), "upcoming": second.token},
            HTTP_HX_REQUEST="true",
        )
        assert response.status_code == 200
        html = response.content.decode()
        assert 'data-kind="skipped"' in html
        assert f"Skipped: judge it later — topic {first.topic.topic_id}, 0 of" in html
        # What comes after the document the page moved on to; no label buttons, no panel.
        assert f'data-token="{third.token}"' in html
        assert "label-button" not in html
        assert 'id="judge"' not in html

    def test_a_skip_costs_a_bounded_number_of_queries(
        self, client, assessor_a, setup, django_assert_max_num_queries
    ):
        client.force_login(assessor_a)
        a = setup["a"]
        first = next_item(a)
        _warm(client)
        # Session, user, assignment, item, the lock, one read of the positions, two statements
        # of the move, the record, the next document; and in a test (which runs inside a
        # transaction) the savepoint and its release around the skip's own transaction.
        with django_assert_max_num_queries(12):
            response = client.post(_url("skip", a, first.token), {"submission": str(uuid.uuid4())})
        assert response.status_code == 303

    def test_a_replayed_skip_skips_nothing_more(self, client, assessor_a, setup):
        client.force_login(assessor_a)
        a = setup["a"]
        first = next_item(a)
        data = {"submission": str(uuid.uuid4())}
        client.post(_url("skip", a, first.token), data)
        order = list(a.items.order_by("position").values_list("pk", flat=True))
        client.post(_url("skip", a, first.token), data)
        assert list(a.items.order_by("position").values_list("pk", flat=True)) == order
        assert Skip.objects.count() == 1

    def test_a_judged_document_is_not_skipped_and_the_page_says_why(
        self, client, assessor_a, setup
    ):
        client.force_login(assessor_a)
        a = setup["a"]
        first = next_item(a)
        judge(first, 1)
        response = client.post(_url("skip", a, first.token), follow=True)
        assert "judged already" in response.content.decode()
        assert not Skip.objects.exists()

    def test_a_damaged_form_skips_nothing(self, client, assessor_a, setup):
        client.force_login(assessor_a)
        a = setup["a"]
        first = next_item(a)
        response = client.post(_url("skip", a, first.token), {"submission": "not-a-uuid"})
        assert response.status_code == 303
        assert not Skip.objects.exists()

    def test_the_last_document_of_a_topic_stays_and_the_page_says_so(
        self, client, assessor_b, setup
    ):
        client.force_login(assessor_b)
        b = setup["b"]
        items = list(b.items.order_by("position"))
        for item in items[:-1]:
            judge(item, 0)
        response = client.post(_url("skip", b, items[-1].token), follow=True)
        assert response.redirect_chain[0][0] == _url("judge", b, items[-1].token)
        assert "last document left to judge" in response.content.decode()

    def test_skip_is_a_post(self, client, assessor_a, setup):
        client.force_login(assessor_a)
        a = setup["a"]
        assert client.get(_url("skip", a, next_item(a).token)).status_code == 405


class TestNext:
    def test_next_opens_the_document_after_this_one_not_this_one(
        self, client, assessor_a, setup, django_assert_max_num_queries
    ):
        client.force_login(assessor_a)
        a = setup["a"]
        first, second = list(open_items(a).order_by("position")[:2])
        _warm(client)
        # Session, user, assignment, item, the next open document.
        with django_assert_max_num_queries(5):
            response = client.get(_url("next", a, first.token))
        assert response.status_code == 303
        assert response["Location"] == _url("judge", a, second.token)

    def test_next_wraps_round_to_an_earlier_open_document(self, client, assessor_a, setup):
        client.force_login(assessor_a)
        a = setup["a"]
        items = list(a.items.order_by("position"))
        response = client.get(_url("next", a, items[-1].token))
        assert response["Location"] == _url("judge", a, items[0].token)

    def test_on_the_only_open_document_next_stays_and_says_so(self, client, assessor_b, setup):
        client.force_login(assessor_b)
        b = setup["b"]
        items = list(b.items.order_by("position"))
        for item in items[1:]:
            judge(item, 0)
        response = client.get(_url("next", b, items[0].token), follow=True)
        assert response.redirect_chain[0][0] == _url("judge", b, items[0].token)
        assert "No other document is waiting" in response.content.decode()

    def test_when_everything_is_judged_next_goes_to_the_finished_page(
        self, client, assessor_b, setup
    ):
        client.force_login(assessor_b)
        b = setup["b"]
        items = list(b.items.order_by("position"))
        for item in items:
            judge(item, 0)
        response = client.get(_url("next", b, items[0].token))
        assert response["Location"] == _url("start", b)


class TestReviseList:
    def test_it_lists_own_judged_documents_with_label_names_and_when(
        self, client, campaign, assessor_a, setup, django_assert_max_num_queries
    ):
        a = setup["a"]
        topic = setup["topics"][0]
        items = list(a.items.filter(topic=topic).order_by("position"))
        judge(items[0], 2, note="MY-OWN-NOTE")
        judge(items[1], 0)
        client.force_login(assessor_a)
        _warm(client)
        url = _url("judged", a, topic.pk)
        # Session, user, assignment, topics, the skipped (items, titles), the page (count,
        # items, titles), the current rubric, the label names.
        with django_assert_max_num_queries(11):
            response = client.get(url)
        html = response.content.decode()
        assert response.status_code == 200
        assert f"Document {items[0].doc_id}" in html  # the titles
        assert "Highly relevant" in html
        assert "Not relevant" in html
        assert _url("judge", a, items[0].token) in html
        assert _url("judge", a, items[1].token) in html
        assert _url("judge", a, items[2].token) not in html  # not judged: not listed
        assert "<time datetime=" in html
        assert "MY-OWN-NOTE" not in html  # a note is flagged, not printed in a list

    def test_it_pages_long_topics_in_a_bounded_number_of_queries(
        self, client, campaign, assessor_a, django_assert_max_num_queries
    ):
        pool = small_campaign(campaign, topics=("401",), docs=130)
        [work] = assign(
            campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all())
        )
        for item in work.items.all():
            judge(item, 1)
        client.force_login(assessor_a)
        _warm(client)
        url = _url("judged", work, work.topics.get().pk)
        with django_assert_max_num_queries(11):
            first_page = client.get(url).content.decode()
        with django_assert_max_num_queries(11):
            second_page = client.get(url, {"page": 2}).content.decode()
        assert first_page.count("Partially relevant") == 100
        assert second_page.count("Partially relevant") == 30

    def test_it_names_a_label_as_the_rubric_the_assessor_judged_with(
        self, client, campaign, assessor_a, setup
    ):
        a = setup["a"]
        topic = setup["topics"][0]
        item = a.items.filter(topic=topic).order_by("position").first()
        judge(item, 2)
        # A later rubric renames the label: the list shows the name the assessor chose.
        rubric = campaign.current_rubric()
        specs = rubric.specs()
        specs[2] = specs[2].__class__(2, "Renamed later", "", "", "2")
        campaign.save_rubric(specs)
        client.force_login(assessor_a)
        html = client.get(_url("judged", a, topic.pk)).content.decode()
        assert "Highly relevant" in html
        assert "Renamed later" not in html

    def test_it_lists_the_documents_skipped_and_not_yet_judged(self, client, assessor_a, setup):
        client.force_login(assessor_a)
        a = setup["a"]
        first = next_item(a)
        client.post(_url("skip", a, first.token))
        html = client.get(_url("judged", a, first.topic_id)).content.decode()
        assert "Skipped, not yet judged" in html
        assert _url("judge", a, first.token) in html

    def test_revise_after_finishing_keeps_both_verdicts_in_history(self, client, assessor_b, setup):
        """Finish the topic, open the list from the assignment page, change one label."""
        client.force_login(assessor_b)
        b = setup["b"]
        while (item := next_item(b)) is not None:
            url = _url("judge", b, item.token)
            client.post(url, {**_form(client.get(url).content.decode()), "label": "0"})
        home = client.get(reverse("assess:campaign_home", args=[b.campaign.slug]))
        topic = b.topics.get()
        list_url = _url("judged", b, topic.pk)
        assert "All judged" in home.content.decode()
        assert list_url in home.content.decode()
        listed = client.get(list_url).content.decode()
        target = b.items.order_by("position").first()
        revise_url = _url("judge", b, target.token)
        assert revise_url in listed
        page = client.get(revise_url)
        response = client.post(revise_url, {**_form(page.content.decode()), "label": "2"})
        assert response.status_code == 302
        judgment = Judgment.objects.get(assessor=b.assessor, doc_id=target.doc_id)
        assert judgment.label == 2
        history = JudgmentRevision.objects.filter(judgment=judgment).order_by("version")
        assert list(history.values_list("label", flat=True)) == [0, 2]
        assert "Highly relevant" in client.get(list_url).content.decode()

    def test_a_topic_of_another_assignment_is_not_found(self, client, assessor_b, setup):
        client.force_login(assessor_b)
        b = setup["b"]
        other_topic = next(t for t in setup["topics"] if not b.topics.filter(pk=t.pk).exists())
        assert client.get(_url("judged", b, other_topic.pk)).status_code == 404


class TestKeysPage:
    def test_it_lists_the_labels_and_every_command(
        self, client, campaign, assessor_a, setup, django_assert_max_num_queries
    ):
        client.force_login(assessor_a)
        a = setup["a"]
        item = next_item(a)
        _warm(client)
        # Session, user, assignment, rubric, labels, the document to go back to.
        with django_assert_max_num_queries(6):
            response = client.get(_url("keys", a), {"item": item.token})
        html = response.content.decode()
        for label in campaign.current_rubric().labels.all():
            assert f"<kbd>{label.key}</kbd>" in html
            assert label.name in html
        for key in ("[", "]", "s", "r", "u", "x", "n", "g", "?", "Esc", "Enter"):
            assert f"<kbd>{key}</kbd>" in html, key
        assert "<kbd>h</kbd>" not in html  # highlighting is off
        assert _url("judge", a, item.token) in html  # back to the document

    def test_a_label_that_takes_a_command_key_wins_and_the_page_says_so(
        self, client, campaign, assessor_a, setup
    ):
        Label.objects.filter(rubric=campaign.current_rubric(), value=1).update(key="g")
        campaign.highlight_terms = True
        campaign.save(update_fields=["highlight_terms"])
        client.force_login(assessor_a)
        html = client.get(_url("keys", setup["a"])).content.decode()
        assert 'data-command="guidelines">Show or hide the guidelines' in html
        assert "is the key of the label “Partially relevant”" in html
        assert "<kbd>h</kbd>" in html

    def test_another_assignments_document_is_not_a_way_back(self, client, assessor_b, setup):
        client.force_login(assessor_b)
        foreign = next_item(setup["a"])
        html = client.get(_url("keys", setup["b"]), {"item": foreign.token}).content.decode()
        assert foreign.token not in html
        assert _url("start", setup["b"]) in html


class TestAssignmentPage:
    def test_topic_rows_link_to_the_revise_lists(self, client, campaign, assessor_a, setup):
        client.force_login(assessor_a)
        html = client.get(reverse("assess:campaign_home", args=[campaign.slug])).content.decode()
        for topic in setup["topics"]:
            assert _url("judged", setup["a"], topic.pk) in html

    def test_assessors_are_never_told_their_work_is_the_agreement_check(
        self, client, campaign, assessor_b, setup
    ):
        client.force_login(assessor_b)
        b = setup["b"]
        pages = [
            reverse("assess:campaign_home", args=[campaign.slug]),
            _url("judged", b, b.topics.get().pk),
            _url("keys", b),
            _url("judge", b, next_item(b).token),
        ]
        for url in pages:
            text = client.get(url).content.decode().lower()
            for word in ("overlap", "agreement", "second judgment", "partner"):
                assert word not in text, (word, url)


def test_the_done_panel_links_each_topic_to_its_revise_list(
    campaign, assessor_a, setup, django_assert_max_num_queries
):
    a = setup["a"]
    first = next_item(a)
    # One is skipped: the link says it is still to judge.
    from assess.skips import skip

    skip(item=first)
    with django_assert_max_num_queries(3):
        links = topic_links(a)
    html = render_to_string("assess/_revise_links.html", {"links": links})
    for link in links:
        assert link.url in html
    assert "1 skipped, not yet judged" in html
    assert [link.skipped for link in links] == [
        1 if t.pk == first.topic_id else 0 for t in setup["topics"]
    ]


def test_the_guidelines_panel_holds_the_guidelines_and_the_topics_instructions(campaign):
    from tests.factories import make_topics

    campaign.guidelines = "Judge the document, not its title.\n\nFlag unreadable documents."
    [topic] = make_topics(campaign, ["501"])
    html = render_to_string(
        "assess/_guidelines.html", {"campaign": campaign, "topic": topic, "key": "g"}
    )
    assert html.count("<details") == 1
    assert 'id="guidelines"' in html
    assert "<p>Judge the document, not its title.</p>" in html
    assert "For topic 501" in html
    assert topic.narrative in html
    assert "<kbd>g</kbd>" in html
    bare = render_to_string("assess/_guidelines.html", {"campaign": campaign})
    assert "For topic" not in bare
    assert "<kbd>" not in bare


@pytest.mark.parametrize(
    "who", ["anonymous", "outsider", "assessor_b", "organiser", "other_organiser"]
)
def test_nobody_but_the_owner_reaches_the_flow_pages(
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
    order = list(a.items.order_by("position").values_list("pk", flat=True))
    for url in (
        _url("judged", a, item.topic_id),
        _url("keys", a),
        _url("next", a, item.token),
    ):
        response = client.get(url)
        assert response.status_code in (302, 404), url
        if response.status_code == 302:
            assert "/accounts/login/" in response["Location"]
    response = client.post(_url("skip", a, item.token), {"submission": str(uuid.uuid4())})
    assert response.status_code in (302, 404)
    assert not Skip.objects.exists()
    assert list(a.items.order_by("position").values_list("pk", flat=True)) == order


def test_a_blinding_crawl_of_the_flow_pages(client, campaign, assessor_a, assessor_b, setup):
    """Everything assessor A reaches through the flow pages: no run, score, rank, stratum,
    assessor B's labels, notes or name, or a model's labels on the very pairs A judges."""
    model_labels(setup["pool"])
    b_item = next_item(setup["b"])
    judge(b_item, 2, note="BOB-PRIVATE-NOTE")
    client.force_login(assessor_a)
    a = setup["a"]
    seen = []
    for topic in setup["topics"]:
        seen.append(client.get(_url("judged", a, topic.pk)))
    first = next_item(a)
    seen.append(client.post(_url("skip", a, first.token), follow=True))
    seen.append(client.get(_url("next", a, first.token), follow=True))
    seen.append(client.get(_url("keys", a)))
    while (item := next_item(a)) is not None:
        judge(item, 1)
    for topic in setup["topics"]:
        seen.append(client.get(_url("judged", a, topic.pk)))
    seen.append(client.get(reverse("assess:campaign_home", args=[campaign.slug])))
    forbidden = ["SECRET-RUN", "alpha", "beta", "100.0", "7.25", "provenance", "BOB-PRIVATE-NOTE"]
    forbidden += ["rank", "score", "stratum", "inclusion", "bob", "overlap", "agreement"]
    forbidden += [MODEL_NAME, MODEL_NOTE, MODEL_ITERATION, "model"]
    for response in seen:
        text = response.content.decode().lower()
        text += " ".join(f"{k}: {v}" for k, v in response.items()).lower()
        for needle in forbidden:
            pattern = rf"(?<![a-z0-9]){re.escape(needle.lower())}(?![a-z0-9])"
            assert not re.search(pattern, text), needle
