"""The Documents page: organisers (and adjudicators) search the campaign's documents by id or by
words, open one as assessors see it, and read every verdict on it under every topic
(qrels.documents). Never an assessor: the page shows everyone's labels."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import OperationalError, transaction
from django.db.models import Exists, OuterRef
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from assess.screen import document_html
from campaigns.access import ADJUDICATING, get_campaign_for
from campaigns.models import Judgment
from pooljudge.common import planner_settings
from qrels.documents import document_verdicts, judgment_counts, pooled_topics
from qrels.views.adjudication import adjudicate_url
from qrels.views.common import query_string

DOCUMENTS_PER_PAGE = 50
# How long a search may take on PostgreSQL before it is stopped with a message. A word in
# most documents of a large campaign is slow: the planner then reads the campaign's documents
# and works out each one's words again instead of using the words index (bench/
# document_search.py: a word in all of 100,000 documents takes a minute on a busy machine).
SEARCH_TIMEOUT = "5s"
TOO_SLOW = (
    "This search matches too many documents to list in time (its words are in most of them). "
    "Add a rarer word, or search by id."
)


class DocumentSearchForm(forms.Form):
    q = forms.CharField(
        label="Id or words",
        required=False,
        max_length=500,
        help_text="A document id (or its beginning), or words the title and text hold, all of "
        "them. Blank: every document.",
    )
    judged = forms.BooleanField(label="Only documents someone judged", required=False)
    page = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)


def document_url(slug: str, doc_id: str, *, topic_pk: int | None = None) -> str:
    url = reverse("qrels:document", args=[slug, doc_id])
    return f"{url}?topic={topic_pk}" if topic_pk is not None else url


@login_required
@require_GET
def documents_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The campaign's documents matching ``q`` (an id, its beginning, or words), 50 a page,
    each with how many verdicts it has and under how many topics."""
    campaign = get_campaign_for(request, slug, role=ADJUDICATING)
    form = DocumentSearchForm(request.GET or None)
    valid = not form.is_bound or form.is_valid()
    data = form.cleaned_data if form.is_bound and valid else {}
    text = data.get("q") or ""
    rows, page, total, error = [], None, 0, ""
    if valid:
        found = campaign.documents.search(text)
        if data.get("judged"):
            judged = Judgment.objects.filter(campaign=campaign, doc_id=OuterRef("doc_id"))
            found = found.filter(Exists(judged))
        # Only what a row shows: never the bodies of fifty documents.
        found = found.only("doc_id", "title")
        paginator = Paginator(found, DOCUMENTS_PER_PAGE, allow_empty_first_page=True)
        number = data.get("page") or 1
        try:
            with transaction.atomic(), planner_settings(statement_timeout=SEARCH_TIMEOUT):
                if number > paginator.num_pages:
                    raise Http404("No such page.")
                page = paginator.page(number)
                documents = list(page)
        except OperationalError:  # PostgreSQL stopped it (statement_timeout)
            page, documents, error = None, [], TOO_SLOW
        total = paginator.count if page is not None else 0
        counts = judgment_counts(campaign=campaign, doc_ids=[d.doc_id for d in documents])
        rows = [
            {
                "document": document,
                "url": document_url(slug, document.doc_id),
                "verdicts": counts.get(document.doc_id, (0, 0))[0],
                "topics": counts.get(document.doc_id, (0, 0))[1],
                "exact": document.doc_id == text.strip(),
            }
            for document in documents
        ]
    context = {
        "campaign": campaign,
        "form": form,
        "text": text,
        "rows": rows,
        "page": page,
        "total": total,
        "searched": bool(text.strip()) or bool(data.get("judged")),
        "error": error,
        "previous_url": query_string(request, page=str(page.number - 1))
        if page and page.has_previous()
        else "",
        "next_url": query_string(request, page=str(page.number + 1))
        if page and page.has_next()
        else "",
    }
    return render(request, "qrels/documents.html", context, status=200 if valid else 400)


@login_required
@require_GET
def document_page(request: HttpRequest, slug: str, doc: str) -> HttpResponse:
    """One document: its text as assessors see it under a topic (``?topic=``, a topic's pk:
    the topic beside it and its terms marked when the campaign highlights; default the first
    topic it was judged or pooled for), and every verdict under every topic with its history,
    each kind marked; a link to adjudicate each pair someone judged."""
    campaign = get_campaign_for(request, slug, role=ADJUDICATING)
    document = campaign.documents.filter(doc_id=doc).first()
    groups = document_verdicts(campaign=campaign, doc_id=doc)
    pooled = pooled_topics(campaign=campaign, doc_id=doc)
    if document is None and not groups and not pooled:
        raise Http404("No such document.")
    judged_topics = [group.topic for group in groups]
    # Topics to show it under: judged ones first, then pooled ones nobody judged yet.
    topics = judged_topics + [t for t in pooled if t.pk not in {j.pk for j in judged_topics}]
    wanted = request.GET.get("topic", "")
    topic = next((t for t in topics if str(t.pk) == wanted), topics[0] if topics else None)
    if wanted and (topic is None or str(topic.pk) != wanted):
        raise Http404("This document was neither judged nor pooled for that topic.")
    here = request.get_full_path()
    context = {
        "campaign": campaign,
        "doc_id": doc,
        "document": document,
        "body": document_html(document.body_html, topic=topic, campaign=campaign)
        if document
        else "",
        "topic": topic,
        "topics": [
            {"topic": t, "url": document_url(slug, doc, topic_pk=t.pk), "current": t == topic}
            for t in topics
        ],
        "groups": [
            {
                "group": group,
                "adjudicate_url": adjudicate_url(slug, group.topic.pk, doc, back=here)
                if group.labels_given
                else "",
            }
            for group in groups
        ],
        "unjudged": [t for t in pooled if t.pk not in {j.pk for j in judged_topics}],
        "verdict_count": sum(len(group.verdicts) for group in groups),
        "search_url": reverse("qrels:documents", args=[slug]),
    }
    return render(request, "qrels/document.html", context)
