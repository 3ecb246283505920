"""What the report pages share: a report computed while the page loads or by a background job
(:class:`Outcome`, :func:`outcome_for`, :func:`enqueue`), an uploaded qrels file stored for the
job (:func:`read_upload`), downloads and links.

Size decides how a report is computed: a campaign whose current runs hold at most
``runscores.DIRECT_LIMIT`` ranked documents is scored while the page loads (well under a second);
a bigger one is scored by a background job (``qrels.tasks.report_task``) started with a button,
its progress shown on the page, and its result kept on the job row and shown again for as long
as nothing it read has changed (``queries.fingerprint``). A report against an uploaded qrels
file always runs as a job: the file is stored with the campaign's uploads, and the job's page
(``?job=<id>``) shows and downloads the result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.urls import reverse
from django.utils.http import content_disposition_header

from campaigns import jobs
from campaigns.models import Campaign, Job, Upload
from campaigns.uploads import UploadRefused, store_upload, upload_refusals
from qrels import queries, runscores, sources
from qrels.policies import PolicyConflict
from qrels.report_forms import UploadForm
from qrels.reports import AgreementReport, RunReport, run_report_from_dict
from qrels.tasks import REPORT_KIND, report_task

UPLOAD_KIND = "report_qrels"
SHOWN_PROBLEMS = 50


def download(content: str, *, name: str, kind: str) -> HttpResponse:
    types = {"csv": "text/csv; charset=utf-8", "json": "application/json"}
    response = HttpResponse(content, content_type=types[kind])
    response["Content-Disposition"] = content_disposition_header(True, name)
    response["Cache-Control"] = "private, no-store"
    return response


def report_download(report: AgreementReport | RunReport, *, stem: str, fmt: str) -> HttpResponse:
    """``report`` as ``stem.csv`` or ``stem.json``, written by the report itself."""
    if fmt == "json":
        return download(report.to_json(), name=f"{stem}.json", kind="json")
    return download(report.to_csv(), name=f"{stem}.csv", kind="csv")


def query_string(request: HttpRequest, **changes: str | None) -> str:
    """The current query string with ``changes`` (None removes a key), for links."""
    params: QueryDict = request.GET.copy()
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else ""


def base(campaign: Campaign, page: str) -> dict[str, Any]:
    return {"campaign": campaign, "report_page": page}


@dataclass
class Outcome:
    """What a report page has to show: the report, or the job computing it, or why not."""

    report: RunReport | None = None
    job: Job | None = None
    error: str = ""
    problems: list[str] = field(default_factory=list)
    more: int = 0
    pending: bool = False  # big campaign, not computed for these options yet
    direct: bool = True
    size: int = 0
    limit: int = runscores.DIRECT_LIMIT


def _key(report: str, options: dict[str, Any]) -> str:
    return json.dumps({"report": report, "options": options}, sort_keys=True)


def _from_job(job: Job, outcome: Outcome) -> Outcome:
    outcome.job = job
    outcome.direct = False
    if job.status == Job.Status.DONE:
        stored = (job.result or {}).get("report")
        outcome.report = run_report_from_dict(stored) if stored else None
    elif job.is_final:
        outcome.error = job.error or f"The report job ended {job.status}."
        outcome.problems = (job.result or {}).get("problems", [])
        outcome.more = (job.result or {}).get("more", 0)
    return outcome


def _job_from_query(request: HttpRequest, campaign: Campaign, report: str) -> Job | None:
    raw = request.GET.get("job")
    if not raw:
        return None
    if not raw.isdigit():
        raise Http404("No such report.")
    job = campaign.jobs.filter(pk=int(raw), kind=REPORT_KIND, params__report=report).first()
    if job is None:
        raise Http404("No such report.")
    return job


def outcome_for(
    request: HttpRequest, campaign: Campaign, report: str, options: dict[str, Any]
) -> Outcome:
    size = queries.ranked_documents(campaign)
    outcome = Outcome(size=size)
    job = _job_from_query(request, campaign, report)
    if job is not None:
        return _from_job(job, outcome)
    if size <= runscores.DIRECT_LIMIT:
        try:
            outcome.report = runscores.compute_report(
                campaign=campaign, report=report, options=options
            )
        except PolicyConflict as exc:
            count = len(exc.conflicts)
            outcome.error = (
                f"Policy refuse: assessors disagree on {count:,} pair"
                f"{'s' if count != 1 else ''}. Choose another policy."
            )
            outcome.problems = exc.lines(SHOWN_PROBLEMS)
            outcome.more = max(0, count - SHOWN_PROBLEMS)
        except ValueError as exc:
            outcome.error = str(exc)
        return outcome
    outcome.direct = False
    related = campaign.jobs.filter(
        kind=REPORT_KIND,
        params__key=_key(report, options),
        params__fingerprint=queries.fingerprint(campaign),
    )
    active = related.active().first()
    if active is not None:
        return _from_job(active, outcome)
    done = related.filter(status=Job.Status.DONE).first()
    if done is not None:
        return _from_job(done, outcome)
    outcome.pending = True
    return outcome


def enqueue(
    request: HttpRequest,
    campaign: Campaign,
    report: str,
    options: dict[str, Any],
    *,
    describe: str,
    uploads: dict[str, Upload] | None = None,
    on_conflict: str = "refuse",
) -> Job:
    uploads = uploads or {}
    with transaction.atomic():
        job = jobs.enqueue(
            kind=REPORT_KIND,
            task=report_task,
            campaign=campaign,
            params={
                "report": report,
                "options": options,
                "key": _key(report, options),
                "fingerprint": queries.fingerprint(campaign),
                "uploads": {key: upload.pk for key, upload in uploads.items()},
                "on_conflict": on_conflict,
                "files": [describe],
            },
            user=request.user,
        )
        Upload.objects.filter(pk__in=[u.pk for u in uploads.values()]).update(job=job)
    return job


def read_upload(request: HttpRequest, campaign: Campaign) -> tuple[UploadForm, Any, list[str]]:
    """(form, (upload, None) or None, problems): the uploaded qrels file stored for the job,
    which parses it (a big file would outlast the request); a bad line fails the job, whose page
    lists every problem with its line number."""
    form = UploadForm(request.POST, request.FILES)
    refusals = upload_refusals(request)
    if refusals or not form.is_valid():
        return form, None, refusals
    file = form.cleaned_data["qrels"]
    try:
        upload = store_upload(campaign=campaign, kind=UPLOAD_KIND, file=file, user=request.user)
    except UploadRefused as exc:
        form.add_error("qrels", str(exc))
        return form, None, []
    return form, (upload, None), []


def upload_source(upload: Upload) -> sources.QrelsSource:
    return sources.QrelsSource(kind="upload", upload_name=upload.name, upload_sha256=upload.sha256)


def page_url(name: str, slug: str, **query: Any) -> str:
    url = reverse(name, args=[slug])
    query = {key: value for key, value in query.items() if value not in (None, "")}
    return url + (f"?{urlencode(query)}" if query else "")
