"""The organiser's reports: assessor agreement, run evaluation, ranking stability and pool bias.

Every view starts from ``get_campaign_for`` (organisers only; anyone else gets a 404). The
figures come from qrels.runscores (which calls the tested pure functions of qrels.agreement and
qrels.evaluation); the views choose options, render, and serve the same figures as CSV and JSON.

Size decides how a report is computed: a campaign whose current runs hold at most
``runscores.DIRECT_LIMIT`` ranked documents is scored while the page loads (well under a second);
a bigger one is scored by a background job (``qrels.tasks.report_task``) started with a button,
its progress shown on the page, and its result kept on the job row and shown again for as long
as nothing it read has changed (``runscores.fingerprint``). A report against an uploaded qrels
file always runs as a job: the file is stored with the campaign's uploads, and the job's page
(``?job=<id>``) shows and downloads the result.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRefresh

from campaigns import jobs
from campaigns.access import get_campaign_for
from campaigns.models import Assessor, Campaign, Job, Judgment, Upload
from campaigns.uploads import UploadRefused, store_upload, upload_refusals
from pooljudge.common import neutralise
from qrels import agreement, report_plots, runscores
from qrels.evaluation import MEASURES
from qrels.policies import PolicyConflict, default_policy
from qrels.report_forms import (
    AgreementForm,
    EvaluationForm,
    MeasureForm,
    PoolBiasForm,
    QrelsSourceForm,
    UploadForm,
)
from qrels.tasks import REPORT_KIND, report_task

UPLOAD_KIND = "report_qrels"
SHOWN_PROBLEMS = 50
# Seed 000 (Manning, Raghavan and Schuetze): above 0.8 good, 0.67 to 0.8 fair, below dubious.
KAPPA_GOOD, KAPPA_FAIR = 0.8, 0.67
# Seed 003: a double-digit share of a run's top 10 unjudged needs a caveat.
UNJUDGED_WARNING = 0.10


def kappa_band(value: float | None) -> str:
    if value is None:
        return "none"
    if value > KAPPA_GOOD:
        return "good"
    if value >= KAPPA_FAIR:
        return "fair"
    return "dubious"


def _download(content: str, *, name: str, kind: str) -> HttpResponse:
    types = {"csv": "text/csv; charset=utf-8", "json": "application/json"}
    response = HttpResponse(content, content_type=types[kind])
    response["Content-Disposition"] = content_disposition_header(True, name)
    response["Cache-Control"] = "private, no-store"
    return response


def _csv(header: list[str], rows: list[list[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if value is None else _cell(value) for value in row])
    return out.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return repr(round(value, 6))
    if isinstance(value, str):
        return neutralise(value)
    return value


def _json(data: Any) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def _query(request: HttpRequest, **changes: str | None) -> str:
    """The current query string with ``changes`` (None removes a key), for links."""
    query: QueryDict = request.GET.copy()
    for key, value in changes.items():
        if value is None:
            query.pop(key, None)
        else:
            query[key] = value
    encoded = query.urlencode()
    return f"?{encoded}" if encoded else ""


def _base(campaign: Campaign, page: str) -> dict[str, Any]:
    return {"campaign": campaign, "report_page": page}


# --- Index ---------------------------------------------------------------------------------------


@login_required
@require_GET
def reports_index(request: HttpRequest, slug: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    assessors = runscores.judging_assessors(campaign)
    overlap = (
        Judgment.objects.filter(campaign=campaign, label__gte=0)
        .values("topic_id", "doc_id")
        .annotate(n=Count("pk"))
        .filter(n__gte=2)
        .count()
    )
    pools = list(campaign.pools.built().order_by("-version"))
    context = {
        **_base(campaign, "index"),
        "assessors": assessors,
        "people": sum(1 for a in assessors if a.kind == Assessor.Kind.PERSON),
        "overlap": overlap,
        "runs": campaign.runs.current().count(),
        "ranked": runscores.ranked_documents(campaign),
        "direct_limit": runscores.DIRECT_LIMIT,
        "verdicts": Judgment.objects.filter(campaign=campaign, label__gte=0).count(),
        "pools": pools,
    }
    return render(request, "qrels/reports/index.html", context)


# --- Agreement -----------------------------------------------------------------------------------


def _agreement_csv(data: runscores.AgreementData) -> str:
    header = [
        "assessor_a",
        "assessor_b",
        "topic",
        "n",
        "observed",
        "cohen_kappa",
        "pooled_kappa",
        "weighted_kappa_linear",
        "weighted_kappa_quadratic",
        "relevant_overlap",
        "small_n",
        "negative",
        "identical",
    ]
    rows = []
    for pair in data.pairs:
        for topic, result in [("all", pair), *pair.per_topic.items()]:
            f = runscores.pair_figures(result)
            rows.append(
                [
                    pair.a,
                    pair.b,
                    topic,
                    f["n"],
                    f["observed"],
                    f["cohen_kappa"],
                    f["pooled_kappa"],
                    f["weighted_kappa_linear"],
                    f["weighted_kappa_quadratic"],
                    f["relevant_overlap"],
                    int(f["small_n"]),
                    f["negative"],
                    f["identical"],
                ]
            )
    return _csv(header, rows)


@login_required
@require_GET
def agreement_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The kappa matrix of the chosen assessors (graded or binary) and the group statistics;
    ``?format=csv`` (every pair, overall and per topic) or ``json`` (everything, with the
    confusion matrices and bootstrap intervals)."""
    campaign = get_campaign_for(request, slug)
    form = AgreementForm(request.GET or None, campaign=campaign)
    valid = not form.is_bound or form.is_valid()
    chosen = form.chosen() if valid else []
    binary = form.binary() if valid else False
    fmt = request.GET.get("format")
    if fmt in ("csv", "json") and valid:
        data = runscores.agreement_data(
            campaign=campaign, assessors=chosen, binary=binary, bootstrap=runscores.BOOTSTRAP
        )
        suffix = "-binary" if binary else ""
        if fmt == "json":
            return _download(
                _json(runscores.agreement_json(data)),
                name=f"{campaign.slug}-agreement{suffix}.json",
                kind="json",
            )
        return _download(
            _agreement_csv(data), name=f"{campaign.slug}-agreement{suffix}.csv", kind="csv"
        )
    data = runscores.agreement_data(campaign=campaign, assessors=chosen, binary=binary)
    pks = {a.name: a.pk for a in form.known}
    by_pair = {}
    for pair in data.pairs:
        by_pair[(pair.a, pair.b)] = by_pair[(pair.b, pair.a)] = pair
    labels_param = "binary" if binary else "graded"
    matrix = []
    for name in data.assessors:
        cells = []
        for other in data.assessors:
            pair = by_pair.get((name, other))
            cells.append(
                {
                    "self": name == other,
                    "other": other,
                    "pair": pair,
                    "band": kappa_band(pair.cohen_kappa) if pair else "none",
                    "url": (
                        reverse("qrels:agreement_pair", args=[slug, pks[name], pks[other]])
                        + f"?labels={labels_param}"
                    ),
                }
            )
        matrix.append({"name": name, "kind": data.kinds.get(name), "cells": cells})
    pair_rows = [
        {
            "pair": pair,
            "band": kappa_band(pair.cohen_kappa),
            "url": reverse("qrels:agreement_pair", args=[slug, pks[pair.a], pks[pair.b]])
            + f"?labels={labels_param}",
        }
        for pair in data.pairs
    ]
    context = {
        **_base(campaign, "agreement"),
        "form": form,
        "data": data,
        "matrix": matrix,
        "pair_rows": pair_rows,
        "small_n": agreement.SMALL_N,
        "small_pairs": sum(1 for pair in data.pairs if pair.small_n),
        "negative_pairs": [pair for pair in data.pairs if pair.negative],
        "graded_scale": len(data.scale) > 2,
        "csv_url": _query(request, format="csv"),
        "json_url": _query(request, format="json"),
    }
    return render(request, "qrels/reports/agreement.html", context, status=200 if valid else 400)


@login_required
@require_GET
def agreement_pair(request: HttpRequest, slug: str, a: int, b: int) -> HttpResponse:
    """Two assessors: their confusion matrix as a heat map, every kappa with its bootstrap
    interval, the relevant-set overlap, and the same per topic."""
    campaign = get_campaign_for(request, slug)
    found = dict(
        Assessor.objects.filter(campaign=campaign, pk__in=[a, b]).values_list("pk", "name")
    )
    if a == b or len(found) != 2:
        raise Http404("No such pair of assessors.")
    name_a, name_b = found[a], found[b]
    binary = request.GET.get("labels") == "binary"
    try:
        data = runscores.agreement_data(
            campaign=campaign,
            assessors=[name_a, name_b],
            binary=binary,
            bootstrap=runscores.BOOTSTRAP,
        )
    except ValueError:  # one of them has no judgment yet: nothing in common
        data = runscores.agreement_data(campaign=campaign, assessors=[], binary=binary)
    pair = data.pairs[0] if data.pairs else None
    suffix = f"{campaign.slug}-agreement-{a}-{b}{'-binary' if binary else ''}"
    fmt = request.GET.get("format")
    if fmt == "json":
        return _download(_json(runscores.agreement_json(data)), name=f"{suffix}.json", kind="json")
    if fmt == "csv":
        return _download(_agreement_csv(data), name=f"{suffix}.csv", kind="csv")
    rubric = campaign.current_rubric()
    names = {label.value: label.name for label in rubric.labels.all()} if rubric else {}
    if binary:
        names = {0: "not relevant", 1: "relevant"}
    context = {
        **_base(campaign, "agreement"),
        "a": {"pk": a, "name": name_a},
        "b": {"pk": b, "name": name_b},
        "pair": pair,
        "binary": binary,
        "data": data,
        "graded_scale": len(data.scale) > 2,
        "band": kappa_band(pair.cohen_kappa) if pair else "none",
        "small_n": agreement.SMALL_N,
        "label_names": [(label, names.get(label, "")) for label in data.labels],
        "heatmap": (
            report_plots.confusion_heatmap(
                pair.confusion, pair.labels, a=name_a, b=name_b, names=names
            )
            if pair
            else None
        ),
        "figures": _pair_figures(pair, graded=not binary and len(data.labels) > 2) if pair else [],
        "topics": _topic_rows(campaign, pair) if pair else [],
        "confusion_rows": [
            {
                "label": label,
                "name": names.get(label, ""),
                "cells": [{"count": c, "agree": i == j} for j, c in enumerate(row)],
                "total": sum(row),
            }
            for i, (label, row) in enumerate(zip(pair.labels, pair.confusion, strict=True))
        ]
        if pair
        else [],
        "column_totals": [sum(column) for column in zip(*pair.confusion, strict=True)]
        if pair
        else [],
        "csv_url": _query(request, format="csv"),
        "json_url": _query(request, format="json"),
        "bootstrap": runscores.BOOTSTRAP,
    }
    return render(request, "qrels/reports/agreement_pair.html", context)


FIGURES = [
    (
        "observed",
        "Observed agreement",
        "Share of the common pairs given the same label.",
    ),
    (
        "cohen_kappa",
        "Cohen's kappa",
        "Agreement beyond chance, chance from each assessor's own label rates.",
    ),
    (
        "pooled_kappa",
        "Kappa, pooled marginals",
        "The textbook's kappa (Manning et al. 8.5, Scott's pi): chance from one label rate "
        "shared by both assessors, so a difference in their rates counts as disagreement.",
    ),
    (
        "weighted_kappa_linear",
        "Weighted kappa, linear",
        "Partial credit for near misses: disagreement weighted by the distance between labels.",
    ),
    (
        "weighted_kappa_quadratic",
        "Weighted kappa, quadratic",
        "As linear, weighted by the squared distance: far misses cost more.",
    ),
    (
        "relevant_overlap",
        "Relevant-set overlap",
        "|A and B| / |A or B| of the pairs each called relevant (Voorhees' overlap).",
    ),
]


def _pair_figures(pair: agreement.PairAgreement, *, graded: bool) -> list[dict[str, Any]]:
    rows = []
    for key, title, help_text in FIGURES:
        if key.startswith("weighted") and not graded:
            continue
        ci = pair.ci.get(key)
        rows.append(
            {
                "key": key,
                "title": title,
                "help": help_text,
                "value": getattr(pair, key),
                "low": ci[0] if ci else None,
                "high": ci[1] if ci else None,
                "band": kappa_band(getattr(pair, key)) if "kappa" in key else "",
            }
        )
    return rows


def _topic_rows(campaign: Campaign, pair: agreement.PairAgreement) -> list[dict[str, Any]]:
    titles = dict(campaign.topics.values_list("topic_id", "title"))
    return [
        {
            "topic": topic,
            "title": titles.get(topic, ""),
            "result": result,
            "band": kappa_band(result.cohen_kappa),
            "ci": result.ci.get("cohen_kappa"),
            "agree": sum(result.confusion[i][i] for i in range(len(result.labels))),
        }
        for topic, result in pair.per_topic.items()
    ]


# --- Reports computed from runs: directly or as a job ---------------------------------------------


@dataclass
class Outcome:
    """What a report page has to show: the report, or the job computing it, or why not."""

    report: dict[str, Any] | None = None
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
        outcome.report = (job.result or {}).get("report")
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


def _outcome(
    request: HttpRequest, campaign: Campaign, report: str, options: dict[str, Any]
) -> Outcome:
    size = runscores.ranked_documents(campaign)
    outcome = Outcome(size=size)
    job = _job_from_query(request, campaign, report)
    if job is not None:
        return _from_job(job, outcome)
    if size <= runscores.DIRECT_LIMIT:
        try:
            outcome.report = runscores.run_report(campaign=campaign, report=report, options=options)
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
        params__fingerprint=runscores.fingerprint(campaign),
    )
    active = related.active().first()
    if active is not None:
        return _from_job(active, outcome)
    done = related.filter(status=Job.Status.DONE).first()
    if done is not None:
        return _from_job(done, outcome)
    outcome.pending = True
    return outcome


def _enqueue(
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
                "fingerprint": runscores.fingerprint(campaign),
                "uploads": {key: upload.pk for key, upload in uploads.items()},
                "on_conflict": on_conflict,
                "files": [describe],
            },
            user=request.user,
        )
        Upload.objects.filter(pk__in=[u.pk for u in uploads.values()]).update(job=job)
    return job


def _read_upload(request: HttpRequest, campaign: Campaign) -> tuple[UploadForm, Any, list[str]]:
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


def _upload_source(upload: Upload) -> runscores.QrelsSource:
    return runscores.QrelsSource(
        kind="upload", upload_name=upload.name, upload_sha256=upload.sha256
    )


def _page_url(name: str, slug: str, **query: Any) -> str:
    url = reverse(name, args=[slug])
    query = {key: value for key, value in query.items() if value not in (None, "")}
    return url + (f"?{urlencode(query)}" if query else "")


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


# --- Evaluation ----------------------------------------------------------------------------------


def _evaluation_downloads(report: dict[str, Any], fmt: str, slug: str) -> HttpResponse | None:
    measures = report["measures"]
    if fmt == "json":
        return _download(
            _json(runscores.explicit_report(report)),
            name=f"{slug}-evaluation.json",
            kind="json",
        )
    if fmt == "csv":
        rows = [
            [row["run"], int(row["contributor"]), row["topics_answered"]]
            + [row["mean"][m] for m in measures]
            + [row["unjudged_at_10"]]
            for row in runscores.ranked(report["runs"], measures[0])
        ]
        header = ["run", "contributor", "topics_returned", *measures, "unjudged@10"]
        return _download(_csv(header, rows), name=f"{slug}-evaluation.csv", kind="csv")
    if fmt == "topics.csv":
        rows = []
        for row in report["runs"]:
            for topic in report["topics"]:
                values = row["per_topic"].get(topic)
                rows.append([row["run"], topic, *(values or [None] * len(measures))])
        header = ["run", "topic", *measures]
        return _download(_csv(header, rows), name=f"{slug}-evaluation-topics.csv", kind="csv")
    return None


def _evaluation_context(
    request: HttpRequest, campaign: Campaign, form: EvaluationForm, outcome: Outcome
) -> dict[str, Any]:
    report = outcome.report
    context: dict[str, Any] = {
        **_base(campaign, "evaluation"),
        "form": form,
        "upload_form": UploadForm(),
        "outcome": outcome,
        "report": report,
        "runs_count": campaign.runs.current().count(),
        "unjudged_warning": UNJUDGED_WARNING,
    }
    if not report:
        return context
    sort = form.sort_measure() if form.is_valid() else MEASURES[0]
    if sort not in report["measures"]:
        sort = report["measures"][0]
    measures = report["measures"]
    run_pks = dict(campaign.runs.current().values_list("tag", "pk"))
    carry = _query(request, format=None)
    rows = []
    for rank, row in enumerate(runscores.ranked(report["runs"], sort), start=1):
        rows.append(
            {
                "rank": rank,
                "run": row["run"],
                "contributor": row["contributor"],
                "values": [row["mean"][m] for m in measures],
                # 95 % intervals of the inferred measures, None for the others
                "values_intervals": [
                    (row["mean"][m], row.get("intervals", {}).get(m)) for m in measures
                ],
                "unjudged": row["unjudged_at_10"],
                "warn": row["unjudged_at_10"] >= UNJUDGED_WARNING,
                "topics": row["topics_answered"],
                "url": (
                    reverse("qrels:evaluation_run", args=[campaign.slug, run_pks[row["run"]]])
                    + carry
                    if row["run"] in run_pks
                    else ""
                ),
            }
        )
    context.update(
        {
            "sort": sort,
            "measures": measures,
            "sort_links": [(m, _query(request, sort=m, format=None)) for m in measures],
            "rows": rows,
            "outsiders": sum(1 for r in rows if not r["contributor"]),
            "warned": sum(1 for r in rows if r["warn"]),
            "downloads": [
                ("CSV: means", _query(request, format="csv")),
                ("CSV: per topic", _query(request, format="topics.csv")),
                ("JSON: everything", _query(request, format="json")),
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
    outcome = _outcome(request, campaign, "evaluation", options)
    fmt = request.GET.get("format")
    if fmt:
        response = _evaluation_downloads(outcome.report, fmt, slug) if outcome.report else None
        if response is None:
            raise Http404("Nothing to download: the report is not computed.")
        return response
    context = _evaluation_context(request, campaign, form, outcome)
    return render(request, "qrels/reports/evaluation.html", context)


def _evaluation_post(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    slug = campaign.slug
    form = EvaluationForm(request.POST, campaign=campaign)
    form.is_valid()
    if request.POST.get("action") == "upload":
        upload_form, parsed, problems = _read_upload(request, campaign)
        if parsed is None:
            context = _evaluation_context(request, campaign, form, Outcome())
            context["upload_form"] = upload_form
            context["upload_problems"] = problems
            return render(request, "qrels/reports/evaluation.html", context, status=400)
        upload, _qrels = parsed
        source = _upload_source(upload)
        job = _enqueue(
            request,
            campaign,
            "evaluation",
            {"source": source.as_params()},
            describe=f"evaluation against {upload.name}",
            uploads={"source": upload},
            on_conflict=upload_form.conflict_policy(),
        )
        return redirect(_page_url("qrels:evaluation", slug, job=job.pk))
    source = form.qrels_source()
    options = {"source": source.as_params()}
    describe = f"evaluation: {source.describe(campaign)}"
    _enqueue(request, campaign, "evaluation", options, describe=describe)
    return redirect(
        _page_url(
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
    outcome = _outcome(request, campaign, "evaluation", options)
    report = outcome.report
    topics = runscores.run_topics(report, run.tag) if report else None
    if report and topics is None:
        raise Http404("This run is not in the report (it was replaced by a newer import).")
    sort = form.sort_measure() if form.is_bound else MEASURES[0]
    context: dict[str, Any] = {
        **_base(campaign, "evaluation"),
        "run": run,
        "outcome": outcome,
        "report": report,
        "back": reverse("qrels:evaluation", args=[slug]) + _query(request, format=None),
    }
    if report:
        row = next(r for r in report["runs"] if r["run"] == run.tag)
        measures = report["measures"]
        if sort not in measures:
            sort = measures[0]
        titles = dict(campaign.topics.values_list("topic_id", "title"))
        index = measures.index(sort)
        context.update(
            {
                "row": row,
                "measures": measures,
                "sort": sort,
                "means": [row["mean"][m] for m in measures],
                "head": [(m, row["mean"][m]) for m in measures[:3]],
                "topic_rows": [
                    {
                        "topic": t["topic"],
                        "title": titles.get(t["topic"], ""),
                        "values": [t["values"][m] for m in measures] if t["values"] else None,
                    }
                    for t in topics
                ],
                "measure_links": [(m, _query(request, sort=m)) for m in measures[:-1]],
                "bars": report_plots.topic_bars(
                    [(t["topic"], t["values"][sort] if t["values"] else None) for t in topics],
                    measure=sort,
                    mean=row["mean"][sort],
                ),
                "missing": sum(1 for t in topics if t["values"] is None),
                "bar_index": index,
            }
        )
    return render(request, "qrels/reports/evaluation_run.html", context)


# --- Ranking stability ---------------------------------------------------------------------------


def _stability_forms(
    data, campaign: Campaign
) -> tuple[MeasureForm, QrelsSourceForm, QrelsSourceForm]:
    """The measure and the two qrels. Defaults: two people's own judgments on the topics both
    have (assessor against assessor) when two people judged anything; otherwise the default
    policy against majority (or max when majority is the default)."""
    people = [a.pk for a in runscores.judging_assessors(campaign) if a.kind == Assessor.Kind.PERSON]
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
            upload_form, parsed, upload_problems = _read_upload(request, campaign)
            if parsed is not None:
                upload, _ = parsed
                options["second"] = _upload_source(upload).as_params()
                job = _enqueue(
                    request,
                    campaign,
                    "stability",
                    options,
                    describe=f"ranking stability against {upload.name}",
                    uploads={"second": upload},
                    on_conflict=upload_form.conflict_policy(),
                )
                return redirect(_page_url("qrels:stability", slug, job=job.pk))
        else:
            _enqueue(
                request,
                campaign,
                "stability",
                options,
                describe=f"ranking stability by {measure}",
            )
            return redirect(_page_url("qrels:stability", slug, **keep))
    outcome = (
        Outcome()
        if invalid or upload_problems
        else _outcome(request, campaign, "stability", options)
    )
    report = outcome.report
    fmt = request.GET.get("format") if request.method == "GET" else None
    if fmt:
        if not report or fmt not in ("csv", "json"):
            raise Http404("Nothing to download: the report is not computed.")
        if fmt == "json":
            return _download(_json(report), name=f"{slug}-stability.json", kind="json")
        rows = [
            [r["run"], r["first"], r["second"], r["rank_first"], r["rank_second"]]
            for r in report["runs"]
        ]
        header = ["run", f"{report['measure']}_first", f"{report['measure']}_second"]
        header += ["rank_first", "rank_second"]
        return _download(_csv(header, rows), name=f"{slug}-stability.csv", kind="csv")
    context: dict[str, Any] = {
        **_base(campaign, "stability"),
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
                    ("CSV", _query(request, format="csv")),
                    ("JSON", _query(request, format="json")),
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


# --- Pool bias -----------------------------------------------------------------------------------


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
        _enqueue(
            request,
            campaign,
            "pool_bias",
            options,
            describe=f"pool bias of pool v{options['pool']} ({options['measure']})",
        )
        query = {k: request.POST.get(k) for k in ("pool", "measure", "policy", "imported")}
        return redirect(_page_url("qrels:pool_bias", slug, **query))
    outcome = (
        _outcome(request, campaign, "pool_bias", options) if options.get("pool") else Outcome()
    )
    report = outcome.report
    fmt = request.GET.get("format")
    if fmt:
        if not report or fmt not in ("csv", "json"):
            raise Http404("Nothing to download: the report is not computed.")
        if fmt == "json":
            return _download(_json(report), name=f"{slug}-pool-bias.json", kind="json")
        header = [
            "run",
            "contributor",
            report["measure"],
            "rank",
            f"{report['measure']}_leave_one_out",
            "drop",
            "rank_leave_one_out",
            "removed_entries",
            "removed_relevant",
            "unjudged@10",
            f"unjudged@{report['depth']}" if report["depth"] else "unjudged@depth",
        ]
        rows = [
            [
                r["run"],
                int(r["contributor"]),
                r["score"],
                r["rank"],
                r.get("score_loo"),
                r.get("drop"),
                r.get("rank_loo"),
                r.get("removed"),
                r.get("removed_relevant"),
                r["unjudged_at_10"],
                r["unjudged_at_depth"],
            ]
            for r in report["runs"]
        ]
        return _download(_csv(header, rows), name=f"{slug}-pool-bias.csv", kind="csv")
    context: dict[str, Any] = {
        **_base(campaign, "pool_bias"),
        "form": form,
        "outcome": outcome,
        "report": report,
        "has_pools": bool(form.pools),
        "unjudged_warning": UNJUDGED_WARNING,
    }
    if report:
        context.update(
            {
                "rows": [
                    {
                        **r,
                        "warn": r["unjudged_at_10"] >= UNJUDGED_WARNING,
                        "warn_depth": (r["unjudged_at_depth"] or 0) >= UNJUDGED_WARNING,
                        "drop_percent": 100 * (r.get("relative_drop") or 0),
                        "rise": -(r.get("drop") or 0),
                    }
                    for r in report["runs"]
                ],
                "contributors": sum(1 for r in report["runs"] if r["contributor"]),
                "outsiders": sum(1 for r in report["runs"] if not r["contributor"]),
                "downloads": [
                    ("CSV", _query(request, format="csv")),
                    ("JSON", _query(request, format="json")),
                ],
            }
        )
    return render(request, "qrels/reports/pool_bias.html", context, status=400 if invalid else 200)
