"""The Files page: organisers upload each kind of file, the import runs as a job (in the real
worker where a broker is configured), and the page shows the counts or the line-numbered
problems. Refused uploads store nothing and start no job."""

from __future__ import annotations

import gzip
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse

from campaigns.models import Job, Upload, UploadChunk
from campaigns.uploads import UploadRefused, store_upload
from pooling.models import Run
from tests.conftest import wait_for_job
from tests.factories import make_topics
from tests.imports import run_lines, stored_rows

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"


def files_url(campaign) -> str:
    return reverse("campaigns:files", args=[campaign.slug])


def upload_url(campaign, kind: str) -> str:
    return reverse("campaigns:upload", args=[campaign.slug, kind])


def token(client, campaign) -> str:
    page = client.get(files_url(campaign)).content.decode()
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def upload(client, campaign, kind: str, files, *, htmx: bool = False, **fields):
    """POST the kind's form as a browser does: multipart, with the page's CSRF token (in the
    form, or in the header htmx sends)."""
    data = {f"{kind}-{key}": value for key, value in fields.items()}
    data[f"{kind}-files"] = files
    csrf = token(client, campaign)
    if htmx:
        return client.post(
            upload_url(campaign, kind),
            data,
            headers={"HX-Request": "true", "X-CSRFToken": csrf},
        )
    return client.post(upload_url(campaign, kind), {**data, "csrfmiddlewaretoken": csrf})


def text_file(name: str, content: str | bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content.encode() if isinstance(content, str) else content)


def finished_job(kind: str) -> Job:
    job = wait_for_job(Job.objects.get(kind=f"import_{kind}"))
    assert job.is_final, f"job still {job.status} after the timeout"
    return job


def page(client, campaign) -> str:
    response = client.get(files_url(campaign))
    assert response.status_code == 200
    return response.content.decode()


class TestAccess:
    def test_organisers_see_the_files_page(self, client, campaign, organiser):
        client.force_login(organiser)
        html = page(client, campaign)
        for kind in ("topics", "documents", "runs", "qrels"):
            assert f'id="import-{kind}"' in html

    @pytest.mark.parametrize("who", ["assessor_a", "outsider", "other_organiser"])
    def test_nobody_else_finds_it(self, request, client, campaign, who):
        client.force_login(request.getfixturevalue(who))
        assert client.get(files_url(campaign)).status_code == 404
        response = client.post(upload_url(campaign, "topics"), {"topics-files": text_file("t", "")})
        assert response.status_code == 404
        assert not Upload.objects.exists()

    def test_anonymous_visitors_are_sent_to_log_in(self, client, campaign):
        response = client.get(files_url(campaign))
        assert response.status_code == 302
        assert response.url.startswith(reverse("login"))

    def test_an_unknown_kind_is_not_found(self, client, campaign, organiser):
        client.force_login(organiser)
        assert upload(client, campaign, "videos", text_file("v.txt", "x")).status_code == 404


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
class TestImportThroughThePage:
    def test_topics(self, client, campaign, organiser):
        client.force_login(organiser)
        response = upload(
            client,
            campaign,
            "topics",
            text_file("cran.qry", ".I 004\n.W\nfirst .\n.I 009\n.W\nsecond .\n"),
            positional_ids="on",
        )
        assert response.status_code == 302
        assert response.url == files_url(campaign)
        job = finished_job("topics")
        assert job.status == Job.Status.DONE, job.error
        assert list(campaign.topics.values_list("topic_id", flat=True)) == ["1", "2"]
        html = page(client, campaign)
        assert "Imported topics: 2 new topics, 0 updated, 0 unchanged." in html
        assert "<strong>2</strong><span>topics</span>" in html
        # The stored bytes are dropped once the import has succeeded.
        assert Upload.objects.get().name == "cran.qry"
        assert not UploadChunk.objects.exists()

    def test_documents_gzip(self, client, campaign, organiser):
        client.force_login(organiser)
        body = '{"id": "0042", "title": "T", "text": "<p>x</p><script>bad()</script>"}\n'
        response = upload(
            client, campaign, "documents", text_file("docs.jsonl.gz", gzip.compress(body.encode()))
        )
        assert response.status_code == 302
        job = finished_job("documents")
        assert job.status == Job.Status.DONE, job.error
        document = campaign.documents.get()
        assert (document.doc_id, document.body_html) == ("0042", "<p>x</p>")
        assert "Imported documents: 1 new documents, 0 updated, 0 unchanged." in page(
            client, campaign
        )

    def test_several_runs_at_once_with_htmx(self, client, campaign, organiser):
        make_topics(campaign, ["051", "052"])
        client.force_login(organiser)
        files = [
            text_file("a.txt", run_lines("a", {"051": [("d1", 2.0), ("d2", 1.0)]})),
            text_file("b.txt", run_lines("b", {"052": [("d1", 1.0)]}, separator="\t")),
        ]
        response = upload(client, campaign, "runs", files, htmx=True)
        assert response.status_code == 200
        fragment = response.content.decode()
        assert fragment.lstrip().startswith('<section class="card import-card" id="import-runs">')
        assert "<html" not in fragment
        job = finished_job("runs")
        assert f"job {job.pk}</a>" in fragment
        assert job.status == Job.Status.DONE, job.error
        assert job.params["files"] == ["a.txt", "b.txt"]
        assert sorted(Run.objects.values_list("tag", flat=True)) == ["a", "b"]
        assert "Imported runs: 2 runs, 3 lines, 2 run topics." in page(client, campaign)

    def test_qrels(self, client, campaign, organiser):
        make_topics(campaign, ["051"])
        client.force_login(organiser)
        response = upload(
            client,
            campaign,
            "qrels",
            text_file("qrels.txt", "051 0.5 0042 2\n051 0 d2 -1\n051 0 0042 1\n"),
            assessor="NIST-round1",
            on_conflict="max",
        )
        assert response.status_code == 302
        job = finished_job("qrels")
        assert job.status == Job.Status.DONE, job.error
        assert sorted(campaign.judgments.values_list("doc_id", "label")) == [
            ("0042", 2),
            ("d2", -1),
        ]
        html = page(client, campaign)
        assert "Imported qrels: 2 new judgments, 0 revised, 0 unchanged." in html
        assert "1 warning" in html

    def test_qrels_as_a_models_labels(self, client, campaign, organiser):
        from campaigns.models import Assessor

        make_topics(campaign, ["051"])
        client.force_login(organiser)
        assert "A model (an LLM judge)" in page(client, campaign)
        fields = {"assessor": "umbrela", "kind": "model", "on_conflict": "refuse"}
        data = {f"qrels-{key}": value for key, value in fields.items()}
        data["qrels-files"] = text_file("umbrela.txt", "051 Q0 d1 2\n051 Q0 d2 0\n")
        data["csrfmiddlewaretoken"] = token(client, campaign)
        response = client.post(upload_url(campaign, "qrels"), data)
        assert response.status_code == 302
        job = finished_job("qrels")
        assert job.status == Job.Status.DONE, job.error
        assert Assessor.objects.get(name="umbrela").kind == Assessor.Kind.MODEL
        assert campaign.judgments.count() == 2

    def test_a_bad_file_shows_its_line_numbered_problems_and_imports_nothing(
        self, client, campaign, organiser
    ):
        make_topics(campaign, ["051"])
        client.force_login(organiser)
        files = [
            text_file("good.txt", run_lines("good", {"051": [("d1", 1.0)]})),
            text_file("bad.txt", "051 Q0 d1 1 1.0 bad\n051 Q0 d2 2 NaN bad\n051 Q0 d3 3\n"),
        ]
        response = upload(client, campaign, "runs", files)
        assert response.status_code == 302
        job = finished_job("runs")
        assert job.status == Job.Status.FAILED
        assert job.error == "Nothing was imported: 2 problems found."
        assert not Run.objects.exists()
        html = page(client, campaign)
        assert "Nothing was imported: 2 problems found." in html
        assert "bad.txt line 2: score &#x27;NaN&#x27; is not a number (NaN)" in html
        assert "bad.txt line 3: has 4 columns; a run line has 6" in html


@pytest.mark.django_db
class TestRefusedUploads:
    def refused(self, client, campaign, kind, files, status=400, **fields) -> str:
        before = stored_rows()
        response = upload(client, campaign, kind, files, **fields)
        assert response.status_code == status
        assert stored_rows() == before
        assert not Upload.objects.exists()
        assert not Job.objects.exists()
        return response.content.decode()

    def test_a_post_without_the_csrf_token_is_forbidden(self, csrf_client, campaign, organiser):
        csrf_client.force_login(organiser)
        response = csrf_client.post(
            upload_url(campaign, "topics"), {"topics-files": text_file("t.tsv", "1\tOne\n")}
        )
        assert response.status_code == 403
        assert not Upload.objects.exists()
        assert not Job.objects.exists()

    def test_the_same_post_with_the_token_is_accepted(self, csrf_client, campaign, organiser):
        csrf_client.force_login(organiser)
        response = upload(csrf_client, campaign, "topics", text_file("t.tsv", "1\tOne\n"))
        assert response.status_code == 302
        assert Upload.objects.count() == 1

    @override_settings(POOLJUDGE_MAX_UPLOAD_BYTES=100)
    def test_an_oversize_file(self, csrf_client, campaign, organiser):
        csrf_client.force_login(organiser)
        html = self.refused(csrf_client, campaign, "topics", text_file("big.tsv", "1\tx\n" * 50))
        # Refused while it streamed in, before any handler stored it.
        assert (
            "big.tsv is larger than the limit of 100 bytes per file; nothing was stored. "
            "Import bigger files with the command line." in html
        )

    def test_a_gzip_bomb(self, csrf_client, campaign, organiser):
        csrf_client.force_login(organiser)
        bomb = gzip.compress(b"\0" * (8 * 1024 * 1024), compresslevel=9)
        html = self.refused(csrf_client, campaign, "runs", [text_file("runs.txt.gz", bomb)])
        assert (
            "runs.txt.gz expands more than 200x when decompressed; refusing it as a possible "
            "gzip bomb." in html
        )

    def test_a_png(self, csrf_client, campaign, organiser):
        csrf_client.force_login(organiser)
        html = self.refused(csrf_client, campaign, "documents", text_file("docs.txt", PNG))
        assert "docs.txt is a PNG image, not a text file." in html

    def test_an_empty_file(self, csrf_client, campaign, organiser):
        csrf_client.force_login(organiser)
        html = self.refused(csrf_client, campaign, "topics", text_file("t.tsv", b""))
        assert "The submitted file is empty." in html

    def test_one_bad_file_among_several_stores_none(self, csrf_client, campaign, organiser):
        csrf_client.force_login(organiser)
        files = [text_file("a.txt", "1 Q0 d 1 1 a\n"), text_file("b.png", PNG)]
        html = self.refused(csrf_client, campaign, "runs", files)
        assert "b.png is a PNG image, not a text file." in html

    def test_a_file_name_that_starts_like_a_path(self, csrf_client, campaign, organiser):
        csrf_client.force_login(organiser)
        html = self.refused(csrf_client, campaign, "topics", text_file("..topics.tsv", "1\tx\n"))
        assert (
            "The file name &#x27;..topics.tsv&#x27; contains a path; upload a plain file." in html
        )

    def test_a_path_never_reaches_storage(self, csrf_client, campaign, organiser):
        # Django's multipart parser keeps only the last component of a submitted file name, so
        # "../../etc/passwd" arrives as "passwd"; store_upload itself refuses any path.
        csrf_client.force_login(organiser)
        boundary = "pooljudge-boundary"
        body = (
            f"--{boundary}\r\n"
            'Content-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n'
            f"{token(csrf_client, campaign)}\r\n"
            f"--{boundary}\r\n"
            'Content-Disposition: form-data; name="topics-files"; filename="../../etc/passwd"\r\n'
            "Content-Type: text/plain\r\n\r\n"
            "1\tOne\r\n"
            f"--{boundary}--\r\n"
        )
        response = csrf_client.generic(
            "POST",
            upload_url(campaign, "topics"),
            body.encode(),
            content_type=f"multipart/form-data; boundary={boundary}",
        )
        assert response.status_code == 302
        assert list(Upload.objects.values_list("name", flat=True)) == ["passwd"]

    @pytest.mark.parametrize("name", ["../topics.tsv", "..\\topics.tsv", "a/b.tsv", ".."])
    def test_store_upload_refuses_paths(self, campaign, name):
        with pytest.raises(UploadRefused, match="contains a path; upload a plain file"):
            store_upload(campaign=campaign, kind="topics", file=RawNamedFile(name, b"1\tx\n"))
        assert not Upload.objects.exists()


class RawNamedFile:
    """An uploaded file carrying its name exactly as a client sent it (Django's own upload
    classes already strip directories)."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name = name
        self.size = len(data)
        self._data = data

    def chunks(self, chunk_size: int | None = None):
        yield self._data
