"""``manage.py evaluate`` on real TREC-COVID round-1 runs and qrels, imported the normal way,
against pytrec_eval reading the same files directly.

The data lives beside the checkout (``../shared/data``); without it the module is skipped. The
files carry the traps of real submissions: tabs, 0-based and reversed rank columns, tied scores,
and a ``0.5`` iteration column in the qrels.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import pytrec_eval
from django.conf import settings
from django.core.management import call_command

from campaigns.models import Topic
from pooling.imports import import_runs
from qrels.imports import import_qrels

DATA = Path(settings.BASE_DIR).parent / "shared" / "data" / "trec-covid-round1"
QRELS = DATA / "qrels" / "qrels-rnd1.txt"
KEYS = {
    "AP": "map",
    "nDCG@10": "ndcg_cut_10",
    "P@10": "P_10",
    "Rprec": "Rprec",
    "bpref": "bpref",
    "infAP": "infAP",
}

pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.django_db,
    pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is absent"),
]


@pytest.fixture
def covid(campaign):
    """Eleven runs spread over the alphabet and the official round-1 qrels, imported."""
    Topic.objects.bulk_create(
        Topic(campaign=campaign, topic_id=str(n), position=n) for n in range(1, 31)
    )
    paths = sorted((DATA / "runs").iterdir())[::14]
    import_runs(campaign=campaign, sources=[(path.name, str(path)) for path in paths])
    import_qrels(campaign=campaign, source=str(QRELS), name=QRELS.name, assessor="NIST-round1")
    return campaign, paths


def evaluate(*args) -> dict:
    out = io.StringIO()
    call_command("evaluate", *args, "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())["evaluation"]


def direct_scores(paths: list[Path], threshold: int) -> dict[str, dict]:
    with QRELS.open() as handle:
        qrels = pytrec_eval.parse_qrel(handle)
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"map", "ndcg_cut.10", "P.10", "Rprec", "bpref", "infAP"}, threshold
    )
    scores = {}
    for path in paths:
        with path.open() as handle:
            run = pytrec_eval.parse_run(handle)
        tag = next(iter(path.read_text().split("\n", 1)[0].split()[5:]), path.name)
        scores[tag] = evaluator.evaluate(run)
    return scores, len(qrels)


def assert_same(report: dict, direct: dict, topics: int) -> None:
    assert {row["run"] for row in report["runs"]} == set(direct)
    for row in report["runs"]:
        expected = direct[row["run"]]
        assert set(row["per_topic"]) == set(expected)
        for measure, key in KEYS.items():
            for topic, values in row["per_topic"].items():
                assert round(values[measure], 4) == round(expected[topic][key], 4)
            mean = sum(values[key] for values in expected.values()) / topics
            assert round(row["mean"][measure], 4) == round(mean, 4), (row["run"], measure)


@pytest.mark.parametrize("from_file", [False, True])
def test_evaluate_matches_pytrec_eval_on_the_files(covid, from_file):
    campaign, paths = covid
    direct, topics = direct_scores(paths, campaign.relevance_threshold)
    args = [campaign.slug] + (["--qrels", str(QRELS)] if from_file else [])
    report = evaluate(*args)
    assert report["qrels"]["verdicts"] == 8691
    assert report["qrels"]["topics"] == topics == 30
    assert_same(report, direct, topics)


def test_the_evaluation_page_shows_the_same_scores(client, organiser, covid):
    from django.urls import reverse

    from tests.reports import login

    campaign, paths = covid
    direct, topics = direct_scores(paths, campaign.relevance_threshold)
    login(client, organiser)
    response = client.get(reverse("qrels:evaluation", args=[campaign.slug]) + "?format=json")
    assert_same(json.loads(response.content), direct, topics)
