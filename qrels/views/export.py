"""The organiser's Export page: build a bundle as a job, list past bundles, download them."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling, trigger_client_event

from campaigns import jobs
from campaigns.access import get_campaign_for
from campaigns.models import Campaign
from qrels.forms import ExportForm
from qrels.models import Export, ExportChunk
from qrels.tasks import export_task

EXPORT_KIND = "export_qrels"
LISTED = 20


def _context(campaign: Campaign, form: ExportForm) -> dict:
    exports = list(campaign.exports.select_related("job", "created_by")[:LISTED])
    latest_ready = next((export for export in exports if export.is_ready), None)
    return {
        "campaign": campaign,
        "form": form,
        "exports": exports,
        "any_active": any(e.job is not None and not e.job.is_final for e in exports),
        "latest_job": exports[0].job if exports else None,
        "preview": latest_ready,
        "counts": {
            "judgments": campaign.judgments.count(),
            "assessors": campaign.assessors.filter(judgments__isnull=False).distinct().count(),
            "pools": len(form.pools),
        },
    }


@login_required
@require_http_methods(["GET", "POST"])
def export_page(request: HttpRequest, slug: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    if request.method == "POST":
        form = ExportForm(request.POST, campaign=campaign)
        if form.is_valid():
            # Here, not at the top: the export module loads numpy (its agreement summary), which
            # a web process should not hold for every page (tests/architecture).
            from qrels.export import bundle_name

            with transaction.atomic():
                export = Export.objects.create(
                    campaign=campaign,
                    options=form.options(),
                    file_name=f"{bundle_name(campaign, timezone.now())}.zip",
                    created_by=request.user,
                )
                export.job = jobs.enqueue(
                    kind=EXPORT_KIND,
                    task=export_task,
                    campaign=campaign,
                    params={"export": export.pk, "files": [export.file_name]},
                    user=request.user,
                )
                export.save(update_fields=["job"])
            if not request.htmx:
                messages.info(request, f"Building {export.file_name}.")
                return redirect("qrels:export", slug=slug)
            export.job.refresh_from_db()  # in embedded mode the job has already run
            context = _context(campaign, ExportForm(campaign=campaign))
            context["latest_job"] = export.job
            response = render(request, "qrels/export.html#build", context)
            return trigger_client_event(response, "exports-changed")
        template = "qrels/export.html#build" if request.htmx else "qrels/export.html"
        return render(request, template, _context(campaign, form), status=400)
    context = _context(campaign, ExportForm(campaign=campaign))
    if request.htmx:
        response = render(request, "qrels/export.html#exports", context)
        if not context["any_active"]:
            response.status_code = HttpResponseStopPolling.status_code
        return response
    return render(request, "qrels/export.html", context)


def _ready_export(request: HttpRequest, slug: str, pk: int) -> Export:
    campaign = get_campaign_for(request, slug)
    export = campaign.exports.select_related("job").filter(pk=pk).first()
    if export is None or not export.is_ready:
        raise Http404("No such bundle.")
    return export


@login_required
@require_GET
def export_download(request: HttpRequest, slug: str, pk: int) -> StreamingHttpResponse:
    """The zip, streamed chunk by chunk from the database (one chunk in memory at a time)."""
    export = _ready_export(request, slug, pk)
    chunk_ids = list(export.chunks.order_by("seq").values_list("pk", flat=True))

    def chunks():
        for chunk_id in chunk_ids:
            data = ExportChunk.objects.filter(pk=chunk_id).values_list("data", flat=True).first()
            if data is not None:
                yield bytes(data)

    response = StreamingHttpResponse(chunks(), content_type="application/zip")
    response["Content-Length"] = str(export.size)
    response["Content-Disposition"] = content_disposition_header(True, export.file_name)
    response["Cache-Control"] = "private, no-store"
    return response


@login_required
@require_GET
def export_readme(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    export = _ready_export(request, slug, pk)
    response = HttpResponse(export.readme, content_type="text/plain; charset=utf-8")
    response["Cache-Control"] = "private, no-store"
    return response
