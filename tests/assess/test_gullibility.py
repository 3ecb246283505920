"""The gullibility check (issue 20, assess/gullibility.py) against a real HTTP server on loopback
(tests/llm_server.py): ``GULLIBLE`` documents are labelled 0 as they are and 2 once a word of
the topic follows in the text, so the topic's query terms appended to them flip the label."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import transaction
from django.test import TestCase
from django.urls import reverse

from assess import gullibility
from assess.model_judging import ConfigError, Execution, model_config, start_model_judging
from assess.models import GullibilityCall, ModelCall
from campaigns.models import Assessor, Document, Job, Judgment, JudgmentRevision, Topic
from tests.factories import make_pool, make_run, make_topics
from tests.llm_server import FakeModel

pytestmark = pytest.mark.django_db

# (topic, document) -> (text, people's label). Threshold 1: 1 and 2 are relevant.
PAIRS = {
    ("301", "d01"): ("GULLIBLE-a about gardening", 0),  # flips
    ("301", "d02"): ("ANSWER-0-b steady prose", 0),  # does not flip
    ("301", "d03"): ("GULLIBLE-c about gardening", 2),  # people: relevant, not asked
    ("301", "d04"): ("ANSWER-2-d relevant to the model", 0),  # the model: relevant, not asked
    ("301", "d05"): ("BUSY-1-e then label 1", 0),  # the model's own label is set to 0 below
    ("302", "d01"): ("GULLIBLE-a about gardening", 0),  # flips (same document, other topic)
    ("302", "d06"): ("CHATTY-f no label", 0),  # unparseable when stuffed (own label set to 0)
}
FAST = Execution(concurrency=2, per_minute=0, timeout=5, retries=2, backoff=0.01)


@pytest.fixture
def server():
    with FakeModel() as fake:
        yield fake


@pytest.fixture
def judged(campaign, server):
    """People's labels (an imported source) and a model configuration's ordinary labels."""
    make_topics(campaign, ["301", "302"])
    Topic.objects.filter(campaign=campaign, topic_id="301").update(title="Solar panels efficiency")
    Topic.objects.filter(campaign=campaign, topic_id="302").update(title="Coral reef bleaching")
    texts = {doc: text for (_, doc), (text, _) in PAIRS.items()}
    Document.objects.bulk_create(
        Document(campaign=campaign, doc_id=doc, title=f"Title {doc}", body=text)
        for doc, text in texts.items()
    )
    make_run(
        campaign,
        "r",
        {
            topic: [(doc, 10.0 - i) for i, ((t, doc), _) in enumerate(PAIRS.items()) if t == topic]
            for topic in ("301", "302")
        },
    )
    pool = make_pool(campaign, depth=10)
    with TestCase.captureOnCommitCallbacks(execute=True), transaction.atomic():
        config = model_config(campaign=campaign, endpoint=server.url, model="m")
        start_model_judging(config=config, pool=pool, execution=FAST)
    people = Assessor.objects.create(campaign=campaign, name="nist", kind=Assessor.Kind.IMPORTED)
    topics = {t.topic_id: t for t in campaign.topics.all()}
    Judgment.objects.bulk_create(
        Judgment(
            campaign=campaign, topic=topics[t], doc_id=d, assessor=people, label=label, version=1
        )
        for (t, d), (_, label) in PAIRS.items()
    )
    # The model's own (ordinary) labels on the two pairs its endpoint labels 1 or not at all.
    for topic, doc in (("301", "d05"), ("302", "d06")):
        Judgment.objects.update_or_create(
            assessor=config.assessor,
            topic=topics[topic],
            doc_id=doc,
            defaults={"campaign": campaign, "label": 0},
        )
    server.hits.clear()
    server.requests.clear()
    return config


def check(config, **kwargs) -> Job:
    with TestCase.captureOnCommitCallbacks(execute=True), transaction.atomic():
        job = gullibility.start_gullibility_check(config=config, execution=FAST, **kwargs)
    job.refresh_from_db()
    return job


def test_query_terms_appended_flip_a_gullible_models_labels(campaign, judged, server):
    judgments = Judgment.objects.count()
    revisions = JudgmentRevision.objects.count()
    ordinary = list(ModelCall.objects.order_by("pk").values_list("pk", "status", "label"))
    job = check(judged)
    assert job.status == Job.Status.DONE, job.error
    found = gullibility.report(judged)
    # Asked: the pairs people and the model both judged non-relevant, and only those.
    assert found.candidates == found.asked == 5
    assert (found.labelled, found.unparseable, found.failed) == (4, 1, 0)
    assert found.flipped == 3  # two GULLIBLE documents, and the BUSY one answering 1
    assert found.rate == pytest.approx(3 / 4)
    assert [(t.topic, t.labelled, t.flipped) for t in found.topics] == [
        ("301", 3, 2),
        ("302", 1, 1),
    ]
    assert {(p.topic, p.doc_id) for p in found.pairs[:3]} == {
        ("301", "d01"),
        ("302", "d01"),
        ("301", "d05"),
    }
    # Every stuffed prompt carried the topic's query terms after the document.
    prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert len(prompts) == 6  # five pairs, one 429 retried
    assert sum("gardening\n\nsolar panels efficiency\n" in p for p in prompts) == 1
    # Kept apart: no judgment, no revision, no ordinary call changed; agreement as it was.
    assert Judgment.objects.count() == judgments
    assert JudgmentRevision.objects.count() == revisions
    assert list(ModelCall.objects.order_by("pk").values_list("pk", "status", "label")) == ordinary
    busy = GullibilityCall.objects.get(doc_id="d05")
    assert (busy.tries, busy.original_label, busy.label) == (2, 0, 1)
    assert job.result["flipped"] == 3
    assert "3 of 4 non-relevant pairs flipped" in job.result["message"]


def test_a_second_run_never_pays_again(campaign, judged, server):
    check(judged)
    asked = sum(server.hits.values())
    job = check(judged)
    assert job.status == Job.Status.DONE, job.error
    assert sum(server.hits.values()) == asked
    assert GullibilityCall.objects.count() == 5


def test_a_call_a_dead_worker_left_out_is_not_sent_again(campaign, judged, server):
    topic = campaign.topics.get(topic_id="301")
    GullibilityCall.objects.create(
        config=judged,
        topic=topic,
        doc_id="d01",
        variant=gullibility.VARIANT,
        original_label=0,
        status=GullibilityCall.Status.SENT,
    )
    job = check(judged)
    assert job.status == Job.Status.DONE, job.error
    left = GullibilityCall.objects.get(topic=topic, doc_id="d01")
    assert left.status == GullibilityCall.Status.INTERRUPTED
    assert server.hits["GULLIBLE-a"] == 1  # topic 302's d01 only


def test_a_sample_is_the_same_for_the_same_seed(campaign, judged, server):
    job = check(judged, limit=2, seed=7)
    assert job.status == Job.Status.DONE, job.error
    first = set(GullibilityCall.objects.values_list("topic__topic_id", "doc_id"))
    assert len(first) == 2
    pairs = gullibility.candidates(judged)
    again = gullibility.chosen(pairs, limit=2, seed=7)
    assert {(campaign.topics.get(pk=p.topic_id).topic_id, p.doc_id) for p in again} == first


def test_nothing_to_ask_is_refused_with_the_reason(campaign, judged):
    Judgment.objects.filter(assessor__name="nist").update(label=2)
    with pytest.raises(ConfigError, match="judged non-relevant"):
        gullibility.start_gullibility_check(config=judged)


def test_the_command_runs_the_check_and_prints_the_report(campaign, judged, capsys):
    # The test's transaction never commits: the job runs when the capture ends (in the
    # embedded setup it runs inside the command, which then prints the report).
    with TestCase.captureOnCommitCallbacks(execute=True):
        call_command("gullibility_check", campaign.slug, "--rate", "0", "--backoff", "0.01")
    assert "queued" in capsys.readouterr().out
    call_command("gullibility_check", campaign.slug, "--report")
    out = capsys.readouterr().out
    assert "5 of 5 pairs people and the model judged non-relevant" in out
    assert "3 of them relevant (label >= 1): flip rate 75.0%" in out
    assert "301\t3\t2\t0.667" in out
    assert "302\td01\t0\t2\tlabelled" in out


def test_without_an_endpoint_the_check_says_so_and_is_skipped(campaign, client, organiser, capsys):
    call_command("gullibility_check", campaign.slug)
    assert "No model endpoint is configured" in capsys.readouterr().out
    Assessor.objects.create(campaign=campaign, name="umbrela", kind=Assessor.Kind.MODEL)
    call_command("gullibility_check", campaign.slug, "--assessor", "umbrela")
    assert "labels were imported: there is no endpoint" in capsys.readouterr().out
    client.force_login(organiser)
    page = client.get(reverse("assess:gullibility", args=[campaign.slug])).content.decode()
    assert "No model endpoint is configured in this campaign" in page
    assert "Start the check" not in page
    assert not Job.objects.exists()


def test_an_organiser_starts_the_check_and_reads_the_report(client, campaign, organiser, judged):
    client.force_login(organiser)
    url = reverse("assess:gullibility", args=[campaign.slug])
    assert "Not checked yet" in client.get(url).content.decode()
    data = {
        "config": judged.pk,
        "limit": 0,
        "seed": 0,
        "concurrency": 2,
        "per_minute": 0,
        "timeout": 5,
        "retries": 2,
        "price_prompt": 1,
        "price_completion": 0,
    }
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = client.post(url, data)
    assert response.status_code == 302
    job = Job.objects.get(kind=gullibility.JOB_KIND)
    assert job.status == Job.Status.DONE, job.error
    assert job.result["cost"] == pytest.approx(job.result["prompt_tokens"] / 1_000_000)
    page = client.get(url).content.decode()
    assert "<strong>3 of 4</strong> labels flipped to relevant" in page
    assert "75 %" in page


def test_assessors_cannot_reach_the_gullibility_page(client, campaign, assessor_a):
    client.force_login(assessor_a)
    response = client.get(reverse("assess:gullibility", args=[campaign.slug]))
    assert response.status_code in (403, 404)
