"""The shipped demo campaign data (pooljudge/demo/) is well formed.

Read with tiny readers of its own (gzip, json, a regex for TREC SGML topics), so that these tests
say whether the data is right, independently of the project's parsers.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "pooljudge" / "demo"
RUN_FILES = sorted((DEMO / "runs").glob("*.run.gz"))
TOPIC_RE = re.compile(
    r"<top>\s*<num>\s*Number:\s*(?P<num>\S+)\s*<title>(?P<title>.*?)"
    r"<desc>\s*Description:(?P<desc>.*?)<narr>\s*Narrative:(?P<narr>.*?)</top>",
    re.DOTALL,
)


@cache
def documents() -> list[dict]:
    with gzip.open(DEMO / "documents.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@cache
def topics() -> dict[str, dict[str, str]]:
    text = (DEMO / "topics.xml").read_text(encoding="utf-8")
    found = {}
    for m in TOPIC_RE.finditer(text):
        assert m["num"] not in found, f"topic {m['num']} twice"
        found[m["num"]] = {k: " ".join(m[k].split()) for k in ("title", "desc", "narr")}
    assert text.count("<top>") == len(found), "a <top> block did not parse"
    return found


@cache
def run(path: Path) -> dict[str, list[tuple[str, int, float, str]]]:
    """topic -> [(docid, rank, score, tag)] in file order."""
    rows = defaultdict(list)
    with gzip.open(path, "rt", encoding="ascii") as f:
        for n, line in enumerate(f, start=1):
            fields = line.split()
            assert len(fields) == 6, f"{path.name}:{n}: {line!r}"
            topic, q0, docid, rank, score, tag = fields
            assert q0 == "Q0", f"{path.name}:{n}"
            rows[topic].append((docid, int(rank), float(score), tag))
    return dict(rows)


def test_collection_size_ids_and_fields():
    docs = documents()
    assert len(docs) >= 1000
    ids = [d["id"] for d in docs]
    assert len(set(ids)) == len(ids)
    for d in docs:
        assert set(d) == {"id", "title", "text"}
        assert re.fullmatch(r"\S+", d["id"]), d["id"]
        assert d["title"].strip(), d["id"]
        assert len(d["text"].split()) >= 15, d["id"]
    titles = [d["title"] for d in docs]
    assert titles == sorted(titles), "documents are sorted by qualified name"
    assert len(set(titles)) == len(titles)
    texts = [d["text"] for d in docs]
    assert len(set(texts)) == len(texts), "exact duplicate docstrings are dropped"
    assert ids == sorted(ids), "ids follow the title order"


def test_topics_are_complete_and_unique():
    found = topics()
    assert 18 <= len(found) <= 25
    for num, topic in found.items():
        assert re.fullmatch(r"\S+", num), num
        assert 2 <= len(topic["title"].split()) <= 5, topic["title"]
        assert topic["desc"], num
        assert topic["narr"], num
        assert "not relevant" in topic["narr"], f"topic {num}'s narrative says what is not"


def test_there_are_enough_runs_with_distinct_tags():
    assert len(RUN_FILES) >= 8
    stems = [p.name.removesuffix(".run.gz") for p in RUN_FILES]
    assert len(set(stems)) == len(stems)


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda p: p.name)
def test_run_is_valid_against_topics_and_collection(path: Path):
    rows = run(path)
    docids = {d["id"] for d in documents()}
    tag = path.name.removesuffix(".run.gz")
    assert set(rows) == set(topics()), "the run answers every topic and only those"
    for topic, ranking in rows.items():
        assert 1 <= len(ranking) <= 100
        assert {r[3] for r in ranking} == {tag}, "one tag per file, equal to the file name"
        ids = [r[0] for r in ranking]
        assert len(set(ids)) == len(ids), f"{topic}: a document twice"
        assert set(ids) <= docids, f"{topic}: documents not in the collection"
        assert [r[1] for r in ranking] == list(range(1, len(ranking) + 1))
        # trec_eval's order: score descending, ties by docid descending; the file agrees.
        trec_eval_order = sorted(ranking, key=lambda r: (r[2], r[0]), reverse=True)
        assert ranking == trec_eval_order, f"{topic}: ranks disagree with trec_eval's order"


def test_gzip_files_carry_no_timestamp():
    for path in [DEMO / "documents.jsonl.gz", *RUN_FILES]:
        header = path.read_bytes()[:10]
        assert header[:2] == b"\x1f\x8b"
        assert header[4:8] == b"\0\0\0\0", f"{path.name} has an mtime: not reproducible"


def test_rubric_has_four_labels_with_examples():
    rubric = json.loads((DEMO / "rubric.json").read_text(encoding="utf-8"))
    assert rubric["threshold"] == 2
    for field in ("title", "description", "guidelines"):
        assert rubric[field].strip()
    assert rubric["example_topic"] in topics()
    labels = rubric["labels"]
    assert [label["value"] for label in labels] == [0, 1, 2, 3]
    assert [label["key"] for label in labels] == ["0", "1", "2", "3"]
    titles = {d["title"] for d in documents()}
    for label in labels:
        assert label["name"].strip()
        assert label["description"].strip()
        assert label["example"].split(" ", 1)[0] in titles, "examples come from the collection"


def test_overlap_plan_refers_to_real_topics_and_pool_sizes_are_right():
    plan = json.loads((DEMO / "overlap.json").read_text(encoding="utf-8"))
    found = topics()
    assessors = plan["assessors"]
    assert len(assessors) == 2
    assert set(plan["primary"]) == set(assessors)
    primary = [t for a in assessors for t in plan["primary"][a]]
    assert sorted(primary) == sorted(found), "every topic has exactly one primary assessor"
    overlap = plan["overlap_topics"]
    assert overlap
    assert set(overlap) <= set(found)
    depth = plan["depth"]
    assert isinstance(depth, int)
    assert depth > 0
    for topic in found:
        pool = {r[0] for path in RUN_FILES for r in run(path)[topic][:depth]}
        assert len(pool) == plan["pool_sizes"][topic]
        assert 10 <= len(pool) <= 60, f"topic {topic}: pool of {len(pool)}"
