"""The job table and its runner: claims, attempts, failures, cancellation, and dying workers.

Tests marked ``worker`` run through Redis and a separate worker process where REDIS_URL is set
(always in CI), and in-process otherwise; the crash tests need the real thing.
"""

from __future__ import annotations

import time

import pytest
from django.db import transaction

from campaigns import jobs
from campaigns.models import Job, Topic
from tests.conftest import HAS_BROKER, wait_for_job
from tests.worker_tasks import marker_task
from tests.workers import FAST_REDELIVERY


def _enqueue(campaign, **params) -> Job:
    with transaction.atomic():
        job = jobs.enqueue(
            kind="marker",
            task=marker_task,
            campaign=campaign,
            params={"campaign": campaign.pk, **params},
        )
    return job


def _markers(job: Job) -> int:
    return Topic.objects.filter(topic_id=f"marker-{job.pk}").count()


@pytest.mark.django_db(transaction=True)
class TestInProcess:
    """The same runner, with tasks executed in the enqueuing process (the embedded default)."""

    @pytest.fixture(autouse=True)
    def _eager(self):
        from pooljudge.celery import app

        app.conf.task_always_eager = True

    def test_it_runs_a_job_to_done_after_commit(self, campaign):
        job = _enqueue(campaign, steps=3)
        job.refresh_from_db()
        assert job.status == Job.Status.DONE
        assert job.attempts == 1
        assert job.progress_done == 3
        assert job.progress_total == 3
        assert job.result["attempt"] == 1
        assert _markers(job) == 1

    def test_it_does_not_send_a_job_whose_transaction_rolled_back(self, campaign):
        def failing_form() -> None:
            with transaction.atomic():
                jobs.enqueue(kind="marker", task=marker_task, campaign=campaign, params={})
                raise RuntimeError("form failed")

        with pytest.raises(RuntimeError):
            failing_form()
        assert not Job.objects.exists()

    def test_a_transient_error_is_retried_and_its_effect_happens_once(self, campaign):
        job = _enqueue(campaign, raise_attempts_upto=1)
        job.refresh_from_db()
        assert job.status == Job.Status.DONE
        assert job.attempts == 2
        assert _markers(job) == 1

    def test_a_job_that_always_fails_stops_at_the_attempt_cap(self, campaign):
        job = _enqueue(campaign, raise_attempts_upto=99)
        job.refresh_from_db()
        assert job.status == Job.Status.FAILED
        assert job.attempts == job.max_attempts == 3
        assert "transient failure on attempt 3" in job.error
        assert _markers(job) == 0

    def test_refused_input_fails_at_once_with_its_problems(self, campaign):
        job = _enqueue(campaign, refuse=True)
        job.refresh_from_db()
        assert job.status == Job.Status.FAILED
        assert job.attempts == 1
        assert job.error == "bad input on line 3"
        assert job.result == {"problems": ["line 3: bad"]}
        assert _markers(job) == 0

    def test_a_second_delivery_of_a_finished_job_changes_nothing(self, campaign):
        job = _enqueue(campaign)
        marker_task.apply(args=[job.pk])
        job.refresh_from_db()
        assert job.attempts == 1
        assert _markers(job) == 1

    def test_cancelling_a_queued_job_means_it_never_runs(self, campaign):
        job = Job.objects.create(
            kind="marker",
            task_name=marker_task.name,
            campaign=campaign,
            params={"campaign": campaign.pk},
        )
        jobs.request_cancel(job)
        marker_task.apply(args=[job.pk])
        job.refresh_from_db()
        assert job.status == Job.Status.CANCELLED
        assert job.attempts == 0
        assert _markers(job) == 0

    def test_a_failed_job_can_be_retried(self, campaign):
        job = _enqueue(campaign, refuse=True)
        job.params = {"campaign": campaign.pk}
        job.save(update_fields=["params"])
        with transaction.atomic():
            assert jobs.retry(job)
        job.refresh_from_db()
        assert job.status == Job.Status.DONE
        assert _markers(job) == 1

    def test_a_claim_on_a_running_job_with_a_fresh_heartbeat_is_busy(self, campaign):
        job = Job.objects.create(kind="marker", task_name=marker_task.name, campaign=campaign)
        outcome, _ = jobs.claim(job.pk)
        assert outcome is jobs.Claim.CLAIMED
        outcome, _ = jobs.claim(job.pk)
        assert outcome is jobs.Claim.BUSY


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_job_enqueued_through_the_broker_runs_in_the_worker_process(campaign):
    job = wait_for_job(_enqueue(campaign, steps=2))
    assert job.status == Job.Status.DONE, job.error
    # The subprocess's node name where a broker exists; in-process in the embedded mode.
    assert job.worker.startswith("test-") if HAS_BROKER else job.worker == "in-process"
    assert _markers(job) == 1


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_job_that_fails_every_time_stops_at_the_cap_in_the_worker(campaign):
    job = wait_for_job(_enqueue(campaign, raise_attempts_upto=99), timeout=90)
    assert job.status == Job.Status.FAILED
    assert job.attempts == 3
    assert "transient failure on attempt 3" in job.error


@pytest.mark.django_db(transaction=True)
def test_sigkill_of_the_pool_process_is_retried_and_done_exactly_once(campaign, worker_factory):
    worker = worker_factory()
    job = _enqueue(campaign, kill_attempts_upto=1)
    job = wait_for_job(job, timeout=90)
    assert job.status == Job.Status.DONE, (job.error, worker.log())
    assert job.attempts == 2
    assert _markers(job) == 1
    assert worker.process.poll() is None  # the main worker process survived its child


@pytest.mark.django_db(transaction=True)
def test_a_task_that_kills_its_worker_every_time_is_given_up(campaign, worker_factory):
    worker = worker_factory()
    job = wait_for_job(_enqueue(campaign, kill_attempts_upto=99), timeout=120)
    assert job.status == Job.Status.FAILED, worker.log()
    assert job.attempts == 3
    assert "Gave up after 3 attempts" in job.error
    assert _markers(job) == 0


@pytest.mark.django_db(transaction=True)
def test_sigkill_of_the_whole_worker_mid_job_is_redelivered_and_done_once(
    campaign, worker_factory, tmp_path
):
    first = worker_factory(**FAST_REDELIVERY)
    flag = tmp_path / "started"
    job = _enqueue(campaign, steps=8, step_seconds=0.4, started_flag=str(flag))
    deadline = time.monotonic() + 30
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert flag.exists(), first.log()
    first.kill_all()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING

    second = worker_factory(**FAST_REDELIVERY)
    job = wait_for_job(job, timeout=90)
    assert job.status == Job.Status.DONE, (job.error, second.log())
    assert job.attempts == 2
    assert _markers(job) == 1
