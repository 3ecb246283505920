"""The evaluation pages: every current run scored against the chosen qrels, and one run's
per-topic scores; downloads as CSV (means, per topic) and JSON."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from campaigns.access import get_campaign_for
from campaigns.models import Campaign
from qrels import report_plots
from qrels.evaluation import MEASURES
from qrels.report_forms import EvaluationForm, UploadForm
from qrels.reports import EvaluationReport
from qrels.views.common import (
    Outcome,
    base,
    download,
    enqueue,
    outcome_for,
    page_url,
    query_string,
    read_upload,
    report_download,
    upload_source,
)

DOWNLOADS = ("csv", "topics.csv", "json")


def _download(report: EvaluationReport, fmt: str, slug: str) -> HttpResponse:
    if fmt == "topics.csv":
        return download(report.topics_csv(), name=f"{slug}-evaluation-topics.csv", kind="csv")
    return report_download(report, stem=f"{slug}-evaluation", fmt=fmt)


def _evaluation_context(
    request: HttpRequest, campaign: Campaign, form: EvaluationForm, outcome: Outcome
) -> dict[str, Any]:
    report = outcome.report
    context: dict[str, Any] = {
        **base(campaign, "evaluation"),
        "form": form,
        "upload_form": UploadForm(),
        "outcome": outcome,
        "report": report,
        "runs_count": campaign.runs.current().count(),
    }
    if not isinstance(report, EvaluationReport):
        return context
    measures = report.measures
    sort = form.sort_measure() if form.is_valid() else MEASURES[0]
    if sort not in measures:
        sort = measures[0]
    run_pks = dict(campaign.runs.current().values_list("tag", "pk"))
    carry = query_string(request, format=None)
    rows = [
        {
            "rank": rank,
            "run": row.run,
            "contributor": row.contributor,
            # 95 % intervals of the inferred measures, None for the others
            "values_intervals": [(row.mean[m], (row.intervals or {}).get(m)) for m in measures],
            "unjudged": row.unjudged_at_10,
            "warn": row.warn,
            "topics": row.topics_answered,
            "url": (
                reverse("qrels:evaluation_run", args=[campaign.slug, run_pks[row.run]]) + carry
                if row.run in run_pks
                else ""
            ),
        }
        for rank, row in enumerate(report.ranked(sort), start=1)
    ]
    context.update(
        {
            "sort": sort,
            "measures": measures,
            "sort_links": [(m, query_string(request, sort=m, format=None)) for m in measures],
            "rows": rows,
            "outsiders": sum(1 for r in rows if not r["contributor"]),
            "warned": sum(1 for r in rows if r["warn"]),
            "downloads": [
                ("CSV: means", query_string(request, format="csv")),
                ("CSV: per topic", query_string(request, format="topics.csv")),
                ("JSON: everything", query_string(request, format="json")),
            ],
        }
    )
    return context


@login_required
@require_http_methods(["GET", "POST"])
def evaluation_page(request: HttpRequest, slug: str) -> HttpResponse:
    """Every current run scored against the chosen qrels: means and Unjudged@10, sortable by
    any measure; ``?format=csv|topics.csv|json``. POST: compute as a job (big campaigns) or
    score against an uploaded qrels file."""
    campaign = get_campaign_for(request, slug)
    if request.method == "POST":
        return _evaluation_post(request, campaign)
    form = EvaluationForm(request.GET or None, campaign=campaign)
    if form.is_bound and not form.is_valid():
        context = _evaluation_context(request, campaign, form, Outcome())
        return render(request, "qrels/reports/evaluation.html", context, status=400)
    options = {"source": form.qrels_source().as_params()}
    outcome = outcome_for(request, campaign, "evaluation", options)
    fmt = request.GET.get("format")
    if fmt:
        if not isinstance(outcome.report, EvaluationReport) or fmt not in DOWNLOADS:
            raise Http404("Nothing to download: the report is not computed.")
        return _download(outcome.report, fmt, slug)
    context = _evaluation_context(request, campaign, form, outcome)
    return render(request, "qrels/reports/evaluation.html", context)


def _evaluation_post(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    slug = campaign.slug
    form = EvaluationForm(request.POST, campaign=campaign)
    form.is_valid()
    if request.POST.get("action") == "upload":
        upload_form, parsed, problems = read_upload(request, campaign)
        if parsed is None:
            context = _evaluation_context(request, campaign, form, Outcome())
            context["upload_form"] = upload_form
            context["upload_problems"] = problems
            return render(request, "qrels/reports/evaluation.html", context, status=400)
        upload, _qrels = parsed
        source = upload_source(upload)
        job = enqueue(
            request,
            campaign,
            "evaluation",
            {"source": source.as_params()},
            describe=f"evaluation against {upload.name}",
            uploads={"source": upload},
            on_conflict=upload_form.conflict_policy(),
        )
        return redirect(page_url("qrels:evaluation", slug, job=job.pk))
    source = form.qrels_source()
    options = {"source": source.as_params()}
    describe = f"evaluation: {source.describe(campaign)}"
    enqueue(request, campaign, "evaluation", options, describe=describe)
    return redirect(
        page_url(
            "qrels:evaluation",
            slug,
            **{name: request.POST.get(name) for name in ("source", "policy", "imported", "pool")},
        )
    )


@login_required
@require_GET
def evaluation_run(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """One run's per-topic scores under the same qrels as the evaluation page it came from."""
    campaign = get_campaign_for(request, slug)
    run = campaign.runs.filter(pk=pk).first()
    if run is None:
        raise Http404("No such run.")
    form = EvaluationForm(request.GET or None, campaign=campaign)
    if form.is_bound and not form.is_valid():
        raise Http404("No such report.")
    options = {"source": form.qrels_source().as_params()}
    outcome = outcome_for(request, campaign, "evaluation", options)
    report = outcome.report if isinstance(outcome.report, EvaluationReport) else None
    topics = report.run_topics(run.tag) if report else None
    if report and topics is None:
        raise Http404("This run is not in the report (it was replaced by a newer import).")
    sort = form.sort_measure() if form.is_bound else MEASURES[0]
    context: dict[str, Any] = {
        **base(campaign, "evaluation"),
        "run": run,
        "outcome": outcome,
        "report": report,
        "back": reverse("qrels:evaluation", args=[slug]) + query_string(request, format=None),
    }
    if report and topics is not None:
        row = report.row(run.tag)
        measures = report.measures
        if sort not in measures:
            sort = measures[0]
        titles = dict(campaign.topics.values_list("topic_id", "title"))
        index = measures.index(sort)
        context.update(
            {
                "row": row,
                "measures": measures,
                "sort": sort,
                "means": [row.mean[m] for m in measures],
                "head": [(m, row.mean[m]) for m in measures[:3]],
                "topic_rows": [
                    {
                        "topic": t["topic"],
                        "title": titles.get(t["topic"], ""),
                        "values": [t["values"][m] for m in measures] if t["values"] else None,
                    }
                    for t in topics
                ],
                "measure_links": [(m, query_string(request, sort=m)) for m in measures[:-1]],
                "bars": report_plots.topic_bars(
                    [(t["topic"], t["values"][sort] if t["values"] else None) for t in topics],
                    measure=sort,
                    mean=row.mean[sort],
                ),
                "missing": sum(1 for t in topics if t["values"] is None),
                "bar_index": index,
            }
        )
    return render(request, "qrels/reports/evaluation_run.html", context)
