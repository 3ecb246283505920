"""The inferred measures of a stratified sampled pool (qrels.sampled) on the evaluation page and
in ``manage.py evaluate``: the defaults there, their intervals, and the warning about infAP."""

from __future__ import annotations

import io
import json
import random

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.urls import reverse

from pooling.models import Pool, PoolEntry
from pooling.pools import build_pool, create_pool
from qrels.sampled import SampledEvaluator, pool_sample_qrels
from tests.factories import make_documents, make_run, make_topics
from tests.reports import judge, login
from tests.reports.test_evaluation_pages import runs_from_db

pytestmark = pytest.mark.django_db

TOPICS = ("1", "2", "3")
STRATA = [
    {"first_rank": 1, "last_rank": 5, "rate": 1.0},
    {"first_rank": 6, "last_rank": 30, "rate": 0.25},
]


def sampled_pool(campaign, *, strata=STRATA) -> Pool:
    with transaction.atomic():
        pool = create_pool(campaign=campaign, strategy="sample", params={"strata": strata}, seed=7)
    pool.refresh_from_db()
    if pool.status != Pool.Status.BUILT:
        build_pool(pool=pool)
        pool.refresh_from_db()
    return pool


@pytest.fixture
def sampled(campaign):
    """Five runs over three topics of 40 documents, a pool sampling ranks 1-5 fully and 6-30 at
    25 %, every sampled pair judged 0, 1 or 2 except one (still -1)."""
    rng = random.Random(16)
    make_topics(campaign, TOPICS)
    docs = [f"d{i:03d}" for i in range(40)]
    make_documents(campaign, docs)
    for r in range(5):
        make_run(
            campaign,
            f"run{r}",
            {t: [(d, float(rng.randint(0, 60))) for d in rng.sample(docs, 30)] for t in TOPICS},
        )
    pool = sampled_pool(campaign)
    entries = PoolEntry.objects.filter(pool=pool, sampled=True).order_by(
        "topic__topic_id", "doc_id"
    )
    verdicts = [(e.topic.topic_id, e.doc_id, rng.choice([0, 0, 1, 2])) for e in entries]
    judge(campaign, "nist", verdicts[1:])
    return pool


def evaluate(*args) -> str:
    out = io.StringIO()
    call_command("evaluate", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def expected(campaign, pool) -> dict:
    """The estimates qrels.sampled gives on the pool's strata and the judgments, run by run."""
    labels: dict[str, dict[str, int]] = {}
    for topic, doc, label in campaign.judgments.values_list("topic__topic_id", "doc_id", "label"):
        labels.setdefault(topic, {})[doc] = label
    entries = PoolEntry.objects.filter(pool=pool).values_list(
        "topic__topic_id", "doc_id", "stratum", "sampled"
    )
    evaluator = SampledEvaluator(pool_sample_qrels(entries, labels))
    return {tag: evaluator.evaluate(tag, run) for tag, run in runs_from_db(campaign).items()}


def test_evaluate_scores_a_sampled_pool_with_xinfap_and_infndcg_and_intervals(campaign, sampled):
    report = json.loads(evaluate(campaign.slug, "--pool", str(sampled.version), "--json"))
    evaluation = report["evaluation"]
    assert evaluation["measures"] == ["xinfAP", "infNDCG", "iP@10", "Judged@10"]
    assert "stratified sample" in evaluation["inferred"]["why"]
    assert evaluation["inferred"]["warning"] == ""
    want = expected(campaign, sampled)
    assert len(evaluation["runs"]) == 5
    for row in evaluation["runs"]:
        for measure in ("xinfAP", "infNDCG", "iP@10"):
            # Every run answers every topic, so the mean is sample_eval's too.
            assert row["mean"][measure] == pytest.approx(want[row["run"]].mean[measure])
            low, high = row["intervals"][measure]
            assert low <= row["mean"][measure] <= high
        assert "Judged@10" not in row["intervals"]
        for topic, values in row["per_topic"].items():
            assert values["xinfAP"] == pytest.approx(want[row["run"]].per_topic[topic]["xinfAP"])


def test_asking_for_infap_on_strata_sampled_at_different_rates_warns(campaign, sampled):
    text = evaluate(campaign.slug, "--pool", str(sampled.version), "--measures", "xinfAP,infAP")
    assert "Warning: infAP assumes one uniform random sample" in text
    assert "(25%, 100%)" in text
    rows = [line for line in text.splitlines() if line[:4] in {f"run{r}" for r in range(5)}]
    assert len(rows) == 5
    assert all(line.count("[") == 1 for line in rows)  # xinfAP's interval, not infAP's


def test_infap_alone_on_a_sampled_pool_gets_the_warning_not_the_note(campaign, sampled):
    text = evaluate(campaign.slug, "--pool", str(sampled.version), "--measures", "AP,infAP")
    assert "Warning: infAP assumes one uniform random sample" in text
    assert "weighting each stratum" not in text
    assert "[" not in text


def test_inferred_measures_need_a_sampled_pool(campaign, sampled):
    with pytest.raises(CommandError, match="xinfAP estimate from a stratified sample"):
        evaluate(campaign.slug, "--measures", "xinfAP,AP")


def test_the_page_shows_the_inferred_measures_their_intervals_and_why(
    client, organiser, campaign, sampled
):
    login(client, organiser)
    page = reverse("qrels:evaluation", args=[campaign.slug])
    response = client.get(page, {"pool": sampled.version})
    assert response.status_code == 200
    html = response.content.decode()
    assert "weighting each stratum by its sampling rate" in html
    assert "95% bootstrap interval over topics" in html
    assert response.context["sort"] == "xinfAP"
    sorted_by = client.get(page, {"pool": sampled.version, "sort": "infNDCG"})
    assert sorted_by.status_code == 200
    assert sorted_by.context["sort"] == "infNDCG"
    # Every judged pair (no pool): trec_eval's measures as before, no inferred note.
    plain = client.get(page)
    assert plain.context["report"].measures[0] == "AP"
    assert "weighting each stratum" not in plain.content.decode()
