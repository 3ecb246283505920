"""A real worker judging with a model is SIGKILLed mid-job: no pair is ever asked twice.

Needs PostgreSQL and Redis (CI sets them; skipped locally without REDIS_URL): the job runs in a
``celery worker`` subprocess that calls the loopback model server of tests/llm_server.py.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.db import transaction

from assess.model_judging import Execution, model_config, start_model_judging
from assess.models import ModelCall
from campaigns.models import Document, Job, Judgment
from tests.conftest import wait_for_job
from tests.factories import make_pool, make_run, make_topics
from tests.llm_server import FakeModel

DOCS = [f"d{i:02d}" for i in range(1, 9)]


@pytest.mark.xdist_group("services")
@pytest.mark.django_db(transaction=True)
def test_sigkill_of_the_worker_mid_job_never_pays_twice(campaign, worker_factory):
    make_topics(campaign, ["301"])
    Document.objects.bulk_create(
        Document(campaign=campaign, doc_id=d, body=f"PAUSE-{d}") for d in DOCS
    )
    make_run(campaign, "r", {"301": [(d, 10.0 - i) for i, d in enumerate(DOCS)]})
    pool = make_pool(campaign, depth=10)
    with FakeModel(pause=0.8) as server:
        worker = worker_factory()
        with transaction.atomic():
            config = model_config(campaign=campaign, endpoint=server.url, model="m")
            job = start_model_judging(
                config=config,
                pool=pool,
                execution=Execution(concurrency=2, per_minute=0, timeout=20, retries=0),
            )
        # Kill the child once two answers are in and two more calls are out.
        deadline = time.monotonic() + 60
        while sum(server.hits.values()) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sum(server.hits.values()) >= 4, worker.log()
        for pid in worker.pool_pids():
            os.kill(pid, signal.SIGKILL)
        job = wait_for_job(job, timeout=120)
        assert job.status == Job.Status.DONE, (job.error, worker.log())
        assert job.attempts == 2
        asked = dict(server.hits)
    assert set(asked) == {f"PAUSE-{d}" for d in DOCS}
    assert set(asked.values()) == {1}  # every pair asked exactly once, across both attempts
    statuses = dict(ModelCall.objects.filter(config=config).values_list("doc_id", "status"))
    interrupted = [d for d, s in statuses.items() if s == ModelCall.Status.INTERRUPTED]
    labelled = [d for d, s in statuses.items() if s == ModelCall.Status.LABELLED]
    assert 1 <= len(interrupted) <= 2  # the calls that were out when the worker died
    assert len(interrupted) + len(labelled) == len(DOCS)
    assert Judgment.objects.filter(assessor=config.assessor).count() == len(labelled)
