"""The 143 real TREC-COVID round-1 runs imported, pooled to depth 10 through the job path, and
checked topic by topic against a plain computation in trec_eval order.

The runs have tabs, 0-based and reversed rank columns and tied scores; the independent reader here
ignores the rank column, sorts each topic by score descending and document id descending, and
takes a set union of the top 10. Runs only where ../shared/data exists.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest
from django.conf import settings

from campaigns.models import Job, Topic
from pooling.imports import import_runs
from pooling.models import Pool, Run
from pooling.pools import create_pool, plan

DATA = Path(settings.BASE_DIR).parent / "shared" / "data"
RUNS = DATA / "trec-covid-round1" / "runs"

if not RUNS.is_dir():
    pytest.skip(f"{RUNS} is absent", allow_module_level=True)

pytestmark = [pytest.mark.shared_data, pytest.mark.django_db(transaction=True)]
DEPTH = 10


def top_documents(path: Path, depth: int) -> dict[str, list[str]]:
    """topic -> the run's top ``depth`` documents in trec_eval order, read with plain Python."""
    by_topic: dict[str, list[tuple[float, str]]] = defaultdict(list)
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            topic, _q0, doc, _rank, score, _tag = line.split()
            by_topic[topic].append((float(score), doc))
    # Sorting (score, doc) pairs and reversing: score descending, ties by document id descending.
    return {
        topic: [doc for _score, doc in sorted(scored, reverse=True)[:depth]]
        for topic, scored in by_topic.items()
    }


def test_a_depth_10_pool_of_the_143_round_1_runs_matches_a_plain_union(campaign):
    Topic.objects.bulk_create(
        Topic(campaign=campaign, topic_id=str(i), position=i) for i in range(1, 31)
    )
    files = sorted(RUNS.iterdir())
    assert len(files) == 143
    started = time.perf_counter()
    summary = import_runs(campaign=campaign, sources=[(path.name, path) for path in files])
    imported = time.perf_counter() - started
    assert summary.counts["runs"] == 143
    assert summary.counts["lines"] == 3_509_493
    assert Run.objects.filter(campaign=campaign).count() == 143

    started = time.perf_counter()
    pool = create_pool(campaign=campaign, strategy="depth", params={"depth": DEPTH})
    job = Job.objects.get(pk=pool.job_id)
    built = time.perf_counter() - started
    pool.refresh_from_db()
    assert job.status == Job.Status.DONE, job.error
    assert pool.status == Pool.Status.BUILT

    expected: dict[str, set[str]] = defaultdict(set)
    proposals: dict[str, int] = defaultdict(int)
    for path in files:
        for topic, docs in top_documents(path, DEPTH).items():
            expected[topic].update(docs)
            proposals[topic] += len(docs)
    stored: dict[str, set[str]] = defaultdict(set)
    for topic, doc in pool.entries.values_list("topic__topic_id", "doc_id").iterator():
        stored[topic].add(doc)
    assert set(stored) == set(expected) == {str(i) for i in range(1, 31)}
    for topic in expected:
        assert stored[topic] == expected[topic], f"topic {topic}"
        recorded = pool.stats["per_topic"][topic]
        assert recorded["pooled"] == len(expected[topic])
        assert recorded["proposals"] == proposals[topic]
    assert pool.size == sum(map(len, expected.values()))

    # The planner, which builds nothing, agrees with the pool it predicts.
    row = next(r for r in plan(campaign=campaign, depths=[DEPTH])["rows"] if r.depth == DEPTH)
    assert row.total_docs == pool.size
    print(
        f"\n143 runs imported in {imported:.1f} s; depth-{DEPTH} pool of {pool.size:,} documents "
        f"built in {built:.1f} s"
    )
