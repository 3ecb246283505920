"""The export bundle of a stratified sampled pool carries NIST sample_eval's qrels, whose
figures under sample_eval.pl are the evaluation page's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pooling.models import PoolEntry
from qrels.export import export_bundle
from qrels.runscores import QrelsSource, evaluation_report
from qrels.sampled import parse_sample_qrels
from tests.reports.test_evaluation_pages import runs_from_db
from tests.reports.test_sampled_evaluation import sampled  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

SAMPLE_EVAL = Path(__file__).resolve().parents[3] / "shared" / "reference" / "sample_eval.pl"
PERL = shutil.which("perl")


def test_a_sampled_pools_bundle_has_sample_evals_qrels_and_the_strata(
    campaign,
    sampled,  # noqa: F811
    tmp_path,
):
    export_bundle(campaign=campaign, destination=tmp_path, pool=sampled, unjudged="-1")
    text = (tmp_path / "qrels.sample_eval.txt").read_text()
    qrels = parse_sample_qrels(text.splitlines(), source="qrels.sample_eval.txt")
    entries = PoolEntry.objects.filter(pool=sampled)
    assert sum(map(len, qrels.values())) == entries.count()
    for entry in entries.select_related("topic"):
        pair = qrels[entry.topic.topic_id][entry.doc_id]
        assert pair.stratum == str(entry.stratum + 1)
        if not entry.sampled:
            assert pair.label == -1
    # One sampled pair was left unjudged: -1 too.
    assert sum(p.label == -1 for docs in qrels.values() for p in docs.values()) == (
        entries.filter(sampled=False).count() + 1
    )
    strata = (tmp_path / "sample_eval_strata.tsv").read_text().splitlines()
    assert strata[0].split("\t") == [
        "topic",
        "stratum",
        "first_rank",
        "last_rank",
        "rate",
        "pooled",
        "sampled",
        "judged",
        "inclusion_probability",
    ]
    for line in strata[1:]:
        topic, stratum, first, last, rate, pooled, chosen, _judged, probability = line.split("\t")
        in_stratum = entries.filter(topic__topic_id=topic, stratum=int(stratum) - 1)
        assert int(pooled) == in_stratum.count()
        assert int(chosen) == in_stratum.filter(sampled=True).count()
        assert float(probability) == pytest.approx(int(chosen) / int(pooled))
        assert (first, last, rate) == (("1", "5", "1.0") if stratum == "1" else ("6", "30", "0.25"))
    assert sum(int(line.split("\t")[7]) for line in strata[1:]) == (
        entries.filter(sampled=True).count() - 1
    )
    readme = (tmp_path / "README.md").read_text()
    assert "perl sample_eval.pl -q qrels.sample_eval.txt RUN" in readme
    sums = (tmp_path / "SHA256SUMS").read_text()
    assert "  qrels.sample_eval.txt\n" in sums
    assert "  sample_eval_strata.tsv\n" in sums


def test_a_depth_pools_bundle_has_no_sample_eval_qrels(campaign, sampled, tmp_path):  # noqa: F811
    export_bundle(campaign=campaign, destination=tmp_path)
    assert not (tmp_path / "qrels.sample_eval.txt").exists()
    assert "sample_eval" not in (tmp_path / "README.md").read_text()


@pytest.mark.shared_data
@pytest.mark.skipif(not SAMPLE_EVAL.is_file(), reason=f"{SAMPLE_EVAL} is absent")
@pytest.mark.skipif(PERL is None, reason="perl is not installed")
def test_sample_eval_on_the_bundle_gives_the_evaluation_pages_figures(
    campaign,
    sampled,  # noqa: F811
    tmp_path,
):
    export_bundle(campaign=campaign, destination=tmp_path, pool=sampled, unjudged="-1")
    report = evaluation_report(campaign=campaign, source=QrelsSource(pool=sampled.version))
    measures = report.measures
    names = {"infAP": "xinfAP", "infNDCG": "infNDCG", "iP10": "iP@10"}
    for tag, run in runs_from_db(campaign).items():
        run_file = tmp_path / f"{tag}.run"
        run_file.write_text(
            "".join(
                f"{topic} Q0 {doc} 0 {score!r} {tag}\n"
                for topic, docs in run.items()
                for doc, score in docs.items()
            )
        )
        out = subprocess.run(
            [PERL, str(SAMPLE_EVAL), "-q", str(tmp_path / "qrels.sample_eval.txt"), str(run_file)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        row = report.row(tag)
        for line in out.splitlines():
            name, topic, value = line.split()
            if name not in names:
                continue
            page = (
                row.mean[names[name]]
                if topic == "all"
                else row.per_topic[topic][measures.index(names[name])]
            )
            assert page == pytest.approx(float(value), abs=1e-4), (tag, name, topic)
