"""The Reports tab's landing page, and the poll a report page makes while its job runs.

Every report page (qrels.views.agreement, .evaluation, .stability, .pool_bias) starts from
``get_campaign_for``: organisers only; anyone else gets a 404.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET
from django_htmx.http import HttpResponseClientRefresh

from campaigns.access import get_campaign_for
from campaigns.models import Assessor, Judgment
from qrels import queries, runscores
from qrels.queries import judging_assessors
from qrels.tasks import REPORT_KIND
from qrels.views.common import base


@login_required
@require_GET
def reports_index(request: HttpRequest, slug: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    assessors = judging_assessors(campaign)
    overlap = (
        Judgment.objects.filter(campaign=campaign, label__gte=0)
        .values("topic_id", "doc_id")
        .annotate(n=Count("pk"))
        .filter(n__gte=2)
        .count()
    )
    pools = list(campaign.pools.built().order_by("-version"))
    context = {
        **base(campaign, "index"),
        "assessors": assessors,
        "people": sum(1 for a in assessors if a.kind == Assessor.Kind.PERSON),
        "overlap": overlap,
        "runs": campaign.runs.current().count(),
        "ranked": queries.ranked_documents(campaign),
        "direct_limit": runscores.DIRECT_LIMIT,
        "verdicts": Judgment.objects.filter(campaign=campaign, label__gte=0).count(),
        "pools": pools,
    }
    return render(request, "qrels/reports/index.html", context)


@login_required
@require_GET
def report_job_status(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """Polled while a report job runs: nothing (204) until it is final, then a page refresh."""
    campaign = get_campaign_for(request, slug)
    job = campaign.jobs.filter(pk=pk, kind=REPORT_KIND).first()
    if job is None:
        raise Http404("No such job.")
    if not request.htmx:
        return redirect("campaigns:job", slug=slug, pk=pk)
    if not job.is_final:
        return HttpResponse(status=204)
    return HttpResponseClientRefresh()
