"""Depth order replayed on TREC-COVID round 1 (issue 15) against a count made here by hand.

The replay reads the 143 runs with the project's parser and drives ``pooling.adjudication`` (the
code that serves assessors). The independent count reads the same files with plain Python
(trec_eval order: score as a 32-bit float descending, then document id descending; the rank column
ignored), cuts every list to the documents the round-1 qrels judge, lists the documents rank by
rank across the runs (runs in file-name order, a document the first time it is seen), and counts
how many of them it takes to find 50/80/90/95 % of each topic's relevant ones (label >= 1). Runs
only where ../shared/data exists (never in CI).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from pooling import adjudication
from pooling.formats import read_run_file
from qrels.formats import read_qrels_file

DATA = Path(settings.BASE_DIR).parent / "shared" / "data" / "trec-covid-round1"

if not (DATA / "runs").is_dir():
    pytest.skip(f"{DATA / 'runs'} is absent", allow_module_level=True)

pytestmark = pytest.mark.shared_data
FRACTIONS = (0.5, 0.8, 0.9, 0.95)


def plain_qrels() -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with (DATA / "qrels" / "qrels-rnd1.txt").open(encoding="utf-8") as lines:
        for line in lines:
            topic, _iteration, doc, label = line.split()
            qrels[topic][doc] = int(label)
    return qrels


def plain_lists(path: Path, qrels: dict[str, dict[str, int]]) -> dict[str, list[str]]:
    """topic -> the run's judged documents in trec_eval order, read with plain Python."""
    scored: dict[str, dict[str, float]] = defaultdict(dict)
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            topic, _q0, doc, _rank, score, _tag = line.split()
            scored[topic][doc] = float(score)
    result = {}
    for topic, by_doc in scored.items():
        ranked = sorted(
            zip(np.float32(list(by_doc.values())).tolist(), by_doc, strict=True), reverse=True
        )
        result[topic] = [doc for _score, doc in ranked if doc in qrels.get(topic, ())]
    return result


def count_by_hand(lists: list[list[str]], labels: dict[str, int]) -> list[int]:
    """Judgments depth order needs for each of FRACTIONS, with nothing from the project."""
    order: list[str] = []
    seen: set[str] = set()
    for position in range(max(map(len, lists))):
        for ranked in lists:
            if position < len(ranked) and ranked[position] not in seen:
                seen.add(ranked[position])
                order.append(ranked[position])
    relevant = sum(1 for doc in order if labels[doc] >= 1)
    needed = []
    for fraction in FRACTIONS:
        want, found = math.ceil(fraction * relevant - 1e-9), 0
        for judged, doc in enumerate(order, 1):
            found += labels[doc] >= 1
            if found >= want:
                needed.append(judged)
                break
    return needed


def test_depth_order_replay_needs_what_a_count_by_hand_says():
    files = sorted((DATA / "runs").iterdir())
    assert len(files) == 143
    qrels = plain_qrels()
    by_hand = [plain_lists(path, qrels) for path in files]

    runs = {}
    for path in files:
        for run in read_run_file(path):
            runs[run.tag] = {topic: ranked.docids for topic, ranked in run.topics.items()}
    parsed = read_qrels_file(DATA / "qrels" / "qrels-rnd1.txt")
    project_qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for judgment in parsed.judgments:
        project_qrels[judgment.topic_id][judgment.doc_id] = judgment.label
    # The stopping estimate plays no part in the counts: the cheapest one keeps the test quick.
    replays = adjudication.replay(
        adjudication.condense(runs, project_qrels),
        project_qrels,
        order="depth",
        stopping_method="decay",
    )

    assert [t.topic_id for t in replays] == [str(i) for i in range(1, 31)]
    summed = [0] * len(FRACTIONS)
    for topic in replays:
        lists = [lists[topic.topic_id] for lists in by_hand if topic.topic_id in lists]
        expected = count_by_hand(lists, qrels[topic.topic_id])
        assert [topic.needed(f) for f in FRACTIONS] == expected, f"topic {topic.topic_id}"
        summed = [s + n for s, n in zip(summed, expected, strict=True)]
    # The figure ("depth-k order needs about 5,900" for 80 %), as counted here.
    assert 5_800 <= summed[1] <= 6_000
    print(f"\ndepth order, judgments for 50/80/90/95 % summed over 30 topics: {summed}")
