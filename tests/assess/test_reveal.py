"""Reveal after deciding (issue 20, assess/reveal.py): a campaign that asks for it shows an
assessor the models' labels on a pair once their own verdict on it exists, never before; a
change made after the reveal is a revision flagged post-reveal, and agreement reads the blind
verdict (the label before the first post-reveal revision)."""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import reverse

from assess.assignments import assign
from assess.judging import next_item, submit
from campaigns.judgments import Timing
from campaigns.models import Assessor, Judgment, JudgmentRevision
from qrels.agreement_data import agreement_data
from qrels.queries import PairFilter, assessor_verdicts, pairs_both_judged
from tests.assess.test_judging_plans import grown as grown
from tests.assess.test_judging_plans import postgres as postgres
from tests.factories import MODEL_NAME, MODEL_NOTE, judge, model_labels, small_campaign

pytestmark = pytest.mark.django_db

REVEAL_ANSWER = re.compile(r'<div id="judge-reveal-answer".*?</div>\s*$', re.S | re.M)


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
        partner=assessor_b,
        seed=5,
    )
    return {"pool": pool, "a": primary, "b": overlap}


def _reveal(campaign, on: bool = True) -> None:
    campaign.reveal_models = on
    campaign.save(update_fields=["reveal_models"])


def _url(assignment, item) -> str:
    return reverse("assess:judge", args=[assignment.campaign.slug, assignment.token, item.token])


def _form(html: str) -> dict[str, str]:
    return dict(re.findall(r'name="(submission|version|served)" value="([^"]*)"', html))


def _reveal_answer(html: str) -> tuple[str, str]:
    """(the reveal block of a verdict's answer, the rest of the answer)."""
    start = html.find('<div id="judge-reveal-answer"')
    if start < 0:
        return "", html
    end = html.index("</div>", html.index('class="help"', start)) + len("</div>")
    return html[start:end], html[:start] + html[end:]


@pytest.mark.parametrize("prefetching", [True, False], ids=["slim answer", "panel answer"])
def test_a_models_label_reaches_the_assessor_only_after_their_verdict(
    client, campaign, assessor_a, setup, prefetching
):
    """A blinding crawl with the reveal on: every page of an unjudged document, and every part
    of a verdict's answer but its reveal of the pair just judged, is free of the model's name
    and note; the reveal names the model and the label, for that pair only; a judged
    document's page shows it."""
    _reveal(campaign)
    model_labels(setup["pool"])  # "umbrela-hidden-model" labelled every pair 2 (Highly)
    a = setup["a"]
    client.force_login(assessor_a)
    judged = []
    for item in a.items.all():
        for page in (client.get(_url(a, item)), client.get(_url(a, item), HTTP_HX_REQUEST="true")):
            assert MODEL_NAME not in page.content.decode()
    while (item := next_item(a)) is not None:
        page = client.get(_url(a, item)).content.decode()
        assert MODEL_NAME not in page
        assert "Revealed after your verdict" not in page
        data = {**_form(page), "label": "1"}
        following = next_item(a, after=item.position)
        if prefetching and following is not None and following.pk != item.pk:
            data["upcoming"] = following.token
        answer = client.post(_url(a, item), data, HTTP_HX_REQUEST="true").content.decode()
        revealed, rest = _reveal_answer(answer)
        assert MODEL_NAME not in rest
        assert MODEL_NOTE not in answer
        assert f'data-item="{item.token}"' in revealed  # the pair just judged, and only it
        assert MODEL_NAME in revealed
        assert re.search(r'class="badge model">\s*Highly', revealed)
        judged.append(item)
    assert len(judged) >= 4
    for item in judged:  # revisiting a judged document: the reveal is in its panel
        page = client.get(_url(a, item)).content.decode()
        assert "Revealed after your verdict" in page
        assert MODEL_NAME in page
        assert MODEL_NOTE not in page


def test_without_the_setting_nothing_is_revealed_and_nothing_flagged(
    client, campaign, assessor_a, setup
):
    model_labels(setup["pool"])
    a = setup["a"]
    client.force_login(assessor_a)
    item = next_item(a)
    url = _url(a, item)
    answer = client.post(
        url, {**_form(client.get(url).content.decode()), "label": "1"}, HTTP_HX_REQUEST="true"
    )
    assert MODEL_NAME not in answer.content.decode()
    page = client.get(url).content.decode()
    assert MODEL_NAME not in page
    assert "judge-reveal" not in page
    client.post(url, {**_form(page), "label": "0"})
    assert not JudgmentRevision.objects.filter(post_reveal=True).exists()


def test_a_change_after_the_reveal_is_a_flagged_revision(client, campaign, assessor_a, setup):
    _reveal(campaign)
    model_labels(setup["pool"])
    a = setup["a"]
    client.force_login(assessor_a)
    item = next_item(a)
    url = _url(a, item)
    client.post(url, {**_form(client.get(url).content.decode()), "label": "0"})
    page = client.get(url).content.decode()
    assert MODEL_NAME in page  # revealed
    answer = client.post(url, {**_form(page), "label": "2"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    revealed, _ = _reveal_answer(answer.content.decode())
    assert "changed after the reveal" in revealed
    # A replay of the same form flags nothing more, and a later change is flagged too.
    form = _form(client.get(url).content.decode())
    client.post(url, {**form, "label": "1"})
    client.post(url, {**form, "label": "1"})
    judgment = Judgment.objects.get(assessor=a.assessor, topic=item.topic, doc_id=item.doc_id)
    history = list(judgment.revisions.order_by("version").values_list("label", "post_reveal"))
    assert history == [(0, False), (2, True), (1, True)]


def test_a_revision_of_a_pair_no_model_labelled_is_not_flagged(client, campaign, assessor_a, setup):
    _reveal(campaign)
    a = setup["a"]
    client.force_login(assessor_a)
    item = next_item(a)
    url = _url(a, item)
    client.post(url, {**_form(client.get(url).content.decode()), "label": "0"})
    page = client.get(url).content.decode()
    assert "No model has labelled this document." in page
    client.post(url, {**_form(page), "label": "2"})
    assert not JudgmentRevision.objects.filter(post_reveal=True).exists()


def test_only_models_labels_are_revealed_never_another_persons(
    client, campaign, assessor_a, assessor_b, setup
):
    _reveal(campaign)
    b_item = next_item(setup["b"])
    judge(b_item, 2, note="BOB-PRIVATE-NOTE")
    imported = Assessor.objects.create(
        campaign=campaign, name="OLD-QRELS", kind=Assessor.Kind.IMPORTED
    )
    Judgment.objects.create(
        campaign=campaign, topic=b_item.topic, doc_id=b_item.doc_id, assessor=imported, label=2
    )
    a = setup["a"]
    item = a.items.get(topic=b_item.topic, doc_id=b_item.doc_id)
    judge(item, 0)
    client.force_login(assessor_a)
    page = client.get(_url(a, item)).content.decode()
    assert "Revealed after your verdict" in page
    for needle in ("bob", "BOB-PRIVATE-NOTE", "OLD-QRELS"):
        assert needle not in page


def _flag(judgment: Judgment, version: int) -> None:
    JudgmentRevision.objects.filter(judgment=judgment, version=version).update(post_reveal=True)


def test_agreement_uses_the_blind_verdict(campaign, assessor_a, assessor_b, setup):
    """A: 0 blind, then 1 after the reveal, then 2; B: 2. Agreement pairs A's 0 with B's 2 (the
    counts, the verdicts of the group statistics, and the pairs behind a cell); qrels keep
    A's 2, which agrees with B."""
    b_item = next_item(setup["b"])
    judge(b_item, 2)
    a_item = setup["a"].items.get(topic=b_item.topic, doc_id=b_item.doc_id)
    judge(a_item, 0)
    judgment = judge(a_item, 1)
    _flag(judgment, 2)
    judge(a_item, 2)  # after a flagged revision: not blind either (flag or no flag)
    report = agreement_data(campaign=campaign)
    (pair,) = report.pairs
    assert pair.n == 1
    assert pair.observed == 0.0
    verdicts = assessor_verdicts(campaign=campaign)
    assert verdicts[setup["a"].assessor.name][(a_item.topic.topic_id, a_item.doc_id)] == 0
    page = pairs_both_judged(
        campaign=campaign,
        a=setup["a"].assessor_id,
        b=setup["b"].assessor_id,
        where=PairFilter(a_label=0),
        limit=10,
    )
    assert page.total == 1
    (listed,) = page.pairs
    assert {listed.a.label, listed.b.label} == {0, 2}
    judgment.refresh_from_db()
    assert judgment.label == 2  # the current verdict, which qrels export


def test_the_settings_page_switches_the_reveal(client, campaign, organiser):
    client.force_login(organiser)
    url = reverse("campaigns:settings", args=[campaign.slug])
    page = client.get(url).content.decode()
    assert "Reveal models" in page
    data = {
        "title": campaign.title,
        "description": "",
        "guidelines": "",
        "topic_breaks": "on",
        "reveal_models": "on",
    }
    assert client.post(url, data).status_code == 302
    campaign.refresh_from_db()
    assert campaign.reveal_models


def test_a_planted_repeat_is_answered_with_the_same_reveal_as_a_first_verdict(
    client, campaign, assessor_a
):
    """The answer to a repeat must not tell it apart from a first verdict (assess/repeats.py):
    with the reveal on, it reveals its pair as every first verdict's answer does."""
    pool = small_campaign(campaign, topics=("301",), docs=12)
    (a,) = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        seed=2,
        repeat_rate=0.5,
    )
    _reveal(campaign)
    model_labels(pool)
    client.force_login(assessor_a)
    answered = {"first": 0, "repeat": 0}
    while (item := next_item(a)) is not None:
        url = _url(a, item)
        page = client.get(url).content.decode()
        assert MODEL_NAME not in page  # a repeat's page is an unjudged document's page
        answer = client.post(url, {**_form(page), "label": "1"}, HTTP_HX_REQUEST="true")
        revealed, rest = _reveal_answer(answer.content.decode())
        assert MODEL_NAME in revealed
        assert MODEL_NAME not in rest
        answered["repeat" if item.repeat_of_id else "first"] += 1
    assert answered["repeat"] > 0
    assert answered["first"] == 12


def test_submit_alone_never_flags(campaign, setup):
    """The flag is the reveal's (assess/reveal.py), not the write's: a verdict recorded by any
    other path (an import, a script) is an ordinary revision."""
    _reveal(campaign)
    model_labels(setup["pool"])
    item = next_item(setup["a"])
    submit(
        item=item,
        label=1,
        rubric_version=campaign.current_rubric(),
        submission_id=uuid.uuid4(),
        expected_version=0,
        timing=Timing(),
    )
    judge(item, 2)
    assert not JudgmentRevision.objects.filter(post_reveal=True).exists()


def test_the_bundle_says_how_post_reveal_revisions_count(
    campaign, assessor_a, assessor_b, setup, tmp_path
):
    """qrels hold the current label (the change after the reveal); campaign.json and the README
    say so, with the number of judgments revised after a reveal."""
    from qrels.export import export_bundle

    _reveal(campaign)
    b_item = next_item(setup["b"])
    judge(b_item, 2)
    item = setup["a"].items.get(topic=b_item.topic, doc_id=b_item.doc_id)
    judge(item, 0)
    judgment = judge(item, 2)
    _flag(judgment, 2)
    bundle = export_bundle(campaign=campaign, destination=tmp_path / "out", policy="max")
    # The bundle's agreement figures pair A's blind 0 with B's 2, as the agreement page does.
    (pair,) = bundle.manifest["agreement"]["pairs"]
    assert (pair["n"], pair["observed"]) == (1, 0.0)
    screen = bundle.manifest["campaign"]["judging_screen"]
    assert screen["reveal_models_after_deciding"] is True
    assert screen["judgments_revised_after_reveal"] == 1
    assert "1 judgments were\nrevised after such a reveal" in bundle.readme
    assert "the agreement figures use the blind verdict" in bundle.readme
    qrels = (tmp_path / "out" / "qrels.txt").read_text().split("\n")
    assert f"{item.topic.topic_id} 0 {item.doc_id} 2" in qrels


def test_with_the_reveal_on_the_scope_stays_flat(grown):
    """The models' labels come with the judging scope (assess/reveal.py: SCOPE_COLUMN): with the
    campaign revealing and a model's label on every pair, the scope still reads a handful of
    rows whatever the size of the assignment (tests/assess/test_judging_plans.py's measure).
    With statistics taken before the judgments existed the planner walks the pair's topic
    instead (448 rows here, the topic's judgments): said in assess/reveal.py, not hidden. With
    the reveal off the subquery never runs."""
    from assess.judging import load_scope
    from tests.assess.test_judging_plans import _assert_flat

    primary, _ = grown()
    campaign = primary.campaign
    _reveal(campaign)
    model_labels(primary.pool)
    judged = primary.items.filter(judgment__isnull=False).order_by("position").last()
    scope = _assert_flat(
        load_scope,
        user_id=primary.assessor.user_id,
        slug=campaign.slug,
        token=primary.token,
        item_token=judged.token,
    )
    assert [r.assessor for r in scope.revealable] == [MODEL_NAME]
