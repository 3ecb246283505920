"""The organiser's Export page: authorisation, CSRF, building a bundle as a job, downloading it."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.urls import reverse

from campaigns.models import Job
from qrels.models import Export, ExportChunk
from tests.conftest import HAS_BROKER, PASSWORD, wait_for_job
from tests.qrels.test_export import judged  # noqa: F401 (fixture)


def login(client, user):
    assert client.login(username=user.get_username(), password=PASSWORD)
    return client


def export_url(campaign):
    return reverse("qrels:export", args=[campaign.slug])


def build(client, campaign, **options):
    data = {"policy": "", "unjudged": "omit", "include_imported": "on", "pool": "", **options}
    return client.post(export_url(campaign), data)


def only_export(campaign) -> Export:
    export = Export.objects.get(campaign=campaign)
    wait_for_job(export.job)
    export.refresh_from_db()
    return export


def download(client, campaign, export) -> zipfile.ZipFile:
    response = client.get(reverse("qrels:export_download", args=[campaign.slug, export.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == f'attachment; filename="{export.file_name}"'
    data = b"".join(response.streaming_content)
    assert len(data) == export.size == int(response["Content-Length"])
    return zipfile.ZipFile(io.BytesIO(data))


@pytest.mark.django_db
class TestWhoMaySee:
    def test_the_organiser_sees_the_page_and_its_tab(self, client, organiser, campaign):
        response = login(client, organiser).get(export_url(campaign))
        assert response.status_code == 200
        assert b'aria-current="page">Export</a>' in response.content
        assert b"Build bundle" in response.content

    @pytest.mark.parametrize("who", ["assessor_a", "outsider", "other_organiser"])
    def test_anyone_else_gets_404(self, client, campaign, who, request):
        user = request.getfixturevalue(who)
        login(client, user)
        assert client.get(export_url(campaign)).status_code == 404
        assert build(client, campaign).status_code == 404

    def test_anonymous_visitors_are_sent_to_log_in(self, client, campaign):
        response = client.get(export_url(campaign))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))

    def test_a_bundle_of_another_campaign_is_404(self, client, organiser, campaign, other_campaign):
        foreign = Export.objects.create(campaign=other_campaign, file_name="other.zip")
        login(client, organiser)
        for name in ("qrels:export_download", "qrels:export_readme"):
            url = reverse(name, args=[campaign.slug, foreign.pk])
            assert client.get(url).status_code == 404
            url = reverse(name, args=[other_campaign.slug, foreign.pk])
            assert client.get(url).status_code == 404

    def test_an_unfinished_bundle_is_not_served(self, client, organiser, campaign):
        job = Job.objects.create(campaign=campaign, kind="export_qrels", task_name="x")
        export = Export.objects.create(campaign=campaign, file_name="x.zip", job=job)
        login(client, organiser)
        url = reverse("qrels:export_download", args=[campaign.slug, export.pk])
        assert client.get(url).status_code == 404


@pytest.mark.django_db
def test_the_post_needs_a_csrf_token(csrf_client, organiser, campaign):
    login(csrf_client, organiser)
    response = build(csrf_client, campaign)
    assert response.status_code == 403
    assert not Export.objects.exists()
    page = csrf_client.get(export_url(campaign))
    token = page.context["csrf_token"]
    response = build(csrf_client, campaign, csrfmiddlewaretoken=str(token))
    assert response.status_code == 302
    assert Export.objects.count() == 1


@pytest.mark.django_db
def test_bad_options_are_shown_next_to_the_form(client, organiser, campaign):
    response = build(login(client, organiser), campaign, policy="median", pool="99")
    assert response.status_code == 400
    assert b"Select a valid choice" in response.content
    assert not Export.objects.exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("judged")
class TestBuildingAndDownloading:
    def test_a_bundle_is_built_by_a_job_and_downloads(self, client, organiser, campaign):
        login(client, organiser)
        response = build(client, campaign, unjudged="-1")
        assert response.status_code == 302
        export = only_export(campaign)
        assert export.job.status == Job.Status.DONE, export.job.error
        assert export.job.kind == "export_qrels"
        # With a broker (CI, PostgreSQL) a separate worker process built it.
        assert (export.job.worker == "in-process") is not HAS_BROKER
        assert export.options == {
            "policy": "primary",
            "per_assessor": False,
            "unjudged": "-1",
            "binary": False,
            "include_imported": True,
            "include_models": False,
            "include_filled": False,
            "usernames": False,
            "pool": None,
        }
        assert export.file_name.startswith("robust04-qrels-")
        assert export.file_name.endswith(".zip")
        assert ExportChunk.objects.filter(export=export).count() >= 1
        root = export.file_name.removesuffix(".zip")
        with download(client, campaign, export) as bundle:
            assert bundle.testzip() is None
            assert bundle.namelist() == [
                f"{root}/{name}"
                for name in (
                    "qrels.txt",
                    "judgments.tsv",
                    "judgments.jsonl",
                    "README.md",
                    "campaign.json",
                    "SHA256SUMS",
                )
            ]
            qrels = bundle.read(f"{root}/qrels.txt").decode()
            assert "051 0 d00042 2\n" in qrels
            assert "051 0 d77 -1\n" in qrels
        page = client.get(export_url(campaign))
        assert export.sha256[:12].encode() in page.content
        assert b"README of the latest bundle" in page.content
        readme = client.get(reverse("qrels:export_readme", args=[campaign.slug, export.pk]))
        assert readme.status_code == 200
        assert readme.content.decode() == export.readme
        assert export.readme.startswith("# Robust 2004 re-judging: relevance judgments")

    def test_htmx_builds_in_place_and_lists_the_bundle(self, client, organiser, campaign):
        login(client, organiser)
        response = client.post(
            export_url(campaign),
            {"policy": "max", "unjudged": "omit", "per_assessor": "on", "pool": ""},
            HTTP_HX_REQUEST="true",
        )
        assert response.status_code == 200
        assert "exports-changed" in response["HX-Trigger"]
        assert b'id="build"' in response.content
        assert b"<html" not in response.content
        export = only_export(campaign)
        assert export.options["per_assessor"] is True
        assert export.options["include_imported"] is False  # an unticked box is off
        listing = client.get(export_url(campaign), HTTP_HX_REQUEST="true")
        assert listing.status_code == 286  # nothing left running: stop polling
        assert b'id="exports"' in listing.content
        assert b"per assessor" in listing.content
        with download(client, campaign, export) as bundle:
            names = bundle.namelist()
        assert any(name.endswith("/qrels/a0000001.txt") for name in names)
        assert not any(name.endswith("/qrels.txt") for name in names)

    def test_a_refused_policy_fails_the_job_with_the_conflicts(self, client, organiser, campaign):
        login(client, organiser)
        build(client, campaign, policy="refuse")
        export = only_export(campaign)
        assert export.job.status == Job.Status.FAILED
        assert "disagree on 1 pair" in export.job.error
        assert export.job.result["problems"] == ["topic 051 document d00042: alice=2, bob=1"]
        assert not export.is_ready
        page = client.get(export_url(campaign))
        assert b"topic 051 document d00042: alice=2, bob=1" in page.content
