"""Building pools as jobs: a build that runs twice, at once, or in a worker killed halfway still
gives one identical pool; a cancelled build leaves nothing; and seed 000's example, ties at the
depth boundary and untrustworthy rank columns, end to end through import, job and database.

Tests marked ``worker`` (and the crash test) use Redis and a real worker process where REDIS_URL
is set; the two-thread test needs PostgreSQL's row locks.
"""

from __future__ import annotations

import io
import itertools
import os
import random
import signal
import threading
import time

import pytest
from django.db import connection, connections, transaction

from campaigns import jobs
from campaigns.models import Job, Topic
from pooling import pools, strategies
from pooling.imports import import_runs
from pooling.models import Pool, PoolEntry, Run, RunTopic
from pooling.pools import create_pool
from pooling.tasks import build_pool_task
from tests.conftest import wait_for_job

ON_POSTGRESQL = connection.vendor == "postgresql"


def synthetic_campaign(
    campaign, *, runs: int, topics: int, length: int, vocabulary: int, seed: int = 1
) -> dict[str, dict[str, list[str]]]:
    """Runs stored directly as RunTopic rows; returns run key -> topic -> documents, keyed as
    pools.ranked_lists keys them, for computing the expected pool independently."""
    rng = random.Random(seed)
    topic_rows = Topic.objects.bulk_create(
        Topic(campaign=campaign, topic_id=f"t{t:02d}", position=t) for t in range(topics)
    )
    # A Zipf-like preference: low-numbered documents are picked by most runs.
    population = range(vocabulary)
    cumulative = list(itertools.accumulate(1 / (i + 1) for i in population))
    lists: dict[str, dict[str, list[str]]] = {}
    for r in range(runs):
        run = Run.objects.create(
            campaign=campaign, tag=f"run{r:02d}", line_count=topics * length, topic_count=topics
        )
        rows, by_topic = [], {}
        for topic in topic_rows:
            chosen: dict[int, None] = {}
            while len(chosen) < length:
                chosen.update(
                    dict.fromkeys(rng.choices(population, cum_weights=cumulative, k=length))
                )
            docs = [f"{topic.topic_id}-d{i:05d}" for i in list(chosen)[:length]]
            by_topic[topic.topic_id] = docs
            rows.append(
                RunTopic(
                    run=run,
                    topic=topic,
                    docids="\n".join(docs),
                    scores=RunTopic.pack_scores([float(length - i) for i in range(length)]),
                    ranks=RunTopic.pack_ranks(list(range(1, length + 1))),
                    length=length,
                )
            )
        RunTopic.objects.bulk_create(rows)
        lists[str(run.pk)] = by_topic
    return lists


def pairs(pool: Pool) -> list[tuple[str, str]]:
    return sorted(pool.entries.values_list("topic__topic_id", "doc_id"))


def expected_pairs(built: strategies.Pool) -> list[tuple[str, str]]:
    return sorted((topic, e.doc_id) for topic, entries in built.items() for e in entries)


@pytest.fixture
def small(campaign):
    return synthetic_campaign(campaign, runs=5, topics=4, length=60, vocabulary=150)


# --- Twice, at once, killed -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
class TestIdempotence:
    def test_running_the_same_build_job_again_changes_nothing(self, campaign, small):
        pool = create_pool(campaign=campaign, strategy="depth", params={"depth": 20})
        pool.refresh_from_db()
        job = pool.job
        job.refresh_from_db()
        assert (pool.status, job.status, job.attempts) == (Pool.Status.BUILT, Job.Status.DONE, 1)
        first = (pairs(pool), pool.size, pool.stats, pool.built_at)
        assert first[0] == expected_pairs(strategies.depth_pool(small, depth=20))

        build_pool_task.apply(args=[job.pk])
        build_pool_task.apply(args=[job.pk])
        pool.refresh_from_db()
        job.refresh_from_db()
        assert (pairs(pool), pool.size, pool.stats, pool.built_at) == first
        assert job.attempts == 1
        assert PoolEntry.objects.count() == pool.size

    def test_building_a_built_pool_again_is_a_no_op(self, campaign, small):
        pool = create_pool(campaign=campaign, strategy="rrf", params={"budget": 30})
        pool.refresh_from_db()
        with transaction.atomic():
            result = pools.build_pool(pool=pool)
        assert result["message"] == "Already built."
        assert PoolEntry.objects.count() == pool.size == 4 * 30

    def test_a_retried_job_of_a_built_pool_does_not_duplicate_it(self, campaign, small):
        """An organiser may press retry on the job of a pool that is already built."""
        pool = create_pool(campaign=campaign, strategy="depth", params={"depth": 10})
        pool.refresh_from_db()
        Job.objects.filter(pk=pool.job_id).update(status=Job.Status.FAILED)
        with transaction.atomic():
            assert jobs.retry(pool.job)
        pool.refresh_from_db()
        assert pool.status == Pool.Status.BUILT
        assert pairs(pool) == expected_pairs(strategies.depth_pool(small, depth=10))

    @pytest.mark.skipif(not ON_POSTGRESQL, reason="needs PostgreSQL's row locks")
    def test_two_deliveries_at_once_build_one_identical_pool(
        self, campaign, small, settings, monkeypatch
    ):
        """The second delivery takes over (the first one's heartbeat looks stale) while the first
        is mid-build: the pool row lock makes it wait, the first one's result is refused (it lost
        its claim), and the second builds the pool once."""
        settings.JOB_STALE_AFTER_SECONDS = 0
        with transaction.atomic():
            pool = Pool.objects.create(
                campaign=campaign,
                version=1,
                strategy="depth",
                params={"depth": 30},
                software_version="test",
            )
            pool.runs.set(Run.objects.all())
            pool.topics.set(Topic.objects.filter(campaign=campaign))
            job = Job.objects.create(
                kind="build_pool",
                task_name=build_pool_task.name,
                campaign=campaign,
                params={"pool": pool.pk, "version": 1},
            )
            Pool.objects.filter(pk=pool.pk).update(job=job)

        inside, release = threading.Event(), threading.Event()
        calls = []
        real_ranked_lists = pools.ranked_lists

        def ranked_lists(*args, **kwargs):
            calls.append(threading.current_thread().name)
            if len(calls) == 1:
                inside.set()
                release.wait(timeout=30)
            return real_ranked_lists(*args, **kwargs)

        monkeypatch.setattr(pools, "ranked_lists", ranked_lists)
        errors = []

        def deliver() -> None:
            try:
                build_pool_task.apply(args=[job.pk])
            except Exception as exc:  # pragma: no cover (reported below)
                errors.append(exc)
            finally:
                connections.close_all()

        first = threading.Thread(target=deliver, name="first")
        second = threading.Thread(target=deliver, name="second")
        first.start()
        assert inside.wait(timeout=30)
        second.start()
        deadline = time.monotonic() + 30
        while Job.objects.get(pk=job.pk).attempts < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # the second delivery is now waiting for the pool row
        release.set()
        first.join(timeout=60)
        second.join(timeout=60)
        assert not errors
        job.refresh_from_db()
        pool.refresh_from_db()
        assert job.status == Job.Status.DONE
        assert job.attempts == 2
        assert pool.status == Pool.Status.BUILT
        assert calls == ["first", "second"]  # the second built it after the first rolled back
        assert pairs(pool) == expected_pairs(strategies.depth_pool(small, depth=30))
        assert PoolEntry.objects.count() == pool.size


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_duplicated_message_in_the_worker_builds_the_pool_once(campaign, small):
    with transaction.atomic():
        pool = create_pool(campaign=campaign, strategy="depth", params={"depth": 40})
    # The same message delivered again, as a broker may after a network hiccup.
    build_pool_task.apply_async(args=[pool.job_id])
    job = wait_for_job(pool.job, timeout=90)
    assert job.status == Job.Status.DONE, job.error
    assert job.attempts == 1
    time.sleep(0.5)  # let the duplicate finish too (it finds the job done)
    pool.refresh_from_db()
    assert pool.status == Pool.Status.BUILT
    assert pairs(pool) == expected_pairs(strategies.depth_pool(small, depth=40))
    assert PoolEntry.objects.count() == pool.size


@pytest.mark.django_db(transaction=True)
def test_sigkill_of_the_pool_process_mid_build_is_retried_and_builds_once(campaign, worker_factory):
    lists = synthetic_campaign(campaign, runs=30, topics=20, length=500, vocabulary=3000)
    expected = expected_pairs(strategies.depth_pool(lists, depth=500))
    worker = worker_factory()
    with transaction.atomic():
        pool = create_pool(campaign=campaign, strategy="depth", params={"depth": 500})
    deadline = time.monotonic() + 60
    status = None
    while time.monotonic() < deadline:
        status = Job.objects.filter(pk=pool.job_id).values_list("status", flat=True).first()
        if status != Job.Status.QUEUED:
            break
        time.sleep(0.005)
    assert status == Job.Status.RUNNING, worker.log()
    children = worker.pool_pids()
    assert children, worker.log()
    for pid in children:
        os.kill(pid, signal.SIGKILL)

    job = wait_for_job(pool.job, timeout=120)
    assert job.status == Job.Status.DONE, (job.error, worker.log())
    assert job.attempts == 2
    assert Pool.objects.filter(campaign=campaign).count() == 1
    pool.refresh_from_db()
    assert pool.status == Pool.Status.BUILT
    assert pool.size == len(expected)
    assert pairs(pool) == expected
    assert PoolEntry.objects.filter(pool=pool).count() == len(expected)
    assert worker.process.poll() is None  # the main worker process survived its child


# --- Cancelling -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
class TestCancelling:
    def test_a_build_cancelled_before_it_runs_leaves_a_cancelled_empty_pool(self, campaign, small):
        with transaction.atomic():
            pool = Pool.objects.create(
                campaign=campaign,
                version=1,
                strategy="depth",
                params={"depth": 5},
                software_version="test",
            )
            pool.runs.set(Run.objects.all())
            pool.topics.set(Topic.objects.filter(campaign=campaign))
            job = Job.objects.create(
                kind="build_pool",
                task_name=build_pool_task.name,
                campaign=campaign,
                params={"pool": pool.pk, "version": 1},
            )
        jobs.request_cancel(job)
        build_pool_task.apply(args=[job.pk])
        pool.refresh_from_db()
        job.refresh_from_db()
        assert job.status == Job.Status.CANCELLED
        assert pool.status == Pool.Status.CANCELLED
        assert not PoolEntry.objects.exists()
        assert pool.size == 0

    def test_a_build_cancelled_halfway_rolls_back_and_leaves_no_entries(
        self, campaign, small, settings, monkeypatch
    ):
        settings.JOB_HEARTBEAT_SECONDS = 0  # check the cancel flag at every progress report
        real_compute = pools._compute
        computed = []

        def compute(pool, runs, topic_ids):
            computed.append(topic_ids)
            if len(computed) == 2:  # the organiser presses cancel after the first topic
                press_cancel(pool.job_id)
            return real_compute(pool, runs, topic_ids)

        monkeypatch.setattr(pools, "_compute", compute)
        pool = create_pool(campaign=campaign, strategy="depth", params={"depth": 5})
        pool.refresh_from_db()
        job = Job.objects.get(pk=pool.job_id)
        assert job.status == Job.Status.CANCELLED
        assert pool.status == Pool.Status.CANCELLED
        assert len(computed) == 2
        assert not PoolEntry.objects.exists()
        assert pool.stats == {}


def press_cancel(job_id: int) -> None:
    """What the Cancel button does, from the organiser's own connection where there can be one.

    (SQLite has one writer, the build's own transaction, so there the flag is set through it.)
    """
    if connection.vendor == "sqlite":
        Job.objects.filter(pk=job_id).update(cancel_requested=True)
        return

    def request() -> None:
        try:
            Job.objects.filter(pk=job_id).update(cancel_requested=True)
        finally:
            connections.close_all()

    thread = threading.Thread(target=request)
    thread.start()
    thread.join(timeout=30)


# --- Seed 000's example and trec_eval's order, through the database -------------------------------


def import_run_text(campaign, name: str, text: str) -> None:
    import_runs(campaign=campaign, sources=[(name, io.BytesIO(text.encode()))])


def run_text(tag: str, topic: str, docs: list[str], *, scores=None, ranks=None) -> str:
    n = len(docs)
    scores = scores or [float(n - i) for i in range(n)]
    ranks = ranks or list(range(1, n + 1))
    return "".join(
        f"{topic}\tQ0\t{doc}\t{rank}\t{score}\t{tag}\n"
        for doc, rank, score in zip(docs, ranks, scores, strict=True)
    )


def build(campaign, **params) -> Pool:
    order = params.pop("order", "trec_eval")
    pool = create_pool(campaign=campaign, strategy="depth", params={**params, "order": order})
    pool.refresh_from_db()
    assert pool.status == Pool.Status.BUILT, pool.job.error
    return pool


@pytest.mark.django_db(transaction=True)
class TestSeedExample:
    @pytest.fixture(autouse=True)
    def _topic(self, campaign):
        Topic.objects.create(campaign=campaign, topic_id="1")

    def test_three_runs_at_depth_5_pool_exactly_nine_documents(self, campaign):
        import_run_text(campaign, "A", run_text("A", "1", ["3", "7", "12", "5", "9"]))
        import_run_text(campaign, "B", run_text("B", "1", ["7", "3", "15", "22", "5"]))
        import_run_text(campaign, "C", run_text("C", "1", ["12", "40", "3", "7", "18"]))
        pool = build(campaign, depth=5)
        docs = sorted(pool.entries.values_list("doc_id", flat=True), key=int)
        assert docs == ["3", "5", "7", "9", "12", "15", "18", "22", "40"]
        assert pool.size == 9
        totals = pool.stats["totals"]
        assert (totals["pooled"], totals["proposals"]) == (9, 15)  # nine instead of fifteen
        # Provenance: document 3 is A's first, B's second and C's third.
        tags = dict(Run.objects.values_list("pk", "tag"))
        entry = pool.entries.get(doc_id="3")
        assert sorted((tags[run], rank) for run, rank in entry.provenance) == [
            ("A", 1),
            ("B", 2),
            ("C", 3),
        ]
        unique = {tags[int(key)]: row["unique"] for key, row in pool.stats["per_run"].items()}
        assert unique == {"A": 1, "B": 2, "C": 2}  # 9; 15, 22; 40, 18

    def test_at_the_depth_boundary_equal_scores_let_the_greater_doc_id_in(self, campaign):
        # Ranks say "b" then "c"; trec_eval sorts equal scores by document id descending.
        import_run_text(
            campaign,
            "tied",
            run_text("tied", "1", ["a", "b", "c", "d"], scores=[3.0, 2.0, 2.0, 1.0]),
        )
        pool = build(campaign, depth=2)
        assert sorted(pool.entries.values_list("doc_id", flat=True)) == ["a", "c"]

    def test_ids_are_compared_as_strings_at_a_tie(self, campaign):
        import_run_text(
            campaign, "ids", run_text("ids", "1", ["10", "9", "x"], scores=[1.0, 1.0, 0.5])
        )
        pool = build(campaign, depth=1)
        assert list(pool.entries.values_list("doc_id", flat=True)) == ["9"]  # "9" > "10"

    def test_zero_based_and_reversed_ranks_pool_by_score_unless_file_rank_is_asked(self, campaign):
        # 0-based ranks, and reversed: the file calls the lowest score rank 0.
        import_run_text(
            campaign,
            "reversed",
            run_text(
                "reversed", "1", ["low", "mid", "high"], scores=[1.0, 2.0, 3.0], ranks=[0, 1, 2]
            ),
        )
        import_run_text(
            campaign,
            "zerobased",
            run_text("zerobased", "1", ["p", "q", "r"], scores=[0.9, 0.8, 0.7], ranks=[0, 1, 2]),
        )
        by_score = build(campaign, depth=1)
        assert sorted(by_score.entries.values_list("doc_id", flat=True)) == ["high", "p"]
        by_rank = build(campaign, depth=1, order="file_rank")
        assert sorted(by_rank.entries.values_list("doc_id", flat=True)) == ["low", "p"]
        # The rank recorded in the provenance is the position in the order used, 1-based.
        assert {rank for e in by_rank.entries.all() for _run, rank in e.provenance} == {1}
