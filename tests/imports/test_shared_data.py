"""The imports on real data: all 143 TREC-COVID round 1 runs and the round 1 qrels, and the
Cranfield documents, queries and derived qrels.

Runs only where ../shared/data exists beside the project (it is never copied into it).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings

from campaigns.imports import import_documents, import_topics
from campaigns.models import Assessor, Campaign, Judgment, LabelSpec
from pooling.imports import import_runs
from pooling.models import Run, RunTopic
from qrels.imports import import_qrels
from tests.factories import make_topics

DATA = Path(settings.BASE_DIR).parent / "shared" / "data"
if not DATA.is_dir():
    pytest.skip(f"{DATA} is absent", allow_module_level=True)

pytestmark = [pytest.mark.shared_data, pytest.mark.django_db]

COVID = DATA / "trec-covid-round1"
CRANFIELD = DATA / "cranfield"
VARIANTS = ["variant-A_noramtboraas", "variant-B_xyxxyyxy"]


@pytest.fixture
def covid(campaign) -> Campaign:
    make_topics(campaign, [str(n) for n in range(1, 31)])
    return campaign


@pytest.fixture
def cranfield(db) -> Campaign:
    """Cranfield's relevance codes as a rubric: 1 (complete answer) to 4 (minimum interest),
    lower is more relevant; -1 needs no label (negative labels are always accepted)."""
    campaign = Campaign.objects.create(slug="cranfield", title="Cranfield 1400")
    names = ["complete answer", "high relevance", "useful", "minimum interest", "no interest"]
    campaign.save_rubric(
        [LabelSpec(code, name, key=str(code)) for code, name in enumerate(names, 1)]
    )
    return campaign


def test_all_143_trec_covid_round_1_runs_import(covid):
    paths = sorted((COVID / "runs").iterdir())
    assert len(paths) == 143
    summary = import_runs(campaign=covid, sources=[(path.name, path) for path in paths])
    # Every run answers all 30 topics.
    assert summary.counts == {"runs": 143, "lines": 3_509_493, "run topics": 143 * 30}
    assert Run.objects.count() == 143
    assert sum(Run.objects.values_list("line_count", flat=True)) == 3_509_493
    rows = RunTopic.objects.filter(run__campaign=covid)
    assert rows.count() == summary.counts["run topics"]
    assert sum(rows.values_list("length", flat=True)) == 3_509_493
    assert set(rows.values_list("topic__topic_id", flat=True)) == {str(n) for n in range(1, 31)}
    # Stored in trec_eval order: score descending, ties by document id descending.
    for row in rows.filter(run__tag__in=["BBGhelani1", "10x20.prf.unipd.it"]).iterator():
        pairs = list(zip(row.score_list(), row.doc_list(), strict=True))
        assert pairs == sorted(pairs, reverse=True)


def test_the_trec_covid_round_1_qrels_import_as_an_assessor(covid):
    path = COVID / "qrels" / "qrels-rnd1.txt"
    summary = import_qrels(campaign=covid, source=path, name=path.name, assessor="NIST-round1")
    assert summary.counts == {"new judgments": 8_691, "revised": 0, "unchanged": 0}
    assert summary.warnings == []
    source = Assessor.objects.get(campaign=covid, name="NIST-round1")
    assert source.kind == Assessor.Kind.IMPORTED
    labels = Counter(Judgment.objects.filter(assessor=source).values_list("label", flat=True))
    assert labels == {0: 6339, 1: 1115, 2: 1237}


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_cranfield_documents_and_queries_import(cranfield, variant):
    documents = CRANFIELD / variant / "cran.all.1400"
    summary = import_documents(campaign=cranfield, source=documents, name=documents.name)
    assert summary.counts == {"new documents": 1400, "updated": 0, "unchanged": 0}
    assert sorted(cranfield.documents.values_list("doc_id", flat=True), key=int) == [
        str(n) for n in range(1, 1401)
    ]
    # Variant B ends with an empty ".I": skipped, and said so with its line.
    trailing = variant.startswith("variant-B")
    assert [note.split(":")[0] for note in summary.notes] == (
        ["Skipped 1 empty record (a .I with nothing after it)"] if trailing else []
    )
    again = import_documents(campaign=cranfield, source=documents, name=documents.name)
    assert again.counts == {"new documents": 0, "updated": 0, "unchanged": 1400}
    queries = CRANFIELD / variant / "cran.qry"
    summary = import_topics(
        campaign=cranfield, source=queries, name=queries.name, positional_ids=True
    )
    assert summary.counts == {"new topics": 225, "updated": 0, "unchanged": 0}
    assert len(summary.notes) == (1 if trailing else 0)
    assert list(cranfield.topics.values_list("topic_id", flat=True)) == [
        str(n) for n in range(1, 226)
    ]
    # Position 3 is the query whose .I id is 004 (cran.qry skips 003), and keeps that id.
    third = cranfield.topics.get(topic_id="3")
    assert third.title.startswith("what problems of heat conduction in composite slabs")
    assert third.original_id == "004"


def test_the_derived_cranfield_qrels_import_with_their_negative_labels(cranfield):
    queries = CRANFIELD / VARIANTS[0] / "cran.qry"
    import_topics(campaign=cranfield, source=queries, name=queries.name, positional_ids=True)
    path = CRANFIELD / "derived" / "cranqrel.variantA.trec-format.txt"
    summary = import_qrels(campaign=cranfield, source=path, name=path.name, assessor="Cranfield")
    assert summary.counts == {"new judgments": 1837, "revised": 0, "unchanged": 0}
    labels = Counter(Judgment.objects.filter(campaign=cranfield).values_list("label", flat=True))
    assert labels == {-1: 225, 1: 128, 2: 387, 3: 734, 4: 363}
    first = Judgment.objects.get(campaign=cranfield, topic__topic_id="1", doc_id="184")
    assert first.label == 2
