"""Worker crashes: SIGKILL of the prefork pool process, and of the whole worker (main process and
pool at once, as an OOM killer does), in the middle of a pool build and of a run import. Each job
ends done exactly once: one pool version with the entries a clean build gives, each run stored
once with exactly its file's ranked lists, and the attempts recorded.

The kill lands mid-job deterministically, without sleeps or large data: the test holds a SHARE
lock on a table the job writes last (pooling_pool, whose row is marked built after every entry is
written; pooling_run, whose rows are inserted after every run topic is copied), so the job blocks
at that write inside its transaction, with all its other work done but not committed. The test
sees the worker's backend waiting in pg_locks, kills, then releases the lock; the dead worker's
backend finds its client gone and rolls back. Where no worker is left to retry (the whole worker
was killed), the test first checks that nothing of the first attempt was committed, then, with
Redis's default visibility timeout (an hour before it would hand the message to anyone again),
waits for the jobs page to offer Retry on the lost job (within JOB_STALE_AFTER_SECONDS + 10 s),
retries from the page and starts a second worker.

PostgreSQL and Redis only (as CI runs them): the jobs run in real ``celery worker`` processes.
"""

from __future__ import annotations

import io
import os
import random
import signal
import threading
import time
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, connections, transaction
from django.urls import reverse

from campaigns.members import add_member
from campaigns.models import Job, UploadChunk
from pooling import strategies
from pooling.formats import read_packed_run_file
from pooling.models import Pool, PoolEntry, Run, RunTopic
from pooling.pools import create_pool
from tests.conftest import HAS_BROKER, require, wait_for_job
from tests.factories import make_topics
from tests.pooling.test_pool_jobs import expected_pairs, pairs, synthetic_campaign
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

KILLS = ("pool-process", "whole-worker")
WAIT = 60.0  # seconds to wait for a state before giving up (never an assertion on time)
STALE_AFTER = 3.0  # the workers' JOB_STALE_AFTER_SECONDS (tests/conftest.py worker_env)


@pytest.fixture(autouse=True)
def _stale_like_the_workers(settings):
    settings.JOB_STALE_AFTER_SECONDS = STALE_AFTER


@pytest.fixture(autouse=True)
def _services():
    require(HAS_BROKER, "REDIS_URL is not set: no real worker to kill")
    require(
        connection.vendor == "postgresql",
        "DATABASE_URL is not PostgreSQL: the crash tests pause jobs with its table locks",
    )


# --- Pausing a job at a write ---------------------------------------------------------------------


@dataclass(frozen=True)
class Backend:
    pid: int
    query: str


class TableLock:
    """LOCK TABLE … IN SHARE MODE, held by a thread on its own connection until released: the
    table can still be read (and rows locked FOR UPDATE), but a job that writes to it waits."""

    def __init__(self, model) -> None:
        self.table = model._meta.db_table
        self._locked = threading.Event()
        self._release = threading.Event()
        self._thread = threading.Thread(target=self._hold, name=f"lock-{self.table}")
        self.errors: list[BaseException] = []

    def _hold(self) -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {connection.ops.quote_name(self.table)} IN SHARE MODE")
                self._locked.set()
                self._release.wait(timeout=10 * WAIT)
        except BaseException as exc:  # pragma: no cover (reported by __enter__ and release)
            self.errors.append(exc)
        finally:
            connections.close_all()

    def __enter__(self) -> TableLock:
        self._thread.start()
        assert self._locked.wait(timeout=WAIT), self.errors
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()

    def release(self) -> None:
        self._release.set()
        self._thread.join(timeout=WAIT)
        assert not self._thread.is_alive()
        assert not self.errors, self.errors

    def waiter(self, worker: WorkerProcess) -> Backend:
        """The database backend that waits for this lock (the job, at its write)."""
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT a.pid, a.query FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                    "WHERE l.relation = %s::regclass AND NOT l.granted "
                    # Test databases run side by side (pytest -n): only this one's waiters.
                    "AND a.datname = current_database()",
                    [self.table],
                )
                rows = cursor.fetchall()
            if rows:
                ((pid, query),) = rows
                return Backend(pid, query)
            assert worker.process.poll() is None, worker.log()
            time.sleep(0.05)
        raise AssertionError(f"no job came to wait for {self.table}:\n{worker.log()}")


def wait_until_gone(backend: Backend) -> None:
    """Wait for the killed worker's backend to notice its client is gone (and roll back)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [backend.pid])
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"backend {backend.pid} outlived its killed worker")


def wait_for_progress(job: Job, message: str) -> Job:
    """The job as its heartbeat reports it once ``message`` shows (written every 0.5 s)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.progress_message == message:
            return job
        time.sleep(0.05)
    raise AssertionError(f"progress is {job.progress_message!r}, never {message!r}")


def kill(how: str, worker: WorkerProcess) -> None:
    if how == "whole-worker":
        worker.kill_all()
        return
    children = worker.pool_pids()
    assert len(children) == 1, (children, worker.log())  # concurrency 1: the job's process
    os.kill(children[0], signal.SIGKILL)


def node(worker: WorkerProcess) -> str:
    return worker.name.split("@")[0] + "@"


def retry_from_the_jobs_page(client, job: Job) -> None:
    """What an organiser does once the whole worker is gone: the jobs page offers Retry on the
    lost job within JOB_STALE_AFTER_SECONDS (+ 10 s of slack), whatever Redis's visibility
    timeout; the retry queues it for the next worker."""
    jobs_page = reverse("campaigns:jobs", args=[job.campaign.slug])
    retry = reverse("campaigns:job_retry", args=[job.campaign.slug, job.pk])
    deadline = time.monotonic() + STALE_AFTER + 10
    while retry not in client.get(jobs_page).content.decode():
        assert time.monotonic() < deadline, "the jobs page never offered Retry"
        time.sleep(0.2)
    assert client.post(retry).status_code == 302
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED


# --- A pool build ---------------------------------------------------------------------------------


@pytest.mark.parametrize("how", KILLS)
def test_sigkill_mid_pool_build_builds_the_pool_once(
    how, campaign, organiser_client, worker_factory
):
    lists = synthetic_campaign(campaign, runs=8, topics=12, length=120, vocabulary=400)
    expected = expected_pairs(strategies.depth_pool(lists, depth=50))
    pool = create_pool(campaign=campaign, strategy="depth", params={"depth": 50})  # queued

    with TableLock(Pool) as lock:
        first = worker_factory()
        backend = lock.waiter(first)
        # Every entry is written (uncommitted); the build waits to mark the pool built.
        assert backend.query.startswith('UPDATE "pooling_pool"'), backend
        job = wait_for_progress(pool.job, "saving the pool")
        assert (job.status, job.attempts) == (Job.Status.RUNNING, 1)
        assert job.worker.startswith(node(first))
        kill(how, first)
    wait_until_gone(backend)

    if how == "whole-worker":
        # Nothing of the first attempt was committed, and nothing runs it until a worker comes.
        job.refresh_from_db()
        pool.refresh_from_db()
        assert (job.status, job.attempts) == (Job.Status.RUNNING, 1)
        assert (pool.status, pool.size) == (Pool.Status.BUILDING, 0)
        assert not PoolEntry.objects.exists()
        retry_from_the_jobs_page(organiser_client, job)
        last = worker_factory()
    else:
        last = first  # its main process starts a new pool process, which retries the job
    job = wait_for_job(job, timeout=120)
    assert job.status == Job.Status.DONE, (job.error, last.log())
    assert job.attempts == 2
    assert job.worker.startswith(node(last))
    # The attempt that committed built the pool (rather than finding it built by a dead one).
    assert job.result["message"] == f"Pool v1 built: {len(expected):,} documents over 12 topics."

    assert Pool.objects.filter(campaign=campaign).count() == 1  # one version: v1
    pool.refresh_from_db()
    assert (pool.version, pool.status, pool.size) == (1, Pool.Status.BUILT, len(expected))
    assert pairs(pool) == expected
    assert PoolEntry.objects.count() == len(expected)
    if how == "pool-process":
        assert first.process.poll() is None  # the main process outlived its pool process
    print(f"\npool build, {how} killed: done on attempt 2, {pool.size} entries once")


# --- A run import -------------------------------------------------------------------------------

TOPICS = [f"{n:03d}" for n in range(1, 11)]


def run_files(count: int, *, depth: int = 150, seed: int = 9) -> list[tuple[str, bytes]]:
    """Run files as systems write them: tab-separated, scores with ties, 0-based ranks in one."""
    rng = random.Random(seed)
    files = []
    for r in range(count):
        lines = []
        for topic in TOPICS:
            docs = rng.sample(range(5000), depth)
            scores = sorted((round(rng.uniform(0, 20), 1) for _ in docs), reverse=True)
            first = 0 if r == 0 else 1
            lines += [
                f"{topic}\tQ0\tdoc{doc:05d}\t{rank}\t{score}\tsys{r}\n"
                for rank, (doc, score) in enumerate(zip(docs, scores, strict=True), first)
            ]
        files.append((f"sys{r}.run", "".join(lines).encode()))
    return files


def stored_as_parsed(files: list[tuple[str, bytes]]) -> dict[tuple[str, str], tuple]:
    """(tag, topic) -> the packed ranked list a clean import of the files stores."""
    stored = {}
    for name, data in files:
        for run in read_packed_run_file(io.BytesIO(data), name=name):
            for topic in run.topics:
                stored[run.tag, topic.topic_id] = (
                    topic.docids,
                    topic.scores,
                    topic.ranks,
                    topic.length,
                )
    return stored


def stored_run_topics() -> dict[tuple[str, str], tuple]:
    rows = RunTopic.objects.values_list(
        "run__tag", "topic__topic_id", "docids", "scores", "ranks", "length"
    )
    return {
        (tag, topic): (docids, bytes(scores), bytes(ranks), length)
        for tag, topic, docids, scores, ranks, length in rows
    }


@pytest.fixture
def organiser_client(client, campaign):
    user = get_user_model().objects.create(username="olivia")
    add_member(campaign=campaign, user=user, role="organiser")
    client.force_login(user)
    return client


@pytest.mark.parametrize("how", KILLS)
def test_sigkill_mid_run_import_stores_each_run_once(
    how, campaign, organiser_client, worker_factory
):
    make_topics(campaign, TOPICS)
    files = run_files(4)
    expected = stored_as_parsed(files)

    with TableLock(Run) as lock:
        # The Files page: the uploads are stored and the import job is queued at commit.
        response = organiser_client.post(
            reverse("campaigns:upload", args=[campaign.slug, "runs"]),
            {"runs-files": [SimpleUploadedFile(name, data) for name, data in files]},
        )
        assert response.status_code == 302
        job = Job.objects.get(kind="import_runs")
        first = worker_factory()
        backend = lock.waiter(first)
        # Every run topic of every file is copied (uncommitted); the runs' rows wait.
        assert backend.query.startswith('INSERT INTO "pooling_run"'), backend
        job = wait_for_progress(job, f"storing {files[-1][0]}")
        assert (job.status, job.attempts) == (Job.Status.RUNNING, 1)
        assert job.worker.startswith(node(first))
        kill(how, first)
    wait_until_gone(backend)

    if how == "whole-worker":
        job.refresh_from_db()
        assert (job.status, job.attempts) == (Job.Status.RUNNING, 1)
        assert not Run.objects.exists()
        assert not RunTopic.objects.exists()
        assert UploadChunk.objects.exists()  # the retry reads the uploads again
        retry_from_the_jobs_page(organiser_client, job)
        last = worker_factory()
    else:
        last = first
    job = wait_for_job(job, timeout=120)
    assert job.status == Job.Status.DONE, (job.error, last.log())
    assert job.attempts == 2
    assert job.worker.startswith(node(last))
    lines = sum(data.count(b"\n") for _, data in files)
    assert job.result["counts"] == {"runs": 4, "lines": lines, "run topics": 4 * len(TOPICS)}

    tags = list(Run.objects.order_by("tag").values_list("tag", flat=True))
    assert tags == ["sys0", "sys1", "sys2", "sys3"]  # each once
    assert RunTopic.objects.count() == len(expected)
    assert stored_run_topics() == expected
    assert not UploadChunk.objects.exists()  # dropped once, by the attempt that committed
    if how == "pool-process":
        assert first.process.poll() is None  # the main process outlived its pool process
    print(f"\nrun import, {how} killed: done on attempt 2, {len(tags)} runs, {lines} lines once")
