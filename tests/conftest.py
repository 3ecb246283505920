"""Shared fixtures: named people on a campaign, the Celery mode, and a real worker process.

With DATABASE_URL and REDIS_URL set (CI always sets them) the suite runs on PostgreSQL, and tests
marked ``worker`` run their jobs in a separate ``celery worker`` process through Redis. Without
them, everything runs on SQLite with tasks executed in-process. In CI (CI=true) a missing service
or browser is an error, never a skip.

Hypothesis runs derandomized, with no example database, unless HYPOTHESIS_PROFILE=fuzz (``make
fuzz``): the same commit always draws the same examples, so ``make test`` and CI never turn red
for a bug that an earlier run happened not to draw. Exploring with fresh seeds is ``make fuzz``'s
job; a falsifying example it finds is printed as an ``@example(...)`` line to pin in the test.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from hypothesis import settings as hypothesis_settings

from campaigns.members import add_member
from campaigns.models import Campaign, Job
from campaigns.scales import SCALES
from pooljudge.celery import app as celery_app
from tests.workers import WorkerProcess

IN_CI = os.environ.get("CI", "").lower() == "true"
HAS_BROKER = not settings.CELERY_TASK_ALWAYS_EAGER
SHARED_DATA = Path(settings.BASE_DIR).parent / "shared" / "data"
# A queue of its own per test session: stale messages from an earlier run can never be consumed.
TEST_QUEUE = f"pooljudge-test-{uuid.uuid4().hex[:8]}"

hypothesis_settings.register_profile("deterministic", derandomize=True, database=None)
hypothesis_settings.register_profile("fuzz", derandomize=False, database=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
# Hypothesis's report of a failure, "Failing test case: test_name(\n    arg=...,\n)" in the
# exception's notes ("Falsifying example:" in the report of older versions).
_FALSIFYING = re.compile(r"^(?:Failing test case|Falsifying example): \w+\((.*?)^\)", re.M | re.S)

if IN_CI and not (HAS_BROKER and settings.DATABASES["default"]["ENGINE"].endswith("postgresql")):
    raise pytest.UsageError("CI=true needs DATABASE_URL (PostgreSQL) and REDIS_URL set.")


def pytest_collection_modifyitems(config, items):
    """Under ``pytest -n`` (``make test`` runs the suite on several processes), every test that
    drives Chromium or a real Celery worker goes to one process (``--dist loadgroup``): one
    browser, one live server and one worker process serve them all, as in a serial run, while
    the other tests spread over the remaining processes."""
    services = pytest.mark.xdist_group("services")
    for item in items:
        if item.get_closest_marker("browser") or item.get_closest_marker("worker"):
            item.add_marker(services)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Add each falsifying example Hypothesis found to the failure as a line to paste above the
    test, so that the example is tried on every run from then on."""
    report = yield
    texts = [getattr(item, "hypothesis_report_information", "")]
    errors = [call.excinfo.value] if call.excinfo else []
    while errors:  # several distinct bugs come as an ExceptionGroup, one note each
        error = errors.pop()
        texts += getattr(error, "__notes__", [])
        errors += getattr(error, "exceptions", [])
    found = _FALSIFYING.findall("\n".join(texts))
    if report.failed and found:
        pins = "\n".join(f"@example({arguments.rstrip()}\n)" for arguments in found)
        report.sections.append(("Pin it: paste above the test", pins))
    return report


def require(condition: bool, reason: str) -> None:
    """Skip locally when a service is absent; in CI the same absence fails the test."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True, scope="session")
def _plain_static_storage():
    # Hashed static names need collectstatic; tests serve static files from the source tree.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(autouse=True)
def _celery_mode(request):
    """Jobs run in-process unless the test is marked ``worker`` and a broker exists."""
    use_worker = request.node.get_closest_marker("worker") is not None and HAS_BROKER
    celery_app.conf.task_always_eager = not use_worker
    celery_app.conf.task_default_queue = TEST_QUEUE
    if use_worker:
        request.getfixturevalue("celery_worker")
    yield
    celery_app.conf.task_always_eager = settings.CELERY_TASK_ALWAYS_EAGER


def worker_env(**overrides: str) -> dict[str, str]:
    """Environment for a worker subprocess that reads and writes the test database."""
    from django.db import connection

    db = connection.settings_dict
    env = dict(os.environ)
    if db["ENGINE"].endswith("postgresql"):
        auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        host = db["HOST"] or "localhost"
        port = f":{db['PORT']}" if db["PORT"] else ""
        env["DATABASE_URL"] = f"postgres://{auth}@{host}{port}/{db['NAME']}"
    env.update(
        {
            "CELERY_QUEUE": TEST_QUEUE,
            "JOB_HEARTBEAT_SECONDS": "0.5",
            "JOB_STALE_AFTER_SECONDS": "3",
            "JOB_MAX_ATTEMPTS": "3",
            "SECRET_KEY": settings.SECRET_KEY,
        }
    )
    env.update(overrides)
    return env


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """One real worker process for the session, consuming the test queue."""
    require(HAS_BROKER, "REDIS_URL is not set: no real worker to run jobs")
    worker = WorkerProcess(
        env=worker_env(),
        queue=TEST_QUEUE,
        log_path=tmp_path_factory.mktemp("worker") / "worker.log",
        concurrency=2,
    )
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture
def worker_factory(transactional_db, tmp_path):
    """Start (and always clean up) workers with their own settings, for crash tests."""
    require(HAS_BROKER, "REDIS_URL is not set: no real worker to crash")
    started: list[WorkerProcess] = []
    # A queue of their own, so the session's worker never takes the job that is meant to crash.
    queue = f"{TEST_QUEUE}-crash-{uuid.uuid4().hex[:6]}"
    celery_app.conf.task_always_eager = False
    celery_app.conf.task_default_queue = queue

    def start(**env_overrides: str) -> WorkerProcess:
        worker = WorkerProcess(
            env=worker_env(CELERY_QUEUE=queue, **env_overrides),
            queue=queue,
            log_path=tmp_path / f"worker-{len(started)}.log",
            concurrency=1,
        )
        started.append(worker)
        worker.start()
        return worker

    yield start
    for worker in started:
        worker.stop()


def wait_for_job(job: Job, *, timeout: float = 60.0) -> Job:
    """Poll the job row until it is final (immediate in eager mode)."""
    deadline = time.monotonic() + timeout
    while True:
        job.refresh_from_db()
        if job.is_final or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


# --- People and a campaign -----------------------------------------------------------------------

User = get_user_model()
PASSWORD = "correct-horse-battery-staple"


@pytest.fixture
def campaign(db) -> Campaign:
    scale = SCALES["graded3"]
    campaign = Campaign.objects.create(
        slug="robust04", title="Robust 2004 re-judging", relevance_threshold=scale.threshold
    )
    campaign.save_rubric(list(scale.labels), note="preset")
    return campaign


@pytest.fixture
def other_campaign(db) -> Campaign:
    scale = SCALES["binary"]
    other = Campaign.objects.create(slug="other", title="Another campaign")
    other.save_rubric(list(scale.labels))
    return other


def _user(username: str):
    return User.objects.create_user(username=username, password=PASSWORD)


@pytest.fixture
def organiser(campaign):
    user = _user("olivia")
    add_member(campaign=campaign, user=user, role="organiser")
    return user


@pytest.fixture
def assessor_a(campaign):
    user = _user("alice")
    add_member(campaign=campaign, user=user, role="assessor")
    return user


@pytest.fixture
def assessor_b(campaign):
    user = _user("bob")
    add_member(campaign=campaign, user=user, role="assessor")
    return user


@pytest.fixture
def outsider(db):
    return _user("mallory")


@pytest.fixture
def other_organiser(other_campaign):
    user = _user("oscar")
    add_member(campaign=other_campaign, user=user, role="organiser")
    return user


# Requests arrive over HTTPS, as behind the production proxy: with DEBUG off the suite runs the
# production settings (SSL redirect, secure cookies) rather than a laxer copy of them.
class HttpsClient(Client):
    """A browser on the production site: HTTPS, and a same-origin Referer as browsers send."""

    def generic(self, *args, secure: bool = True, **kwargs):
        kwargs.setdefault("HTTP_REFERER", "https://testserver/")
        return super().generic(*args, secure=True, **kwargs)


@pytest.fixture
def client() -> HttpsClient:
    return HttpsClient()


@pytest.fixture
def csrf_client() -> HttpsClient:
    return HttpsClient(enforce_csrf_checks=True)
