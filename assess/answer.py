"""What the judging screen's script gets back for a verdict or a skip: only what changed.

The page already holds the topic card, the label buttons, the guidelines and the document the
assessor moved on to (prefetched into ``<template id="upcoming">``). The answer to a verdict
posted with ``upcoming=<token of the document now on screen>`` therefore carries:

1. an acknowledgement of the posted document (outcome, the label's name, the new version) and the
   status sentence for the page's ``aria-live`` region ("Saved: Related — topic 002, 4 of 23");
2. the judged count of the posted document's topic;
3. the next document to prefetch (the open one after the document on screen), with its form
   state, or a "none" marker;
4. only when that next document starts another topic: the new topic's card, which the script
   shows as a topic break before the document (docs/judging-protocol.md).

When the page has no document on screen (it posted without ``upcoming``, or the one it moved on
to is no longer open), the answer is the whole judging panel of the document to show, or the
done panel, each with the same acknowledgement. Without JavaScript nothing here is used: the
form posts and is redirected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from assess.judging import Panel, TopicProgress, mark_served, next_item, progress
from assess.models import Assignment, AssignmentItem
from assess.screen import document_html, flow_urls
from campaigns.models import Document, Label, Topic

SLIM_TEMPLATE = "assess/judge.html#answer"


def label_name(labels: Sequence[Label], value: int | None) -> str:
    """The name of label ``value`` on the current scale (the value itself when it left it)."""
    for label in labels:
        if label.value == value:
            return label.name
    return "" if value is None else str(value)


def status_text(kind: str, *, topic: Topic, judged: int, total: int, name: str = "") -> str:
    """The sentence the screen's live region announces after an action on a document."""
    where = f"topic {topic.topic_id}, {judged} of {total}"
    if kind == "revised":
        return f"Revised: {name} — {where}"
    if kind == "skipped":
        return f"Skipped: judge it later — {where} judged"
    if kind == "kept":
        return f"Still the last document of topic {topic.topic_id}: judge it, or mark it Unreadable"
    return f"Saved: {name} — {where}"


def acknowledgement(
    *,
    assignment: Assignment,
    item: AssignmentItem,
    kind: str,
    name: str = "",
    version: int = 0,
    counts: TopicProgress | None = None,
) -> dict[str, object]:
    """The acknowledgement of an action on ``item``: outcome, label name, version, its topic's
    judged count and the status sentence (``counts``, or one query: the topic's progress)."""
    if counts is None:
        found = progress(assignment, topic=item.topic)
        counts = found[0] if found else None
    judged, total = (counts.judged, counts.total) if counts else (0, 0)
    return {
        "kind": kind,
        "item": item,
        "topic": item.topic,
        "name": name,
        "version": version,
        "judged": judged,
        "total": total,
        "status": status_text(kind, topic=item.topic, judged=judged, total=total, name=name),
    }


def _open_upcoming(assignment: Assignment, token: str) -> AssignmentItem | None:
    """The document the page moved on to, while it is still open and this assessor's."""
    if not token:
        return None
    return (
        assignment.items.filter(token=token, judgment__isnull=True, withdrawn=False)
        .select_related("topic")
        .order_by()
        .first()
    )


def upcoming_state(
    assignment: Assignment,
    item: AssignmentItem,
    document: Document | None,
    *,
    after: AssignmentItem,
    counts: TopicProgress | None = None,
) -> dict[str, object]:
    """A prefetched document with its own form state, for ``<template id="upcoming">``: the page
    shows it, and posts its verdict, without asking the server first. When it starts another
    topic than ``after`` (the document shown before it), that topic's card and progress come
    with it: the page shows them as a topic break (one more query, only then)."""
    import uuid

    from assess.views import _served_token

    campaign = assignment.campaign
    state: dict[str, object] = {
        "item": item,
        "document": document,
        "body": document_html(document.body_html, topic=item.topic, campaign=campaign)
        if document
        else "",
        "urls": {
            **flow_urls(assignment, item),
            "url": reverse("assess:judge", args=[campaign.slug, assignment.token, item.token]),
        },
        "served": _served_token(item),
        "submission": uuid.uuid4(),
        "topic_break": None,
    }
    if item.topic_id != after.topic_id:
        if counts is None:  # not read with the item (assess.judging.panel_reads): read now
            found = progress(assignment, topic=item.topic)
            counts = found[0] if found else None
        state["topic_break"] = item.topic
        state["topic_progress"] = counts
    return state


def prefetch_context(
    assignment: Assignment, shown: AssignmentItem, *, panel: Panel | None = None
) -> dict[str, object]:
    """The document to prefetch after ``shown`` (the open one after it, wrapping round; none
    when ``shown`` is the only open one), as ``upcoming_state`` describes it; from ``panel``
    when it was read with ``shown`` (assess.judging.panel_reads)."""
    if panel is not None:
        if panel.upcoming is None:
            return {"next": None}
        counts = panel.counts.get(panel.upcoming.topic_id)
        state = upcoming_state(
            assignment, panel.upcoming, panel.upcoming_document, after=shown, counts=counts
        )
        return {"next": state}
    following = next_item(assignment, after=shown.position)
    if following is not None and following.pk == shown.pk:
        following = None
    if following is None:
        return {"next": None}
    document = (
        Document.objects.filter(campaign=assignment.campaign, doc_id=following.doc_id)
        .only("doc_id", "title", "body_html")
        .order_by()
        .first()
    )
    return {"next": upcoming_state(assignment, following, document, after=shown)}


def respond(
    request: HttpRequest,
    assignment: Assignment,
    current: AssignmentItem,
    ack: dict[str, object],
    *,
    fallback: Callable[[], AssignmentItem | None] | None = None,
    panel: Panel | None = None,
) -> HttpResponse:
    """The answer to the page's script after an action on ``current`` (see the module's
    docstring): slim when the page shows the open document it moved on to, else the panel of the
    document to show (``fallback()``, by default the next open one after ``current``), or the
    done panel."""
    from assess import views

    token = request.POST.get("upcoming", "").strip()
    if panel is not None:
        # Read with the verdict's answer (assess/views.py): the open item ``token`` with what
        # follows it, or without a token the first open item after ``current``.
        shown = panel.item if token and panel.item is not None else None
    else:
        shown = _open_upcoming(assignment, token)
    if shown is not None and shown.pk != current.pk:
        if panel is None:
            # The page shows it now: the time it was first on screen (a GET never served it).
            # With a panel, the verdict's own write recorded it (assess.judging.submit).
            mark_served(shown)
        context = {
            "campaign": assignment.campaign,
            "assignment": assignment,
            "ack": ack,
            "shown": shown,
            **prefetch_context(assignment, shown, panel=panel),
        }
        return render(request, SLIM_TEMPLATE, context)
    read = None
    if fallback is not None:
        following = fallback()
    elif panel is not None and not token:
        # Read (and, in queue mode, claimed) with the verdict's answer: nothing means done.
        following, read = panel.item, panel
    else:
        following = next_item(assignment, after=current.position)
    if following is None:
        context = {**views._done_context(assignment), "ack": ack}
        return render(request, "assess/done.html#finished", context)
    context = views._panel_context(assignment, following, panel=read, ack=ack)
    return render(request, "assess/judge.html#panel", context)
