"""What one upload on the Files page may hold, and what happens past it: many files at once (all
143 TREC-COVID round 1 runs; Django's own limit of 100 answered a bare "Bad Request (400)"), the
limits stated on the page, and a message naming the limit, with nothing stored, when a request
passes one while it streams in. Then the bytes of failed imports, deleted after the retention
period by the paths that run in a deployment."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from campaigns import jobs
from campaigns.models import Job, Upload, UploadChunk
from campaigns.uploads import purge_expired_bytes, store_upload
from pooling.models import Run
from tests.conftest import wait_for_job
from tests.factories import make_topics
from tests.imports import run_lines, stored_rows
from tests.imports.test_upload_pages import page, text_file, upload

COVID_RUNS = Path(settings.BASE_DIR).parent / "shared" / "data" / "trec-covid-round1" / "runs"


def tiny_runs(count: int) -> list[SimpleUploadedFile]:
    return [
        text_file(f"sys{n:03d}.run", run_lines(f"sys{n:03d}", {"051": [(f"d{n}", 1.0)]}))
        for n in range(count)
    ]


@pytest.mark.django_db(transaction=True)
def test_143_run_files_are_one_upload_and_one_job(client, campaign, organiser):
    make_topics(campaign, ["051"])
    client.force_login(organiser)
    response = upload(client, campaign, "runs", tiny_runs(143))
    assert response.status_code == 302
    job = wait_for_job(Job.objects.get(kind="import_runs"))
    assert job.status == Job.Status.DONE, job.error
    assert len(job.params["files"]) == Upload.objects.count() == 143
    assert Run.objects.count() == 143


@pytest.mark.django_db
class TestLimits:
    def test_the_page_states_them(self, client, campaign, organiser):
        client.force_login(organiser)
        html = page(client, campaign)
        assert (
            "Up to 1,000 files at once, each up to 1 GiB, 4 GiB in all. More or bigger: "
            "<code>manage.py import_runs</code>." in html
        )
        assert "Up to 1 GiB. Bigger: <code>manage.py import_topics</code>." in html

    @override_settings(POOLJUDGE_MAX_UPLOAD_FILES=5)
    def test_one_file_too_many_is_refused_by_name_and_nothing_is_stored(
        self, client, campaign, organiser
    ):
        client.force_login(organiser)
        before = stored_rows()
        response = upload(client, campaign, "runs", tiny_runs(6))
        assert response.status_code == 400
        html = response.content.decode()
        assert (
            "More than 5 files were sent at once; nothing was stored. Upload them in batches "
            "of at most 5, or import them with the command line." in html
        )
        assert "Bad Request" not in html
        assert "This field is required" not in html
        assert stored_rows() == before

    @override_settings(POOLJUDGE_MAX_UPLOAD_FILES=5)
    def test_the_limit_itself_is_accepted(self, client, campaign, organiser):
        client.force_login(organiser)
        assert upload(client, campaign, "runs", tiny_runs(5)).status_code == 302
        assert Upload.objects.count() == 5

    @override_settings(POOLJUDGE_MAX_UPLOAD_TOTAL_BYTES=1000)
    def test_too_much_in_all_is_refused_while_it_streams_in(self, client, campaign, organiser):
        client.force_login(organiser)
        files = [text_file(f"r{n}.run", "051 Q0 d1 1 1.0 r\n" * 20) for n in range(3)]
        response = upload(client, campaign, "runs", files)
        assert response.status_code == 400
        assert "The files sent at once come to more than 1,000 bytes; nothing was stored." in (
            response.content.decode()
        )
        assert not Upload.objects.exists()

    @override_settings(POOLJUDGE_MAX_UPLOAD_BYTES=100)
    def test_an_htmx_upload_past_a_limit_gets_its_card_back_with_the_message(
        self, client, campaign, organiser
    ):
        client.force_login(organiser)
        files = [text_file("ok.run", "051 Q0 d1 1 1 r\n"), text_file("big.run", "x" * 200)]
        response = upload(client, campaign, "runs", files, htmx=True)
        assert response.status_code == 200
        fragment = response.content.decode()
        assert fragment.lstrip().startswith('<section class="card import-card" id="import-runs">')
        assert "big.run is larger than the limit of 100 bytes per file" in fragment
        assert not Upload.objects.exists()


@pytest.mark.shared_data
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_all_143_trec_covid_runs_in_one_upload(client, campaign, organiser):
    if not COVID_RUNS.is_dir():
        pytest.skip(f"{COVID_RUNS} is absent")
    make_topics(campaign, [str(n) for n in range(1, 31)])
    client.force_login(organiser)
    paths = sorted(COVID_RUNS.iterdir())
    files = [SimpleUploadedFile(path.name, path.read_bytes()) for path in paths]
    response = upload(client, campaign, "runs", files)
    assert response.status_code == 302
    job = wait_for_job(Job.objects.get(kind="import_runs"), timeout=600)
    assert job.status == Job.Status.DONE, job.error
    assert job.result["counts"] == {"runs": 143, "lines": 3_509_493, "run topics": 143 * 30}
    assert "Imported runs: 143 runs, 3,509,493 lines, 4,290 run topics." in page(client, campaign)


# --- The bytes of failed imports -------------------------------------------------------------


def failed_import(campaign, *, ended_hours_ago: float) -> Upload:
    stored = store_upload(
        campaign=campaign, kind="runs", file=text_file("r.run", "051 Q0 d 1 1 r\n")
    )
    job = Job.objects.create(
        campaign=campaign,
        kind="import_runs",
        task_name="pooling.tasks.import_runs_task",
        status=Job.Status.FAILED,
        finished_at=timezone.now() - timedelta(hours=ended_hours_ago),
        params={"uploads": [stored.pk], "files": [stored.name]},
    )
    Upload.objects.filter(pk=stored.pk).update(job=job)
    stored.refresh_from_db()
    return stored


@pytest.mark.django_db
class TestRetention:
    @override_settings(POOLJUDGE_UPLOAD_RETENTION_HOURS=24)
    def test_failed_imports_lose_their_bytes_after_the_retention_period(self, campaign):
        old = failed_import(campaign, ended_hours_ago=25)
        recent = failed_import(campaign, ended_hours_ago=23)
        waiting = store_upload(
            campaign=campaign, kind="runs", file=text_file("w.run", "1 Q0 d 1 1 w\n")
        )
        queued = Job.objects.create(campaign=campaign, kind="import_runs", task_name="x")
        Upload.objects.filter(pk=waiting.pk).update(
            job=queued, created_at=timezone.now() - timedelta(days=30)
        )
        assert purge_expired_bytes() == 1
        assert not UploadChunk.objects.filter(upload=old).exists()
        assert UploadChunk.objects.filter(upload=recent).exists()
        assert UploadChunk.objects.filter(upload=waiting).exists()  # its job may still run
        # The record of what was uploaded stays.
        assert Upload.objects.filter(pk=old.pk, name="r.run").exists()

    @override_settings(POOLJUDGE_UPLOAD_RETENTION_HOURS=24)
    def test_uploads_no_job_points_to_go_after_the_same_period(self, campaign):
        orphan = store_upload(
            campaign=campaign, kind="runs", file=text_file("o.run", "1 Q0 d 1 1 o\n")
        )
        assert purge_expired_bytes() == 0
        Upload.objects.filter(pk=orphan.pk).update(created_at=timezone.now() - timedelta(hours=25))
        assert purge_expired_bytes() == 1
        assert not UploadChunk.objects.exists()

    @override_settings(POOLJUDGE_UPLOAD_RETENTION_HOURS=24)
    def test_a_new_upload_purges_the_expired_bytes(self, client, campaign, organiser):
        old = failed_import(campaign, ended_hours_ago=25)
        client.force_login(organiser)
        assert upload(client, campaign, "runs", tiny_runs(1)).status_code == 302
        assert not UploadChunk.objects.filter(upload=old).exists()

    @override_settings(POOLJUDGE_UPLOAD_RETENTION_HOURS=24)
    def test_the_worker_housekeeping_and_the_command_purge_them(self, campaign):
        failed_import(campaign, ended_hours_ago=25)
        assert jobs.housekeeping() == {"uploads": 1, "workers": 0}
        failed_import(campaign, ended_hours_ago=48)
        out = StringIO()
        call_command("purge_uploads", stdout=out)
        assert out.getvalue() == "Deleted the stored bytes of 1 upload kept more than 24 hours.\n"
        assert not UploadChunk.objects.exists()

    @override_settings(POOLJUDGE_UPLOAD_RETENTION_HOURS=24)
    def test_the_job_page_says_until_when_the_files_are_kept(self, client, campaign, organiser):
        stored = failed_import(campaign, ended_hours_ago=2)
        job = stored.job
        client.force_login(organiser)
        url = reverse("campaigns:job", args=[campaign.slug, job.pk])
        until = timezone.localtime(job.finished_at + timedelta(hours=24)).strftime("%Y-%m-%d %H:%M")
        assert (
            f"kept for a retry until {until} UTC, then deleted" in client.get(url).content.decode()
        )
        purge_expired_bytes(now=timezone.now() + timedelta(hours=23))
        html = client.get(url).content.decode()
        assert "deleted after the retention period: upload them again rather than retry" in html
