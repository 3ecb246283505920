"""Tasks that exist only for the job-machinery tests. The worker subprocess loads this module with
``-I tests.worker_tasks``; the test process imports it to send them."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from celery import shared_task

from campaigns.jobs import JobFailed, Progress, run_job
from campaigns.models import Job, Topic


def _marker(job: Job, progress: Progress) -> dict:
    """Write one topic named after the job: the effect that must happen exactly once."""
    params = job.params
    if params.get("started_flag"):
        Path(params["started_flag"]).write_text(f"{os.getpid()} {job.attempts}\n")
    steps = params.get("steps", 1)
    progress.update(0, total=steps)
    for step in range(steps):
        time.sleep(params.get("step_seconds", 0))
        progress.update(step + 1, message=f"step {step + 1}")
    Topic.objects.create(campaign_id=params["campaign"], topic_id=f"marker-{job.pk}")
    if job.attempts <= params.get("kill_attempts_upto", 0):
        # Die the way an OOM kill does: no cleanup, no exception, no ack.
        os.kill(os.getpid(), signal.SIGKILL)
    if job.attempts <= params.get("raise_attempts_upto", 0):
        raise RuntimeError(f"transient failure on attempt {job.attempts}")
    if params.get("refuse"):
        raise JobFailed("bad input on line 3", result={"problems": ["line 3: bad"]})
    return {"attempt": job.attempts, "pid": os.getpid()}


@shared_task(bind=True, name="tests.worker_tasks.marker_task")
def marker_task(self, job_id: int) -> None:
    run_job(self, job_id, _marker)
