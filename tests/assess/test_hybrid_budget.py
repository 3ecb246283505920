"""A hybrid budget in a live campaign (assess/hybrid.py): people are served the pairs a model is
least sure of, up to a budget per topic, in the simulation's own order (qrels/hybrid.py); the
rest are filled with the model's labels calibrated on the people's verdicts, marked in the
sidecar, and in qrels only when asked."""

from __future__ import annotations

import csv
import hashlib
import re
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from assess import hybrid
from assess.assignments import AssignmentError, assign
from assess.hybrid import HybridError, Share
from assess.judging import CLAIM_MINUTES, next_item, submit
from assess.models import HybridBudget, HybridPlan, ModelCall, ModelConfig, QueueItem
from campaigns.judgments import Timing
from campaigns.models import Assessor, Judgment, JudgmentRevision
from qrels import hybrid as simulation
from qrels.formats import read_qrels_file
from tests.factories import judge, small_campaign

pytestmark = pytest.mark.django_db

DOCS = 20


def _mixed(text: str, values: int) -> int:
    return hashlib.sha256(text.encode()).digest()[0] % values


def _setup(campaign, *, docs: int = DOCS):
    """A pool of two topics, a model's label on every pair (0-2, a few of each), and the
    people's labels each pair would get (what the assessor will answer when served it)."""
    pool = small_campaign(campaign, docs=docs)
    model = Assessor.objects.create(campaign=campaign, name="umbrela", kind=Assessor.Kind.MODEL)
    pairs = list(pool.entries.values_list("topic__topic_id", "topic_id", "doc_id").order_by())
    model_labels, people = {}, {}
    for topic_id, _, doc_id in pairs:
        model_labels[(topic_id, doc_id)] = _mixed(f"m{topic_id}{doc_id}", 3)
        # People agree with the model on label 2, half the time on 1, rarely on 0.
        people[(topic_id, doc_id)] = (
            2
            if model_labels[(topic_id, doc_id)] == 2
            else _mixed(f"p{topic_id}{doc_id}", 2 + model_labels[(topic_id, doc_id)])
        )
    made = Judgment.objects.bulk_create(
        Judgment(
            campaign=campaign,
            topic_id=topic_pk,
            doc_id=doc_id,
            assessor=model,
            label=model_labels[(topic_id, doc_id)],
            source=Judgment.Source.IMPORTED,
        )
        for topic_id, topic_pk, doc_id in pairs
    )
    JudgmentRevision.objects.bulk_create(
        JudgmentRevision(judgment=j, version=1, label=j.label) for j in made
    )
    return pool, model, model_labels, people


def _judge_the_queue(assignment, people) -> dict[str, list[tuple[str, str]]]:
    """Judge whatever the queue serves, as the people's labels say, until it serves nothing;
    returns the pairs served per topic, in order."""
    served: dict[str, list[tuple[str, str]]] = {}
    while (item := next_item(assignment)) is not None:
        pair = (item.topic.topic_id, item.doc_id)
        served.setdefault(pair[0], []).append(pair)
        judge(item, people[pair])
    return served


@pytest.mark.parametrize("routing", ["uncertain", "boundary", "random"])
def test_the_live_order_is_the_simulations_order(campaign, assessor_a, routing):
    pool, model, model_labels, people = _setup(campaign)
    topics = list(campaign.topics.all())
    hybrid.set_budget(
        pool=pool,
        model=model,
        budgets={t: Share(percent=Decimal(40)) for t in topics},
        route=routing,
        seed=11,
    )
    (assignment,) = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue"
    )
    assert assignment.hybrid
    served = _judge_the_queue(assignment, people)
    expected = simulation.simulate(
        people=people,
        model=model_labels,
        budget=40,
        routing=routing,
        threshold=campaign.relevance_threshold,
        seed=11,
    )
    assert served == expected.order
    # The budget caps what people are served: 40 % of 20 pairs per topic, the rest never shown.
    assert {t: len(p) for t, p in served.items()} == {"301": 8, "302": 8}
    assert QueueItem.objects.filter(pool=pool, done=False).count() == 24


def test_a_count_budget_and_pairs_the_model_did_not_label(campaign, assessor_a):
    pool, model, _, people = _setup(campaign, docs=10)
    topic = campaign.topics.get(topic_id="301")
    # The model has no label on d01 of topic 301: it cannot be filled, so people always get it.
    Judgment.objects.filter(assessor=model, topic=topic, doc_id="d01").update(label=-1)
    hybrid.set_budget(pool=pool, model=model, budgets={topic: Share(count=3)})
    (assignment,) = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=[topic], mode="queue"
    )
    served = _judge_the_queue(assignment, people)
    assert served["301"][0] == ("301", "d01")
    assert len(served["301"]) == 4


def test_the_budget_refuses_what_it_cannot_do(campaign, assessor_a, assessor_b):
    pool, model, _, _ = _setup(campaign, docs=6)
    topics = list(campaign.topics.all())
    (_primary,) = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics[:1])
    with pytest.raises(HybridError, match="primary or overlap mode: 301 \\(alice\\)"):
        hybrid.set_budget(pool=pool, model=model, budgets={topics[0]: Share(count=2)})
    person = Assessor.objects.get(user=assessor_a)
    with pytest.raises(HybridError, match="not a model assessor"):
        hybrid.set_budget(pool=pool, model=person, budgets={topics[1]: Share(count=2)})
    with pytest.raises(HybridError, match="no label probabilities"):
        hybrid.set_budget(
            pool=pool, model=model, budgets={topics[1]: Share(count=2)}, probabilities=True
        )
    hybrid.set_budget(pool=pool, model=model, budgets={topics[1]: Share(count=2)})
    with pytest.raises(AssignmentError, match="hybrid budget"):
        assign(campaign=campaign, pool=pool, user=assessor_b, topics=topics[1:])
    for text, message in [
        ("", "empty"),
        ("101%", "between 0% and 100%"),
        ("x%", "between 0% and 100%"),
        ("-3", "neither a count"),
        ("2.5", "neither a count"),
        ("12.345%", "two decimals"),
    ]:
        with pytest.raises(HybridError, match=message):
            Share.parse(text, where="topic 301")
    assert Share.parse("30 %", where="t") == Share(percent=Decimal(30))
    assert Share.parse("7", where="t") == Share(count=7)


def test_filling_a_judged_budget_end_to_end(campaign, assessor_a, tmp_path):
    pool, model, model_labels, people = _setup(campaign)
    topics = list(campaign.topics.all())
    hybrid.set_budget(
        pool=pool, model=model, budgets={t: Share(percent=Decimal(30)) for t in topics}, seed=3
    )
    (assignment,) = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue"
    )
    # Not judged yet: nothing is filled.
    with pytest.raises(CommandError, match="not judged yet for topics 301 \\(0 of 6 judged\\)"):
        call_command("fill_hybrid", campaign.slug, "--pool", str(pool.version))
    assert not Judgment.objects.filter(assessor__kind=Assessor.Kind.FILLED).exists()
    served = _judge_the_queue(assignment, people)
    judged = {p for pairs in served.values() for p in pairs}
    assert len(judged) == 12

    call_command("fill_hybrid", campaign.slug, "--pool", str(pool.version))
    filled = {
        (t, d): label
        for t, d, label in Judgment.objects.filter(assessor__kind=Assessor.Kind.FILLED).values_list(
            "topic__topic_id", "doc_id", "label"
        )
    }
    assert set(filled) == set(people) - judged  # every pair nobody judged, and only those
    expected = simulation.simulate(
        people=people,
        model=model_labels,
        budget=30,
        threshold=campaign.relevance_threshold,
        seed=3,
    )
    threshold = campaign.relevance_threshold
    assert {p: int(label >= threshold) for p, label in filled.items()} == {
        p: v for p, v in expected.merged.items() if p not in judged
    }

    plain, with_filled = tmp_path / "plain", tmp_path / "filled"
    call_command("export_qrels", campaign.slug, "--out", str(plain))
    call_command("export_qrels", campaign.slug, "--out", str(with_filled), "--include-filled")
    default = read_qrels_file(plain / "qrels.txt").judgments
    assert {(j.topic_id, j.doc_id) for j in default} == judged  # people's alone
    everything = read_qrels_file(with_filled / "qrels.txt").judgments
    assert {(j.topic_id, j.doc_id) for j in everything} == set(people)
    with open(with_filled / "judgments.tsv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    sources = {(r["topic"], r["docid"]): r["source"] for r in rows}
    assert {p for p, s in sources.items() if s == "filled"} == set(filled)
    assert {p for p, s in sources.items() if s == "person"} == judged
    with open(plain / "judgments.tsv", encoding="utf-8") as handle:
        assert "filled" not in handle.read()
    readme = (with_filled / "README.md").read_text()
    assert "Filled labels were asked for" in readme
    assert "Filled labels were asked for" not in (plain / "README.md").read_text()
    # The budget of a filled topic stays as it was judged.
    with pytest.raises(HybridError, match="filled already"):
        hybrid.set_budget(pool=pool, model=model, budgets={topics[0]: Share(count=10)})


def test_judging_through_the_page_serves_the_simulations_order(client, campaign, assessor_a):
    """The verdict's answer claims the next document itself (on PostgreSQL ranked from the state
    the verdict's own statement read): the order is still the simulation's."""
    pool, model, model_labels, people = _setup(campaign, docs=12)
    topics = list(campaign.topics.all())
    hybrid.set_budget(
        pool=pool, model=model, budgets={t: Share(percent=Decimal(50)) for t in topics}, seed=2
    )
    (assignment,) = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue"
    )
    client.force_login(assessor_a)
    client.get(reverse("assess:start", args=[campaign.slug, assignment.token]))
    served: dict[str, list[tuple[str, str]]] = {}
    while True:
        item = assignment.items.select_related("topic").order_by("-position").first()
        if item is None or item.judgment_id is not None:
            break
        pair = (item.topic.topic_id, item.doc_id)
        served.setdefault(pair[0], []).append(pair)
        url = reverse("assess:judge", args=[campaign.slug, assignment.token, item.token])
        page = client.get(url).content.decode()
        # Nothing about the model reaches the page: not its name, not a stratum.
        assert "umbrela" not in page
        assert "stratum" not in page
        form = dict(re.findall(r'name="(submission|version|served)" value="([^"]*)"', page))
        answer = client.post(url, {**form, "label": str(people[pair])})
        assert answer.status_code == 302
    expected = simulation.simulate(
        people=people,
        model=model_labels,
        budget=50,
        threshold=campaign.relevance_threshold,
        seed=2,
    )
    assert served == expected.order


def test_the_order_a_verdict_reads_is_the_order_read_afresh(campaign, assessor_a):
    """The state the verdict's statement reads (before its own writes) with the verdict folded
    in is the state read after it: for new verdicts and revisions alike."""
    if connection.vendor != "postgresql":
        pytest.skip("The verdict reads the routing's state in its statement on PostgreSQL.")
    pool, model, _, people = _setup(campaign, docs=10)
    topics = list(campaign.topics.all())
    hybrid.set_budget(pool=pool, model=model, budgets={t: Share(count=8) for t in topics})
    (assignment,) = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue"
    )
    items = []
    for turn in range(6):
        item = next_item(assignment)
        items.append(item)
        for target, label in [(item, people[(item.topic.topic_id, item.doc_id)])] + (
            [
                (
                    items[turn - 1],
                    2 - people[(items[turn - 1].topic.topic_id, items[turn - 1].doc_id)],
                )
            ]
            if turn
            else []
        ):
            target.refresh_from_db()
            target.assignment = assignment
            submit(
                item=target,
                label=label,
                rubric_version=campaign.current_rubric(),
                submission_id=uuid.uuid4(),
                expected_version=target.judgment.version if target.judgment else 0,
                timing=Timing(),
            )
            folded = assignment.__dict__.pop("hybrid_order")
            expired = timezone.now() - timedelta(minutes=CLAIM_MINUTES)
            assert folded == hybrid.claim_order(assignment, expired=expired)


def test_the_organiser_sets_the_budget_and_fills_from_the_page(
    client, campaign, organiser, assessor_a
):
    pool, _model, _, people = _setup(campaign, docs=10)
    t301, t302 = campaign.topics.order_by("position")
    url = reverse("assess:hybrid", args=[campaign.slug, pool.version])
    client.force_login(organiser)
    assert "umbrela" in client.get(url).content.decode()
    base = {"action": "budget", "model": "umbrela", "routing": "uncertain"}
    # A bad budget: named, nothing changed.
    page = client.post(url, {**base, f"topic-{t301.pk}": "150%"})
    assert "Topic 301: &#x27;150%&#x27; is not a share" in page.content.decode()
    assert not HybridPlan.objects.exists()
    answer = client.post(url, {**base, "every": "20%", f"topic-{t302.pk}": "3"})
    assert answer.status_code == 302
    budgets = {b.topic.topic_id: b.allowed for b in HybridBudget.objects.all()}
    assert budgets == {"301": 2, "302": 3}
    # Filling before the budget is judged: refused, nothing written.
    page = client.post(url, {"action": "fill"}, follow=True).content.decode()
    assert "No topic" in page
    (assignment,) = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=[t301, t302], mode="queue"
    )
    _judge_the_queue(assignment, people)
    page = client.post(url, {"action": "fill", "topic": t301.pk}, follow=True).content.decode()
    assert "topic 301 8 new or changed" in page
    filled = Judgment.objects.filter(assessor__kind=Assessor.Kind.FILLED)
    assert set(filled.values_list("topic__topic_id", flat=True)) == {"301"}
    assert filled.count() == 8


def test_the_live_order_with_label_probabilities_is_the_simulations(campaign, assessor_a):
    """Strata from the model's label probabilities (its logprobs, stored on its calls): the
    tenth of its probability of relevance, as ``manage.py hybrid --probabilities`` cuts them."""
    pool, model, model_labels, people = _setup(campaign)
    config = ModelConfig.objects.create(
        campaign=campaign,
        assessor=model,
        rubric_version=campaign.current_rubric(),
        endpoint="http://127.0.0.1:9/v1",
        model="m",
        prompt_template="$document",
        prompt_sha256="0" * 64,
        temperature=0,
        max_tokens=8,
        label_rule="exact",
        logprobs=True,
        fingerprint="f" * 64,
    )
    threshold = campaign.relevance_threshold
    topic_pks = dict(campaign.topics.values_list("topic_id", "pk"))
    relevance = {}
    for (topic_id, doc_id), label in model_labels.items():
        high = _mixed(f"q{topic_id}{doc_id}", 100) / 100
        given = {"0": round(1 - high, 2), "1": round(high / 2, 2), "2": round(high / 2, 2)}
        ModelCall.objects.create(
            config=config,
            topic_id=topic_pks[topic_id],
            doc_id=doc_id,
            status=ModelCall.Status.LABELLED,
            label=label,
            probabilities=given,
        )
        relevance[(topic_id, doc_id)] = sum(p for k, p in given.items() if int(k) >= threshold)
    topics = list(campaign.topics.all())
    hybrid.set_budget(
        pool=pool,
        model=model,
        budgets={t: Share(percent=Decimal(35)) for t in topics},
        probabilities=True,
        seed=4,
    )
    (assignment,) = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=topics, mode="queue"
    )
    served = _judge_the_queue(assignment, people)
    expected = simulation.simulate(
        people=people,
        model=model_labels,
        budget=35,
        threshold=threshold,
        probabilities=relevance,
        seed=4,
    )
    assert served == expected.order
    assert sum(len(p) for p in served.values()) == 14
