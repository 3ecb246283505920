"""TREC RAG 2025: NIST's judgments and UMBRELA-v2's labels on the same 10,284 pairs, imported
the normal way (``create_campaign --labels 0-4 --threshold 2``, ``import_topics`` of the JSONL
topics, ``import_qrels`` once as imported qrels and once ``--kind model``), against scikit-learn
reading the two files directly.

NIST's qrels are imported as kind ``imported``: people's verdicts made elsewhere, which the
agreement report puts on the people's side, so the pair is a person-model comparison (README,
"Model assessors"). The data lives beside the checkout (``../shared/data``); without it the
module is skipped.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse

from campaigns.models import Assessor, Campaign

DATA = Path(settings.BASE_DIR).parent / "shared" / "data" / "trec-rag"
PEOPLE = DATA / "qrels.rag25.test.txt"
MODEL = DATA / "qrels.rag25.test-umbrela2.txt"
TOPICS = DATA / "topics.rag25.test.jsonl"

# The issue's targets (3 decimals), checked below against scikit-learn too.
TARGETS = {
    "observed": 0.441,
    "cohen_kappa": 0.233,
    "weighted_kappa_linear": 0.373,
    "weighted_kappa_quadratic": 0.492,
}
BINARY_KAPPA = 0.431

pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.django_db,
    pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is absent"),
]


def _quiet(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def rag25(db) -> Campaign:
    _quiet(
        "create_campaign",
        "rag25",
        "--title",
        "TREC RAG 2025",
        "--labels",
        "0-4",
        "--threshold",
        "2",
    )
    _quiet("import_topics", "rag25", str(TOPICS))
    _quiet("import_qrels", "rag25", str(PEOPLE), "--assessor", "NIST")
    _quiet("import_qrels", "rag25", str(MODEL), "--assessor", "umbrela2", "--kind", "model")
    return Campaign.objects.get(slug="rag25")


def _read(path: Path) -> dict[tuple[str, str], int]:
    pairs = {}
    for line in path.read_text().splitlines():
        topic, _, doc, label = line.split()
        pairs[(topic, doc)] = int(label)
    return pairs


def oracle() -> dict[str, float]:
    """The figures as scikit-learn computes them from the two files alone."""
    from sklearn.metrics import cohen_kappa_score

    people, model = _read(PEOPLE), _read(MODEL)
    shared = sorted(people.keys() & model.keys())
    a = [people[pair] for pair in shared]
    b = [model[pair] for pair in shared]
    return {
        "n": len(shared),
        "observed": sum(x == y for x, y in zip(a, b, strict=True)) / len(shared),
        "cohen_kappa": cohen_kappa_score(a, b),
        "weighted_kappa_linear": cohen_kappa_score(a, b, weights="linear"),
        "weighted_kappa_quadratic": cohen_kappa_score(a, b, weights="quadratic"),
        "binary": cohen_kappa_score([x >= 2 for x in a], [y >= 2 for y in b]),
        "people_relevant": sum(x >= 2 for x in a) / len(a),
        "model_relevant": sum(y >= 2 for y in b) / len(b),
    }


def test_the_topics_and_both_sources_import(rag25):
    assert rag25.relevance_threshold == 2
    assert [label.value for label in rag25.current_rubric().labels.all()] == [0, 1, 2, 3, 4]
    assert rag25.topics.count() == 105
    kinds = dict(rag25.assessors.values_list("name", "kind"))
    assert kinds == {"NIST": Assessor.Kind.IMPORTED, "umbrela2": Assessor.Kind.MODEL}
    assert rag25.judgments.count() == 2 * 10_284


def test_agreement_json_gives_the_issues_figures(rag25):
    expected = oracle()
    for key, target in TARGETS.items():
        assert round(expected[key], 3) == target, key  # the data gives the targets
    assert round(expected["binary"], 3) == BINARY_KAPPA
    report = json.loads(_quiet("agreement", "rag25", "--json", "--bootstrap", "0"))
    (pair,) = report["pairs"]
    assert (pair["a"], pair["b"], pair["comparison"]) == ("NIST", "umbrela2", "person-model")
    assert pair["n"] == expected["n"] == 10_284
    for key, target in TARGETS.items():
        assert pair[key] == pytest.approx(expected[key], abs=1e-12), key
        assert round(pair[key], 3) == target, key
    # No two people: no headline; the model is measured against the people, not in it.
    assert report["headline"] is None
    (leniency,) = report["leniency"]
    assert leniency["model"] == "umbrela2"
    assert leniency["model_relevant"] == pytest.approx(expected["model_relevant"])
    assert leniency["people_relevant"] == pytest.approx(expected["people_relevant"])
    assert leniency["model_relevant"] > leniency["people_relevant"]  # the model is lenient
    binary = json.loads(_quiet("agreement", "rag25", "--json", "--bootstrap", "0", "--binary"))
    assert round(binary["pairs"][0]["cohen_kappa"], 3) == BINARY_KAPPA
    assert binary["pairs"][0]["cohen_kappa"] == pytest.approx(expected["binary"], abs=1e-12)


def test_the_agreement_page_shows_them(client, organiser, rag25):
    from campaigns.members import add_member
    from tests.reports import login

    add_member(campaign=rag25, user=organiser, role="organiser")
    login(client, organiser)
    url = reverse("qrels:agreement", args=["rag25"])
    html = client.get(url).content.decode()
    assert "People and models" in html
    assert "Between people" not in html
    row = html[html.index("NIST &amp; umbrela2") :]
    row = row[: row.index("</tr>")]
    for target in TARGETS.values():
        assert f">{target:.3f}<" in row
    assert 'id="leniency"' in html
    lenient = html[html.index('id="leniency"') :]
    assert ">0.521<" in lenient
    assert ">0.502<" in lenient
    binary = client.get(url + "?labels=binary").content.decode()
    row = binary[binary.index("NIST &amp; umbrela2") :]
    assert f">{BINARY_KAPPA:.3f}<" in row[: row.index("</tr>")]


def test_default_qrels_are_the_peoples_and_models_come_in_when_asked(rag25, tmp_path):
    _quiet("export_qrels", "rag25", "--out", str(tmp_path / "people"))
    _quiet("export_qrels", "rag25", "--out", str(tmp_path / "both"), "--include-models")
    people = (tmp_path / "people" / "qrels.txt").read_text()
    assert people.count("\n") == 10_284
    assert _read(tmp_path / "people" / "qrels.txt") == _read(
        PEOPLE
    )  # NIST's labels, not one of UMBRELA's
    sources = [line.split("\t")[4] for line in (tmp_path / "people" / "judgments.tsv").open()]
    assert set(sources[1:]) == {"imported"}
    both = [line.split("\t")[4] for line in (tmp_path / "both" / "judgments.tsv").open()]
    assert sorted(set(both[1:])) == ["imported", "model"]
    readme = (tmp_path / "both" / "README.md").read_text()
    assert "| `model` | a model's labels, e.g. an LLM judge's | 1 | 10,284 | 10,284 |" in readme
