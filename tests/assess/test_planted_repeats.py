"""Planted repeats (issue 19, assess/repeats.py): a share of an assessor's documents comes back
later in their order, unannounced; the second verdict is kept apart (never a revision, never in
qrels) and gives the assessor's self-agreement."""

from __future__ import annotations

import random
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from assess import repeats
from assess.assignments import AssignmentError, assign
from assess.judging import next_item
from assess.models import AssignmentItem, RepeatVerdict
from campaigns.models import Judgment, JudgmentRevision
from qrels.policies import iter_campaign_qrels
from tests.factories import small_campaign

pytestmark = pytest.mark.django_db
FORM = re.compile(r'name="(submission|version|served)" value="([^"]*)"')


@pytest.fixture
def half_repeated(campaign, assessor_a):
    """Twelve documents of one topic, half of them planted again (seeded)."""
    pool = small_campaign(campaign, topics=("301",), docs=12)
    (assignment,) = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        seed=2,
        repeat_rate=0.5,
    )
    return assignment


def test_planting_repeats_each_chosen_document_once_later_in_the_order():
    order = [(1, f"d{i:02d}") for i in range(20)]
    planted = repeats.plant(order, rate=0.2, rng=random.Random(5), judged=set())
    assert [(t, d) for t, d, again in planted if not again] == order
    again = [(i, (t, d)) for i, (t, d, rep) in enumerate(planted) if rep]
    assert len(again) == 4
    assert len({pair for _, pair in again}) == 4
    for position, pair in again:
        first = next(i for i, (t, d, rep) in enumerate(planted) if (t, d) == pair and not rep)
        # At least MIN_GAP documents later, or at the end when the order is too short for it.
        assert (
            position - first > repeats.MIN_GAP
            or position == len(planted) - 1
            or (order.index(pair) + repeats.MIN_GAP >= len(order) - 1)
        )
    # Judged documents are never chosen (their first verdict is not this assignment's).
    judged = set(order[:18])
    planted = repeats.plant(order, rate=0.5, rng=random.Random(5), judged=judged)
    (chosen,) = [(t, d) for t, d, rep in planted if rep]
    assert chosen in order[18:]


def test_the_rate_is_checked(campaign, assessor_a):
    pool = small_campaign(campaign, docs=4)
    topics = list(campaign.topics.all())
    with pytest.raises(AssignmentError, match=r"share from 0 to 0\.5"):
        assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, repeat_rate=0.6)
    with pytest.raises(AssignmentError, match="shared queue has no planted repeats"):
        assign(
            campaign=campaign,
            pool=pool,
            user=assessor_a,
            topics=topics,
            mode="queue",
            repeat_rate=0.1,
        )


def _normalised(html: str) -> str:
    """The page without what differs between any two serves: opaque tokens, signed serving
    times, one-time form ids, CSRF tokens, the progress counts, and where the page sits in the
    order (the document it prefetches, whether there is one before it)."""
    html = re.sub(r'<a class="button" data-nav="previous"[^>]*>', "<a previous>", html)
    html = re.sub(r'<template id="upcoming".*?</template>', "", html, flags=re.S)
    html = re.sub(r'value="[^"]*"', 'value=""', html)
    html = re.sub(r"/judge/[\w-]+/[\w-]+/", "/judge/T/I/", html)
    html = re.sub(r"item=[\w-]+", "item=I", html)
    html = re.sub(r'data-[\w-]*(token|item|submission|served|url)="[^"]*"', "data-x", html)
    html = re.sub(r"hx-headers=\'[^\']*\'", "", html)
    html = re.sub(r"\n\s*\n", "\n", html)
    return re.sub(r"\d+", "N", html)


def test_repeats_come_back_blind_and_stay_out_of_qrels(client, campaign, assessor_a):
    """Rate 0.2 over 20 documents: 4 come back, each page indistinguishable from the same
    document's first serve (but for tokens and counts); the repeat's verdict is a RepeatVerdict,
    the judgments and qrels are those of the first serves, and self-agreement is computed."""
    pool = small_campaign(campaign, topics=("301",), docs=20)
    (assignment,) = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        seed=11,
        repeat_rate=0.2,
    )
    assert assignment.items.count() == 24
    assert assignment.items.filter(repeat_of__isnull=False).count() == 4
    client.force_login(assessor_a)
    first_pages: dict[str, str] = {}
    served: list[tuple[str, bool]] = []
    labels = {}
    while (item := next_item(assignment)) is not None:
        url = reverse("assess:judge", args=[campaign.slug, assignment.token, item.token])
        page = client.get(url, HTTP_HX_REQUEST="true")
        assert page.status_code == 200
        html = page.content.decode()
        is_repeat = item.repeat_of_id is not None
        if is_repeat:
            # The first verdict exists before the repeat is served.
            assert Judgment.objects.filter(topic=item.topic, doc_id=item.doc_id).exists()
            import difflib

            diff = list(
                difflib.unified_diff(
                    first_pages[item.doc_id].splitlines(), _normalised(html).splitlines(), n=0
                )
            )
            assert not diff, "\n".join(diff)
            assert "repeat" not in html.lower()
        else:
            first_pages[item.doc_id] = _normalised(html)
        served.append((item.doc_id, is_repeat))
        # First serves: label 1; repeats: the same label but for one document.
        label = 1
        if is_repeat and len([x for x in served if x[1]]) == 1:
            label = 2
        labels.setdefault(item.doc_id, []).append(label)
        form = dict(FORM.findall(html))
        answer = client.post(url, {**form, "label": str(label)}, HTTP_HX_REQUEST="true")
        assert answer.status_code == 200
    assert len(served) == 24
    assert sum(is_repeat for _, is_repeat in served) == 4
    assert Judgment.objects.filter(assessor__user=assessor_a).count() == 20
    # No revision: every judgment has exactly its first verdict.
    assert JudgmentRevision.objects.filter(judgment__assessor__user=assessor_a).count() == 20
    assert RepeatVerdict.objects.count() == 4
    assert sorted(v.label for v in RepeatVerdict.objects.all()) == [1, 1, 1, 2]
    assert {v.first_label for v in RepeatVerdict.objects.all()} == {1}
    # qrels: the first verdicts only.
    rows = list(iter_campaign_qrels(campaign=campaign))
    assert len(rows) == 20
    assert {label for _, _, label in rows} == {1}
    (row,) = repeats.self_agreement(campaign)
    assert (row.repeats, row.same, row.agreement) == (4, 3, 0.75)
    assert row.kappa is None or row.kappa <= 0  # one label throughout the first verdicts
    # The organiser sees it on the progress page.
    assert assignment.items.filter(judgment__isnull=True).count() == 0


def test_self_agreement_kappa_matches_scikit_learn():
    from sklearn.metrics import cohen_kappa_score

    rng = random.Random(3)
    pairs = [(rng.randint(0, 2), rng.randint(0, 2)) for _ in range(60)]
    pairs += [(x, x) for x in (0, 1, 2) * 10]
    expected = cohen_kappa_score([a for a, _ in pairs], [b for _, b in pairs])
    assert repeats.cohen_kappa(pairs) == pytest.approx(expected, abs=1e-12)
    assert repeats.cohen_kappa([]) is None
    assert repeats.cohen_kappa([(1, 1), (1, 1)]) is None


def test_a_repeat_waits_for_its_first_verdict(half_repeated):
    """A repeat is served only once the document's first serve is judged, even when the first
    was put off ("judge later") past the repeat's place in the order."""
    assignment = half_repeated
    repeat = assignment.items.filter(repeat_of__isnull=False).order_by("position").first()
    first = repeat.repeat_of
    # Everything before the repeat judged except its first serve.
    from tests.factories import judge

    for item in assignment.items.filter(position__lt=repeat.position).exclude(pk=first.pk):
        if item.repeat_of_id is None:
            judge(item, 1)
    served = next_item(assignment, after=repeat.position - 1)
    assert served.pk != repeat.pk
    judge(first, 1)
    assert next_item(assignment, after=repeat.position - 1).pk == repeat.pk


def test_a_replayed_repeat_form_records_once_and_a_reused_one_is_refused(
    client, campaign, assessor_a, half_repeated
):
    assignment = half_repeated
    client.force_login(assessor_a)
    from tests.factories import judge

    repeat = assignment.items.filter(repeat_of__isnull=False).order_by("position").first()
    for item in assignment.items.filter(repeat_of__isnull=True):
        judge(item, 1)
    url = reverse("assess:judge", args=[campaign.slug, assignment.token, repeat.token])
    form = dict(FORM.findall(client.get(url, HTTP_HX_REQUEST="true").content.decode()))
    for _ in range(2):
        answer = client.post(url, {**form, "label": "2"}, HTTP_HX_REQUEST="true")
        assert answer.status_code == 200
    assert RepeatVerdict.objects.filter(item=repeat).count() == 1
    other = assignment.items.filter(repeat_of__isnull=False, judgment__isnull=True).first()
    other_url = reverse("assess:judge", args=[campaign.slug, assignment.token, other.token])
    answer = client.post(other_url, {**form, "label": "2"}, HTTP_HX_REQUEST="true")
    # Word for word what an ordinary document's page says to a reused form: one word apart
    # ("That" for "This") told a planted repeat from a first serve.
    from campaigns.judgments import SubmissionReused

    assert str(SubmissionReused()) in answer.content.decode()
    assert not RepeatVerdict.objects.filter(item=other).exists()
    assert AssignmentItem.objects.get(pk=other.pk).judgment_id is None


def test_the_command_and_the_form_take_a_repeat_rate(campaign, assessor_a, organiser, client):
    pool = small_campaign(campaign, topics=("301",), docs=10)
    call_command(
        "assign",
        campaign.slug,
        "--pool",
        str(pool.version),
        "--assessor",
        assessor_a.username,
        "--topics",
        "all",
        "--repeat-rate",
        "0.2",
    )
    assignment = assessor_a.assessor_identities.get().assignments.get()
    assert assignment.repeat_rate == 0.2
    assert assignment.items.filter(repeat_of__isnull=False).count() == 2
    client.force_login(organiser)
    page = client.get(reverse("assess:assessors", args=[campaign.slug]))
    assert 'name="repeats"' in page.content.decode()


def test_a_repeat_verdict_costs_what_a_first_verdict_costs(
    client, campaign, assessor_a, half_repeated
):
    """At most 5 statements counted at the connection (issue 13's budget), as any verdict:
    session, user, scope, the one-statement write, the answer's read."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("The one-statement write is PostgreSQL's (CI runs it).")
    from tests.factories import judge

    assignment = half_repeated
    for item in assignment.items.filter(repeat_of__isnull=True):
        judge(item, 1)
    client.force_login(assessor_a)
    client.get(reverse("assess:start", args=[campaign.slug, assignment.token]), follow=True)
    repeat = next_item(assignment)
    assert repeat.repeat_of_id is not None
    url = reverse("assess:judge", args=[campaign.slug, assignment.token, repeat.token])
    form = dict(FORM.findall(client.get(url, HTTP_HX_REQUEST="true").content.decode()))
    following = next_item(assignment, after=repeat.position)
    statements: list[str] = []

    def count(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        answer = client.post(
            url, {**form, "label": "2", "upcoming": following.token}, HTTP_HX_REQUEST="true"
        )
    assert answer.status_code == 200
    assert len(statements) <= 5, " | ".join(" ".join(s.split())[:70] for s in statements)
    verdict = RepeatVerdict.objects.get(item=repeat)
    assert (verdict.first_label, verdict.label) == (1, 2)
    following.refresh_from_db()
    assert following.first_served_at is not None
