"""The assessor's pages: their assignments, and the judging screen.

Every object is reached through ``_get_assignment_for_user`` (scoped to the logged-in assessor, 404
otherwise) and opaque tokens; nothing rendered here names runs, ranks, scores, pool provenance or
another assessor's label. One view serves the full page and, for htmx, the judging panel alone.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from django.contrib.auth.decorators import login_required
from django.core import signing
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods
from django_htmx.http import push_url

from assess import gold, repeats, reveal
from assess.answer import acknowledgement, label_name, respond, upcoming_state
from assess.judging import (
    ItemTakenAway,
    Panel,
    load_scope,
    next_item,
    open_items,
    panel_reads,
    progress,
    rubric_and_labels,
    submit,
)
from assess.models import Assignment, AssignmentItem
from assess.screen import document_html, screen_context
from campaigns.access import ASSESSOR, get_campaign_for
from campaigns.judgments import InvalidLabel, StaleJudgment, SubmissionReused, Timing
from campaigns.models import Assessor, Label, RubricVersion

SERVED_SALT = "pooljudge.served"
# Seconds the page waits before sending a verdict again after the database failed to answer.
RETRY_AFTER = 2
# The fields a verdict is sent with: the retry answer re-sends exactly these.
VERDICT_FIELDS = (
    "submission",
    "version",
    "served",
    "active_ms",
    "label",
    "note",
    "unsure",
    "unreadable",
)
# Longer than this on one document counts as "left open", not as time spent judging.
MAX_SECONDS_ON_SCREEN = 6 * 3600


def _get_assignment_for_user(request: HttpRequest, slug: str, token: str) -> Assignment:
    """The assignment ``token`` of the logged-in user, while they are an assessor of the
    campaign ``slug`` (one query: this runs on every judgment)."""
    assignment = (
        Assignment.objects.filter(
            campaign__slug=slug,
            token=token,
            assessor__user=request.user,
            campaign__memberships__user=request.user,
            campaign__memberships__role=ASSESSOR,
        )
        .select_related("campaign", "assessor", "pool")
        .first()
    )
    if assignment is None:
        raise Http404("No such assignment.")
    return assignment


def _scope(request: HttpRequest, slug: str, token: str, item_token: str) -> AssignmentItem:
    """The item ``item_token`` of the logged-in user's assignment ``token`` in campaign ``slug``,
    while they are one of its assessors, with its assignment, campaign, assessor, topic, current
    judgment and the campaign's current rubric id (``rubric_pk``): one query, 404 otherwise."""
    item = load_scope(user_id=request.user.pk, slug=slug, token=token, item_token=item_token)
    if item is None:
        raise Http404("No such document in this assignment.")
    return item


def _get_item(assignment: Assignment, token: str) -> AssignmentItem:
    item = assignment.items.filter(token=token).select_related("topic", "judgment").first()
    if item is None:
        raise Http404("No such document in this assignment.")
    if item.judgment is not None and item.judgment.assessor_id != assignment.assessor_id:
        # Blindness (issue 20): an assessor reads their own verdict only, never another
        # assessor's or a model's, whatever an item was linked to.
        item.judgment = None
    return item


@login_required
def campaign_home(request: HttpRequest, slug: str) -> HttpResponse:
    """The assessor's assignments in this campaign, with progress per topic."""
    campaign = get_campaign_for(request, slug, role=ASSESSOR)
    assessor = Assessor.objects.for_user(campaign, request.user)
    assignments = [
        {"assignment": a, "topics": progress(a), "open": open_items(a).exists()}
        for a in Assignment.objects.filter(assessor=assessor, active=True)
        .select_related("pool")
        .prefetch_related("topics")
    ]
    for entry in assignments:
        entry["judged"] = sum(t.judged for t in entry["topics"])
        entry["total"] = sum(t.total for t in entry["topics"])
    return render(
        request,
        "assess/campaign_home.html",
        {"campaign": campaign, "assignments": assignments, "rubric": campaign.current_rubric()},
    )


@login_required
def start(request: HttpRequest, slug: str, token: str) -> HttpResponse:
    """Resume: the first unjudged document of the assignment, or the finished page."""
    assignment = _get_assignment_for_user(request, slug, token)
    item = next_item(assignment)
    if item is None:
        return render(request, "assess/done.html", _done_context(assignment))
    return redirect("assess:judge", slug=slug, token=token, item=item.token)


def _done_context(assignment: Assignment) -> dict:
    from assess.revise import topic_links

    topics = progress(assignment)
    last = (
        assignment.items.filter(judgment__isnull=False, repeat_of__isnull=True)
        .order_by("-position")
        .only("token")
        .first()
    )
    return {
        "campaign": assignment.campaign,
        "assignment": assignment,
        "topics": topics,
        "judged": sum(t.judged for t in topics),
        # Where to revise: per topic, the assessor's judged documents; `[` opens the last one.
        "revise_links": topic_links(assignment, progress=topics),
        "last_url": _judge_url(assignment, last) if last else "",
    }


def _judge_url(assignment: Assignment, item: AssignmentItem) -> str:
    return reverse("assess:judge", args=[assignment.campaign.slug, assignment.token, item.token])


def _served_token(item: AssignmentItem) -> str:
    return signing.dumps([item.pk, time.time()], salt=SERVED_SALT, compress=True)


def _timing(request: HttpRequest, item: AssignmentItem) -> Timing:
    """Seconds on screen from the signed time the page was served; active seconds as the page
    reports them (tab visible and focused), never more than the time on screen."""
    try:
        pk, served = signing.loads(
            request.POST.get("served", ""), salt=SERVED_SALT, max_age=MAX_SECONDS_ON_SCREEN
        )
    except (signing.BadSignature, ValueError, TypeError):
        return Timing()
    if pk != item.pk:
        return Timing()
    on_screen = max(0.0, time.time() - served)
    try:
        active = max(0.0, int(request.POST.get("active_ms", "")) / 1000)
    except ValueError:
        active = None
    if active is not None:
        active = min(active, on_screen)
    served_at = datetime.fromtimestamp(served, tz=UTC)
    return Timing(served_at=served_at, seconds_on_screen=round(on_screen, 3), active_seconds=active)


def _rubric(assignment: Assignment) -> tuple[RubricVersion | None, list[Label]]:
    """The campaign's current rubric and its labels (the version's id comes with the scope
    query; the labels from the worker's cache of immutable versions)."""
    rubric_pk = getattr(assignment, "rubric_pk", None)
    if rubric_pk is None:
        rubric = assignment.campaign.current_rubric()
        rubric_pk = rubric.pk if rubric is not None else None
        assignment.rubric_pk = rubric_pk
    return rubric_and_labels(rubric_pk)


def _panel_context(
    assignment: Assignment, item: AssignmentItem, *, panel: Panel | None = None, **extra
) -> dict:
    """The judging panel's context. ``panel`` (see assess.judging.panel_reads) is read here
    when the caller has not read it already."""
    campaign = assignment.campaign
    rubric, labels = _rubric(assignment)
    if panel is None:
        panel = panel_reads(assignment, item=item)
    # Items are linked to their judgment when judged, and to earlier judgments of the same pair
    # when they are created, so the item alone says whether the document is judged. A judged
    # document prefetches nothing: the next step from it is the assessor's choice.
    judgment = item.judgment
    if item.gold_only and judgment is None:
        # A gold-only item shows the assessor's own verdict on it, kept apart (assess/gold.py),
        # as any judged document shows theirs (one read, on gold-only items alone).
        judgment = item.judgment = gold.shown_verdict(item)
    upcoming = None
    if judgment is None and panel.upcoming is not None:
        upcoming = upcoming_state(
            assignment,
            panel.upcoming,
            panel.upcoming_document,
            after=item,
            counts=panel.counts.get(panel.upcoming.topic_id),
        )
    document = panel.document
    return {
        "campaign": campaign,
        "assignment": assignment,
        "item": item,
        "topic": item.topic,
        "document": document,
        "document_body": document_html(document.body_html, topic=item.topic, campaign=campaign)
        if document
        else "",
        "judgment": judgment,
        "rubric": rubric,
        "labels": labels,
        "previous": panel.previous,
        "topic_progress": panel.progress,
        "upcoming": upcoming,
        "submission_id": uuid.uuid4(),
        "served": _served_token(item),
        **screen_context(assignment=assignment, item=item, labels=labels),
        **reveal.panel_context(assignment=assignment, item=item, labels=labels),
        **extra,
    }


def _render_panel(request, context, *, status: int = 200) -> HttpResponse:
    template = "assess/judge.html#panel" if request.htmx else "assess/judge.html"
    return render(request, template, context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def judge(request: HttpRequest, slug: str, token: str, item: str) -> HttpResponse:
    current = _scope(request, slug, token, item)
    assignment = current.assignment
    if request.method == "GET":
        if current.withdrawn and current.judgment_id is None:
            return redirect("assess:start", slug=slug, token=token)
        return _render_panel(request, _panel_context(assignment, current))

    try:
        return _judge_post(request, assignment, current)
    except DatabaseError:
        # The database went away mid-request (a killed backend, a failover). Whether the verdict
        # was stored is unknown here, so the answer says so and carries the same submission id:
        # sent again, it is stored once, or answered with the verdict already stored.
        return _retry_answer(request, assignment, current)


def _retry_answer(request: HttpRequest, assignment: Assignment, item: AssignmentItem):
    fields = [(name, request.POST.get(name)) for name in VERDICT_FIELDS]
    response = render(
        request,
        "assess/retry.html#retry" if request.htmx else "assess/retry.html",
        {
            "campaign": assignment.campaign,
            "action": reverse(
                "assess:judge", args=[assignment.campaign.slug, assignment.token, item.token]
            ),
            "fields": [(name, value) for name, value in fields if value is not None],
            "retry_after": RETRY_AFTER,
        },
        status=503,
    )
    response["Retry-After"] = str(RETRY_AFTER)
    return response


def _after_verdict(request: HttpRequest, assignment: Assignment, after: int, **extra):
    """The answer once a verdict is settled: the next document, or the finished page."""
    slug, token = assignment.campaign.slug, assignment.token
    # Nothing left of a queue assessor's claims: the same read claims the queue's next document.
    panel = panel_reads(assignment, after=after, claim=True)
    following = panel.item
    status = 409 if extra.get("error") else 200
    if following is None:
        if request.htmx:
            response = render(
                request,
                "assess/done.html#finished",
                {**_done_context(assignment), **extra},
                status=status,
            )
            return push_url(response, reverse("assess:start", args=[slug, token]))
        if extra:
            return render(
                request, "assess/done.html", {**_done_context(assignment), **extra}, status=status
            )
        return redirect("assess:start", slug=slug, token=token)
    url = reverse("assess:judge", args=[slug, token, following.token])
    if not request.htmx and not extra:
        return redirect(url)
    context = _panel_context(assignment, following, panel=panel, **extra)
    response = _render_panel(request, context, status=status)
    return push_url(response, url) if request.htmx else response


def _judge_post(request: HttpRequest, assignment: Assignment, current: AssignmentItem):
    rubric, labels = _rubric(assignment)
    try:
        label = int(request.POST.get("label", ""))
        submission_id = uuid.UUID(request.POST.get("submission", ""))
        expected = int(request.POST.get("version", ""))
    except ValueError:
        context = _panel_context(assignment, current, error="Choose one of the labels.")
        return _render_panel(request, context, status=400)
    if label not in {choice.value for choice in labels}:
        context = _panel_context(assignment, current, error="That label is not on the scale.")
        return _render_panel(request, context, status=400)
    if current.repeat_of_id is not None and (
        # Open, or this very form's verdict already stored (a replay gets the same answer).
        current.judgment_id is None or repeats.stored(submission_id, current) is not None
    ):
        return _repeat_post(request, assignment, current, label, submission_id, labels)
    # Read before the write: the screen showed the models' labels on a judged pair.
    post_reveal = reveal.post_reveal(assignment, current)
    try:
        if current.gold_only:
            # Kept apart, answered alike (assess/gold.py): the same outcomes, the same pages.
            judgment = gold.record(
                item=current,
                label=label,
                rubric_pk=rubric.pk if rubric is not None else None,
                submission_id=submission_id,
                expected_version=expected,
                timing=_timing(request, current),
                note=request.POST.get("note", "").strip()[:2000],
                unreadable=bool(request.POST.get("unreadable")),
                unsure=bool(request.POST.get("unsure")),
                shown_token=request.POST.get("upcoming", "").strip() if request.htmx else None,
            )
        else:
            judgment, _ = submit(
                item=current,
                label=label,
                rubric_version=rubric,
                check_label=False,
                submission_id=submission_id,
                expected_version=expected,
                timing=_timing(request, current),
                note=request.POST.get("note", "").strip()[:2000],
                unreadable=bool(request.POST.get("unreadable")),
                unsure=bool(request.POST.get("unsure")),
                # The document the page moved on to: its first time on screen is recorded with
                # this write (the page showed it from its prefetch, no GET served it).
                shown_token=request.POST.get("upcoming", "").strip() if request.htmx else None,
                post_reveal=post_reveal,
            )
    except InvalidLabel:
        context = _panel_context(assignment, current, error="That label is not on the scale.")
        return _render_panel(request, context, status=400)
    except SubmissionReused as exc:
        context = _panel_context(
            assignment, current, error=f"{exc} Nothing was saved: choose again."
        )
        return _render_panel(request, context, status=400)
    except StaleJudgment as exc:
        current.judgment = exc.current
        context = _panel_context(
            assignment,
            current,
            conflict=exc.current,
            attempted=label,
            conflict_name=label_name(labels, exc.current.label),
            attempted_name=label_name(labels, label),
        )
        return _render_panel(request, context, status=409)
    except ItemTakenAway as exc:
        return _after_verdict(request, assignment, current.position, error=str(exc))
    revealed = reveal.after_verdict(
        assignment=assignment,
        item=current,
        flagged=post_reveal and judgment.version > 1,
        labels=labels,
    )
    if request.htmx:
        return _verdict_answer(
            request, assignment, current, labels, judgment.label, judgment.version, revealed
        )
    return _after_verdict(request, assignment, current.position)


def _verdict_answer(
    request: HttpRequest,
    assignment: Assignment,
    current: AssignmentItem,
    labels: list[Label],
    label: int,
    version: int,
    revealed: reveal.Reveal | None = None,
) -> HttpResponse:
    """The page's script's answer to a stored verdict: only what changed (assess/answer.py),
    read in one statement: the document the page moved on to (or the next open one), what
    follows it, and the progress of the topics involved; and, in a revealing campaign, the
    models' labels on the pair just judged (assess/reveal.py)."""
    shown = request.POST.get("upcoming", "").strip()
    if shown:
        panel = panel_reads(assignment, shown=shown, also_topic=current.topic)
    else:
        panel = panel_reads(
            assignment, after=current.position, also_topic=current.topic, claim=True
        )
    ack = acknowledgement(
        assignment=assignment,
        item=current,
        kind="revised" if version > 1 else "saved",
        name=label_name(labels, label),
        version=version,
        counts=panel.counts.get(current.topic_id),
    )
    if revealed is not None:
        ack["reveal"] = revealed
    return respond(request, assignment, current, ack, panel=panel)


def _repeat_post(
    request: HttpRequest,
    assignment: Assignment,
    current: AssignmentItem,
    label: int,
    submission_id: uuid.UUID,
    labels: list[Label],
) -> HttpResponse:
    """A verdict on a planted repeat (assess/repeats.py): stored apart from judgments, answered
    exactly as a first verdict is, so nothing on the page tells the two apart."""
    timing = _timing(request, current)
    shown = request.POST.get("upcoming", "").strip() if request.htmx else ""
    try:
        stored = repeats.record(
            item=current,
            label=label,
            submission_id=submission_id,
            served_at=timing.served_at,
            seconds_on_screen=timing.seconds_on_screen,
            active_seconds=timing.active_seconds,
            note=request.POST.get("note", "").strip()[:2000],
            unreadable=bool(request.POST.get("unreadable")),
            unsure=bool(request.POST.get("unsure")),
            shown_token=shown or None,
        )
    except repeats.RepeatError as exc:
        return _after_verdict(request, assignment, current.position, error=str(exc))
    if not request.htmx:
        return _after_verdict(request, assignment, current.position)
    # As a first verdict's answer: saved, version 1, with the same reveal (the pair's first
    # verdict exists: it is what the repeat is compared with).
    revealed = reveal.after_verdict(
        assignment=assignment, item=current, flagged=False, labels=labels
    )
    return _verdict_answer(request, assignment, current, labels, stored, 1, revealed)
