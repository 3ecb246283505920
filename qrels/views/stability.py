"""The ranking-stability page: the runs ordered by one measure under two qrels, Kendall's tau
and the swapped pairs, a bump chart; downloads as CSV and JSON."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from campaigns.access import get_campaign_for
from campaigns.models import Assessor, Campaign
from qrels import report_plots
from qrels.policies import default_policy
from qrels.queries import judging_assessors
from qrels.report_forms import MeasureForm, QrelsSourceForm, UploadForm
from qrels.reports import StabilityReport
from qrels.views.common import (
    SHOWN_PROBLEMS,
    Outcome,
    base,
    enqueue,
    outcome_for,
    page_url,
    query_string,
    read_upload,
    report_download,
    upload_source,
)


def _stability_forms(
    data, campaign: Campaign
) -> tuple[MeasureForm, QrelsSourceForm, QrelsSourceForm]:
    """The measure and the two qrels. Defaults: two people's own judgments on the topics both
    have (assessor against assessor) when two people judged anything; otherwise the default
    policy against majority (or max when majority is the default)."""
    people = [a.pk for a in judging_assessors(campaign) if a.kind == Assessor.Kind.PERSON]
    first_initial: dict[str, str] = {}
    second_initial: dict[str, str] = {}
    if len(people) >= 2:
        first_initial["source"] = f"assessor-{people[0]}"
        second_initial["source"] = f"assessor-{people[1]}"
    else:
        default = default_policy(campaign)
        second_initial["policy"] = "majority" if default != "majority" else "max"
    measure = MeasureForm(data)
    first = QrelsSourceForm(data, campaign=campaign, prefix="a", initial=first_initial)
    second = QrelsSourceForm(data, campaign=campaign, prefix="b", initial=second_initial)
    for form in (measure, first, second):
        if form.is_bound:
            form.is_valid()
    return measure, first, second


def _kept_query(*forms: forms.Form) -> dict[str, str]:
    """The choices of the bound forms, for the page's links after a POST."""
    return {
        key: value
        for form in forms
        if form.is_bound
        for key, value in form.data.items()
        if key.startswith(("a-", "b-")) or key in ("measure", "common")
    }


def _post(
    request: HttpRequest, campaign: Campaign, options: dict[str, Any], keep: dict[str, str]
) -> tuple[HttpResponse | None, UploadForm, list[str]]:
    """Start the job a POST asks for: a redirect to the page, or (None, the upload form, its
    problems) when the uploaded file is refused."""
    if request.POST.get("action") != "upload":
        describe = f"ranking stability by {options['measure']}"
        enqueue(request, campaign, "stability", options, describe=describe)
        return redirect(page_url("qrels:stability", campaign.slug, **keep)), UploadForm(), []
    upload_form, parsed, problems = read_upload(request, campaign)
    if parsed is None:
        return None, upload_form, problems
    upload, _ = parsed
    job = enqueue(
        request,
        campaign,
        "stability",
        {**options, "second": upload_source(upload).as_params()},
        describe=f"ranking stability against {upload.name}",
        uploads={"second": upload},
        on_conflict=upload_form.conflict_policy(),
    )
    return redirect(page_url("qrels:stability", campaign.slug, job=job.pk)), upload_form, []


@login_required
@require_http_methods(["GET", "POST"])
def stability_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The ordering of the runs by one measure under two qrels, Kendall's tau and the swapped
    pairs, and a bump chart; ``?format=csv|json``. POST: compute as a job, or compare the first
    qrels with an uploaded file."""
    campaign = get_campaign_for(request, slug)
    data = request.POST if request.method == "POST" else (request.GET or None)
    measure_form, first_form, second_form = _stability_forms(data, campaign)
    invalid = any(f.is_bound and f.errors for f in (measure_form, first_form, second_form))
    options = {
        "first": first_form.qrels_source().as_params(),
        "second": second_form.qrels_source().as_params(),
        "measure": measure_form.measure_name(),
        "common_topics": measure_form.common_topics(),
    }
    keep = _kept_query(first_form, second_form, measure_form)
    upload_form, upload_problems = UploadForm(), []
    if request.method == "POST" and not invalid:
        response, upload_form, upload_problems = _post(request, campaign, options, keep)
        if response is not None:
            return response
    outcome = (
        Outcome()
        if invalid or upload_problems
        else outcome_for(request, campaign, "stability", options)
    )
    report = outcome.report if isinstance(outcome.report, StabilityReport) else None
    fmt = request.GET.get("format") if request.method == "GET" else None
    if fmt:
        if not report or fmt not in ("csv", "json"):
            raise Http404("Nothing to download: the report is not computed.")
        return report_download(report, stem=f"{slug}-stability", fmt=fmt)
    context: dict[str, Any] = {
        **base(campaign, "stability"),
        "measure_form": measure_form,
        "first_form": first_form,
        "second_form": second_form,
        "upload_form": upload_form,
        "upload_problems": upload_problems,
        "keep": keep,
        "outcome": outcome,
        "report": report,
        "runs_count": campaign.runs.current().count(),
    }
    if report:
        context["bump"] = report_plots.bump_chart(
            [
                report_plots.Bump(r.run, r.rank_first, r.rank_second, r.first, r.second)
                for r in report.runs
            ],
            first="A",
            second="B",
            measure=report.measure,
        )
        context["shown_swaps"] = report.swapped_pairs[:SHOWN_PROBLEMS]
        context["downloads"] = [
            ("CSV", query_string(request, format="csv")),
            ("JSON", query_string(request, format="json")),
        ]
    status = 400 if invalid or upload_problems or upload_form.errors else 200
    return render(request, "qrels/reports/stability.html", context, status=status)
