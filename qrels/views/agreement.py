"""The agreement pages: the kappa matrix of the chosen assessors with the group statistics, and
one pair of assessors in detail; each also as CSV and JSON (qrels.reports.AgreementReport)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from campaigns.access import ADJUDICATING, get_campaign_for
from campaigns.models import Assessor, Campaign
from qrels import report_plots
from qrels.adjudication import adjudicated_labels
from qrels.agreement_data import BOOTSTRAP, agreement_data
from qrels.queries import PairFilter, PairPage, pairs_both_judged
from qrels.report_forms import AgreementForm, PairListForm
from qrels.reports import COMPARISON_TITLES, AgreementReport
from qrels.views.adjudication import adjudicate_url
from qrels.views.common import base, query_string, report_download

if TYPE_CHECKING:
    from qrels.agreement import PairAgreement

# Seed 000 (Manning, Raghavan and Schuetze): above 0.8 good, 0.67 to 0.8 fair, below dubious.
KAPPA_GOOD, KAPPA_FAIR = 0.8, 0.67


def kappa_band(value: float | None) -> str:
    if value is None:
        return "none"
    if value > KAPPA_GOOD:
        return "good"
    if value >= KAPPA_FAIR:
        return "fair"
    return "dubious"


@login_required
@require_GET
def agreement_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The kappa matrix of the chosen assessors (graded or binary) and the group statistics;
    ``?format=csv`` (every pair, overall and per topic) or ``json`` (everything, with the
    confusion matrices and bootstrap intervals)."""
    campaign = get_campaign_for(request, slug, role=ADJUDICATING)
    form = AgreementForm(request.GET or None, campaign=campaign)
    valid = not form.is_bound or form.is_valid()
    chosen = form.chosen() if valid else []
    binary = form.binary() if valid else False
    fmt = request.GET.get("format")
    if fmt in ("csv", "json") and valid:
        data = agreement_data(
            campaign=campaign, assessors=chosen, binary=binary, bootstrap=BOOTSTRAP
        )
        return report_download(
            data, stem=f"{campaign.slug}-agreement{'-binary' if binary else ''}", fmt=fmt
        )
    data = agreement_data(campaign=campaign, assessors=chosen, binary=binary)
    context = {
        **base(campaign, "agreement"),
        "form": form,
        "data": data,
        **_matrix(data, slug=slug, pks={a.name: a.pk for a in form.known}),
        "small_n": data.small_n,
        "small_pairs": sum(1 for pair in data.pairs if pair.small_n),
        "negative_pairs": [pair for pair in data.pairs if pair.negative],
        "graded_scale": len(data.scale) > 2,
        "headline": data.headline,
        "headline_band": kappa_band(data.headline.kappa) if data.headline else "none",
        "leniency": data.leniency,
        "models": [name for name in data.assessors if data.kinds.get(name) == "model"],
        "csv_url": query_string(request, format="csv"),
        "json_url": query_string(request, format="json"),
    }
    return render(request, "qrels/reports/agreement.html", context, status=200 if valid else 400)


def _matrix(data: AgreementReport, *, slug: str, pks: dict[str, int]) -> dict[str, Any]:
    """The kappa matrix (a row and a column per assessor) and the list of pairs, each pair
    with its band and the link to its page."""

    def url(a: str, b: str) -> str:
        labels = "binary" if data.binary else "graded"
        return reverse("qrels:agreement_pair", args=[slug, pks[a], pks[b]]) + f"?labels={labels}"

    def pairs(a: str, b: str, **filters: Any) -> str:
        return pairs_url(slug, pks[a], pks[b], binary=data.binary, **filters)

    by_pair = {}
    for pair in data.pairs:
        by_pair[(pair.a, pair.b)] = by_pair[(pair.b, pair.a)] = pair
    matrix = [
        {
            "name": name,
            "kind": data.kinds.get(name),
            "cells": [
                {
                    "self": name == other,
                    "other": other,
                    "pair": by_pair.get((name, other)),
                    "band": kappa_band(by_pair[(name, other)].cohen_kappa)
                    if (name, other) in by_pair
                    else "none",
                    "url": url(name, other),
                    "pairs_url": pairs(name, other) if name != other else "",
                    "negative_url": pairs(name, other, show="negative") if name != other else "",
                }
                for other in data.assessors
            ],
        }
        for name in data.assessors
    ]
    comparisons = [
        {
            "key": key,
            "title": COMPARISON_TITLES[key],
            "rows": [
                {
                    "pair": pair,
                    "band": kappa_band(pair.cohen_kappa),
                    "url": url(pair.a, pair.b),
                    "pairs_url": pairs(pair.a, pair.b),
                    "negative_url": pairs(pair.a, pair.b, show="negative"),
                }
                for pair in group
            ],
        }
        for key, group in data.by_comparison().items()
        if group
    ]
    return {"matrix": matrix, "comparisons": comparisons}


@login_required
@require_GET
def agreement_pair(request: HttpRequest, slug: str, a: int, b: int) -> HttpResponse:
    """Two assessors: their confusion matrix as a heat map, every kappa with its bootstrap
    interval, the relevant-set overlap, and the same per topic."""
    campaign = get_campaign_for(request, slug, role=ADJUDICATING)
    found = dict(
        Assessor.objects.filter(campaign=campaign, pk__in=[a, b])
        .exclude(kind__in=(Assessor.Kind.ADJUDICATED, Assessor.Kind.FILLED))
        .order_by()
        .values_list("pk", "name")
    )
    if a == b or len(found) != 2:
        raise Http404("No such pair of assessors.")
    name_a, name_b = found[a], found[b]
    binary = request.GET.get("labels") == "binary"
    try:
        data = agreement_data(
            campaign=campaign, assessors=[name_a, name_b], binary=binary, bootstrap=BOOTSTRAP
        )
    except ValueError:  # one of them has no judgment yet: nothing in common
        data = agreement_data(campaign=campaign, assessors=[], binary=binary)
    pair = data.pairs[0] if data.pairs else None
    fmt = request.GET.get("format")
    if fmt in ("csv", "json"):
        stem = f"{campaign.slug}-agreement-{a}-{b}{'-binary' if binary else ''}"
        return report_download(data, stem=stem, fmt=fmt)
    rubric = campaign.current_rubric()
    names = {label.value: label.name for label in rubric.labels.all()} if rubric else {}
    if binary:
        names = {0: "not relevant", 1: "relevant"}
    context = {
        **base(campaign, "agreement"),
        "a": {"pk": a, "name": name_a},
        "b": {"pk": b, "name": name_b},
        "pair": pair,
        "binary": binary,
        "data": data,
        "graded_scale": len(data.scale) > 2,
        "band": kappa_band(pair.cohen_kappa) if pair else "none",
        "small_n": data.small_n,
        "label_names": [(label, names.get(label, "")) for label in data.labels],
        "heatmap": None,
        "figures": [],
        "topics": [],
        "confusion_rows": [],
        "column_totals": [],
        "csv_url": query_string(request, format="csv"),
        "json_url": query_string(request, format="json"),
        "bootstrap": BOOTSTRAP,
    }
    if pair:
        graded = not binary and len(data.labels) > 2
        context.update(
            _pair_details(
                campaign,
                pair,
                a=name_a,
                b=name_b,
                names=names,
                graded=graded,
                links=functools.partial(pairs_url, campaign.slug, a, b, binary=binary),
            )
        )
        context["pairs_url"] = pairs_url(campaign.slug, a, b, binary=binary)
        context["negative_url"] = pairs_url(campaign.slug, a, b, binary=binary, show="negative")
    return render(request, "qrels/reports/agreement_pair.html", context)


def _pair_details(
    campaign: Campaign,
    pair: PairAgreement,
    *,
    a: str,
    b: str,
    names: dict[int, str],
    graded: bool,
    links: Callable[..., str],
) -> dict[str, Any]:
    """The pair page's heat map, figures, per-topic rows and confusion table; ``links(**filters)``
    is the list of the pairs behind a count (a cell, a row, a column, a topic)."""
    return {
        "heatmap": report_plots.confusion_heatmap(
            pair.confusion,
            pair.labels,
            a=a,
            b=b,
            names=names,
            links=lambda label_a, label_b: links(a_label=label_a, b_label=label_b),
        ),
        "figures": _pair_figures(pair, graded=graded),
        "topics": _topic_rows(campaign, pair, links=links),
        "confusion_rows": [
            {
                "label": label,
                "name": names.get(label, ""),
                "cells": [
                    {
                        "count": c,
                        "agree": i == j,
                        "b_label": pair.labels[j],
                        "url": links(a_label=label, b_label=pair.labels[j]) if c else "",
                    }
                    for j, c in enumerate(row)
                ],
                "total": sum(row),
                "url": links(a_label=label) if sum(row) else "",
            }
            for i, (label, row) in enumerate(zip(pair.labels, pair.confusion, strict=True))
        ],
        "column_totals": [
            {"count": sum(column), "url": links(b_label=label) if sum(column) else ""}
            for label, column in zip(pair.labels, zip(*pair.confusion, strict=True), strict=True)
        ],
    }


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


def _pair_figures(pair: PairAgreement, *, graded: bool) -> list[dict[str, Any]]:
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


def _topic_rows(
    campaign: Campaign, pair: PairAgreement, *, links: Callable[..., str]
) -> list[dict[str, Any]]:
    titles = dict(campaign.topics.values_list("topic_id", "title"))
    return [
        {
            "topic": topic,
            "title": titles.get(topic, ""),
            "result": result,
            "band": kappa_band(result.cohen_kappa),
            "ci": result.ci.get("cohen_kappa"),
            "agree": sum(result.confusion[i][i] for i in range(len(result.labels))),
            "url": links(topic=topic) if result.n else "",
            "same_url": links(topic=topic, show="same") if result.n else "",
        }
        for topic, result in pair.per_topic.items()
    ]


PAIRS_PER_PAGE = 100


@login_required
@require_GET
def agreement_pairs(request: HttpRequest, slug: str, a: int, b: int) -> HttpResponse:
    """The (topic, document) pairs behind a count of the agreement pages (a confusion cell,
    a row or column total, a pair's or a topic's n), each with both assessors' verdicts (label
    and its name, note, flags, time, when) and a link to the document as assessors see it;
    filtered by topic and by the distance between the labels, 100 a page."""
    campaign = get_campaign_for(request, slug, role=ADJUDICATING)
    found = dict(
        Assessor.objects.filter(campaign=campaign, pk__in=[a, b])
        .exclude(kind__in=(Assessor.Kind.ADJUDICATED, Assessor.Kind.FILLED))
        .order_by()
        .values_list("pk", "name")
    )
    if a == b or len(found) != 2:
        raise Http404("No such pair of assessors.")
    form = PairListForm(request.GET or None, campaign=campaign)
    form.fields["a_label"].label = f"{found[a]}\N{RIGHT SINGLE QUOTATION MARK}s label"
    form.fields["b_label"].label = f"{found[b]}\N{RIGHT SINGLE QUOTATION MARK}s label"
    valid = not form.is_bound or form.is_valid()
    cleaned = form.cleaned_data if form.is_bound and valid else {}
    binary = form.binary() if valid else False
    where = PairFilter(
        binary=binary,
        threshold=campaign.relevance_threshold,
        a_label=cleaned.get("a_label"),
        b_label=cleaned.get("b_label"),
        topic=cleaned.get("topic") or None,
        distance=cleaned.get("distance"),
        show=cleaned.get("show") or "",
    )
    number = cleaned.get("page") or 1
    rubric = campaign.current_rubric()
    names = {label.value: label.name for label in rubric.labels.all()} if rubric else {}
    binary_names = {0: "not relevant", 1: "relevant"}
    page = PairPage(total=0, pairs=[])
    if valid:
        page = pairs_both_judged(
            campaign=campaign,
            a=a,
            b=b,
            where=where,
            limit=PAIRS_PER_PAGE,
            offset=(number - 1) * PAIRS_PER_PAGE,
            label_names=names,
        )
        if not page.pairs and number > 1:
            raise Http404("No such page.")
    pages = max(1, -(-page.total // PAIRS_PER_PAGE))
    settled = adjudicated_labels(
        campaign=campaign, pairs=[(pair.topic_pk, pair.doc_id) for pair in page.pairs]
    )
    here = request.get_full_path()
    context = {
        **base(campaign, "agreement"),
        "form": form,
        "a": {"pk": a, "name": found[a]},
        "b": {"pk": b, "name": found[b]},
        "binary": binary,
        "where": where,
        "cell_names": {
            "a": (binary_names if binary else names).get(where.a_label, ""),
            "b": (binary_names if binary else names).get(where.b_label, ""),
        },
        "topic_filter": where.topic,
        "page": page,
        "rows": [
            {
                "pair": pair,
                # The document as assessors saw it, the verdicts and the adjudication form.
                "adjudicate_url": adjudicate_url(slug, pair.topic_pk, pair.doc_id, back=here),
                "adjudicated": settled.get((pair.topic_pk, pair.doc_id)),
                "document_url": reverse("qrels:document", args=[slug, pair.doc_id])
                + f"?topic={pair.topic_pk}",
            }
            for pair in page.pairs
        ],
        "number": number,
        "pages": pages,
        "first_shown": (number - 1) * PAIRS_PER_PAGE + 1,
        "last_shown": (number - 1) * PAIRS_PER_PAGE + len(page.pairs),
        "previous_url": query_string(request, page=str(number - 1)) if number > 1 else "",
        "next_url": query_string(request, page=str(number + 1)) if number < pages else "",
        "pair_url": reverse("qrels:agreement_pair", args=[slug, a, b])
        + f"?labels={'binary' if binary else 'graded'}",
    }
    return render(
        request, "qrels/reports/agreement_pairs.html", context, status=200 if valid else 400
    )


def pairs_url(slug: str, a: int, b: int, *, binary: bool, **filters: Any) -> str:
    """The link to the pairs of ``a`` and ``b`` behind a count, with ``filters``
    (``a_label``, ``b_label``, ``topic``)."""
    query = {"labels": "binary" if binary else "graded"}
    query.update({key: str(value) for key, value in filters.items() if value is not None})
    return reverse("qrels:agreement_pairs", args=[slug, a, b]) + "?" + urlencode(query)
