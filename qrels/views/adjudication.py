"""Adjudication: an organiser or adjudicator reads a pair's document as assessors saw it, every
assessor's verdict, and records the pair's adjudicated label with a reason
(qrels.adjudication)."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from assess.screen import document_html
from campaigns.access import ADJUDICATING, get_campaign_for
from campaigns.judgments import InvalidLabel, StaleJudgment
from campaigns.models import Campaign, Topic
from qrels.adjudication import (
    ADJUDICATION_COLUMNS,
    AdjudicationError,
    adjudicate,
    adjudication_csv_rows,
    adjudication_history,
    adjudication_log,
    current_adjudication,
    pair_verdicts,
)
from qrels.reports import csv_text
from qrels.views.common import download, query_string


class AdjudicationForm(forms.Form):
    label = forms.TypedChoiceField(coerce=int, widget=forms.RadioSelect, label="Adjudicated label")
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=4000,
        help_text="Why this label: kept with it, and shown to whoever adjudicates next.",
    )
    # The adjudication's version when the page was shown (0: none yet): a stale page is refused.
    version = forms.IntegerField(widget=forms.HiddenInput, min_value=0)
    submission_id = forms.UUIDField(widget=forms.HiddenInput)

    def __init__(self, *args, campaign: Campaign, **kwargs):
        super().__init__(*args, **kwargs)
        rubric = campaign.current_rubric()
        labels = rubric.labels.order_by("value") if rubric else []
        self.fields["label"].choices = [
            (label.value, f"{label.value} {label.name}") for label in labels
        ]

    def clean_reason(self) -> str:
        reason = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError("Give a reason: it is kept with the adjudicated label.")
        return reason


def _back(request: HttpRequest, campaign: Campaign) -> str:
    """The page the pair was opened from (``next``: a filtered pairs list, a document's page,
    the list of adjudications), else the agreement page. Only this campaign's agreement,
    adjudication and document pages: never an outside address."""
    home = reverse("qrels:agreement", args=[campaign.slug])
    allowed = (
        home,
        reverse("qrels:adjudications", args=[campaign.slug]),
        reverse("qrels:documents", args=[campaign.slug]),
    )
    wanted = request.GET.get("next", "")
    if wanted.startswith(allowed) and "//" not in wanted and "\\" not in wanted:
        return wanted
    return home


def _back_name(url: str, campaign: Campaign) -> str:
    """What the page ``_back`` chose is, for the link's words."""
    if url.startswith(reverse("qrels:documents", args=[campaign.slug])):
        return "the document"
    if url.startswith(reverse("qrels:adjudications", args=[campaign.slug])):
        return "the adjudications"
    if "/pairs/" in url:
        return "the pairs"
    return "agreement"


def adjudicate_url(slug: str, topic_pk: int, doc_id: str, *, back: str = "") -> str:
    url = reverse("qrels:adjudicate", args=[slug, topic_pk, doc_id])
    return url + "?" + urlencode({"next": back}) if back else url


@login_required
@require_http_methods(["GET", "POST"])
def adjudicate_pair(request: HttpRequest, slug: str, topic: int, doc: str) -> HttpResponse:
    """One pair (a topic's pk, a document id): the document as assessors
    saw it, every verdict with its note, flags and time, the adjudicated label's history, and
    the form that records (or revises) it. A form shown before someone else adjudicated the pair
    is refused (409) with the reader's label and reason kept in it."""
    campaign = get_campaign_for(request, slug, role=ADJUDICATING)
    pair_topic = Topic.objects.filter(campaign=campaign, pk=topic).first()
    if pair_topic is None:
        raise Http404("No such topic.")
    topic, doc_id = pair_topic, doc
    verdicts = pair_verdicts(campaign=campaign, topic=topic, doc_id=doc_id)
    if not verdicts:
        raise Http404("Nobody judged this pair.")
    current = current_adjudication(campaign=campaign, topic=topic, doc_id=doc_id)
    status = 200
    error = ""
    if request.method == "POST":
        form = AdjudicationForm(request.POST, campaign=campaign)
        if form.is_valid():
            data = form.cleaned_data
            try:
                _, recorded = adjudicate(
                    campaign=campaign,
                    topic=topic,
                    doc_id=doc_id,
                    label=data["label"],
                    reason=data["reason"],
                    by=request.user,
                    expected_version=data["version"],
                    submission_id=data["submission_id"],
                )
            except StaleJudgment as stale:
                current = stale.current
                status = 409
                error = (
                    "Someone adjudicated this pair since you opened it (their label is shown "
                    "above). Your label and reason are kept below: submit again to replace it."
                )
                form = AdjudicationForm(
                    {
                        **request.POST.dict(),
                        "version": current.version if current else 0,
                        "submission_id": uuid.uuid4(),
                    },
                    campaign=campaign,
                )
            except (InvalidLabel, AdjudicationError) as exc:
                status, error = 400, str(exc)
            else:
                if recorded:
                    messages.success(
                        request,
                        f"Adjudicated topic {topic.topic_id}, document {doc_id}: "
                        f"label {data['label']}.",
                    )
                return redirect(_back(request, campaign))
        else:
            status = 400
    else:
        form = AdjudicationForm(
            initial={
                "label": current.label if current else None,
                "version": current.version if current else 0,
                "submission_id": uuid.uuid4(),
            },
            campaign=campaign,
        )
    document = campaign.documents.filter(doc_id=doc_id).first()
    context = {
        "campaign": campaign,
        "topic": topic,
        "doc_id": doc_id,
        "document": document,
        "body": document_html(document.body_html, topic=topic, campaign=campaign)
        if document
        else "",
        "verdicts": verdicts,
        "labels_given": sorted({v.label for v in verdicts}),
        "current": current,
        "history": adjudication_history(current),
        "form": form,
        "error": error,
        "back_url": _back(request, campaign),
        "back_name": _back_name(_back(request, campaign), campaign),
        "document_url": reverse("qrels:document", args=[campaign.slug, doc_id])
        + f"?topic={topic.pk}",
    }
    return render(request, "qrels/reports/adjudicate.html", context, status=status)


ADJUDICATIONS_PER_PAGE = 100


@login_required
@require_GET
def adjudication_list(request: HttpRequest, slug: str) -> HttpResponse:
    """Every adjudication of the campaign, newest first (who, when, the pair, the label, the
    reason, the assessors' labels on the pair, whether a later one replaced it), 100 a page;
    ``?format=csv`` every one of them."""
    campaign = get_campaign_for(request, slug, role=ADJUDICATING)
    if request.GET.get("format") == "csv":
        _, entries = adjudication_log(campaign=campaign)
        return download(
            csv_text(ADJUDICATION_COLUMNS, adjudication_csv_rows(entries)),
            name=f"{campaign.slug}-adjudications.csv",
            kind="csv",
        )
    raw = request.GET.get("page", "1")
    if not raw.isdigit() or int(raw) < 1:
        raise Http404("No such page.")
    number = int(raw)
    total, entries = adjudication_log(
        campaign=campaign,
        limit=ADJUDICATIONS_PER_PAGE,
        offset=(number - 1) * ADJUDICATIONS_PER_PAGE,
    )
    if not entries and number > 1:
        raise Http404("No such page.")
    pages = max(1, -(-total // ADJUDICATIONS_PER_PAGE))
    here = request.get_full_path()
    context = {
        "campaign": campaign,
        "report_page": "agreement",
        "total": total,
        "rows": [
            {
                "entry": entry,
                "adjudicate_url": adjudicate_url(slug, entry.topic_pk, entry.doc_id, back=here),
                "document_url": reverse("qrels:document", args=[slug, entry.doc_id])
                + f"?topic={entry.topic_pk}",
            }
            for entry in entries
        ],
        "number": number,
        "pages": pages,
        "first_shown": (number - 1) * ADJUDICATIONS_PER_PAGE + 1,
        "last_shown": (number - 1) * ADJUDICATIONS_PER_PAGE + len(entries),
        "previous_url": query_string(request, page=str(number - 1)) if number > 1 else "",
        "next_url": query_string(request, page=str(number + 1)) if number < pages else "",
        "csv_url": "?format=csv",
    }
    return render(request, "qrels/reports/adjudications.html", context)
