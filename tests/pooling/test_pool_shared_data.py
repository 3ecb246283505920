"""The 143 real TREC-COVID round-1 runs imported, pooled through the job path, and checked topic
by topic against a plain computation in trec_eval order, and against trec_eval itself.

The runs have tabs, 0-based and reversed rank columns and tied scores; the independent reader here
ignores the rank column, sorts each topic by score (as trec_eval's 32-bit float) descending and
document id descending, and takes a set union of the top k. pytrec_eval (trec_eval's own code)
then confirms that each of those top k is the top k it evaluates. Runs only where ../shared/data
exists.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
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


def read_plainly(path: Path) -> dict[str, dict[str, float]]:
    """topic -> document -> score, read with plain Python."""
    by_topic: dict[str, dict[str, float]] = defaultdict(dict)
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            topic, _q0, doc, _rank, score, _tag = line.split()
            by_topic[topic][doc] = float(score)
    return by_topic


def ranked_plainly(run: dict[str, dict[str, float]]) -> dict[str, list[str]]:
    """topic -> the run's documents in trec_eval order, computed with plain Python: (score as
    numpy's float32, document id) pairs sorted and reversed."""
    return {
        topic: [
            doc
            for _score, doc in sorted(
                zip(np.float32(list(scored.values())).tolist(), scored, strict=True),
                reverse=True,
            )
        ]
        for topic, scored in run.items()
    }


def trec_eval_agrees(
    run: dict[str, dict[str, float]], tops: dict[str, list[str]], depth: int
) -> bool:
    """Whether trec_eval evaluates exactly ``tops`` as the run's top ``depth`` of each topic:
    with those documents (and only those) relevant, its P@depth is all of them."""
    qrels = {topic: dict.fromkeys(docs, 1) for topic, docs in tops.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {f"P.{depth}"})
    results = evaluator.evaluate(run)
    return all(
        round(results[topic][f"P_{depth}"] * depth) == len(docs) for topic, docs in tops.items()
    )


def stored_pool(pool: Pool) -> dict[str, set[str]]:
    stored: dict[str, set[str]] = defaultdict(set)
    for topic, doc in pool.entries.values_list("topic__topic_id", "doc_id").iterator():
        stored[topic].add(doc)
    return stored


def test_pools_of_the_143_round_1_runs_are_the_top_k_trec_eval_evaluates(campaign):
    """The 143 runs are imported once; a depth-10 pool equals a plain union of every run's top 10
    (with its per-topic statistics and the planner's prediction), and the pools of depth 20, 50
    and 100 are exactly the top k that trec_eval evaluates.

    Scores are 32-bit floats to trec_eval: in 2 of the 143 runs scores that differ only beyond
    a float's precision tie there, and are ordered by document id. Ordered as 64-bit floats,
    the pools of depth 20, 50 and 100 differed from trec_eval's top k by 4, 568 and 1,104
    (topic, document) pairs."""
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

    # Each file is read once, plainly, and kept ranked for every depth.
    runs = {path.name: read_plainly(path) for path in files}
    ranked = {name: ranked_plainly(run) for name, run in runs.items()}

    started = time.perf_counter()
    pool = create_pool(campaign=campaign, strategy="depth", params={"depth": DEPTH})
    job = Job.objects.get(pk=pool.job_id)
    built = time.perf_counter() - started
    pool.refresh_from_db()
    assert job.status == Job.Status.DONE, job.error
    assert pool.status == Pool.Status.BUILT

    expected: dict[str, set[str]] = defaultdict(set)
    proposals: dict[str, int] = defaultdict(int)
    for by_topic in ranked.values():
        for topic, docs in by_topic.items():
            expected[topic].update(docs[:DEPTH])
            proposals[topic] += len(docs[:DEPTH])
    stored = stored_pool(pool)
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

    for depth in (20, 50, 100):
        pool = create_pool(campaign=campaign, strategy="depth", params={"depth": depth})
        pool.refresh_from_db()
        assert pool.status == Pool.Status.BUILT
        expected = defaultdict(set)
        for name, by_topic in ranked.items():
            tops = {topic: docs[:depth] for topic, docs in by_topic.items()}
            assert trec_eval_agrees(runs[name], tops, depth), f"{name} at depth {depth}"
            for topic, docs in tops.items():
                expected[topic].update(docs)
        stored = stored_pool(pool)
        differing = sum(len(stored[topic] ^ expected[topic]) for topic in expected)
        assert differing == 0, f"depth {depth}: {differing} pairs differ from trec_eval's top k"
