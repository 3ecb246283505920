"""Background jobs: the job table is the truth, Celery only delivers.

A task (``…_task(job_id)``) calls :func:`run_job` with a handler, the domain function that does the
work. ``run_job`` claims the job row with one conditional UPDATE, so a message delivered twice
(``acks_late`` redelivery after a worker died, a duplicate enqueue) runs the work once; it counts
attempts and gives up after ``max_attempts`` (a task that kills its worker every time must not loop
forever); and it writes the handler's results and the ``done`` status in one transaction, so a
worker killed mid-job leaves nothing half-written and the retry starts clean.

Progress and heartbeat are written by a small thread on its own database connection, because the
handler's own transaction is invisible to the pages that poll the row until it commits. The thread
outlives database blips: a failed beat is logged and retried on a fresh connection.

A running job whose heartbeat is older than ``JOB_STALE_AFTER_SECONDS`` is *lost* (its worker was
killed, ran out of memory or restarted): the pages say so and offer Retry and Cancel at once,
whatever Redis's visibility timeout. Attempt numbers only grow (a retry extends ``max_attempts``
rather than resetting ``attempts``), so every claim has a number of its own and a worker that
comes back, or a message Redis redelivers an hour later, can never commit over a newer claim.

Each worker's main process also writes a sign of life (:class:`WorkerHeartbeat`, the
``WorkerBeat`` table), which the jobs page and ``/healthz?deep=1`` read (:func:`worker_status`).
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from campaigns.models import Campaign, Job, WorkerBeat

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


def stale_cutoff() -> datetime:
    """A running job whose heartbeat is older than this is lost (``Job.is_lost``)."""
    return timezone.now() - _stale_after()


def _lost() -> Q:
    return Q(status=Job.Status.RUNNING) & (
        Q(heartbeat_at__lt=stale_cutoff()) | Q(heartbeat_at__isnull=True)
    )


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
    if job.task_name not in app.tasks:
        # A task named by string (e.g. pooling.pools.BUILD_TASK) whose module nothing has
        # imported yet in this process: Celery registers a task when its module is imported.
        importlib.import_module(job.task_name.rpartition(".")[0])
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
        self._lost = False
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
        """Raise JobCancelled if the job was cancelled; stop the work if another claim (a retry
        after this attempt was presumed lost) owns the job now."""
        if not self._live and time.monotonic() - self._last_check > settings.JOB_HEARTBEAT_SECONDS:
            self._last_check = time.monotonic()
            self._cancelled = Job.objects.filter(pk=self.job_id, cancel_requested=True).exists()
        if self._cancelled:
            raise JobCancelled
        if self._lost:
            raise _LostClaim

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
        failing_since: float | None = None
        try:
            while not self._stop.wait(settings.JOB_HEARTBEAT_SECONDS):
                try:
                    self._flush()
                except Exception:
                    # A database blip (restart, failover, a killed backend): the job may well be
                    # fine, so keep beating on a fresh connection rather than go quiet for good,
                    # which would leave the job looking lost and its cancel unseen.
                    if failing_since is None:
                        failing_since = time.monotonic()
                        log.exception("heartbeat of job %s failed; retrying", self.job_id)
                    _drop_connection()
                else:
                    if failing_since is not None:
                        log.warning(
                            "heartbeat of job %s back after %.1f s",
                            self.job_id,
                            time.monotonic() - failing_since,
                        )
                        failing_since = None
        finally:
            connections.close_all()

    def _flush(self) -> None:
        beating = Job.objects.filter(
            pk=self.job_id, attempts=self.attempt, status=Job.Status.RUNNING
        ).update(
            heartbeat_at=timezone.now(),
            progress_done=self.done,
            progress_total=self.total,
            progress_message=self.message,
        )
        if not beating:
            # Cancelled or retried after this attempt was presumed lost, or finished: in every
            # case this attempt's work must not go on (nor commit: its final update would fail).
            self._lost = True
        if Job.objects.filter(pk=self.job_id, cancel_requested=True).exists():
            self._cancelled = True


def _drop_connection() -> None:
    """Close this thread's (broken) database connection; the next query opens a new one."""
    with contextlib.suppress(Exception):
        connection.close()


def run_job(task: Task, job_id: int, handler: Handler, *, atomic: bool = True) -> None:
    """Claim job ``job_id`` and run ``handler(job, progress)`` exactly once to completion.

    Called by every Celery task. Returns normally when there is nothing (more) to do; raises
    Celery's Retry when the job should be tried again later. ``atomic=False`` is for a handler
    whose every step must outlive a killed worker (a paid call to a model endpoint): it commits
    as it goes and is idempotent step by step, and only the final ``done`` is written here.
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
        with transaction.atomic() if atomic else contextlib.nullcontext():
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
    """Cancel a queued job, or a lost one (no worker will read the flag), now; ask a running one
    to stop at its next progress report."""
    now = timezone.now()
    Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(
        status=Job.Status.CANCELLED,
        cancel_requested=True,
        finished_at=now,
        error="Cancelled before it ran.",
    )
    Job.objects.filter(_lost(), pk=job.pk).update(
        status=Job.Status.CANCELLED,
        cancel_requested=True,
        finished_at=now,
        error="Cancelled after its worker was lost; nothing it did was kept.",
    )
    Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(cancel_requested=True)
    job.refresh_from_db()


def retry(job: Job) -> bool:
    """Queue a failed, cancelled or lost job again (or resend a queued one the broker never got).

    The attempts made so far stay counted and the job gets ``JOB_MAX_ATTEMPTS`` more: the next
    claim is a new number, so an earlier attempt (a worker that comes back, a message Redis
    redelivers later) can no longer write to the job."""
    resend_after = timezone.now() - timedelta(minutes=1)
    reset = Job.objects.filter(
        Q(status__in=[Job.Status.FAILED, Job.Status.CANCELLED])
        | Q(status=Job.Status.QUEUED, created_at__lt=resend_after)
        | _lost(),
        pk=job.pk,
    ).update(
        status=Job.Status.QUEUED,
        max_attempts=F("attempts") + settings.JOB_MAX_ATTEMPTS,
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


# --- Worker liveness ------------------------------------------------------------------------------

# Housekeeping a worker does besides beating: purge expired upload bytes, forget old workers.
HOUSEKEEPING_SECONDS = 3600
FORGET_WORKERS_AFTER = timedelta(days=7)


class WorkerHeartbeat:
    """A thread in a Celery worker's main process that writes its ``WorkerBeat`` row every
    ``JOB_HEARTBEAT_SECONDS`` and, once an hour, does the housekeeping no beat scheduler is there
    to do (``celery beat`` is not part of the deployment): it deletes the expired bytes of failed
    imports. Started and stopped by the worker_ready and worker_shutdown signals
    (pooljudge/celery.py). Database errors are logged and retried, never fatal."""

    def __init__(self, name: str, *, queues: list[str]) -> None:
        self.name = name[:200]
        self.queues = ",".join(queues)[:500]
        self.started_at = timezone.now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-heartbeat", daemon=True)
        self._next_housekeeping = time.monotonic()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            WorkerBeat.objects.filter(name=self.name).update(stopped_at=timezone.now())
        except Exception:
            log.exception("worker %s could not record that it stopped", self.name)
        finally:
            connections.close_all()

    def _run(self) -> None:
        failing = False
        try:
            while True:
                try:
                    self.beat()
                    if time.monotonic() >= self._next_housekeeping:
                        self._next_housekeeping = time.monotonic() + HOUSEKEEPING_SECONDS
                        housekeeping()
                except Exception:
                    if not failing:
                        log.exception("worker %s: heartbeat failed; retrying", self.name)
                    failing = True
                    _drop_connection()
                else:
                    if failing:
                        log.warning("worker %s: heartbeat back", self.name)
                    failing = False
                if self._stop.wait(settings.JOB_HEARTBEAT_SECONDS):
                    return
        finally:
            connections.close_all()

    def beat(self) -> None:
        WorkerBeat.objects.update_or_create(
            name=self.name,
            defaults={
                "pid": os.getpid(),
                "queues": self.queues,
                "started_at": self.started_at,
                "seen_at": timezone.now(),
                "stopped_at": None,
            },
        )


def housekeeping() -> dict[str, int]:
    """The periodic clean-up, run hourly by every worker (and by ``manage.py purge_uploads``)."""
    from campaigns.uploads import purge_expired_bytes

    purged = purge_expired_bytes()
    forgotten, _ = WorkerBeat.objects.filter(
        seen_at__lt=timezone.now() - FORGET_WORKERS_AFTER
    ).delete()
    if purged:
        log.info("deleted the stored bytes of %s expired uploads", purged)
    return {"uploads": purged, "workers": forgotten}


@dataclass(frozen=True)
class WorkerStatus:
    """Whether any worker runs the jobs, as the jobs page and ``/healthz?deep=1`` report it."""

    in_process: bool = False  # no broker: jobs run in the web process that starts them
    alive: tuple[str, ...] = ()
    last: WorkerBeat | None = None  # the worker heard from most recently
    queue: str = ""

    @property
    def ok(self) -> bool:
        return self.in_process or bool(self.alive)

    @property
    def silent_seconds(self) -> float | None:
        if self.ok or self.last is None:
            return None
        return (timezone.now() - self.last.seen_at).total_seconds()

    def as_dict(self) -> dict[str, Any]:
        """For /healthz, which anyone may read: counts and times, no host names."""
        return {
            "ok": self.ok,
            "in_process": self.in_process,
            "alive": len(self.alive),
            "last_seen": self.last.seen_at.isoformat() if self.last else None,
            "silent_seconds": None if self.silent_seconds is None else round(self.silent_seconds),
        }


def worker_status() -> WorkerStatus:
    """Which workers consuming the queue jobs are sent to have beaten within
    ``JOB_STALE_AFTER_SECONDS`` (one small indexed query): a worker on another queue would
    never run them."""
    from pooljudge.celery import app

    if app.conf.task_always_eager:
        return WorkerStatus(in_process=True)
    queue = app.conf.task_default_queue
    cutoff = timezone.now() - timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS)
    recent = [
        beat
        for beat in WorkerBeat.objects.order_by("-seen_at")[:50]
        if queue in beat.queues.split(",")
    ]
    alive = tuple(
        sorted(beat.name for beat in recent if beat.stopped_at is None and beat.seen_at >= cutoff)
    )
    return WorkerStatus(alive=alive, last=recent[0] if recent else None, queue=queue)
