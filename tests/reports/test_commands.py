"""``manage.py agreement`` and ``manage.py evaluate``: seed 000's numbers as the commands print
them, scores equal to pytrec_eval's, Kendall's tau between two qrels files, and bad input as a
CommandError with a clear message."""

from __future__ import annotations

import io
import json

import pytest
import pytrec_eval
from django.core.management import call_command
from django.core.management.base import CommandError

from qrels.policies import campaign_qrels
from tests.factories import make_run, make_topics, small_campaign
from tests.reports import (
    DIFFERENT_RATES,
    RARE,
    TEXTBOOK,
    binary_campaign,
    judge,
    twelve_runs,
    two_judges,
    write_qrels,
)
from tests.reports.test_evaluation_pages import TREC_KEYS, runs_from_db

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


class TestAgreement:
    @pytest.mark.parametrize(
        ("table", "cohen", "pooled", "observed"),
        [
            (TEXTBOOK, "0.776", "0.776", "0.925"),
            (DIFFERENT_RATES, "0.216", "0.167", "0.850"),
            (RARE, "0.360", "0.360", "0.925"),
        ],
    )
    def test_seed_000s_examples(self, table, cohen, pooled, observed):
        campaign = binary_campaign()
        two_judges(campaign, table)
        text = run("agreement", campaign.slug)
        line = next(line for line in text.splitlines() if line.startswith("judge1"))
        assert line.split()[:5] == ["judge1", "judge2", "400", observed, cohen]
        assert line.split()[-2:] == [pooled, line.split()[-1]]

        data = json.loads(run("agreement", campaign.slug, "--json", "--bootstrap", "200"))
        (pair,) = data["pairs"]
        assert f"{pair['cohen_kappa']:.3f}" == cohen
        assert f"{pair['pooled_kappa']:.3f}" == pooled
        assert sum(map(sum, pair["confusion"])) == 400
        assert pair["ci95"]["cohen_kappa"][0] < pair["cohen_kappa"] < pair["ci95"]["cohen_kappa"][1]
        assert set(pair["per_topic"]) == {"1", "2", "3", "4"}
        assert data["group"] is None

    def test_graded_binary_and_group(self, campaign):
        make_topics(campaign, ["7"])
        labels = [[0, 1, 2, 2, 1, 0], [0, 2, 1, 2, 1, 0], [0, 2, 2, 2, 0, 0]]
        for name, given in zip(("x", "y", "z"), labels, strict=True):
            judge(campaign, name, [("7", f"d{i}", given[i % 6]) for i in range(60)])
        text = run("agreement", campaign.slug, "--bootstrap", "0")
        assert "linear" in text
        assert "quadratic" in text
        assert "Fleiss' kappa" in text
        assert "Krippendorff's alpha nominal" in text
        binary = run("agreement", campaign.slug, "--binary", "--assessors", "x,y")
        assert "linear" not in binary
        line = next(line for line in binary.splitlines() if line.startswith("x "))
        assert line.split()[4] == "1.000"

    def test_bad_input_is_a_command_error(self, campaign):
        two_judges(campaign, TEXTBOOK)
        with pytest.raises(CommandError, match="No campaign with slug 'nope'"):
            run("agreement", "nope")
        with pytest.raises(CommandError, match="No judgments by 'carol'"):
            run("agreement", campaign.slug, "--assessors", "judge1,carol")
        with pytest.raises(CommandError, match="at least two"):
            run("agreement", campaign.slug, "--assessors", "judge1")

    def test_without_overlap_it_says_so(self, campaign):
        make_topics(campaign, ["1"])
        judge(campaign, "a", [("1", "x", 1)])
        judge(campaign, "b", [("1", "y", 1)])
        assert "No two of them judged the same" in run("agreement", campaign.slug)


class TestEvaluate:
    @pytest.fixture
    def judged(self, campaign):
        small_campaign(campaign, docs=6)
        judge(campaign, "nist", [("301", "d01", 2), ("301", "d04", 1), ("302", "d05", 0)])
        judge(campaign, "ann", [("302", "d02", 1), ("302", "d05", 2)], kind="person")
        return campaign

    def test_scores_equal_pytrec_eval(self, judged):
        data = json.loads(run("evaluate", judged.slug, "--json"))
        report = data["evaluation"]
        qrels = campaign_qrels(campaign=judged, unjudged="-1")
        evaluator = pytrec_eval.RelevanceEvaluator(
            qrels, {"map", "ndcg_cut.10", "P.10", "Rprec", "bpref", "infAP"}, 1
        )
        for tag, stored in runs_from_db(judged).items():
            direct = evaluator.evaluate(stored)
            row = next(r for r in report["runs"] if r["run"] == tag)
            for measure, key in TREC_KEYS.items():
                mean = sum(v[key] for v in direct.values()) / len(qrels)
                assert round(row["mean"][measure], 4) == round(mean, 4)
                for topic, values in row["per_topic"].items():
                    assert round(values[measure], 4) == round(direct[topic][key], 4)
        assert data["comparison"] is None

        text = run("evaluate", judged.slug, "--measures", "P@10,AP")
        assert "Qrels: campaign qrels, policy majority, imported qrels included" in text
        assert "Pool v1: depth 6, from 2 runs" in text
        header = next(line for line in text.splitlines() if line.startswith("run "))
        assert header.split() == ["run", "topics", "P@10", "AP", "unjudged@10"]
        for row in report["runs"]:
            assert f"{row['mean']['AP']:.4f}" in text

    def test_a_qrels_file_and_kendalls_tau_against_another(self, tmp_path):
        campaign = binary_campaign("twelve")
        twelve_runs(campaign)
        docs = ["r", "u01", *(f"u{i:02d}" for i in (0, *range(2, 12)))]
        first = write_qrels(tmp_path / "first.txt", [("1", d, int(d == "r")) for d in docs])
        second = write_qrels(
            tmp_path / "second.txt", [("1", d, int(d in ("r", "u01"))) for d in docs]
        )
        text = run("evaluate", campaign.slug, "--qrels", first, "--compare-with", second)
        assert "Kendall's tau 0.9697: 1 of 66 pairs of runs swapped." in text
        assert "s00 above s01 under the first, below under the second" in text
        data = json.loads(
            run("evaluate", campaign.slug, "--qrels", first, "--compare-with", second, "--json")
        )
        assert data["comparison"]["tau"] == pytest.approx(64 / 66)
        assert data["comparison"]["swapped_pairs"] == [["s00", "s01"]]
        aps = {r["run"]: r["mean"]["AP"] for r in data["evaluation"]["runs"]}
        assert aps["s00"] == pytest.approx(1 / 2)
        assert aps["s11"] == pytest.approx(1 / 13)

    def test_bad_input_is_a_command_error(self, judged, tmp_path):
        slug = judged.slug
        with pytest.raises(CommandError, match="unknown measure 'MAPP'"):
            run("evaluate", slug, "--measures", "AP,MAPP")
        with pytest.raises(CommandError, match="No qrels file at"):
            run("evaluate", slug, "--qrels", str(tmp_path / "missing.txt"))
        bad = tmp_path / "bad.txt"
        bad.write_text("301 0 d01 1\n301 d02 1\n302 0 d03 yes\n")
        with pytest.raises(CommandError, match=r"2 problems[\s\S]*line 2[\s\S]*line 3"):
            run("evaluate", slug, "--qrels", str(bad))
        with pytest.raises(CommandError, match="no pool v9"):
            run("evaluate", slug, "--pool", "9")
        with pytest.raises(CommandError, match="invalid choice"):
            run("evaluate", slug, "--policy", "loudest")
        with pytest.raises(CommandError, match="apply to the campaign's judgments"):
            run("evaluate", slug, "--qrels", str(bad), "--policy", "max")
        with pytest.raises(CommandError, match="No campaign with slug"):
            run("evaluate", "nope")

    def test_nothing_to_score(self, campaign):
        with pytest.raises(CommandError, match="no runs"):
            run("evaluate", campaign.slug)
        make_topics(campaign, ["1"])
        make_run(campaign, "only", {"1": [("a", 1.0)]})
        with pytest.raises(CommandError, match="hold no judgment yet"):
            run("evaluate", campaign.slug)
