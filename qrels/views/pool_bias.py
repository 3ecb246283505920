"""The pool-bias page: leave-one-out for each run that built a pool, and every run's unjudged
share at 10 and at the pool depth; downloads as CSV and JSON."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from campaigns.access import get_campaign_for
from qrels.report_forms import PoolBiasForm
from qrels.reports import PoolBiasReport
from qrels.views.common import (
    Outcome,
    base,
    enqueue,
    outcome_for,
    page_url,
    query_string,
    report_download,
)


@login_required
@require_http_methods(["GET", "POST"])
def pool_bias_page(request: HttpRequest, slug: str) -> HttpResponse:
    """Leave-one-out for each run that built the chosen pool, and every run's unjudged share
    at 10 and at the pool depth; ``?format=csv|json``. POST: compute as a job."""
    campaign = get_campaign_for(request, slug)
    data = request.POST if request.method == "POST" else (request.GET or None)
    form = PoolBiasForm(data, campaign=campaign)
    invalid = form.is_bound and not form.is_valid()
    options = form.options() if not invalid else {}
    if request.method == "POST" and not invalid and options.get("pool"):
        enqueue(
            request,
            campaign,
            "pool_bias",
            options,
            describe=f"pool bias of pool v{options['pool']} ({options['measure']})",
        )
        chosen = {k: request.POST.get(k) for k in ("pool", "measure", "policy", "imported")}
        return redirect(page_url("qrels:pool_bias", slug, **chosen))
    outcome = (
        outcome_for(request, campaign, "pool_bias", options) if options.get("pool") else Outcome()
    )
    report = outcome.report if isinstance(outcome.report, PoolBiasReport) else None
    fmt = request.GET.get("format")
    if fmt:
        if not report or fmt not in ("csv", "json"):
            raise Http404("Nothing to download: the report is not computed.")
        return report_download(report, stem=f"{slug}-pool-bias", fmt=fmt)
    context = {
        **base(campaign, "pool_bias"),
        "form": form,
        "outcome": outcome,
        "report": report,
        "has_pools": bool(form.pools),
        "downloads": [
            ("CSV", query_string(request, format="csv")),
            ("JSON", query_string(request, format="json")),
        ],
    }
    return render(request, "qrels/reports/pool_bias.html", context, status=400 if invalid else 200)
