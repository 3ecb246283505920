"""The assessor's flow beside the judging screen: skip a document, go to the next unjudged one,
the list of their judged documents per topic (to revise one), and the keys page.

Every object is reached through the assignment of the logged-in assessor
(``_get_assignment_for_user``: 404 for anyone else) and opaque tokens. Nothing here shows runs,
ranks, scores, strata or another assessor's labels: only the assessor's own verdicts. Without
JavaScript every action is a link or a form that redirects; the judging screen's script gets the
same slim answer for a skip as for a verdict (assess/answer.py), and a client redirect for next.
"""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from assess import views
from assess.answer import acknowledgement, respond
from assess.keys import screen_keys
from assess.models import Assignment, AssignmentItem
from assess.revise import PAGE_SIZE, judge_url, judged_items, judged_rows
from assess.skips import SkipRefused, next_after, next_after_skip, skip, skipped_open
from assess.views import _get_assignment_for_user, _get_item


def _start_url(assignment: Assignment) -> str:
    return reverse("assess:start", args=[assignment.campaign.slug, assignment.token])


def _go(request: HttpRequest, url: str) -> HttpResponse:
    """To ``url``: a 303 without JavaScript (the browser GETs it after a POST), a client-side
    redirect for htmx."""
    if request.htmx:
        return HttpResponseClientRedirect(url)
    response = HttpResponseRedirect(url)
    response.status_code = 303
    return response


@login_required
@require_POST
def skip_document(request: HttpRequest, slug: str, token: str, item: str) -> HttpResponse:
    """Judge later: the document goes to the end of the assessor's order for its topic, and the
    next document opens. The form's ``submission`` id makes a replayed POST skip nothing more."""
    assignment = _get_assignment_for_user(request, slug, token)
    current = _get_item(assignment, item)
    submission = request.POST.get("submission", "").strip()
    try:
        submission_id = uuid.UUID(submission) if submission else None
    except ValueError:
        messages.error(request, "The form was damaged; nothing was skipped. Try again.")
        return _go(request, judge_url(assignment, current))
    try:
        outcome = skip(item=current, submission_id=submission_id)
    except SkipRefused as refused:
        if request.htmx:
            # The page goes back to this document and says why; nothing moved.
            context = views._panel_context(assignment, current, error=str(refused))
            return render(request, "assess/judge.html#panel", context, status=409)
        messages.warning(request, str(refused))
        back = judge_url(assignment, current) if current.judgment_id else _start_url(assignment)
        return _go(request, back)
    if request.htmx:
        # The page's script: only what changed (assess/answer.py); when the page has no document
        # to show, the one that followed the skipped one (or the skipped one, if it is alone).
        kind = "kept" if outcome.recorded and not outcome.moved else "skipped"
        ack = acknowledgement(assignment=assignment, item=current, kind=kind)
        return respond(
            request,
            assignment,
            current,
            ack,
            fallback=lambda: next_after_skip(assignment=assignment, skip=outcome.skip),
        )
    if not outcome.moved and outcome.recorded:
        messages.info(
            request,
            f"This is the last document left to judge in topic {current.topic.topic_id}: it "
            "stays until you judge it (mark it Unreadable if it cannot be read).",
        )
    following = next_after_skip(assignment=assignment, skip=outcome.skip)
    return _go(request, judge_url(assignment, following) if following else _start_url(assignment))


@login_required
@require_GET
def next_document(request: HttpRequest, slug: str, token: str, item: str) -> HttpResponse:
    """`]`: the next unjudged document after this one in the assessor's order (wrapping round)."""
    assignment = _get_assignment_for_user(request, slug, token)
    current = _get_item(assignment, item)
    following = next_after(item=current)
    if following is not None:
        return _go(request, judge_url(assignment, following))
    if current.judgment_id is None and not current.withdrawn:
        messages.info(request, "No other document is waiting: this is the last one to judge.")
        return _go(request, judge_url(assignment, current))
    return _go(request, _start_url(assignment))


@login_required
@require_GET
def judged_documents(request: HttpRequest, slug: str, token: str, topic: int) -> HttpResponse:
    """The assessor's own judged documents of one topic (title, their label by name, when), each
    opening the judging screen on it, and the documents they skipped and have still to judge."""
    assignment = _get_assignment_for_user(request, slug, token)
    topics = list(assignment.topics.order_by("position", "topic_id"))
    chosen = next((t for t in topics if t.pk == topic), None)
    if chosen is None:
        raise Http404("No such topic in this assignment.")
    page = Paginator(judged_items(assignment, chosen), PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "campaign": assignment.campaign,
        "assignment": assignment,
        "topic": chosen,
        "topics": topics,
        "page": page,
        "rows": judged_rows(assignment, chosen, list(page)),
        "skipped": [
            (entry, judge_url(assignment, entry.item))
            for entry in skipped_open(assignment, topic=chosen)
        ],
        "start_url": _start_url(assignment),
    }
    return render(request, "assess/judged.html", context)


@login_required
@require_GET
def keys_page(request: HttpRequest, slug: str, token: str) -> HttpResponse:
    """Every key of the judging screen, as a page (what `?` shows, for browsers without
    JavaScript). ``?item=`` names the document to go back to."""
    assignment = _get_assignment_for_user(request, slug, token)
    campaign = assignment.campaign
    rubric = campaign.current_rubric()
    labels = list(rubric.labels.order_by("value")) if rubric else []
    back = None
    wanted = request.GET.get("item", "")
    if wanted:
        back = AssignmentItem.objects.filter(assignment=assignment, token=wanted).first()
    context = {
        "campaign": campaign,
        "assignment": assignment,
        "screen_keys": screen_keys(campaign=campaign, labels=labels),
        "back_url": judge_url(assignment, back) if back else _start_url(assignment),
    }
    return render(request, "assess/keys.html", context)
