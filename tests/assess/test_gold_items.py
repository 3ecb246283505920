"""Gold items (issue 19, assess/gold.py): pairs with a known label from imported qrels, mixed
silently into an assessor's order; a pair added only as gold keeps its verdicts apart (never a
judgment, never in qrels), and each assessor's accuracy on gold is counted."""

from __future__ import annotations

import io
import json
import random
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from assess import gold
from assess.assignments import AssignmentError, assign, reassign
from assess.judging import next_item
from assess.models import AssignmentItem, GoldVerdict
from campaigns.models import Judgment, JudgmentRevision
from qrels.policies import iter_campaign_qrels
from tests.factories import gold_qrels, make_documents, model_labels, small_campaign

pytestmark = pytest.mark.django_db
FORM = re.compile(r'name="(submission|version|served)" value="([^"]*)"')
# The source's labels: one pair in the pool (d02), three outside it with a document to show,
# one without a document (never served) and one with no verdict on the scale (-1).
GOLD = [
    ("301", "d02", 2),
    ("301", "d07", 0),
    ("301", "d08", 2),
    ("302", "d09", 1),
    ("302", "d99", 2),
    ("302", "d10", -1),
]


@pytest.fixture
def golden(campaign, assessor_a):
    """Six documents on each of two topics, all pooled; four gold pairs asked for."""
    pool = small_campaign(campaign, docs=6)
    make_documents(campaign, ["d07", "d08", "d09", "d10"])
    source = gold_qrels(campaign, GOLD)
    (assignment,) = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        seed=4,
        gold_source=source,
        gold_count=4,
    )
    return assignment


def _url(assignment, item) -> str:
    return reverse("assess:judge", args=[assignment.campaign.slug, assignment.token, item.token])


def test_mixing_marks_pairs_in_the_order_and_inserts_the_others_within_their_topic():
    planted = [(1, f"a{i}", False) for i in range(5)] + [(2, f"b{i}", False) for i in range(5)]
    found = {(1, "a3"): 11, (1, "x"): 12, (2, "y"): 13, (3, "elsewhere"): 14}
    rows = gold.mix(planted, gold=found, k=3, rng=random.Random(1))
    assert len(rows) == 10 + 2  # a3 is marked where it is; x and y are added
    marked = {(t, d): (pk, only) for t, d, _, pk, only in rows if pk is not None}
    assert marked.keys() <= {(1, "a3"), (1, "x"), (2, "y")}
    assert len(marked) == 3
    if (1, "a3") in marked:
        assert marked[(1, "a3")] == (11, False)
    # An added pair sits among its topic's documents: topics stay one block each.
    topics = [t for t, *_ in rows]
    assert topics == sorted(topics)
    # Never more than there are candidates on the order's topics.
    assert len([r for r in gold.mix(planted, gold=found, k=99, rng=random.Random(2)) if r[3]]) == 3


def test_the_amount_is_a_share_or_a_number():
    assert gold.parse_amount("") == (0.0, None)
    assert gold.parse_amount("5%") == (0.05, None)
    assert gold.parse_amount("0,1") == (0.1, None)
    assert gold.parse_amount("12") == (0.0, 12)
    with pytest.raises(ValueError, match=r"share from 0 to 0\.5"):
        gold.parse_amount("60%")
    with pytest.raises(ValueError, match="whole number of gold documents"):
        gold.parse_amount("a few")


def test_gold_needs_an_imported_source_and_no_queue(campaign, assessor_a):
    pool = small_campaign(campaign, docs=4)
    topics = list(campaign.topics.all())
    source = gold_qrels(campaign, [("301", "d01", 1)])
    model = model_labels(pool)
    cases = [
        ({"gold_rate": 0.1}, "need a gold source"),
        ({"gold_source": source}, "needs a gold rate or a number"),
        ({"gold_source": source, "gold_rate": 0.1, "gold_count": 2}, "not both"),
        ({"gold_source": source, "gold_rate": 0.9}, "share from 0 to 0.5"),
        ({"gold_source": model, "gold_count": 2}, "not an imported qrels source"),
        ({"gold_source": source, "gold_count": 2, "mode": "queue"}, "shared queue has no gold"),
    ]
    for options, message in cases:
        with pytest.raises(AssignmentError, match=message):
            assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, **options)
    assert not AssignmentItem.objects.exists()


def test_gold_pairs_are_marked_in_the_pool_and_added_outside_it(golden):
    items = list(golden.items.order_by("position"))
    assert len(items) == 12 + 3
    marked = {(i.topic.topic_id, i.doc_id): i.gold_only for i in items if i.gold_id}
    assert marked == {
        ("301", "d02"): False,
        ("301", "d07"): True,
        ("301", "d08"): True,
        ("302", "d09"): True,
    }
    # Each topic's documents are served together, the added ones among them.
    topics = [i.topic.topic_id for i in items]
    assert topics == sorted(topics)
    # Counted in the topic's progress like any document: 7 + 7 + 1, never told apart.
    from assess.judging import progress

    assert {p.topic.topic_id: p.total for p in progress(golden)} == {"301": 8, "302": 7}


def test_accuracy_equals_a_hand_count_and_gold_only_verdicts_stay_out_of_qrels(
    client, campaign, assessor_a, golden, tmp_path
):
    """Judged through the judging screen: d02 (known 2) as 2, d07 (known 0) as 1, d08 (known
    2) as 1, d09 (known 1) as 1, every other document 0. By hand: 4 gold judged, 2 exact
    (d02, d09), binary at threshold 1: 3 (d07 is on the wrong side), 3 added as gold. Then d07
    is revised to 0 from its page: 3 exact, 4 binary."""
    answers = {"d02": 2, "d07": 1, "d08": 1, "d09": 1}
    client.force_login(assessor_a)
    while (item := next_item(golden)) is not None:
        url = _url(golden, item)
        page = client.get(url, HTTP_HX_REQUEST="true")
        form = dict(FORM.findall(page.content.decode()))
        label = answers.get(item.doc_id, 0)
        answer = client.post(url, {**form, "label": str(label)}, HTTP_HX_REQUEST="true")
        assert answer.status_code == 200
        assert "Saved: " in answer.content.decode()
    (row,) = gold.accuracy(campaign)
    assert (row.assessor, row.judged, row.correct, row.binary_correct, row.added) == (
        assessor_a.username,
        4,
        2,
        3,
        3,
    )
    assert row.accuracy == 0.5
    # The assessor's judgments are the 12 pool pairs only; gold-only verdicts are kept apart.
    mine = Judgment.objects.filter(assessor__user=assessor_a)
    assert mine.count() == 12
    assert not mine.filter(doc_id__in=["d07", "d08", "d09"]).exists()
    assert GoldVerdict.objects.count() == 3
    # Revised from its page, as any judged document: the page shows the assessor's own label.
    d07 = golden.items.get(doc_id="d07")
    page = client.get(_url(golden, d07)).content.decode()
    form = dict(FORM.findall(page))
    assert form["version"] == "1"
    assert re.search(r'class="label-button chosen"[^>]*value="1"|value="1"[^>]*chosen', page)
    revised = client.post(_url(golden, d07), {**form, "label": "0"}, HTTP_HX_REQUEST="true")
    assert "Revised: Not relevant" in revised.content.decode()
    assert list(GoldVerdict.objects.filter(item=d07).values_list("version", "label")) == [
        (1, 1),
        (2, 0),
    ]
    (row,) = gold.accuracy(campaign)
    assert (row.judged, row.correct, row.binary_correct) == (4, 3, 4)
    # Listed among the assessor's judged documents of topic 301, with their own label.
    listing = client.get(
        reverse("assess:judged", args=[campaign.slug, golden.token, d07.topic_id])
    ).content.decode()
    assert _url(golden, d07) in listing
    # qrels and the export: the gold source's labels and the assessor's pool verdicts only.
    rows = {(t, d, label) for t, d, label in iter_campaign_qrels(campaign=campaign)}
    by_pair = {(t, d): label for t, d, label in rows}
    assert by_pair[("301", "d08")] == 2  # the source's label, not the assessor's 1
    assert by_pair[("302", "d09")] == 1
    GoldVerdict.objects.all().delete()
    assert {(t, d, label) for t, d, label in iter_campaign_qrels(campaign=campaign)} == rows
    out = tmp_path / "export"
    call_command("export_qrels", campaign.slug, "--out", str(out), "--usernames")
    sidecar = [line.split("\t") for line in (out / "judgments.tsv").read_text().splitlines()]
    mine = [row for row in sidecar if assessor_a.username in row]
    assert len(mine) == 12
    assert not [row for row in mine if {"d07", "d08", "d09"} & set(row)]
    assert JudgmentRevision.objects.filter(judgment__assessor__user=assessor_a).count() == 12


def test_a_replayed_gold_form_records_once_and_a_stale_one_gets_409(client, assessor_a, golden):
    client.force_login(assessor_a)
    item = golden.items.filter(gold_only=True).order_by("position").first()
    url = _url(golden, item)
    form = dict(FORM.findall(client.get(url).content.decode()))
    for _ in range(2):
        assert client.post(url, {**form, "label": "2"}).status_code == 302
    assert GoldVerdict.objects.filter(item=item).count() == 1
    tab_one = dict(FORM.findall(client.get(url).content.decode()))
    tab_two = dict(FORM.findall(client.get(url).content.decode()))
    assert client.post(url, {**tab_one, "label": "1"}).status_code == 302
    stale = client.post(url, {**tab_two, "label": "0"}, HTTP_HX_REQUEST="true")
    assert stale.status_code == 409
    assert "judged in another tab" in stale.content.decode()
    assert list(GoldVerdict.objects.filter(item=item).values_list("label", flat=True)) == [2, 1]


def test_moving_a_topic_never_hands_a_gold_only_check_on(campaign, assessor_a, assessor_b, golden):
    """Gold-only items are checks on their assessor, not work: moving the topic withdraws
    them and gives the other assessor the pool's documents only."""
    topic = campaign.topics.get(topic_id="301")
    destination = reassign(assignment=golden, topics=[topic], to_user=assessor_b)
    assert sorted(destination.items.values_list("doc_id", flat=True)) == [
        f"d{i:02d}" for i in range(1, 7)
    ]
    assert not golden.items.filter(topic=topic, withdrawn=False, judgment__isnull=True).exists()


def test_the_command_and_the_form_take_gold(campaign, assessor_a, organiser, client):
    pool = small_campaign(campaign, topics=("301",), docs=10)
    gold_qrels(campaign, [("301", f"d{i:02d}", 1) for i in range(1, 11)])
    with pytest.raises(CommandError, match="not an imported qrels source"):
        call_command(
            "assign", campaign.slug, "--pool", str(pool.version), "--assessor",
            assessor_a.username, "--topics", "all", "--gold-from", "NOBODY", "--gold-rate", "0.2",
        )  # fmt: skip
    call_command(
        "assign", campaign.slug, "--pool", str(pool.version), "--assessor", assessor_a.username,
        "--topics", "all", "--gold-from", "GOLD-SOURCE-NIST", "--gold-rate", "0.2",
    )  # fmt: skip
    assignment = assessor_a.assessor_identities.get().assignments.get()
    assert (assignment.gold_source.name, assignment.gold_rate) == ("GOLD-SOURCE-NIST", 0.2)
    # Every pooled pair is in the source: 2 of the 10 are marked, none added.
    assert assignment.items.filter(gold__isnull=False, gold_only=False).count() == 2
    assert assignment.items.count() == 10
    client.force_login(organiser)
    page = client.get(reverse("assess:assessors", args=[campaign.slug])).content.decode()
    assert 'name="gold_from"' in page
    assert 'name="gold_amount"' in page
    assert "GOLD-SOURCE-NIST" in page


def test_the_form_gives_gold_and_says_what_is_wrong(campaign, assessor_a, organiser, client):
    pool = small_campaign(campaign, topics=("301",), docs=6)
    make_documents(campaign, ["d07", "d08"])
    source = gold_qrels(campaign, [("301", "d07", 1), ("301", "d08", 0)])
    client.force_login(organiser)
    url = reverse("assess:assign", args=[campaign.slug, pool.version])
    base = {"assessor": assessor_a.pk, "all_topics": "on", "mode": "primary"}
    wrong = [
        ({"gold_from": source.pk, "gold_amount": "60%"}, "share from 0 to 0.5"),
        ({"gold_from": source.pk, "gold_amount": "a few"}, "whole number of gold documents"),
        ({"gold_from": source.pk}, "Give a share or a number of gold documents"),
        ({"gold_amount": "2"}, "Choose the imported qrels"),
        ({"gold_from": source.pk, "gold_amount": "2", "mode": "queue"}, "queue has no gold"),
    ]
    for data, message in wrong:
        response = client.post(url, {**base, **data})
        assert response.status_code == 400, data
        assert message in response.content.decode(), data
    assert not AssignmentItem.objects.exists()
    response = client.post(url, {**base, "gold_from": source.pk, "gold_amount": "2"})
    assert response.status_code in (200, 302)
    items = AssignmentItem.objects.filter(assignment__assessor__user=assessor_a)
    assert items.count() == 8
    assert set(items.filter(gold_only=True).values_list("doc_id", flat=True)) == {"d07", "d08"}


def test_the_progress_page_shows_accuracy_on_gold(client, organiser, assessor_a, golden):
    from tests.factories import judge

    for item in golden.items.filter(gold_only=False).exclude(doc_id="d02"):
        judge(item, 0)
    judge(golden.items.get(topic__topic_id="301", doc_id="d02"), 2)
    client.force_login(organiser)
    page = client.get(reverse("assess:progress", args=[golden.campaign.slug])).content.decode()
    assert "Accuracy: gold documents" in page
    row = re.search(r"<td>" + assessor_a.username + r"</td>(.*?)</tr>", page, re.S).group(1)
    cells = re.findall(r'<td class="num">(\d+)', row)
    assert cells == ["1", "0", "1", "1"]  # judged, added, exact, binary
    # The same figures for a script.
    out = io.StringIO()
    call_command("gold_accuracy", golden.campaign.slug, "--json", stdout=out)
    (figures,) = json.loads(out.getvalue())["assessors"]
    assert figures == {
        "assessor": assessor_a.username,
        "judged": 1,
        "added_as_gold": 0,
        "correct": 1,
        "accuracy": 1.0,
        "binary_correct": 1,
        "binary_accuracy": 1.0,
    }


def test_a_gold_verdict_costs_what_a_first_verdict_costs(client, assessor_a, golden):
    """On PostgreSQL at most 5 statements for the verdict on a gold-only item (its page too),
    as any verdict (issue 13's budget); and a judged gold item's page, which reads the
    assessor's verdict kept apart, at most 5 as well."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("The one-statement write is PostgreSQL's (CI runs it).")
    client.force_login(assessor_a)
    client.get(reverse("assess:start", args=[golden.campaign.slug, golden.token]), follow=True)
    item = golden.items.filter(gold_only=True).order_by("position").first()
    url = _url(golden, item)
    statements: list[str] = []

    def count(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    def shown(sequence):
        return " | ".join(" ".join(s.split())[:70] for s in sequence)

    for htmx in ({"HTTP_HX_REQUEST": "true"}, {}):
        statements.clear()
        with connection.execute_wrapper(count):
            page = client.get(url, **htmx)
        assert page.status_code == 200
        assert len(statements) <= 5, shown(statements)
        form = dict(FORM.findall(page.content.decode()))
        following = next_item(golden, after=item.position)
        data = {**form, "label": "2"}
        if htmx:
            data["upcoming"] = following.token
        statements.clear()
        with connection.execute_wrapper(count):
            answer = client.post(url, data, **htmx)
        assert answer.status_code == (200 if htmx else 302)
        assert len(statements) <= 5, shown(statements)
    assert list(GoldVerdict.objects.filter(item=item).values_list("version", "label")) == [
        (1, 2),
        (2, 2),
    ]
