"""Pools over the 143 real TREC-COVID round-1 runs, checked against a plain set union.

The runs have tabs, 0-based and reversed rank columns and tied scores, so they are read here with
a small reader of their own, independent of the project's run parser: lines grouped by topic and
put in trec_eval order (score descending, ties by document id descending), the rank column ignored.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest

from pooling.strategies import depth_pool, plan_depths, pool_statistics

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
ROUND1 = DATA / "trec-covid-round1"

if not DATA.is_dir():
    pytest.skip(f"{DATA} is absent", allow_module_level=True)

pytestmark = pytest.mark.shared_data


def read_run(path: Path) -> dict[str, list[str]]:
    by_topic: dict[str, list[tuple[float, str]]] = defaultdict(list)
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            topic, _q0, doc, _rank, score, _tag = line.split()
            by_topic[topic].append((float(score), doc))
    # trec_eval order: sort by (score, docid) and reverse, i.e. score descending, docid descending.
    return {
        topic: [doc for _score, doc in sorted(scored, reverse=True)]
        for topic, scored in by_topic.items()
    }


def read_relevant(path: Path) -> set[tuple[str, str]]:
    relevant = set()
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            topic, _iteration, doc, label = line.split()
            if int(label) > 0:
                relevant.add((topic, doc))
    return relevant


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, list[str]]]:
    return {path.name: read_run(path) for path in sorted((ROUND1 / "runs").iterdir())}


@pytest.fixture(scope="module")
def relevant() -> set[tuple[str, str]]:
    return read_relevant(ROUND1 / "qrels" / "qrels-rnd1.txt")


def test_all_143_runs_and_30_topics_are_read(runs):
    assert len(runs) == 143
    assert len({topic for by_topic in runs.values() for topic in by_topic}) == 30


def test_the_depth_10_pool_is_the_union_of_every_runs_top_10_topic_by_topic(runs):
    pool = depth_pool(runs, depth=10)

    topics = sorted({topic for by_topic in runs.values() for topic in by_topic})
    assert list(pool) == topics
    for topic in topics:
        union: set[str] = set()
        holders: dict[str, set[str]] = defaultdict(set)
        for run, by_topic in runs.items():
            for doc in by_topic.get(topic, [])[:10]:
                union.add(doc)
                holders[doc].add(run)
        assert [e.doc_id for e in pool[topic]] == sorted(union)
        for entry in pool[topic]:
            assert {c.run for c in entry.contributions} == holders[entry.doc_id]
            for c in entry.contributions:
                assert runs[c.run][topic][c.rank - 1] == entry.doc_id


def test_the_planner_agrees_with_the_depth_10_pool_on_real_runs(runs, relevant):
    pool = depth_pool(runs, depth=10)
    stats = pool_statistics(runs, pool, depth=10, relevant=relevant)

    (row,) = plan_depths(runs, [10], relevant=relevant)

    assert row.total_docs == stats.totals.pooled == sum(len(e) for e in pool.values())
    assert row.share_of_runs_x_k == pytest.approx(stats.totals.distinct_share)
    assert row.relevant_found == pytest.approx(stats.totals.relevant_found)


def test_the_planner_answers_six_depths_over_the_real_runs(runs, relevant):
    depths = [1, 5, 10, 20, 50, 100]
    start = time.perf_counter()
    rows = plan_depths(runs, depths, relevant=relevant)
    elapsed = time.perf_counter() - start

    print(
        f"\nplan_depths over 143 TREC-COVID round-1 runs, depths {depths}: {elapsed * 1000:.0f} ms"
    )
    for row in rows:
        print(
            f"  k={row.depth:>3}  {row.docs_per_topic_mean:7.1f} docs/topic "
            f"(min {row.docs_per_topic_min}, max {row.docs_per_topic_max})  "
            f"share of runs x k {row.share_of_runs_x_k:5.1%}  "
            f"relevant found {row.relevant_found:5.1%}  {row.assessor_hours:6.1f} h"
        )
    assert [row.depth for row in rows] == depths
    assert [row.total_docs for row in rows] == sorted(row.total_docs for row in rows)
