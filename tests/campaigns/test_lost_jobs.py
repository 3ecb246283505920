"""Jobs whose worker is gone, and workers that are gone.

A running job whose heartbeat stopped for ``JOB_STALE_AFTER_SECONDS`` is *lost*: the pages say so
and Retry and Cancel work on it at once, whatever Redis's visibility timeout (an hour by default:
until then the broker would not hand its message to anyone). The attempt that was lost, or its
message redelivered later, can never commit over the retry. The heartbeat outlives a database
blip. Each worker writes a sign of life, which the jobs page and ``/healthz?deep=1`` read.

The tests at the end kill real ``celery worker`` processes (PostgreSQL and Redis, as CI runs
them); the others run on either database with the jobs executed in-process.
"""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from campaigns import jobs
from campaigns.models import Job, Topic, Upload, UploadChunk, WorkerBeat
from campaigns.uploads import store_upload
from pooljudge.celery import app
from tests.conftest import HAS_BROKER, require, wait_for_job
from tests.worker_tasks import marker_task
from tests.workers import FAST_REDELIVERY

pytestmark = pytest.mark.django_db(transaction=True)

LONG_AGO = timedelta(hours=2)  # older than any staleness threshold, live heartbeat or not


@pytest.fixture
def eager():
    app.conf.task_always_eager = True


QUEUE = "pooljudge-liveness-test"


@pytest.fixture
def with_a_broker():
    """The web side as a deployment with workers sees it (nothing is sent in these tests), on a
    queue of its own: the suite's real workers, beating on theirs, are not counted."""
    app.conf.task_always_eager = False
    queue, app.conf.task_default_queue = app.conf.task_default_queue, QUEUE
    yield
    app.conf.task_always_eager = True
    app.conf.task_default_queue = queue


def lost_job(campaign, **params) -> Job:
    """A job claimed by a worker that then died: running, heartbeat long gone."""
    job = Job.objects.create(
        kind="marker",
        task_name=marker_task.name,
        campaign=campaign,
        params={"campaign": campaign.pk, **params},
    )
    outcome, job = jobs.claim(job.pk, worker="celery@gone")
    assert outcome is jobs.Claim.CLAIMED
    Job.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - LONG_AGO)
    job.refresh_from_db()
    return job


def markers(job: Job) -> int:
    return Topic.objects.filter(topic_id=f"marker-{job.pk}").count()


def jobs_page(client, campaign) -> str:
    response = client.get(reverse("campaigns:jobs", args=[campaign.slug]))
    assert response.status_code == 200
    return response.content.decode()


def row_of(html: str, job: Job) -> str:
    match = re.search(rf'<tr>\s*<td><a href="[^"]*/jobs/{job.pk}/">.*?</tr>', html, re.S)
    assert match, f"job {job.pk} is not on the page"
    return match.group(0)


def action_url(job: Job, action: str) -> str:
    return reverse(f"campaigns:job_{action}", args=[job.campaign.slug, job.pk])


# --- Lost jobs ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("eager")
class TestLostJobs:
    def test_the_jobs_page_shows_a_lost_job_with_retry_and_cancel(
        self, client, campaign, organiser
    ):
        job = lost_job(campaign)
        client.force_login(organiser)
        row = row_of(jobs_page(client, campaign), job)
        assert '<span class="badge status-lost">Lost</span>' in row
        assert "its worker stopped" in row
        assert action_url(job, "retry") in row
        assert action_url(job, "cancel") in row
        detail = client.get(reverse("campaigns:job", args=[campaign.slug, job.pk]))
        assert "Its worker stopped: no heartbeat since" in detail.content.decode()

    def test_retry_from_the_page_runs_it_once_more_at_once(self, client, campaign, organiser):
        job = lost_job(campaign, steps=2)
        client.force_login(organiser)
        response = client.post(action_url(job, "retry"))
        assert response.status_code == 302
        job.refresh_from_db()
        assert job.status == Job.Status.DONE, job.error
        # Attempt numbers only grow: the retry is attempt 2, with three more allowed.
        assert (job.attempts, job.max_attempts) == (2, 4)
        assert markers(job) == 1

    def test_cancel_from_the_page_cancels_it_at_once(self, client, campaign, organiser):
        job = lost_job(campaign)
        client.force_login(organiser)
        assert client.post(action_url(job, "cancel")).status_code == 302
        job.refresh_from_db()
        assert job.status == Job.Status.CANCELLED
        assert job.error == "Cancelled after its worker was lost; nothing it did was kept."

    def test_a_job_with_a_fresh_heartbeat_is_running_not_lost(self, client, campaign, organiser):
        job = lost_job(campaign)
        Job.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now())
        job.refresh_from_db()
        assert not job.is_lost
        assert not jobs.retry(job)
        jobs.request_cancel(job)
        assert (job.status, job.cancel_requested) == (Job.Status.RUNNING, True)

    def test_a_message_redelivered_after_the_retry_changes_nothing(self, campaign):
        job = lost_job(campaign)
        with transaction.atomic():
            assert jobs.retry(job)
        job.refresh_from_db()
        assert (job.status, job.attempts, markers(job)) == (Job.Status.DONE, 2, 1)
        marker_task.apply(args=[job.pk])  # the dead worker's message, handed out an hour later
        job.refresh_from_db()
        assert (job.status, job.attempts, markers(job)) == (Job.Status.DONE, 2, 1)

    def test_the_lost_attempt_cannot_commit_over_the_retry(self, campaign, monkeypatch):
        monkeypatch.setattr(jobs, "send", lambda job_id: None)
        job = lost_job(campaign)
        first = Job.objects.get(pk=job.pk)  # attempt 1, as its worker knows it
        assert jobs.retry(job)
        outcome, second = jobs.claim(job.pk, worker="celery@new")
        assert (outcome, second.attempts) == (jobs.Claim.CLAIMED, 2)
        # The first attempt comes back (it was only stalled): its writes match nothing ...
        assert not jobs._finish(first, Job.Status.DONE, result={"attempt": 1})
        progress = jobs.Progress(first, live=True)
        progress._flush()
        # ... and its next progress report stops its work.
        with pytest.raises(jobs._LostClaim):
            progress.check()
        second.refresh_from_db()
        assert (second.status, second.worker) == (Job.Status.RUNNING, "celery@new")


class TestHeartbeat:
    def test_it_keeps_beating_through_database_errors_and_still_sees_a_cancel(
        self, campaign, settings, monkeypatch
    ):
        settings.JOB_HEARTBEAT_SECONDS = 0.02
        job = lost_job(campaign)
        progress = jobs.Progress(job, live=True)
        calls = []

        def flaky_flush() -> None:
            calls.append(threading.current_thread().name)
            if len(calls) <= 3:
                raise OperationalError("terminating connection due to administrator command")
            progress._cancelled = True  # what the real flush sets when it reads the flag

        monkeypatch.setattr(progress, "_flush", flaky_flush)
        progress.start()
        deadline = time.monotonic() + 10
        while len(calls) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        progress.stop()
        assert len(calls) >= 5  # beat on after three failures
        with pytest.raises(jobs.JobCancelled):
            progress.check()


# --- Worker liveness ------------------------------------------------------------------------------


def beat(name: str, *, ago: timedelta, stopped: bool = False) -> WorkerBeat:
    seen = timezone.now() - ago
    return WorkerBeat.objects.create(
        name=name,
        queues=f"other,{QUEUE}",
        started_at=seen - timedelta(hours=1),
        seen_at=seen,
        stopped_at=seen if stopped else None,
    )


@pytest.mark.usefixtures("with_a_broker")
class TestWorkerLiveness:
    def test_the_jobs_page_says_since_when_no_worker_has_answered(
        self, client, campaign, organiser
    ):
        beat("celery@web1", ago=timedelta(minutes=14, seconds=5))
        client.force_login(organiser)
        html = jobs_page(client, campaign)
        assert "No worker is running the jobs" in html
        assert "No worker has answered for 14\xa0minutes" in html
        assert "celery@web1" in html
        assert "celery -A pooljudge worker -Q" in html
        assert "docker-compose up -d worker" in html

    def test_a_worker_that_never_came_is_named_as_such(self, client, campaign, organiser):
        client.force_login(organiser)
        assert "No worker has answered yet." in jobs_page(client, campaign)

    def test_a_stopped_worker_is_said_to_have_stopped(self, client, campaign, organiser):
        beat("celery@web1", ago=timedelta(minutes=3), stopped=True)
        client.force_login(organiser)
        assert "celery@web1</span>, stopped at" in jobs_page(client, campaign)

    def test_no_warning_while_a_worker_beats(self, client, campaign, organiser):
        beat("celery@old", ago=timedelta(days=1))
        beat("celery@web2", ago=timedelta(seconds=2))
        client.force_login(organiser)
        assert "No worker" not in jobs_page(client, campaign)

    def test_a_worker_on_another_queue_does_not_count(self, client, campaign, organiser):
        elsewhere = beat("celery@elsewhere", ago=timedelta(seconds=2))
        WorkerBeat.objects.filter(pk=elsewhere.pk).update(queues="exports,other")
        client.force_login(organiser)
        assert "No worker has answered yet." in jobs_page(client, campaign)

    def test_a_queued_job_says_it_waits_for_a_worker(self, client, campaign, organiser):
        beat("celery@web1", ago=timedelta(minutes=30))
        job = Job.objects.create(campaign=campaign, kind="marker", task_name=marker_task.name)
        client.force_login(organiser)
        html = client.get(reverse("campaigns:job", args=[campaign.slug, job.pk])).content.decode()
        assert "Waiting for a worker. No worker has answered for 30\xa0minutes" in html

    def test_deep_healthz_is_503_without_a_worker_and_plain_healthz_does_not_ask(self, client):
        beat("celery@web1", ago=timedelta(minutes=5))
        deep = client.get("/healthz?deep=1")
        assert deep.status_code == 503
        body = deep.json()
        assert body["checks"]["worker"] is False
        assert "celery@web1" not in deep.content.decode()  # anyone may ask: no host names
        assert 299 <= body["workers"]["silent_seconds"] <= 330
        plain = client.get("/healthz")
        assert "worker" not in plain.json()["checks"]

    def test_deep_healthz_is_200_with_a_worker(self, client):
        beat("celery@web1", ago=timedelta(seconds=1))
        deep = client.get("/healthz?deep=1")
        checks = deep.json()["checks"]
        assert checks["worker"] is True
        assert deep.status_code == (200 if all(checks.values()) else 503)
        assert deep.json()["workers"]["alive"] == 1

    def test_the_worker_heartbeat_writes_its_row_does_the_housekeeping_and_marks_it_stopped(
        self, campaign, settings
    ):
        settings.JOB_HEARTBEAT_SECONDS = 0.05
        expired = store_upload(campaign=campaign, kind="runs", file=SimpleUploadedFile("r", b"x\n"))
        failed = Job.objects.create(
            campaign=campaign,
            kind="import_runs",
            task_name="x",
            status=Job.Status.FAILED,
            finished_at=timezone.now() - timedelta(days=30),
        )
        Upload.objects.filter(pk=expired.pk).update(job=failed)
        heartbeat = jobs.WorkerHeartbeat("celery@here", queues=[QUEUE])
        heartbeat.start()
        deadline = time.monotonic() + 10
        while not WorkerBeat.objects.filter(name="celery@here").exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert jobs.worker_status().alive == ("celery@here",)
        # Its first round also deleted the bytes of the import that failed a month ago.
        while UploadChunk.objects.filter(upload=expired).exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        heartbeat.stop()
        row = WorkerBeat.objects.get(name="celery@here")
        assert (row.queues, row.stopped_at is not None) == (QUEUE, True)
        assert not jobs.worker_status().ok


# --- Real workers, killed -----------------------------------------------------------------------

WAIT = 60.0


@pytest.fixture
def real_services():
    require(HAS_BROKER, "REDIS_URL is not set: no real worker to kill")
    require(connection.vendor == "postgresql", "DATABASE_URL is not PostgreSQL")


def enqueue_marker(campaign, **params) -> Job:
    with transaction.atomic():
        return jobs.enqueue(
            kind="marker",
            task=marker_task,
            campaign=campaign,
            params={"campaign": campaign.pk, **params},
        )


def wait_for_file(path, worker) -> None:
    deadline = time.monotonic() + WAIT
    while not path.exists():
        assert time.monotonic() < deadline, worker.log()
        time.sleep(0.05)


@pytest.mark.usefixtures("real_services")
@pytest.mark.parametrize("redelivery", ["default visibility timeout", "fast redelivery"])
def test_sigkill_of_the_whole_worker_makes_the_job_retryable_from_the_page_at_once(
    redelivery, client, campaign, organiser, worker_factory, settings, tmp_path
):
    # The same staleness as the workers' (tests/conftest.py worker_env): 3 s.
    settings.JOB_STALE_AFTER_SECONDS = 3.0
    # By default Redis keeps the dead worker's message for an hour.
    env = {} if redelivery == "default visibility timeout" else FAST_REDELIVERY
    first = worker_factory(**env)
    flag = tmp_path / "started"
    job = enqueue_marker(campaign, steps=40, step_seconds=0.25, started_flag=str(flag))
    wait_for_file(flag, first)
    first.kill_all()
    killed = time.monotonic()

    client.force_login(organiser)
    retry = action_url(job, "retry")
    while retry not in row_of(jobs_page(client, campaign), job):
        assert time.monotonic() - killed < settings.JOB_STALE_AFTER_SECONDS + 10, (
            "the page never offered Retry"
        )
        time.sleep(0.2)
    seconds = time.monotonic() - killed
    assert client.post(retry).status_code == 302

    second = worker_factory(**env)
    job = wait_for_job(job, timeout=120)
    assert job.status == Job.Status.DONE, (job.error, second.log())
    assert job.attempts == 2
    assert job.worker.startswith(second.name.split("@")[0])
    if redelivery == "fast redelivery":
        # The dead worker's message comes back too, beside the retry's: whichever comes second
        # finds the job taken or done and changes nothing.
        deadline = time.monotonic() + 30
        while second.log().count(f"{marker_task.name}[") < 4:  # each received and succeeded
            assert time.monotonic() < deadline, second.log()
            time.sleep(0.5)
    job.refresh_from_db()
    assert (job.status, job.attempts, markers(job)) == (Job.Status.DONE, 2, 1)
    print(f"\nwhole worker killed ({redelivery}): Retry offered after {seconds:.1f} s")


@pytest.mark.usefixtures("real_services")
def test_the_heartbeat_survives_a_killed_database_connection_and_cancel_is_still_seen(
    client, campaign, organiser, worker_factory, tmp_path
):
    worker = worker_factory()
    flag = tmp_path / "started"
    job = enqueue_marker(campaign, steps=200, step_seconds=0.1, started_flag=str(flag))
    wait_for_file(flag, worker)

    def heartbeat_backends() -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND query LIKE %s",
                # "SELECT 1 AS" with client-side binding, "SELECT $1 AS" with server-side.
                ['SELECT % AS "a" FROM "campaigns_job"%cancel_requested%'],
            )
            return [pid for (pid,) in cursor.fetchall()]

    deadline = time.monotonic() + WAIT
    while not (backends := heartbeat_backends()):
        assert time.monotonic() < deadline, worker.log()
        time.sleep(0.1)
    with connection.cursor() as cursor:
        for pid in backends:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    killed_at = timezone.now()

    # It beats again, on a new connection.
    deadline = time.monotonic() + 10
    while True:
        job.refresh_from_db()
        if job.heartbeat_at > killed_at + timedelta(seconds=1):
            break
        assert time.monotonic() < deadline, f"no heartbeat since the blip:\n{worker.log()}"
        time.sleep(0.1)
    assert job.status == Job.Status.RUNNING
    assert "heartbeat of job" in worker.log()  # the failure was logged, not swallowed

    client.force_login(organiser)
    assert client.post(action_url(job, "cancel")).status_code == 302
    job = wait_for_job(job, timeout=30)
    assert job.status == Job.Status.CANCELLED, (job.error, worker.log())
    assert job.error == "Cancelled by an organiser."
    assert markers(job) == 0
    assert worker.process.poll() is None


@pytest.mark.usefixtures("with_a_broker")
def test_polling_the_jobs_page_and_a_job_costs_a_fixed_number_of_queries(
    client, campaign, organiser, django_assert_max_num_queries
):
    beat("celery@web1", ago=timedelta(minutes=30))
    for status in [Job.Status.QUEUED, Job.Status.DONE, Job.Status.RUNNING] * 20:
        Job.objects.create(campaign=campaign, kind="marker", task_name="x", status=status)
    queued = Job.objects.filter(status=Job.Status.QUEUED).first()
    client.force_login(organiser)
    htmx = {"HX-Request": "true"}
    jobs_url = reverse("campaigns:jobs", args=[campaign.slug])
    job_url = reverse("campaigns:job", args=[campaign.slug, queued.pk])
    client.get(jobs_url, headers=htmx)  # the session's first request may refresh it
    # Session, user, campaign, role, then: count and page of jobs, worker beats.
    with django_assert_max_num_queries(7 + 1):
        assert client.get(jobs_url, headers=htmx).status_code == 200
    # Session, user, campaign, role, the job, worker beats (it is queued).
    with django_assert_max_num_queries(6 + 1):
        assert client.get(job_url, headers=htmx).status_code == 200
