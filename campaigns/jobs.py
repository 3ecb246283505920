"""Background jobs: the job table is the truth, Celery only delivers.

A task (``…_task(job_id)``) calls :func:`run_job` with a handler, the domain function that does the
work. ``run_job`` claims the job row with one conditional UPDATE, so a message delivered twice
(``acks_late`` redelivery after a worker died, a duplicate enqueue) runs the work once; it counts
attempts and gives up after ``max_attempts`` (a task that kills its worker every time must not loop
forever); and it writes the handler's results and the ``done`` status in one transaction, so a
worker killed mid-job leaves nothing half-written and the retry starts clean.

Progress and heartbeat are written by a small thread on its own database connection, because the
handler's own transaction is invisible to the pages that poll the row until it commits.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from campaigns.models import Campaign, Job

log = logging.getLogger(__name__)


class JobFailed(Exception):
    """A failure retrying cannot fix (bad input, a refused import): the job fails at once.

    ``result`` is stored on the job (for example the list of line-numbered problems)."""

    def __init__(self, message: str, *, result: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.result = result or {}


class JobCancelled(Exception):
    """Raised inside a handler when an organiser cancelled the job; its transaction rolls back."""


class _LostClaim(Exception):
    """Another attempt owns the job now; this one's work must not commit."""


class Claim(enum.Enum):
    CLAIMED = "claimed"
    BUSY = "busy"  # running elsewhere with a fresh heartbeat: try again later
    FINISHED = "finished"  # done, failed or cancelled: nothing to do
    GAVE_UP = "gave_up"  # attempt cap reached: marked failed now


Handler = Callable[[Job, "Progress"], dict[str, Any] | None]


def _live_heartbeat() -> bool:
    # SQLite has one writer: a second connection writing progress would wait on the handler's
    # own write transaction. Embedded (eager) runs block the request anyway.
    return connection.vendor != "sqlite"


def _stale_after() -> timedelta:
    if _live_heartbeat():
        return timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS)
    return timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)


def enqueue(
    *,
    kind: str,
    task: Task | str,
    campaign: Campaign | None = None,
    params: dict[str, Any] | None = None,
    user=None,
    max_attempts: int | None = None,
) -> Job:
    """Create a queued job and send its task once the surrounding transaction commits (never
    inside it: the worker must see the row)."""
    job = Job.objects.create(
        kind=kind,
        task_name=task if isinstance(task, str) else task.name,
        campaign=campaign,
        params=params or {},
        created_by=user if user is not None and user.is_authenticated else None,
        max_attempts=max_attempts or settings.JOB_MAX_ATTEMPTS,
    )
    transaction.on_commit(lambda: send(job.pk))
    return job


def send(job_id: int) -> None:
    """Hand the job to Celery (runs it here and now in eager mode)."""
    from pooljudge.celery import app

    job = Job.objects.get(pk=job_id)
    task = app.tasks[job.task_name]
    try:
        task.apply_async(args=[job_id])
    except Exception as exc:
        # The broker is down: the job stays queued, visible, and can be sent again.
        log.exception("could not enqueue job %s", job_id)
        Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
            error=f"Could not reach the task broker ({exc.__class__.__name__}); send it again."
        )


def claim(job_id: int, *, worker: str = "") -> tuple[Claim, Job | None]:
    now = timezone.now()
    stale = now - _stale_after()
    claimable = Q(status=Job.Status.QUEUED) | Q(status=Job.Status.RUNNING, heartbeat_at__lt=stale)
    updated = (
        Job.objects.filter(pk=job_id)
        .filter(claimable, attempts__lt=F("max_attempts"), cancel_requested=False)
        .update(
            status=Job.Status.RUNNING,
            attempts=F("attempts") + 1,
            heartbeat_at=now,
            started_at=now,
            worker=worker[:200],
            error="",
        )
    )
    job = Job.objects.filter(pk=job_id).first()
    if job is None:
        return Claim.FINISHED, None
    if updated:
        return Claim.CLAIMED, job
    if job.is_final:
        return Claim.FINISHED, job
    if job.cancel_requested:
        _finish(job, Job.Status.CANCELLED, error="Cancelled before it ran.")
        return Claim.FINISHED, job
    if job.attempts >= job.max_attempts and (
        job.status == Job.Status.QUEUED or job.heartbeat_at is None or job.heartbeat_at < stale
    ):
        reason = job.error or "the worker was lost each time (killed or out of memory)"
        gave_up = Job.objects.filter(pk=job_id, status__in=[job.status]).update(
            status=Job.Status.FAILED,
            finished_at=now,
            error=f"Gave up after {job.attempts} attempts: {reason}",
        )
        job.refresh_from_db()
        return (Claim.GAVE_UP if gave_up else Claim.FINISHED), job
    return Claim.BUSY, job


def _finish(job: Job, status: str, *, error: str = "", result: dict | None = None) -> bool:
    fields: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "error": error}
    if result is not None:
        fields["result"] = result
    return bool(
        Job.objects.filter(pk=job.pk, attempts=job.attempts, status=Job.Status.RUNNING).update(
            **fields
        )
    )


class Progress:
    """What a handler reports while it works. ``update`` is cheap (memory only); a heartbeat
    thread writes the latest values and reads the cancel flag every few seconds."""

    def __init__(self, job: Job, *, live: bool):
        self.job_id = job.pk
        self.attempt = job.attempts
        self.done = 0
        self.total: int | None = None
        self.message = ""
        self._live = live
        self._cancelled = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_check = time.monotonic()

    def update(
        self, done: int | None = None, *, total: int | None = None, message: str | None = None
    ) -> None:
        if done is not None:
            self.done = done
        if total is not None:
            self.total = total
        if message is not None:
            self.message = message[:200]
        self.check()

    def advance(self, n: int = 1, *, message: str | None = None) -> None:
        self.update(self.done + n, message=message)

    def check(self) -> None:
        """Raise JobCancelled if the job was cancelled."""
        if not self._live and time.monotonic() - self._last_check > settings.JOB_HEARTBEAT_SECONDS:
            self._last_check = time.monotonic()
            self._cancelled = Job.objects.filter(pk=self.job_id, cancel_requested=True).exists()
        if self._cancelled:
            raise JobCancelled

    def start(self) -> None:
        if self._live:
            self._thread = threading.Thread(target=self._beat, name=f"job-{self.job_id}-heartbeat")
            self._thread.daemon = True
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(settings.JOB_HEARTBEAT_SECONDS):
                self._flush()
        except Exception:
            log.exception("heartbeat of job %s stopped", self.job_id)
        finally:
            connections.close_all()

    def _flush(self) -> None:
        Job.objects.filter(pk=self.job_id, attempts=self.attempt, status=Job.Status.RUNNING).update(
            heartbeat_at=timezone.now(),
            progress_done=self.done,
            progress_total=self.total,
            progress_message=self.message,
        )
        if Job.objects.filter(pk=self.job_id, cancel_requested=True).exists():
            self._cancelled = True


def run_job(task: Task, job_id: int, handler: Handler) -> None:
    """Claim job ``job_id`` and run ``handler(job, progress)`` exactly once to completion.

    Called by every Celery task. Returns normally when there is nothing (more) to do; raises
    Celery's Retry when the job should be tried again later.
    """
    eager = bool(getattr(task.request, "is_eager", False))
    worker = "in-process" if eager else (getattr(task.request, "hostname", None) or "")
    outcome, job = claim(job_id, worker=worker)
    if outcome is Claim.BUSY:
        # Another delivery is running it (or its worker died a moment ago): look again once its
        # heartbeat would have gone stale.
        raise task.retry(countdown=settings.JOB_STALE_AFTER_SECONDS, max_retries=None)
    if outcome is not Claim.CLAIMED:
        return
    assert job is not None
    progress = Progress(job, live=_live_heartbeat() and not eager)
    progress.start()
    try:
        with transaction.atomic():
            result = handler(job, progress) or {}
            finished = Job.objects.filter(
                pk=job.pk, attempts=job.attempts, status=Job.Status.RUNNING
            ).update(
                status=Job.Status.DONE,
                result=result,
                finished_at=timezone.now(),
                progress_done=progress.total if progress.total is not None else progress.done,
                progress_total=progress.total,
                progress_message="",
                error="",
            )
            if not finished:
                raise _LostClaim
    except _LostClaim:
        log.warning("job %s was taken over by another attempt; this one rolled back", job_id)
    except JobCancelled:
        _finish(job, Job.Status.CANCELLED, error="Cancelled by an organiser.")
    except JobFailed as exc:
        _finish(job, Job.Status.FAILED, error=exc.message, result=exc.result)
    except SoftTimeLimitExceeded:
        _finish(job, Job.Status.FAILED, error="The job ran past the task time limit.")
    except Exception as exc:
        log.exception("job %s (%s) failed on attempt %s", job_id, job.kind, job.attempts)
        summary = "".join(traceback.format_exception_only(exc)).strip()[:2000]
        if job.attempts >= job.max_attempts:
            _finish(
                job, Job.Status.FAILED, error=f"Gave up after {job.attempts} attempts: {summary}"
            )
            return
        Job.objects.filter(pk=job.pk, attempts=job.attempts, status=Job.Status.RUNNING).update(
            status=Job.Status.QUEUED, error=summary
        )
        raise task.retry(countdown=min(60, 2**job.attempts), max_retries=None) from exc
    finally:
        progress.stop()


def request_cancel(job: Job) -> None:
    """Cancel a queued job now; ask a running one to stop at its next progress report."""
    now = timezone.now()
    Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(
        status=Job.Status.CANCELLED,
        cancel_requested=True,
        finished_at=now,
        error="Cancelled before it ran.",
    )
    Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(cancel_requested=True)
    job.refresh_from_db()


def retry(job: Job) -> bool:
    """Queue a failed or cancelled job again (or resend a queued one the broker never got)."""
    resend_after = timezone.now() - timedelta(minutes=1)
    reset = Job.objects.filter(
        Q(status__in=[Job.Status.FAILED, Job.Status.CANCELLED])
        | Q(status=Job.Status.QUEUED, created_at__lt=resend_after),
        pk=job.pk,
    ).update(
        status=Job.Status.QUEUED,
        attempts=0,
        error="",
        cancel_requested=False,
        progress_done=0,
        progress_total=None,
        progress_message="",
        started_at=None,
        finished_at=None,
        heartbeat_at=None,
    )
    if reset:
        transaction.on_commit(lambda: send(job.pk))
    job.refresh_from_db()
    return bool(reset)
