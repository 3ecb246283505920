"""The ranking-stability page: the runs ordered by one measure under two qrels, Kendall's tau
and the swapped pairs, a bump chart; downloads as CSV and JSON."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from campaigns.access import get_campaign_for
from campaigns.models import Assessor, Campaign
from qrels import report_plots
from qrels.agreement_data import judging_assessors
from qrels.policies import default_policy
from qrels.report_forms import MeasureForm, QrelsSourceForm, UploadForm
from qrels.reports import csv_text, json_text
from qrels.views.common import (
    SHOWN_PROBLEMS,
    Outcome,
    base,
    download,
    enqueue,
    outcome_for,
    page_url,
    query_string,
    read_upload,
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
    first, second = first_form.qrels_source(), second_form.qrels_source()
    measure = measure_form.measure_name()
    common = measure_form.common_topics()
    options = {
        "first": first.as_params(),
        "second": second.as_params(),
        "measure": measure,
        "common_topics": common,
    }
    keep = {
        key: value
        for form in (first_form, second_form, measure_form)
        if form.is_bound
        for key, value in form.data.items()
        if key.startswith(("a-", "b-")) or key in ("measure", "common")
    }
    upload_form, upload_problems = UploadForm(), []
    if request.method == "POST" and not invalid:
        if request.POST.get("action") == "upload":
            upload_form, parsed, upload_problems = read_upload(request, campaign)
            if parsed is not None:
                upload, _ = parsed
                options["second"] = upload_source(upload).as_params()
                job = enqueue(
                    request,
                    campaign,
                    "stability",
                    options,
                    describe=f"ranking stability against {upload.name}",
                    uploads={"second": upload},
                    on_conflict=upload_form.conflict_policy(),
                )
                return redirect(page_url("qrels:stability", slug, job=job.pk))
        else:
            enqueue(
                request,
                campaign,
                "stability",
                options,
                describe=f"ranking stability by {measure}",
            )
            return redirect(page_url("qrels:stability", slug, **keep))
    outcome = (
        Outcome()
        if invalid or upload_problems
        else outcome_for(request, campaign, "stability", options)
    )
    report = outcome.report
    fmt = request.GET.get("format") if request.method == "GET" else None
    if fmt:
        if not report or fmt not in ("csv", "json"):
            raise Http404("Nothing to download: the report is not computed.")
        if fmt == "json":
            return download(json_text(report), name=f"{slug}-stability.json", kind="json")
        rows = [
            [r["run"], r["first"], r["second"], r["rank_first"], r["rank_second"]]
            for r in report["runs"]
        ]
        header = ["run", f"{report['measure']}_first", f"{report['measure']}_second"]
        header += ["rank_first", "rank_second"]
        return download(csv_text(header, rows), name=f"{slug}-stability.csv", kind="csv")
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
        first_label = _side_label(report["qrels"]["first"]["description"], "A")
        second_label = _side_label(report["qrels"]["second"]["description"], "B")
        context.update(
            {
                "first_label": first_label,
                "second_label": second_label,
                "bump": report_plots.bump_chart(
                    [
                        report_plots.Bump(
                            r["run"], r["rank_first"], r["rank_second"], r["first"], r["second"]
                        )
                        for r in report["runs"]
                    ],
                    first="A",
                    second="B",
                    measure=report["measure"],
                ),
                "rows": [
                    {**r, "delta": r["rank_first"] - r["rank_second"]} for r in report["runs"]
                ],
                "moved": sum(1 for r in report["runs"] if r["rank_first"] != r["rank_second"]),
                "mean_change": _mean_change(report["runs"]),
                "shown_swaps": report["swapped_pairs"][:SHOWN_PROBLEMS],
                "downloads": [
                    ("CSV", query_string(request, format="csv")),
                    ("JSON", query_string(request, format="json")),
                ],
            }
        )
    status = 400 if invalid or upload_problems or upload_form.errors else 200
    return render(request, "qrels/reports/stability.html", context, status=status)


def _side_label(description: str, fallback: str) -> str:
    return description or fallback


def _mean_change(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    if not rows:
        return None
    absolute = [abs(r["second"] - r["first"]) for r in rows]
    relative = [abs(r["second"] - r["first"]) / r["first"] for r in rows if r["first"]]
    return {
        "absolute": sum(absolute) / len(absolute),
        "relative": sum(relative) / len(relative) if relative else None,
    }
