"""Round trips of real qrels: import, export, and the same (topic, docid, label) lines come back.

The data lives beside the checkout (``../shared/data``); without it the module is skipped. The
TREC-COVID round-1 qrels have a ``0.5``/``1`` iteration column and double spaces; the Cranfield
judgments (variant A, converted to four fields) carry 225 ``-1`` labels and the codes 1-4, where
a lower code means more relevant: the export only has to give the integers back.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections import Counter
from pathlib import Path

import ir_measures
import pytest
import pytrec_eval
from django.conf import settings
from django.core.management import call_command

from campaigns.models import Campaign, Judgment, LabelSpec, Topic
from qrels.agreement_data import agreement_data
from qrels.export import export_bundle
from qrels.imports import import_qrels

DATA = Path(settings.BASE_DIR).parent / "shared" / "data"
COVID = DATA / "trec-covid-round1" / "qrels" / "qrels-rnd1.txt"
CRANFIELD = DATA / "cranfield" / "derived" / "cranqrel.variantA.trec-format.txt"

pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.django_db,
    pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is absent"),
]


def triples(path: Path) -> list[tuple[str, str, int]]:
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            topic, _iteration, doc, label = line.split()
            out.append((topic, doc, int(label)))
    return out


def exported_triples(directory: Path) -> list[tuple[str, str, int]]:
    return triples(directory / "qrels.txt")


def test_trec_covid_round_one_survives_import_and_export(campaign, tmp_path):
    original = triples(COVID)
    assert len(original) == 8691
    topics = sorted({topic for topic, _, _ in original}, key=int)
    Topic.objects.bulk_create(
        Topic(campaign=campaign, topic_id=topic, position=i) for i, topic in enumerate(topics)
    )
    import_qrels(campaign=campaign, source=str(COVID), name=COVID.name, assessor="NIST-round1")
    assert Judgment.objects.count() == 8691

    result = export_bundle(campaign=campaign, destination=tmp_path / "bundle")
    exported = exported_triples(tmp_path / "bundle")
    assert set(exported) == set(original)
    assert len(exported) == len(original)
    # The stable order: topic, then document id, code-point order ("10" before "2").
    assert [(t, d) for t, d, _ in exported] == sorted((t, d) for t, d, _ in original)
    with (tmp_path / "bundle" / "qrels.txt").open() as handle:
        assert pytrec_eval.parse_qrel(handle) == pytrec_eval.parse_qrel(COVID.open())
    via_ir_measures = {
        (q.query_id, q.doc_id, q.relevance)
        for q in ir_measures.read_trec_qrels(str(tmp_path / "bundle" / "qrels.txt"))
    }
    assert via_ir_measures == set(original)

    manifest = json.loads((tmp_path / "bundle" / "campaign.json").read_text())
    assert manifest["totals"]["judgments"] == 8691
    assert manifest["totals"]["verdicts"] == {"0": 6339, "1": 1115, "2": 1237}
    assert result.files[0].labels == {"0": 6339, "1": 1115, "2": 1237}
    (source,) = manifest["assessors"]
    assert source["assessor"] == "NIST-round1"
    assert source["imports"][0]["sha256"] == hashlib.sha256(COVID.read_bytes()).hexdigest()
    sidecar = (tmp_path / "bundle" / "judgments.tsv").read_text().splitlines()
    assert len(sidecar) == 1 + 8691
    # The judging round of every pair (the iteration column) travels in the sidecar.
    column = sidecar[0].split("\t").index("iteration")
    rounds = {
        (row.split("\t")[0], row.split("\t")[1]): row.split("\t")[column] for row in sidecar[1:]
    }
    given = {
        (topic, doc): iteration
        for topic, iteration, doc, _label in (
            line.split() for line in COVID.read_text().splitlines()
        )
    }
    assert rounds == given
    assert Counter(rounds.values()) == {"0.5": 2627, "1": 6064}


@pytest.fixture
def cranfield(db) -> Campaign:
    campaign = Campaign.objects.create(slug="cranfield", title="Cranfield 1400")
    codes = [
        LabelSpec(1, "Complete answer", key="1"),
        LabelSpec(2, "High relevance", key="2"),
        LabelSpec(3, "Useful", key="3"),
        LabelSpec(4, "Minimum interest", key="4"),
    ]
    campaign.save_rubric(codes, note="cranqrel.readme codes (lower = more relevant)", threshold=1)
    Topic.objects.bulk_create(
        Topic(campaign=campaign, topic_id=str(n), position=n) for n in range(1, 226)
    )
    return campaign


def test_cranfield_with_its_minus_ones_survives_import_and_export(cranfield, tmp_path):
    original = triples(CRANFIELD)
    assert len(original) == 1837
    assert sum(label == -1 for _, _, label in original) == 225
    import_qrels(
        campaign=cranfield, source=str(CRANFIELD), name=CRANFIELD.name, assessor="cranqrel"
    )

    buffer = io.BytesIO()
    export_bundle(campaign=cranfield, destination=buffer, zip=True, unjudged="-1", name="cran")
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as bundle:
        text = bundle.read("cran/qrels.txt").decode()
        manifest = json.loads(bundle.read("cran/campaign.json"))
    exported = [
        (t, d, int(label)) for t, _, d, label in (line.split() for line in text.splitlines())
    ]
    assert set(exported) == set(original)
    assert len(exported) == len(original)
    assert pytrec_eval.parse_qrel(io.StringIO(text)) == pytrec_eval.parse_qrel(CRANFIELD.open())
    assert manifest["totals"]["verdicts"] == {"-1": 225, "1": 128, "2": 387, "3": 734, "4": 363}

    # Without asking for anything: 1,837 lines in, the same 1,837 out, the 225 -1 included.
    plain = tmp_path / "plain"
    export_bundle(campaign=cranfield, destination=plain)
    assert sorted(exported_triples(plain)) == sorted(original)
    assert "225 lines with a negative label" in (plain / "README.md").read_text()


def test_two_cranfield_copies_that_differ_in_their_minus_ones_show_it_in_agreement(
    cranfield, tmp_path
):
    """Variant B writes 1 where variant A writes -1 (225 pairs): agreement must not say 1.000
    over 1,612 pairs and nothing else."""
    variant_b = tmp_path / "cranqrel.variantB.txt"
    raw = (DATA / "cranfield" / "variant-B_xyxxyyxy" / "cranqrel").read_text()
    variant_b.write_text(
        "".join(f"{q} 0 {d} {code}\n" for q, d, code in (line.split() for line in raw.splitlines()))
    )
    import_qrels(campaign=cranfield, source=str(CRANFIELD), name="A", assessor="A")
    import_qrels(campaign=cranfield, source=str(variant_b), name="B", assessor="B")
    data = agreement_data(campaign=cranfield, assessors=["A", "B"])
    (pair,) = data.pairs
    assert (pair.n, pair.cohen_kappa) == (1612, 1.0)
    assert (pair.negative, pair.negative_cells) == (225, [(-1, 1, 225)])
    assert round(pair.identical, 4) == round(1612 / 1837, 4)
    out = io.StringIO()
    call_command("agreement", cranfield.slug, "--assessors", "A,B", "--bootstrap", "0", stdout=out)
    assert "225 more pairs both labelled have a negative label (-1 against 1: 225)" in (
        out.getvalue()
    )
