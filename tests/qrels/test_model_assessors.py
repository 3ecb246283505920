"""Model assessors (issue 20): an LLM's labels imported as an assessor of kind model, kept apart
from people's verdicts in the qrels, the sidecar and the agreement figures."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from campaigns.models import Assessor, Judgment, JudgmentRevision
from campaigns.textfiles import ParseError
from qrels.agreement_data import agreement_data
from qrels.export import export_bundle
from qrels.imports import import_qrels
from qrels.policies import campaign_qrels, per_assessor_qrels
from qrels.tasks import export_task
from tests.factories import make_topics
from tests.reports import judge, login

pytestmark = pytest.mark.django_db


def _file(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _import(campaign, tmp_path, text: str, assessor: str, *extra: str) -> str:
    out = io.StringIO()
    path = _file(tmp_path, f"{assessor}.qrels", text)
    call_command("import_qrels", campaign.slug, path, "--assessor", assessor, *extra, stdout=out)
    return out.getvalue()


class TestImport:
    def test_kind_model_makes_a_model_assessor_with_its_import_on_record(self, campaign, tmp_path):
        make_topics(campaign, ["1", "2"])
        message = _import(
            campaign, tmp_path, "1 Q0 d1 2\n1 Q0 d2 0\n2 Q0 d1 1\n", "umbrela", "--kind", "model"
        )
        assert "3 new judgments" in message
        model = Assessor.objects.get(campaign=campaign, name="umbrela")
        assert model.kind == Assessor.Kind.MODEL
        assert model.user is None
        assert model.details["imports"][0]["judgments"] == 3
        labels = dict(model.judgments.values_list("doc_id", "label").filter(topic__topic_id="1"))
        assert labels == {"d1": 2, "d2": 0}
        assert set(model.judgments.values_list("iteration", flat=True)) == {"Q0"}

    def test_a_bad_line_imports_nothing_and_names_file_and_line(self, campaign, tmp_path):
        make_topics(campaign, ["1"])
        path = _file(tmp_path, "llm.qrels", "1 Q0 d1 2\n1 Q0 d2 7\n9 Q0 d3 1\n")
        with pytest.raises(ParseError) as caught:
            import_qrels(
                campaign=campaign, source=path, name="llm.qrels", assessor="llm", kind="model"
            )
        text = "\n".join(map(str, caught.value.problems))
        assert "llm.qrels line 2: label 7 is not on the campaign's scale" in text
        assert "llm.qrels line 3: topic '9' is not in the campaign" in text
        assert not Assessor.objects.filter(name="llm").exists()
        assert not Judgment.objects.exists()

    @pytest.mark.parametrize(("first", "then"), [("imported", "model"), ("model", "imported")])
    def test_an_assessors_kind_never_changes(self, campaign, tmp_path, first, then):
        make_topics(campaign, ["1"])
        _import(campaign, tmp_path, "1 0 d1 1\n", "src", "--kind", first)
        before = list(JudgmentRevision.objects.values_list("pk", "label"))
        with pytest.raises(CommandError) as caught:
            _import(campaign, tmp_path, "1 0 d1 2\n", "src", "--kind", then)
        assert f"'src' is an assessor of kind {first} in this campaign, not {then}" in str(
            caught.value
        )
        assert Assessor.objects.get(name="src").kind == first
        assert list(JudgmentRevision.objects.values_list("pk", "label")) == before

    def test_a_persons_name_is_refused(self, campaign, tmp_path, assessor_a):
        make_topics(campaign, ["1"])
        Assessor.objects.for_user(campaign, assessor_a)
        with pytest.raises(CommandError, match="'alice' is a person in this campaign"):
            _import(campaign, tmp_path, "1 0 d1 1\n", "alice", "--kind", "model")
        assert not Judgment.objects.exists()

    def test_the_kind_is_one_a_file_can_be(self, campaign, tmp_path):
        make_topics(campaign, ["1"])
        with pytest.raises(CommandError, match="invalid choice: 'person'"):
            _import(campaign, tmp_path, "1 0 d1 1\n", "x", "--kind", "person")


@pytest.fixture
def mixed(campaign):
    """Two people, an imported source, two models and adjudicated labels on topic 1."""
    make_topics(campaign, ["1"])
    docs = [f"d{i}" for i in range(8)]
    people_a = [0, 1, 2, 0, 1, 2, 0, 1]
    people_b = [0, 1, 2, 1, 1, 2, 0, 0]
    nist = [0, 1, 1, 0, 1, 2, 0, 1]
    model_x = [1, 2, 2, 1, 2, 2, 0, 2]  # lenient: relevant (>= 1) on 7 of 8
    model_y = [0, 2, 2, 1, 1, 2, 1, 2]
    adjudicated = [2] * 8
    made = {}
    for name, labels, kind in (
        ("ann", people_a, Assessor.Kind.PERSON),
        ("ben", people_b, Assessor.Kind.PERSON),
        ("nist", nist, Assessor.Kind.IMPORTED),
        ("gpt", model_x, Assessor.Kind.MODEL),
        ("llama", model_y, Assessor.Kind.MODEL),
        ("final", adjudicated, Assessor.Kind.ADJUDICATED),
    ):
        verdicts = [("1", doc, label) for doc, label in zip(docs, labels, strict=True)]
        made[name] = judge(campaign, name, verdicts, kind=kind)
    return made


class TestQrels:
    def test_default_qrels_hold_no_model_or_adjudicated_label(self, campaign, mixed):
        qrels = campaign_qrels(campaign=campaign, policy="max")
        # max over ann, ben and nist: never the models' 2 on d0, d3, d7, nor adjudicated 2s.
        assert qrels["1"] == {
            "d0": 0, "d1": 1, "d2": 2, "d3": 1, "d4": 1, "d5": 2, "d6": 0, "d7": 1
        }  # fmt: skip
        people = campaign_qrels(campaign=campaign, policy="max", include_imported=False)
        assert people["1"]["d3"] == 1
        with_models = campaign_qrels(campaign=campaign, policy="max", include_models=True)
        assert with_models["1"] == {
            "d0": 1, "d1": 2, "d2": 2, "d3": 1, "d4": 2, "d5": 2, "d6": 1, "d7": 2
        }  # fmt: skip

    def test_per_assessor_files_have_models_only_when_asked(self, campaign, mixed):
        assert set(per_assessor_qrels(campaign=campaign)) == {"ann", "ben", "nist"}
        asked = per_assessor_qrels(campaign=campaign, include_models=True)
        assert set(asked) == {"ann", "ben", "nist", "gpt", "llama"}

    def test_naming_a_model_without_including_models_is_refused(self, campaign, mixed):
        with pytest.raises(ValueError, match=r"'gpt' \(model\) left out by these options"):
            campaign_qrels(campaign=campaign, assessors=["ann", "gpt"])
        only = campaign_qrels(
            campaign=campaign, assessors=["gpt"], include_models=True, policy="max"
        )
        assert only["1"]["d0"] == 1

    def test_the_bundle_counts_each_source_and_the_sidecar_names_it(
        self, campaign, mixed, tmp_path
    ):
        default = export_bundle(campaign=campaign, destination=tmp_path / "a", policy="max")
        sources = default.manifest["sources"]
        # Adjudicated labels are in the sidecar, marked by their kind (only the adjudicated
        # policy puts them in qrels.txt); models' only when asked for.
        assert sources["counted"] == ["person", "imported", "adjudicated"]
        assert sources["left_out"] == ["model"]
        assert sources["judgments"] == {
            "adjudicated": {"assessors": 1, "judgments": 8, "verdicts": 8},
            "imported": {"assessors": 1, "judgments": 8, "verdicts": 8},
            "person": {"assessors": 2, "judgments": 16, "verdicts": 16},
        }
        assert "| `person` | people judging in Pooljudge | 2 | 16 | 16 |" in default.readme
        assert "Left out of the qrels and the sidecar: `model`" in default.readme
        lines = (tmp_path / "a" / "judgments.jsonl").read_text().splitlines()
        assert {json.loads(line)["source"] for line in lines} == {
            "person",
            "imported",
            "adjudicated",
        }
        asked = export_bundle(
            campaign=campaign, destination=tmp_path / "b", policy="max", include_models=True
        )
        lines = (tmp_path / "b" / "judgments.jsonl").read_text().splitlines()
        by_source = {}
        for line in lines:
            row = json.loads(line)
            by_source.setdefault(row["source"], set()).add(row["assessor"])
        # People by pseudonym; a model, like an imported source, by its own name.
        assert by_source["model"] == {"gpt", "llama"}
        assert by_source["imported"] == {"nist"}
        assert not by_source["person"] & {"ann", "ben"}
        assert asked.manifest["sources"]["left_out"] == []
        assert asked.manifest["sources"]["qrels_lines_with_models"] == 8
        assert "`model` | a model's labels, e.g. an LLM judge's | 2 | 16 | 16 |" in asked.readme
        assert "0 lines of `qrels.txt` rest on models' labels alone, 8 more" in asked.readme

    def test_export_qrels_include_models(self, campaign, mixed, tmp_path):
        for out, extra in (("people", []), ("models", ["--include-models"])):
            call_command(
                "export_qrels",
                campaign.slug,
                "--out",
                str(tmp_path / out),
                "--policy",
                "max",
                *extra,
                stdout=io.StringIO(),
                stderr=io.StringIO(),
            )
        people = (tmp_path / "people" / "qrels.txt").read_text()
        models = (tmp_path / "models" / "qrels.txt").read_text()
        assert "1 0 d0 0\n" in people
        assert "1 0 d0 1\n" in models

    def test_the_export_page_has_the_option(self, client, campaign, organiser, mixed):
        login(client, organiser)
        url = reverse("qrels:export", args=[campaign.slug])
        assert 'name="include_models"' in client.get(url).content.decode()
        client.post(url, {"unjudged": "omit", "include_imported": "on", "include_models": "on"})
        export = campaign.exports.get()
        assert export.options["include_models"] is True
        export_task.apply(args=[export.job.pk])  # in this process, whatever the Celery mode
        export.refresh_from_db()
        assert export.is_ready, export.job.error
        assert "Models' labels were asked for" in export.readme


class TestAgreement:
    def test_comparisons_are_kept_apart_and_the_headline_is_peoples(self, campaign, mixed):
        from sklearn.metrics import cohen_kappa_score

        data = agreement_data(campaign=campaign)
        # Adjudicated labels are no assessor's verdict: not compared at all.
        assert data.assessors == ("ann", "ben", "nist", "gpt", "llama")
        groups = {key: [(p.a, p.b) for p in pairs] for key, pairs in data.by_comparison().items()}
        assert groups == {
            "person-person": [("ann", "ben"), ("ann", "nist"), ("ben", "nist")],
            "person-model": [
                ("ann", "gpt"), ("ann", "llama"), ("ben", "gpt"), ("ben", "llama"),
                ("nist", "gpt"), ("nist", "llama"),
            ],
            "model-model": [("gpt", "llama")],
        }  # fmt: skip
        people = [p.cohen_kappa for p in data.by_comparison()["person-person"]]
        assert data.headline.kappa == pytest.approx(sum(people) / 3)
        assert data.headline.pairs == 3
        # The models moved nothing: the people's own report gives the same headline.
        alone = agreement_data(campaign=campaign, assessors=["ann", "ben", "nist"])
        assert alone.headline == data.headline
        ann = [0, 1, 2, 0, 1, 2, 0, 1]
        ben = [0, 1, 2, 1, 1, 2, 0, 0]
        (pair,) = [p for p in data.pairs if (p.a, p.b) == ("ann", "ben")]
        assert pair.cohen_kappa == pytest.approx(cohen_kappa_score(ann, ben))
        # Group statistics are people's: three people, the models outside.
        assert data.group.assessors == ["ann", "ben", "nist"]

    def test_a_models_leniency_is_against_the_people_on_the_same_pairs(self, campaign, mixed):
        data = agreement_data(campaign=campaign)
        lenient = {entry.model: entry for entry in data.leniency}
        assert list(lenient) == ["gpt", "llama"]
        gpt = lenient["gpt"]
        # 3 people x 8 pairs; gpt calls 7 of 8 relevant (label >= 1); each person 5 of 8.
        assert gpt.n == 24
        assert gpt.model_relevant == pytest.approx(21 / 24)
        assert gpt.people_relevant == pytest.approx(15 / 24)
        assert gpt.difference == pytest.approx(6 / 24)
        report = data.to_dict()
        assert report["leniency"][0]["model"] == "gpt"
        assert report["headline"]["comparison"] == "person-person"
        assert {p["comparison"] for p in report["pairs"]} == {
            "person-person",
            "person-model",
            "model-model",
        }
        assert data.to_csv().splitlines()[0].endswith(",comparison")

    def test_the_page_and_the_command_show_the_three_comparisons(
        self, client, campaign, organiser, mixed
    ):
        login(client, organiser)
        html = client.get(reverse("qrels:agreement", args=[campaign.slug])).content.decode()
        for title in ("Between people", "People and models", "Between models"):
            assert title in html
        assert "How lenient each model is" in html
        assert "people's kappa" in html
        headline = agreement_data(campaign=campaign).headline.kappa
        assert f"{headline:.3f}" in html[: html.index("assessors chosen")]
        out = io.StringIO()
        call_command("agreement", campaign.slug, "--bootstrap", "0", stdout=out)
        text = out.getvalue()
        assert f"Cohen's kappa {headline:.3f}, the mean over 3 pairs of people" in text
        assert "People and models (person-model):" in text
        assert "Leniency of gpt: calls 0.875 of its 24 pairs with people relevant" in text

    def test_a_person_and_a_model_open_as_a_pair_but_adjudicated_labels_do_not(
        self, client, campaign, organiser, mixed
    ):
        login(client, organiser)
        ann, gpt, final = (mixed[name].pk for name in ("ann", "gpt", "final"))
        for view in ("qrels:agreement_pair", "qrels:agreement_pairs"):
            assert client.get(reverse(view, args=[campaign.slug, ann, gpt])).status_code == 200
            assert client.get(reverse(view, args=[campaign.slug, ann, final])).status_code == 404

    def test_without_two_people_there_is_no_headline(self, campaign, mixed):
        data = agreement_data(campaign=campaign, assessors=["ann", "gpt", "llama"])
        assert data.headline is None
        assert data.group is None  # one person: no group statistics with the models


def test_the_disagreements_command_says_which_side_a_label_came_from(campaign, mixed):
    out = io.StringIO()
    call_command("disagreements", campaign.slug, "--assessors", "nist,gpt", "--json", stdout=out)
    report = json.loads(out.getvalue())
    pairs = report["pairs"]
    assert pairs
    sources = {(pair["a"]["source"], pair["b"]["source"]) for pair in pairs}
    assert sources == {("imported", "model")}
