"""The export bundle (qrels.export) and the export_qrels command."""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import ir_measures
import pytest
import pytrec_eval
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

import pooljudge
from assess.models import Assignment
from campaigns.models import Assessor, Judgment, LabelSpec, Topic
from pooling.models import Pool, PoolEntry, Run
from qrels.export import (
    POST_REVEAL_RULE,
    SIDECAR_COLUMNS,
    ExportError,
    decode_cell,
    export_bundle,
)
from qrels.formats import qrels_sort_key
from qrels.imports import import_qrels
from qrels.policies import PolicyConflict

pytestmark = pytest.mark.django_db

T0 = datetime(2025, 3, 1, 9, 0, 0, 250_000, tzinfo=UTC)
RISKY_NOTES = {
    ("051", "d00042", "alice"): '=HYPERLINK("http://evil.example/","click")',
    ("051", "d00042", "bob"): "+1",
    ("051", "d2", "alice"): "-2",
    ("051", "d2", "bob"): "@SUM(A1:A9)",
    ("052", "d00042", "alice"): "'already quoted",
    ("052", "d3", "alice"): "tab\there, new\nline, cr\rreturn, back\\slash",
    ("052", "d3", "bob"): "\t=starts with a tab",
}


def judge(campaign, assessor, topic, doc, label, *, minute=0, **extra) -> Judgment:
    at = T0 + timedelta(minutes=minute)
    imported = assessor.kind == Assessor.Kind.IMPORTED
    return Judgment.objects.create(
        campaign=campaign,
        topic=topic,
        doc_id=doc,
        assessor=assessor,
        label=label,
        judged_at=at,
        first_judged_at=at,
        source=Judgment.Source.IMPORTED if imported else Judgment.Source.JUDGED,
        **extra,
    )


def make_pool(campaign, version=1, **fields) -> Pool:
    fields.setdefault("strategy", Pool.Strategy.DEPTH)
    fields.setdefault("params", {"depth": 10})
    return Pool.objects.create(
        campaign=campaign,
        version=version,
        software_version="0.1.0",
        status=Pool.Status.BUILT,
        **fields,
    )


@pytest.fixture
def judged(campaign):
    """Two people and an imported source on topics 051 and 052 of a depth pool, with overlap,
    notes written to break spreadsheets, a -1 from the source and an unjudged pooled pair."""
    t1 = Topic.objects.create(campaign=campaign, topic_id="051", title="Ozone", position=1)
    t2 = Topic.objects.create(campaign=campaign, topic_id="052", title="Tariffs", position=2)
    Topic.objects.create(campaign=campaign, topic_id="7", title="Unjudged topic", position=3)
    alice = Assessor.objects.create(campaign=campaign, name="alice", pseudonym="a0000001")
    bob = Assessor.objects.create(campaign=campaign, name="bob", pseudonym="a0000002")
    nist = Assessor.objects.create(campaign=campaign, name="nist", kind=Assessor.Kind.IMPORTED)
    rubric = campaign.current_rubric()
    people = {"alice": alice, "bob": bob}
    rows = [
        ("051", "d00042", "alice", 2),
        ("051", "d00042", "bob", 1),
        ("051", "d2", "alice", 0),
        ("051", "d2", "bob", 0),
        ("051", "d5", "alice", 1),
        ("052", "d00042", "alice", 1),
        ("052", "d3", "alice", 2),
        ("052", "d3", "bob", 2),
    ]
    topics = {"051": t1, "052": t2}
    for minute, (topic, doc, who, label) in enumerate(rows):
        judge(
            campaign,
            people[who],
            topics[topic],
            doc,
            label,
            minute=minute,
            note=RISKY_NOTES.get((topic, doc, who), ""),
            rubric_version=rubric,
            position=minute + 1,
            seconds_on_screen=12.5 + minute,
            active_seconds=10.0,
            served_at=T0,
            unsure=minute == 2,
        )
    judge(campaign, nist, t1, "d9", -1, iteration="0")
    judge(campaign, nist, t2, "d3", 2, iteration="0.5")
    run = Run.objects.create(campaign=campaign, tag="bm25-run")
    pool = make_pool(campaign, seed=7)
    pool.runs.add(run)
    for topic, doc in [("051", "d00042"), ("051", "d2"), ("051", "d5"), ("051", "d77")]:
        PoolEntry.objects.create(pool=pool, topic=topics[topic], doc_id=doc)
    for topic, doc in [("052", "d00042"), ("052", "d3")]:
        PoolEntry.objects.create(pool=pool, topic=topics[topic], doc_id=doc)
    assignment = Assignment.objects.create(
        campaign=campaign, pool=pool, assessor=alice, mode=Assignment.Mode.PRIMARY, seed=1
    )
    assignment.topics.add(t1, t2)
    return {"alice": alice, "bob": bob, "nist": nist, "pool": pool, "topics": topics}


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def lines(path: Path) -> list[tuple[str, str, str, int]]:
    return [(*tuple(line.split()[:3]), int(line.split()[3])) for line in path.open()]


class TestQrels:
    def test_trec_tools_read_the_qrels_with_the_same_judgments(self, campaign, judged, tmp_path):
        export_bundle(campaign=campaign, destination=tmp_path, unjudged="-1")
        qrels_path = tmp_path / "qrels.txt"
        with qrels_path.open() as handle:
            parsed = pytrec_eval.parse_qrel(handle)
        expected = {
            "051": {"d00042": 2, "d2": 0, "d5": 1, "d77": -1, "d9": -1},
            "052": {"d00042": 1, "d3": 2},
        }
        assert {topic: dict(docs) for topic, docs in parsed.items()} == expected
        via_ir_measures = {}
        for qrel in ir_measures.read_trec_qrels(str(qrels_path)):
            via_ir_measures.setdefault(qrel.query_id, {})[qrel.doc_id] = qrel.relevance
        assert via_ir_measures == expected
        # trec_eval itself, through pytrec_eval: -1 is in the pool but not relevant.
        evaluator = pytrec_eval.RelevanceEvaluator(parsed, {"P.5", "num_rel"})
        scores = evaluator.evaluate({"051": {"d77": 3.0, "d00042": 2.0}})
        assert scores["051"]["num_rel"] == 2

    def test_lines_are_four_fields_in_code_point_order(self, campaign, judged, tmp_path):
        export_bundle(campaign=campaign, destination=tmp_path, unjudged="-1")
        text = (tmp_path / "qrels.txt").read_text()
        assert text.splitlines()[0] == "051 0 d00042 2"
        keys = [(line.split()[0], line.split()[2]) for line in text.splitlines()]
        assert keys == sorted(keys, key=lambda key: qrels_sort_key(*key))
        assert all(len(line.split(" ")) == 4 for line in text.splitlines())

    def test_pooled_pairs_nobody_labelled_stay_absent_and_imported_negatives_stay_by_default(
        self, campaign, judged, tmp_path
    ):
        export_bundle(campaign=campaign, destination=tmp_path)
        labels = {(t, d): label for t, _, d, label in lines(tmp_path / "qrels.txt")}
        assert ("051", "d77") not in labels  # pooled, nobody labelled it: absent
        assert labels[("051", "d9")] == -1  # the imported source's -1, as it came
        assert [label for label in labels.values() if label < 0] == [-1]

    def test_minus_one_labels_round_trip_by_default(self, campaign, tmp_path):
        for topic in ("1", "2"):
            Topic.objects.create(campaign=campaign, topic_id=topic)
        original = "1 0 184 2\n1 0 29 -1\n2 0 12 -1\n2 0 31 4\n2 0 57 0\n"
        source = tmp_path / "cranqrel.txt"
        source.write_text(original)
        campaign.save_rubric(
            [LabelSpec(value, f"L{value}", key=str(value)) for value in range(5)], note="0-4"
        )
        import_qrels(campaign=campaign, source=str(source), name="cranqrel", assessor="A")
        result = export_bundle(campaign=campaign, destination=tmp_path / "bundle")
        exported = (tmp_path / "bundle" / "qrels.txt").read_text().splitlines()
        assert sorted(exported) == sorted(original.splitlines())
        assert result.files[0].labels == {"-1": 2, "0": 1, "2": 1, "4": 1}

    def test_round_trip_through_import_gives_the_same_lines(self, campaign, tmp_path):
        for topic in ("051", "052", "10"):
            Topic.objects.create(campaign=campaign, topic_id=topic)
        original = (
            "051 Q0 d00042 2\n052 Q0 d1 0\n051 Q0 A-7 1\n10 Q0 d00042 -1\n"
            "052 Q0 x\\y 2\n10 Q0 d00001 0\n"
        )
        source = tmp_path / "in.qrels"
        source.write_text(original)
        import_qrels(campaign=campaign, source=str(source), name="in.qrels", assessor="earlier")
        out = tmp_path / "bundle"
        export_bundle(campaign=campaign, destination=out, unjudged="-1")
        exported = {(t, d, label) for t, _, d, label in lines(out / "qrels.txt")}
        given = {
            (t, d, int(label)) for t, _, d, label in (x.split() for x in original.split("\n") if x)
        }
        assert exported == given

    def test_per_assessor_files_hold_each_assessors_verdicts(self, campaign, judged, tmp_path):
        result = export_bundle(campaign=campaign, destination=tmp_path, per_assessor=True)
        assert not (tmp_path / "qrels.txt").exists()
        names = sorted(p.name for p in (tmp_path / "qrels").iterdir())
        assert names == ["a0000001.txt", "a0000002.txt", "nist.txt"]
        assert lines(tmp_path / "qrels" / "a0000002.txt") == [
            ("051", "0", "d00042", 1),
            ("051", "0", "d2", 0),
            ("052", "0", "d3", 2),
        ]
        assert lines(tmp_path / "qrels" / "nist.txt") == [
            ("051", "0", "d9", -1),  # the source's -1, as it came
            ("052", "0", "d3", 2),
        ]
        listed = [f.path for f in result.files]
        assert listed[:3] == ["qrels/a0000001.txt", "qrels/a0000002.txt", "qrels/nist.txt"]

    def test_refuse_writes_nothing_when_assessors_disagree(self, campaign, judged, tmp_path):
        with pytest.raises(PolicyConflict) as raised:
            export_bundle(campaign=campaign, destination=tmp_path / "b", policy="refuse")
        assert [(c.topic_id, c.doc_id) for c in raised.value.conflicts] == [("051", "d00042")]
        assert not (tmp_path / "b").exists()

    def test_usernames_only_when_asked(self, campaign, judged, tmp_path):
        export_bundle(campaign=campaign, destination=tmp_path / "p")
        assert {r["assessor"] for r in read_tsv(tmp_path / "p" / "judgments.tsv")} == {
            "a0000001",
            "a0000002",
            "nist",
        }
        assert "alice" not in (tmp_path / "p" / "judgments.jsonl").read_text()
        assert "alice" not in (tmp_path / "p" / "campaign.json").read_text()
        export_bundle(campaign=campaign, destination=tmp_path / "u", usernames=True)
        assert {r["assessor"] for r in read_tsv(tmp_path / "u" / "judgments.tsv")} == {
            "alice",
            "bob",
            "nist",
        }

    def test_a_destination_with_files_is_refused(self, campaign, judged, tmp_path):
        (tmp_path / "old.txt").write_text("x")
        with pytest.raises(ExportError, match="not an empty directory"):
            export_bundle(campaign=campaign, destination=tmp_path)


class TestSidecar:
    def test_one_row_per_judgment_with_keys_that_join_to_the_qrels(
        self, campaign, judged, tmp_path
    ):
        export_bundle(campaign=campaign, destination=tmp_path, unjudged="-1")
        rows = read_tsv(tmp_path / "judgments.tsv")
        assert len(rows) == Judgment.objects.count() == 10
        assert list(rows[0]) == list(SIDECAR_COLUMNS)
        qrels = {(t, d) for t, _, d, _ in lines(tmp_path / "qrels.txt")}
        keys = {(decode_cell(r["topic"]), decode_cell(r["docid"])) for r in rows}
        assert keys <= qrels
        jsonl = [json.loads(line) for line in (tmp_path / "judgments.jsonl").open()]
        assert len(jsonl) == len(rows)
        assert [(j["topic"], j["docid"]) for j in jsonl] == [
            (decode_cell(r["topic"]), decode_cell(r["docid"])) for r in rows
        ]

    def test_every_field_is_written(self, campaign, judged, tmp_path):
        export_bundle(campaign=campaign, destination=tmp_path)
        jsonl = [json.loads(line) for line in (tmp_path / "judgments.jsonl").open()]
        first = jsonl[0]
        assert first == {
            "topic": "051",
            "docid": "d00042",
            "label": 2,
            "assessor": "a0000001",
            "source": "person",
            "iteration": None,  # the column issue 18 added: only imported judgments have one
            "rubric_version": 1,
            "revisions": 1,
            "position": 1,
            "served_at": "2025-03-01T09:00:00.25Z",
            "first_judged_at": "2025-03-01T09:00:00.25Z",
            "judged_at": "2025-03-01T09:00:00.25Z",
            "seconds_on_screen": 12.5,
            "active_seconds": 10,
            "pool": 1,
            "stratum": None,
            "inclusion_probability": None,
            "unreadable": False,
            "unsure": False,
            "note": RISKY_NOTES[("051", "d00042", "alice")],
        }
        imported = [j for j in jsonl if j["assessor"] == "nist"]
        assert {j["source"] for j in imported} == {"imported"}
        assert [j["label"] for j in imported] == [-1, 2]
        assert [j["pool"] for j in imported] == [None, 1]
        assert [j["iteration"] for j in imported] == ["0", "0.5"]
        rows = [r for r in read_tsv(tmp_path / "judgments.tsv") if r["assessor"] == "nist"]
        assert [r["iteration"] for r in rows] == ["0", "0.5"]

    def test_risky_cells_are_neutralised_and_decode_back(self, campaign, judged, tmp_path):
        export_bundle(campaign=campaign, destination=tmp_path)
        raw = (tmp_path / "judgments.tsv").read_text(encoding="utf-8")
        notes = {
            (decode_cell(r["topic"]), decode_cell(r["docid"]), r["assessor"]): r["note"]
            for r in read_tsv(tmp_path / "judgments.tsv")
        }
        pseudonyms = {"alice": "a0000001", "bob": "a0000002"}
        for (topic, doc, who), note in RISKY_NOTES.items():
            cell = notes[(topic, doc, pseudonyms[who])]
            if note[0] in "=+-@'\t\r":
                assert cell[0] == "'", cell  # nothing a spreadsheet would evaluate
            else:
                assert cell[0] == note[0]
            assert decode_cell(cell) == note
        # A tab or newline inside a note never splits a row or a cell.
        assert len(raw.splitlines()) == 1 + Judgment.objects.count()
        assert "\\t" in raw
        assert "\\n" in raw
        assert "\\\\" in raw

    def test_numbers_are_never_quoted_and_minus_one_stays_minus_one(
        self, campaign, judged, tmp_path
    ):
        export_bundle(campaign=campaign, destination=tmp_path)
        rows = read_tsv(tmp_path / "judgments.tsv")
        assert sorted({r["label"] for r in rows}) == ["-1", "0", "1", "2"]
        for row in rows:
            for column in ("label", "revisions", "position", "seconds_on_screen", "pool"):
                assert not row[column].startswith("'")
        jsonl = [json.loads(line) for line in (tmp_path / "judgments.jsonl").open()]
        assert all(isinstance(j["label"], int) for j in jsonl)
        assert sum(j["label"] == -1 for j in jsonl) == 1

    def test_jsonl_carries_the_raw_notes(self, campaign, judged, tmp_path):
        export_bundle(campaign=campaign, destination=tmp_path)
        jsonl = [json.loads(line) for line in (tmp_path / "judgments.jsonl").open()]
        notes = {j["note"] for j in jsonl}
        assert set(RISKY_NOTES.values()) <= notes

    def test_stratum_and_inclusion_probability_come_from_a_sampled_pool(
        self, campaign, judged, tmp_path
    ):
        sampled = make_pool(
            campaign,
            version=2,
            strategy=Pool.Strategy.SAMPLE,
            params={"strata": [{"first_rank": 1, "last_rank": 10, "rate": 0.5}]},
            seed=3,
        )
        topic = judged["topics"]["052"]
        PoolEntry.objects.create(
            pool=sampled, topic=topic, doc_id="d3", stratum=1, inclusion_probability=0.5
        )
        PoolEntry.objects.create(
            pool=sampled,
            topic=topic,
            doc_id="d99",
            stratum=1,
            inclusion_probability=0.5,
            sampled=False,
        )
        export_bundle(campaign=campaign, destination=tmp_path, pool=sampled, unjudged="-1")
        jsonl = [json.loads(line) for line in (tmp_path / "judgments.jsonl").open()]
        assert {
            (j["docid"], j["pool"], j["stratum"], j["inclusion_probability"]) for j in jsonl
        } == {("d3", 2, 1, 0.5)}
        assert lines(tmp_path / "qrels.txt") == [("052", "0", "d3", 2), ("052", "0", "d99", -1)]


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class TestDocumentation:
    def test_every_file_is_hashed_and_verifies(self, campaign, judged, tmp_path):
        result = export_bundle(campaign=campaign, destination=tmp_path)
        sums = (tmp_path / "SHA256SUMS").read_text().splitlines()
        listed = {line.split("  ", 1)[1]: line.split("  ", 1)[0] for line in sums}
        on_disk = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
        assert set(listed) == on_disk - {"SHA256SUMS"}
        for path, digest in listed.items():
            assert sha256_of(tmp_path / path) == digest
        manifest = json.loads((tmp_path / "campaign.json").read_text())
        for entry in manifest["files"]:
            assert sha256_of(tmp_path / entry["path"]) == entry["sha256"]
            assert (tmp_path / entry["path"]).stat().st_size == entry["bytes"]
        assert {e["path"] for e in manifest["files"]} == on_disk - {"SHA256SUMS", "campaign.json"}
        assert result.manifest["files"] == manifest["files"]
        if shutil.which("sha256sum"):
            check = subprocess.run(
                ["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True
            )
            assert check.returncode == 0, check.stdout + check.stderr

    def test_the_counts_equal_what_the_database_holds(self, campaign, judged, tmp_path):
        export_bundle(campaign=campaign, destination=tmp_path)
        manifest = json.loads((tmp_path / "campaign.json").read_text())
        topics = {t["topic"]: t for t in manifest["topics"]}
        assert list(topics) == ["051", "052", "7"]
        assert manifest["totals"]["judgments"] == Judgment.objects.count()
        for topic_id, entry in topics.items():
            judgments = Judgment.objects.filter(topic__topic_id=topic_id)
            assert entry["judgments"] == judgments.count()
            by_label = {}
            for label in judgments.values_list("label", flat=True):
                by_label[str(label)] = by_label.get(str(label), 0) + 1
            assert entry["verdicts"] == dict(sorted(by_label.items(), key=lambda i: int(i[0])))
            pooled = PoolEntry.objects.filter(topic__topic_id=topic_id)
            assert entry["pooled"] == pooled.count()
            judged_pairs = set(judgments.filter(label__gte=0).values_list("doc_id", flat=True))
            assert entry["judged"] == len(judged_pairs)
            in_pool = judged_pairs & set(pooled.values_list("doc_id", flat=True))
            assert entry["judged_in_pool"] == len(in_pool)
            assert entry["unjudged"] == pooled.count() - len(in_pool)
        assert topics["051"]["fraction_judged"] == 3 / 4
        assert topics["7"]["fraction_judged"] is None
        qrels_entry = next(f for f in manifest["files"] if f["path"] == "qrels.txt")
        assert qrels_entry["lines"] == len(lines(tmp_path / "qrels.txt")) == 6
        assert qrels_entry["labels"] == {"-1": 1, "0": 1, "1": 2, "2": 2}
        sidecar = next(f for f in manifest["files"] if f["path"] == "judgments.tsv")
        assert sidecar["lines"] == 1 + Judgment.objects.count()

    def test_it_documents_scale_pools_agreement_and_options(self, campaign, judged, tmp_path):
        campaign.save_rubric(
            [*campaign.current_rubric().specs()[:2], campaign.current_rubric().specs()[2]],
            note="clarified",
        )
        export_bundle(campaign=campaign, destination=tmp_path, binary=True)
        manifest = json.loads((tmp_path / "campaign.json").read_text())
        assert manifest["software"]["version"] == pooljudge.__version__
        assert manifest["exported_at"].endswith("Z")
        assert [label["value"] for label in manifest["scale"]["labels"]] == [0, 1, 2]
        assert manifest["scale"]["relevance_threshold"] == campaign.relevance_threshold
        assert [v["version"] for v in manifest["rubric_history"]] == [1, 2]
        assert manifest["rubric_history"][1]["changes"] == ["no change to the labels"]
        (pool,) = manifest["pools"]
        assert pool["runs"] == ["bm25-run"]
        assert pool["seed"] == 7
        assert pool["description"] == "depth 10"
        assert manifest["export"]["policy"] == "primary"
        assert manifest["export"]["binary"] is True
        (pair,) = manifest["agreement"]["pairs"]
        assert (pair["a"], pair["b"], pair["n"]) == ("a0000001", "a0000002", 3)
        assert pair["observed"] == pytest.approx(2 / 3)
        assert "Only 3 pairs" in pair["statement"]
        readme = (tmp_path / "README.md").read_text()
        for needle in (
            "Label scale",
            "Relevant from label 1",
            "depth 10",
            "(83.3% judged)",
            "Cohen's κ",
            "Only 3 pairs",
            "sha256sum -c SHA256SUMS",
            "remove one leading '",
            '"policy": "primary"',
        ):
            assert needle in readme, needle

    def test_it_records_how_the_judging_screen_was_set(self, campaign, judged, tmp_path):
        campaign.highlight_terms = True
        campaign.save(update_fields=["highlight_terms"])
        export_bundle(campaign=campaign, destination=tmp_path)
        manifest = json.loads((tmp_path / "campaign.json").read_text())
        assert manifest["campaign"]["judging_screen"] == {
            "topic_breaks": True,
            "term_highlighting": True,
            "reveal_models_after_deciding": False,
            "judgments_revised_after_reveal": 0,
            "post_reveal_rule": POST_REVEAL_RULE,
            "as_of": "export time",
        }
        assert "Reveal after deciding" not in (tmp_path / "README.md").read_text()
        readme = (tmp_path / "README.md").read_text()
        assert "Topic breaks on; query-term highlighting on (as set at export time)." in readme

    def test_the_readme_escapes_markdown_in_every_value_it_prints(self, campaign, judged, tmp_path):
        campaign.title = "Ozone | `tariffs` *2025*"
        campaign.description = "# Not a heading\n- not a list\n1. not a list either\n<b>raw</b>"
        campaign.save()
        Run.objects.filter(tag="bm25-run").update(tag="bm25|`v2`")
        Topic.objects.filter(topic_id="051").update(title="a | b")
        weird = Assessor.objects.create(
            campaign=campaign, name="x*y|z", pseudonym="a|`9`", kind=Assessor.Kind.PERSON
        )
        judge(campaign, weird, judged["topics"]["051"], "d00042", 1)
        labels = campaign.current_rubric().specs()
        labels[0] = LabelSpec(labels[0].value, "Not | relevant", "`code` and _x_", "[link](u)", "0")
        campaign.save_rubric(labels, note="a | note")
        export_bundle(campaign=campaign, destination=tmp_path)
        readme = (tmp_path / "README.md").read_text()

        def unescaped(line: str, char: str) -> int:
            return len(re.findall(r"(?<!\\)(?:\\\\)*" + re.escape(char), line))

        for line in readme.splitlines():  # code spans stay closed on their line
            assert unescaped(line, "`") % 2 == 0 or line.startswith("```"), line
        tables = [block.splitlines() for block in readme.split("\n\n") if block.startswith("|")]
        assert len(tables) >= 4  # files, label scale, completeness, agreement
        for table in tables:  # no value adds a cell to its row
            assert len({unescaped(row, "|") for row in table}) == 1, table
        assert readme.startswith("# Ozone \\| \\`tariffs\\` \\*2025\\*: relevance judgments")
        assert "\\# Not a heading\n\\- not a list\n1\\. not a list either\n\\<b\\>raw" in readme
        assert "bm25\\|\\`v2\\`" in readme
        assert "Not \\| relevant | \\`code\\` and \\_x\\_ | \\[link\\](u)" in readme
        assert "(a \\| note)" in readme
        assert "<b>" not in readme
        assert "a\\|\\`9\\`" in readme  # the assessor's pseudonym, in the agreement table

    def test_positional_topic_ids_carry_the_files_own_ids(self, campaign, judged, tmp_path):
        Topic.objects.filter(topic_id="7").update(original_id="007")
        export_bundle(campaign=campaign, destination=tmp_path)
        manifest = json.loads((tmp_path / "campaign.json").read_text())
        topics = {t["topic"]: t for t in manifest["topics"]}
        assert topics["7"]["original_id"] == "007"
        assert "original_id" not in topics["051"]
        readme = (tmp_path / "README.md").read_text()
        assert "| `7` (file: `007`) |" in readme
        assert "`original_id` in `campaign.json`" in readme

    def test_no_agreement_without_overlap(self, campaign, judged, tmp_path):
        Judgment.objects.filter(assessor=judged["bob"]).delete()
        export_bundle(campaign=campaign, destination=tmp_path)
        manifest = json.loads((tmp_path / "campaign.json").read_text())
        assert manifest["agreement"] is None
        assert "No pair was judged by two people" in (tmp_path / "README.md").read_text()


class TestZip:
    def test_the_zip_holds_the_same_files_in_one_folder(self, campaign, judged, tmp_path):
        directory = export_bundle(campaign=campaign, destination=tmp_path / "dir")
        buffer = io.BytesIO()
        result = export_bundle(campaign=campaign, destination=buffer, zip=True, name="b")
        data = buffer.getvalue()
        assert result.zip_bytes == len(data)
        assert result.zip_sha256 == hashlib.sha256(data).hexdigest()
        with zipfile.ZipFile(io.BytesIO(data)) as bundle:
            assert bundle.testzip() is None
            names = bundle.namelist()
            assert names == [f"b/{f.path}" for f in directory.files] + ["b/SHA256SUMS"]
            assert {i.compress_type for i in bundle.infolist()} == {zipfile.ZIP_DEFLATED}
            sums = bundle.read("b/SHA256SUMS").decode().splitlines()
            for line in sums:
                digest, path = line.split("  ", 1)
                assert hashlib.sha256(bundle.read(f"b/{path}")).hexdigest() == digest
            assert bundle.read("b/qrels.txt") == (tmp_path / "dir" / "qrels.txt").read_bytes()

    def test_the_zip_streams_to_a_destination_that_cannot_seek(self, campaign, judged):
        class Pipe:
            def __init__(self):
                self.parts = []

            def write(self, data):
                self.parts.append(bytes(data))
                return len(data)

            def flush(self):
                pass

        pipe = Pipe()
        export_bundle(campaign=campaign, destination=pipe, zip=True)
        with zipfile.ZipFile(io.BytesIO(b"".join(pipe.parts))) as bundle:
            assert bundle.testzip() is None


class TestCommand:
    def test_it_writes_a_directory_bundle(self, campaign, judged, tmp_path, capsys):
        call_command("export_qrels", "robust04", "--out", str(tmp_path / "b"), "--unjudged", "-1")
        out = capsys.readouterr().out
        assert "Exported 10 judgments, 7 qrels lines (policy primary)" in out
        assert (tmp_path / "b" / "SHA256SUMS").exists()

    def test_it_writes_a_zip(self, campaign, judged, tmp_path, capsys):
        call_command("export_qrels", "robust04", "--out", str(tmp_path), "--zip", "--binary")
        (path,) = tmp_path.glob("robust04-qrels-*.zip")
        with zipfile.ZipFile(path) as bundle:
            assert f"{path.stem}/qrels.txt" in bundle.namelist()
        assert hashlib.sha256(path.read_bytes()).hexdigest() in capsys.readouterr().out

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["nosuch", "--out", "{tmp}/x"], "No campaign with slug 'nosuch'"),
            (["robust04", "--out", "{tmp}/x", "--pool", "9"], "has no pool v9; built pools: v1"),
            (["robust04", "--out", "{tmp}"], "is not an empty directory"),
        ],
    )
    def test_bad_input_is_refused(self, campaign, judged, tmp_path, args, message):
        (tmp_path / "occupied").write_text("")
        with pytest.raises(CommandError, match=message):
            call_command("export_qrels", *[a.format(tmp=tmp_path) for a in args])

    def test_an_unknown_policy_exits_non_zero(self, campaign, judged, tmp_path):
        process = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "export_qrels",
                "robust04",
                "--out",
                str(tmp_path),
                "--policy",
                "median",
            ],
            capture_output=True,
            text=True,
            cwd=settings.BASE_DIR,
            check=False,
            env={**os.environ, "DEBUG": "1"},
        )
        assert process.returncode != 0
        assert "invalid choice: 'median'" in process.stderr

    def test_refuse_conflicts_are_printed(self, campaign, judged, tmp_path, capsys):
        with pytest.raises(CommandError, match="disagree on 1 pair"):
            call_command(
                "export_qrels",
                "robust04",
                "--out",
                str(tmp_path / "z"),
                "--zip",
                "--policy",
                "refuse",
            )
        assert "topic 051 document d00042: alice=2, bob=1" in capsys.readouterr().err
        assert not list((tmp_path / "z").glob("*.zip"))


@pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
    reason="COPY is PostgreSQL's",
)
def test_copy_and_a_cursor_give_the_same_rows_and_sidecar_bytes(campaign, judged):
    """On PostgreSQL the database writes the TSV cells; Python writes them elsewhere."""
    from qrels.export import sidecar_rows
    from qrels.policies import scope

    topic = judged["topics"]["052"]
    notes = ['say "hi" \\ there', "é ü \u2028 😀", "\x01\x1f\x7f ctrl", "", "=1+1", "\tx"]
    for i, note in enumerate(notes):
        judge(
            campaign,
            judged["bob"],
            topic,
            f"=x{i}",
            i % 3,
            note=note,
            seconds_on_screen=float("nan") if i == 0 else 1e-05 * i,
            active_seconds=3.0,
            minute=i,
        )
    for i, iteration in enumerate(["=Q0", "'0.5", "a\\b", 'say"it']):
        judge(campaign, judged["nist"], topic, f"=it{i}", 1, iteration=iteration, minute=i)
    Judgment.objects.filter(doc_id="=x1").update(judged_at=datetime(2025, 3, 1, 9, tzinfo=UTC))
    Judgment.objects.filter(doc_id="=x2").update(
        judged_at=datetime(2025, 3, 1, 9, 0, 0, 100, tzinfo=UTC)
    )
    # A model's labels (issue 20): their source column is the assessor's kind on both paths.
    model = Assessor.objects.create(campaign=campaign, name="=umbrela", kind=Assessor.Kind.MODEL)
    judge(campaign, model, topic, "d3", 3, iteration="Q0", note="MODEL\tnote")
    judge(campaign, model, topic, "=x0", 0, iteration="Q0")
    for usernames, unjudged, models in itertools.product((False, True), repeat=3):
        s = scope(campaign=campaign, include_models=models)
        copied = list(sidecar_rows(s, usernames=usernames, pooled_unjudged=unjudged))
        read = list(sidecar_rows(s, usernames=usernames, pooled_unjudged=unjudged, use_copy=False))
        assert [row[0] for row in copied] == [row[0] for row in read]
        assert [row[1:] for row in copied if row[0][2]] == [row[1:] for row in read if row[0][2]]
        sources = {row[0].source for row in copied if row[0].label}
        assert sources == ({"person", "imported", "model"} if models else {"person", "imported"})


@pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
    reason="planner settings are PostgreSQL's",
)
def test_the_planner_settings_of_the_export_query_are_restored(campaign, judged, tmp_path):
    from django.db import connection

    def current(name):
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting(%s)", [name])
            return cursor.fetchone()[0]

    before = current("enable_nestloop"), current("work_mem")
    export_bundle(campaign=campaign, destination=tmp_path)
    assert (current("enable_nestloop"), current("work_mem")) == before


def test_an_export_first_analyses_the_tables_it_finds_without_statistics(
    campaign, judged, tmp_path
):
    """Judgments arrive one at a time, so no bulk write refreshes their statistics; a table
    autovacuum has not analysed (never, here) is analysed before the export plans its reads.
    Elsewhere than on PostgreSQL nothing is analysed (issue 17)."""
    from django.db import connection

    from pooljudge.common import analyse_stale_tables

    if connection.vendor != "postgresql":
        assert analyse_stale_tables(Judgment, Topic) == []
        export_bundle(campaign=campaign, destination=tmp_path)
        return

    def reltuples() -> float:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT reltuples FROM pg_class WHERE oid = 'campaigns_judgment'::regclass"
            )
            return cursor.fetchone()[0]

    with connection.cursor() as cursor:  # as on a table never analysed (rolled back after)
        cursor.execute(
            "UPDATE pg_class SET reltuples = -1 WHERE oid = 'campaigns_judgment'::regclass"
        )
    assert reltuples() == -1
    export_bundle(campaign=campaign, destination=tmp_path)
    assert reltuples() == Judgment.objects.count() > 0
    assert "campaigns_judgment" not in analyse_stale_tables(Judgment)  # fresh now: left alone


def test_the_export_s_pass_leaves_the_process_s_objects_out_of_its_collections(
    campaign, judged, tmp_path
):
    """An export makes a few objects per judgment: its pass runs with the process's existing
    objects frozen out of the collector's walks and young collections 70x rarer (at 1M
    judgments the collector took 3.7 s of the exporting process's 12.8 s of CPU; issue 17),
    and leaves the collector as it found it."""
    import gc

    seen = set()

    def progress(done, total, message):
        seen.add((message, gc.get_freeze_count() > 0, gc.get_threshold()[0]))

    thresholds = gc.get_threshold()
    export_bundle(campaign=campaign, destination=tmp_path, progress=progress)
    during = {(frozen, first) for message, frozen, first in seen if message.startswith("writing")}
    assert during == {(True, 50_000)}  # pooljudge.common.BULK_GC_THRESHOLD; CPython's is 700
    assert gc.get_threshold() == thresholds
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"unjudged": "-1", "policy": "first"},
        {"per_assessor": True, "binary": True},
        {"policy": "max", "usernames": True, "binary": True},
    ],
)
def test_a_sidecar_process_and_small_blocks_write_the_same_bytes(
    campaign, judged, tmp_path, monkeypatch, options
):
    """A large export formats the sidecar in a second process and reads its rows a block at a
    time, a pair's rows possibly in two blocks: the bundle's bytes depend on neither."""
    import qrels.rows
    import qrels.sidecar

    now = T0 + timedelta(days=1)
    export_bundle(campaign=campaign, destination=tmp_path / "plain", now=now, **options)
    started = []
    start = qrels.sidecar.SidecarProcess.__init__

    def spy(self, root):
        started.append(root)
        start(self, root)

    monkeypatch.setattr(qrels.sidecar.SidecarProcess, "__init__", spy)
    monkeypatch.setattr(qrels.sidecar, "SIDECAR_PROCESS_MIN_ROWS", 0)
    monkeypatch.setattr(qrels.rows, "COPY_ROWS", 2)
    monkeypatch.setattr(qrels.rows, "FETCH_ROWS", 2)
    export_bundle(campaign=campaign, destination=tmp_path / "split", now=now, **options)
    plain = sorted(p.relative_to(tmp_path / "plain") for p in (tmp_path / "plain").rglob("*"))
    split = sorted(p.relative_to(tmp_path / "split") for p in (tmp_path / "split").rglob("*"))
    assert started
    assert plain == split
    assert "judgments.jsonl" in {p.name for p in plain}
    for path in plain:
        if (tmp_path / "plain" / path).is_file():
            assert (tmp_path / "split" / path).read_bytes() == (
                tmp_path / "plain" / path
            ).read_bytes(), path


def test_the_export_pass_refuses_a_line_with_too_few_values(tmp_path):
    """The pass splits each line only as far as the eight values it reads; a shorter line is a
    broken read, never a pair to write."""
    from qrels.export_pass import ExportPass, QrelsWriter
    from qrels.policies import Resolver

    rows = ExportPass(
        root=tmp_path,
        qrels=QrelsWriter(tmp_path / "qrels.txt"),
        resolver=Resolver("majority"),
        people={},
        write_unjudged=False,
        per_assessor=False,
        binary=False,
        threshold=1,
    )
    whole = "051\td1\t1\t7\tp-1\t2025-03-01 09:00:00+00\t1\tp-1\tperson\n"
    rows.feed(whole)
    with pytest.raises(ValueError, match="fewer than 8 values"):
        rows.feed(whole + "051\td2\t1\t7\n")
