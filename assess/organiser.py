"""The organiser's workspace: assessors, giving out and moving work, and live progress.

Every view starts from ``get_campaign_for`` (organisers of this campaign only: assessors,
outsiders and organisers of other campaigns get a 404) and looks every object up inside that
campaign, so an id from elsewhere is a 404 too. The Assessors page is one template whose
``workspace`` partial htmx swaps after a form; without JavaScript each form posts and redirects.
The progress page's ``live`` partial polls itself while work is open.
"""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling

from accounts.models import Account
from accounts.passwords import OneTimeLink, one_time_link
from assess import dashboard as dash
from assess import gold, repeats
from assess.assignments import AssignmentError, assign, end_assignment, reassign_topic, rebalance
from assess.care import MIN_JUDGMENTS, care_signals
from assess.forms import (
    AddMemberForm,
    AssignForm,
    CreateAssessorForm,
    MoveWorkForm,
    RebalanceForm,
)
from assess.highlight import highlight_html, topic_terms
from assess.models import Assignment, AssignmentItem
from assess.plots import judgments_over_time
from campaigns.access import get_campaign_for
from campaigns.members import (
    add_member,
    create_user,
    enrolment_refusal,
    password_link_refusals,
)
from campaigns.models import Assessor, Campaign, Judgment, Membership
from pooling.models import Pool, PoolEntry

log = logging.getLogger("pooljudge.accounts")

WORKSPACE = "assess/organiser/assessors.html"
PROGRESS = "assess/organiser/progress.html"
POLL_SECONDS = 5


# --- Lookups --------------------------------------------------------------------------------------


def _built_pools(campaign: Campaign) -> list[Pool]:
    return list(campaign.pools.built().annotate(topic_count=Count("topics")).order_by("-version"))


def _get_pool(campaign: Campaign, version: int) -> Pool:
    pool = campaign.pools.built().filter(version=version).first()
    if pool is None:
        raise Http404("No such built pool.")
    return pool


def _chosen_pool(campaign: Campaign, value: str | None) -> Pool | None:
    """The built pool asked for (``?pool=3``), else the newest built one."""
    built = campaign.pools.built()
    if value and value.isdigit() and len(value) < 10:
        chosen = built.filter(version=int(value)).first()
        if chosen is not None:
            return chosen
    return built.order_by("-version").first()


def _page_url(campaign: Campaign, pool: Pool | None) -> str:
    url = reverse("assess:assessors", args=[campaign.slug])
    return f"{url}?pool={pool.version}" if pool is not None else url


# --- The Assessors page ---------------------------------------------------------------------------


def _member_rows(campaign: Campaign, viewer) -> list[dict]:
    """Everyone in the campaign, with their active assignments, how far each has come, and
    whether ``viewer`` may hand them a one-time password link."""
    memberships = list(campaign.memberships.select_related("user"))
    refusals = password_link_refusals(issuer=viewer, users=[m.user for m in memberships])
    pending = set(
        Account.objects.filter(
            user__in=[m.user_id for m in memberships], password_changed_at__isnull=True
        ).values_list("user_id", flat=True)
    )
    identities = {
        a.user_id: a for a in Assessor.objects.filter(campaign=campaign, user__isnull=False)
    }
    assignments = (
        Assignment.objects.filter(campaign=campaign, active=True)
        .select_related("pool", "partner")
        .annotate(topic_count=Count("topics", distinct=True))
        .order_by("pool__version", "created_at", "pk")
    )
    rows = (
        AssignmentItem.objects.filter(
            assignment__campaign=campaign, assignment__active=True, withdrawn=False
        )
        .values("assignment_id")
        .annotate(done=Count("judgment"), total=Count("pk"))
        .values_list("assignment_id", "done", "total")
    )
    counts = {pk: (done, total) for pk, done, total in rows}
    by_assessor: dict[int, list[Assignment]] = {}
    for assignment in assignments:
        assignment.judged, assignment.total = counts.get(assignment.pk, (0, 0))
        by_assessor.setdefault(assignment.assessor_id, []).append(assignment)
    judged = dict(
        Judgment.objects.filter(campaign=campaign, source=Judgment.Source.JUDGED)
        .values_list("assessor_id")
        .annotate(n=Count("pk"))
    )
    rows = []
    for membership in memberships:
        assessor = identities.get(membership.user_id)
        rows.append(
            {
                "membership": membership,
                "user": membership.user,
                "is_assessor": membership.role == Membership.Role.ASSESSOR,
                "assignments": by_assessor.get(assessor.pk, []) if assessor else [],
                "judged": judged.get(assessor.pk, 0) if assessor else 0,
                "link_refusal": refusals[membership.user_id],
                "pending": membership.user_id in pending,
            }
        )
    return rows


def _grid(campaign: Campaign, pool: Pool) -> dict:
    """Topic x assessor: who holds what of ``pool`` (P primary, O overlap, Q queue)."""
    cells = dash.grid_cells(campaign, pool=pool)
    work = dash.count_work(campaign, pool=pool)
    members = set(
        Assessor.objects.filter(
            campaign=campaign,
            user__memberships__campaign=campaign,
            user__memberships__role=Membership.Role.ASSESSOR,
        ).values_list("pk", flat=True)
    )
    with_work = {assessor_pk for _, assessor_pk in cells}
    columns = list(
        Assessor.objects.filter(campaign=campaign, pk__in=members | with_work).order_by("name")
    )
    rows = []
    for topic in pool.topics.order_by("position", "topic_id"):
        judged, assigned = work.topics.get(topic.pk, (0, 0))
        rows.append(
            {
                "topic": topic,
                "judged": judged,
                "assigned": assigned,
                "cells": [
                    {
                        "work": cells.get((topic.pk, column.pk), []),
                        "name": column.name,
                        # Work goes only to people with a login (assess.grid_views).
                        "url": reverse(
                            "assess:grid_cell",
                            args=[campaign.slug, pool.version, topic.pk, column.pk],
                        )
                        if column.pk in members
                        else "",
                    }
                    for column in columns
                ],
            }
        )
    return {
        "columns": columns,
        "rows": rows,
        "unassigned": sum(1 for row in rows if not row["assigned"]),
    }


def _workspace_context(
    request: HttpRequest,
    campaign: Campaign,
    pool: Pool | None,
    *,
    link: tuple[object, OneTimeLink] | None = None,
    **forms,
):
    context = {
        "campaign": campaign,
        "pool": pool,
        "pools": _built_pools(campaign),
        "members": _member_rows(campaign, request.user),
        # A one-time password link just made: shown in this response only, never stored.
        "link": link,
        "create_form": forms.get("create_form") or CreateAssessorForm(campaign=campaign),
        "add_form": forms.get("add_form") or AddMemberForm(campaign=campaign),
        "is_htmx": _wants_fragment(request),
        "assessor_count": campaign.memberships.filter(role=Membership.Role.ASSESSOR).count(),
        "active_count": Assignment.objects.filter(campaign=campaign, active=True).count(),
    }
    if pool is not None:
        context.update(
            assign_form=forms.get("assign_form") or AssignForm(campaign=campaign, pool=pool),
            move_form=forms.get("move_form") or MoveWorkForm(campaign=campaign, pool=pool),
            rebalance_form=forms.get("rebalance_form")
            or RebalanceForm(campaign=campaign, pool=pool),
            grid=_grid(campaign, pool),
        )
    return context


def _wants_fragment(request: HttpRequest) -> bool:
    """An htmx swap asks for the fragment; htmx restoring history (back button, no cached copy)
    needs the whole page."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def _render_workspace(
    request: HttpRequest,
    campaign: Campaign,
    pool: Pool | None,
    *,
    status: int = 200,
    link: tuple[object, OneTimeLink] | None = None,
    **forms,
) -> HttpResponse:
    template = f"{WORKSPACE}#workspace" if _wants_fragment(request) else WORKSPACE
    context = _workspace_context(request, campaign, pool, link=link, **forms)
    return render(request, template, context, status=status)


def _saved(request: HttpRequest, campaign: Campaign, pool: Pool | None, message: str):
    """After a change: htmx gets the fresh workspace, a plain form post a redirect (PRG)."""
    messages.success(request, message)
    if request.htmx:
        return _render_workspace(request, campaign, pool)
    return redirect(_page_url(campaign, pool))


@login_required
@require_GET
@vary_on_headers("HX-Request")
def assessors(request: HttpRequest, slug: str) -> HttpResponse:
    """Members and their work; giving out, moving and sharing work in one pool."""
    campaign = get_campaign_for(request, slug)
    pool = _chosen_pool(campaign, request.GET.get("pool"))
    return _render_workspace(request, campaign, pool)


def _show_link(
    request: HttpRequest, campaign: Campaign, pool: Pool | None, user, message: str
) -> HttpResponse:
    """The workspace with a fresh one-time link for ``user``. Answered directly, not by a
    redirect, so that the link is never kept in a message cookie or the session."""
    link = one_time_link(user, request=request)
    log.info(
        "one-time password link issued: username=%r by=%r campaign=%s",
        user.get_username(),
        request.user.get_username(),
        campaign.slug,
    )
    messages.success(request, message)
    return _render_workspace(request, campaign, pool, link=(user, link))


@login_required
@require_POST
def assessor_create(request: HttpRequest, slug: str) -> HttpResponse:
    """A new login, added to the campaign as an assessor: with a temporary password (replaced
    at the first login), or with none and a one-time link to hand over."""
    campaign = get_campaign_for(request, slug)
    pool = _chosen_pool(campaign, request.POST.get("pool"))
    form = CreateAssessorForm(request.POST, campaign=campaign)
    if form.is_valid():
        data = form.cleaned_data
        try:
            with transaction.atomic():
                user = create_user(
                    username=data["username"],
                    password=data["password"] or None,
                    email=data["email"],
                    by=request.user,
                )
                add_member(campaign=campaign, user=user, role=Membership.Role.ASSESSOR)
        except ValidationError as exc:  # a name taken meanwhile, say
            form.add_error(None, exc)
        except IntegrityError:
            form.add_error("username", "That name was taken a moment ago; choose another.")
        else:
            name = user.get_username()
            if not data["password"]:
                return _show_link(
                    request,
                    campaign,
                    pool,
                    user,
                    f"Created the account {name} and added it as an assessor. Give them the "
                    "link below: with it they choose their password and find their work here.",
                )
            return _saved(
                request,
                campaign,
                pool,
                f"Created the account {name} and added it as an assessor. Give them the "
                "password: at their first login they must replace it with one of their own.",
            )
    return _render_workspace(request, campaign, pool, status=400, create_form=form)


@login_required
@require_POST
def member_password_link(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """A one-time password link for a member who cannot log in (a forgotten password, or an
    account created without one), if it would give the organiser nothing they cannot already
    do (``campaigns.members.password_link_refusals``)."""
    campaign = get_campaign_for(request, slug)
    membership = campaign.memberships.filter(user_id=pk).select_related("user").first()
    if membership is None:
        raise Http404("No such member.")
    user = membership.user
    pool = _chosen_pool(campaign, request.POST.get("pool"))
    refusal = password_link_refusals(issuer=request.user, users=[user])[user.pk]
    if refusal is not None:
        messages.error(request, refusal)
        return _render_workspace(request, campaign, pool, status=400)
    return _show_link(
        request,
        campaign,
        pool,
        user,
        f"A one-time password link for {user.get_username()}: give it to them. Their current "
        "password keeps working until they use it.",
    )


@login_required
@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    """An existing login joins the campaign (as an assessor or an organiser)."""
    campaign = get_campaign_for(request, slug)
    pool = _chosen_pool(campaign, request.POST.get("pool"))
    form = AddMemberForm(request.POST, campaign=campaign)
    if form.is_valid():
        refusal = enrolment_refusal(issuer=request.user, user=form.cleaned_data["user"])
        if refusal is not None:
            form.add_error("username", refusal)
    if form.is_valid():
        user, role = form.cleaned_data["user"], form.cleaned_data["role"]
        add_member(campaign=campaign, user=user, role=role)
        role_name = Membership.Role(role).label.lower()
        return _saved(request, campaign, pool, f"Added {user.get_username()} as {role_name}.")
    return _render_workspace(request, campaign, pool, status=400, add_form=form)


@login_required
@require_POST
def assign_work(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    pool = _get_pool(campaign, version)
    form = AssignForm(request.POST, campaign=campaign, pool=pool)
    if form.is_valid():
        data = form.cleaned_data
        try:
            created = assign(
                campaign=campaign,
                pool=pool,
                user=data["assessor"],
                topics=list(data["topics"]),
                mode=data["mode"],
                seed=data["seed"],
                interleave=data["interleave"],
                overlap=data["overlap"],
                partner=data["partner"],
                repeat_rate=data["repeats"],
                gold_source=data["gold_from"],
                gold_rate=data["gold_amount"][0],
                gold_count=data["gold_amount"][1],
                by=request.user,
            )
        except AssignmentError as exc:
            form.add_assignment_error(str(exc))
        else:
            return _saved(request, campaign, pool, _describe_created(created, pool))
    return _render_workspace(request, campaign, pool, status=400, assign_form=form)


def _describe_created(created: list[Assignment], pool: Pool) -> str:
    parts = []
    for assignment in created:
        topics = assignment.topics.count()
        if assignment.mode == Assignment.Mode.QUEUE:
            what = "draws from the shared queue"
        else:
            what = f"{assignment.items.count()} documents"
            gold_items = assignment.items.filter(gold__isnull=False).count()
            if gold_items:
                what += f" ({gold_items} of them gold)"
        parts.append(
            f"{assignment.assessor.name}: {assignment.get_mode_display().split(' (')[0].lower()}"
            f" on {topics} topic{'s' if topics != 1 else ''}, {what}"
        )
    return f"Pool v{pool.version}: " + "; ".join(parts) + "."


@login_required
@require_POST
def move_work(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    """One topic's unjudged documents from one assessor to another (judgments stay)."""
    campaign = get_campaign_for(request, slug)
    pool = _get_pool(campaign, version)
    form = MoveWorkForm(request.POST, campaign=campaign, pool=pool)
    if form.is_valid():
        data = form.cleaned_data
        try:
            moved = reassign_topic(
                pool=pool,
                topic=data["topic"],
                from_user=data["from_user"],
                to_user=data["to_user"],
                by=request.user,
            )
        except AssignmentError as exc:
            form.add_assignment_error(str(exc))
        else:
            message = (
                f"Topic {data['topic'].topic_id}: moved {moved} unjudged document"
                f"{'s' if moved != 1 else ''} from {data['from_user'].get_username()} to "
                f"{data['to_user'].get_username()}; judgments made so far stay."
            )
            return _saved(request, campaign, pool, message)
    return _render_workspace(request, campaign, pool, status=400, move_form=form)


@login_required
@require_POST
def rebalance_work(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    """Share one topic's remaining primary work evenly across the chosen assessors."""
    campaign = get_campaign_for(request, slug)
    pool = _get_pool(campaign, version)
    form = RebalanceForm(request.POST, campaign=campaign, pool=pool)
    if form.is_valid():
        data = form.cleaned_data
        try:
            shares = rebalance(
                pool=pool, topic=data["topic"], users=list(data["users"]), by=request.user
            )
        except AssignmentError as exc:
            form.add_assignment_error(str(exc))
        else:
            listed = ", ".join(f"{name} {count}" for name, count in shares.items())
            message = (
                f"Topic {data['topic'].topic_id} rebalanced; left to judge: {listed or 'nothing'}."
            )
            return _saved(request, campaign, pool, message)
    return _render_workspace(request, campaign, pool, status=400, rebalance_form=form)


@login_required
@require_POST
def assignment_end(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """Take back an assignment's unjudged work; its judgments stay."""
    campaign = get_campaign_for(request, slug)
    assignment = (
        Assignment.objects.filter(campaign=campaign, pk=pk).select_related("assessor", "pool")
    ).first()
    if assignment is None:
        raise Http404("No such assignment.")
    pool = _chosen_pool(campaign, request.POST.get("pool"))
    if not assignment.active:
        messages.info(request, "That assignment had already been removed.")
        if request.htmx:
            return _render_workspace(request, campaign, pool)
        return redirect(_page_url(campaign, pool))
    withdrawn = end_assignment(assignment=assignment)
    message = (
        f"Removed {assignment.assessor.name}'s {assignment.get_mode_display().split(' (')[0]} "
        f"assignment on pool v{assignment.pool.version}: {withdrawn} unjudged document"
        f"{'s' if withdrawn != 1 else ''} taken back; their judgments stay."
    )
    return _saved(request, campaign, pool, message)


# --- Progress -------------------------------------------------------------------------------------


@login_required
@require_GET
@vary_on_headers("HX-Request")
def progress(request: HttpRequest, slug: str) -> HttpResponse:
    """Per topic and per assessor: judged / assigned, labels, time, pace and finish; as a page,
    as the fragment that polls itself while work is open, or as CSV (``?format=csv``)."""
    campaign = get_campaign_for(request, slug)
    board = dash.campaign_dashboard(campaign)
    if request.GET.get("format") == "csv":
        stamp = timezone.localtime(board.now).strftime("%Y%m%d-%H%M")
        response = HttpResponse(dash.dashboard_csv(board), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = (
            f'attachment; filename="{campaign.slug}-progress-{stamp}.csv"'
        )
        response["Cache-Control"] = "no-store"
        return response
    context = {
        "campaign": campaign,
        "board": board,
        "plot": judgments_over_time(board.series, bucket=board.bucket),
        "poll_seconds": POLL_SECONDS,
        "has_assignments": Assignment.objects.filter(campaign=campaign).exists(),
        "has_pool": campaign.pools.built().exists(),
        "active_assessors": Assessor.objects.filter(Q(assignments__active=True), campaign=campaign)
        .distinct()
        .count(),
        "consistency": repeats.self_agreement(campaign),
        "gold_accuracy": gold.accuracy(campaign),
    }
    if _wants_fragment(request):
        response = render(request, f"{PROGRESS}#live", context)
        if not board.open_work:
            response.status_code = HttpResponseStopPolling.status_code
        return response
    # Read once per page, not on every poll: it reads every person's verdicts.
    context["care"] = care_signals(campaign)
    context["min_judgments"] = MIN_JUDGMENTS
    return render(request, PROGRESS, context)


# --- Previewing the judging screen's document (term highlighting) -------------------------------

PREVIEW_DOCUMENTS = 200


@login_required
@require_GET
def highlighting(request: HttpRequest, slug: str) -> HttpResponse:
    """A topic's document as an assessor sees it (guidelines, topic, document), with the topic's
    terms marked as they would be, and the terms each topic marks: for deciding whether to turn
    highlighting on. ``?topic=`` (a topic's pk) and ``?doc=`` (a document id) choose."""
    campaign = get_campaign_for(request, slug)
    topics = list(campaign.topics.order_by("position", "topic_id"))
    wanted = request.GET.get("topic", "")
    topic = next((t for t in topics if str(t.pk) == wanted), topics[0] if topics else None)
    document, doc_ids = None, []
    if topic is not None:
        pooled = (
            PoolEntry.objects.filter(pool__campaign=campaign, topic=topic)
            .order_by("doc_id")
            .values_list("doc_id", flat=True)
            .distinct()
        )
        documents = campaign.documents.order_by("doc_id")
        if pooled.exists():
            documents = documents.filter(doc_id__in=pooled)
        doc_ids = list(documents.values_list("doc_id", flat=True)[:PREVIEW_DOCUMENTS])
        chosen = request.GET.get("doc", "")
        # A document named by a link (the agreement pages' pairs) may lie past the preview's
        # first documents: it is shown if the campaign has it.
        if chosen:
            document = campaign.documents.filter(doc_id=chosen).first()
        if document is None and doc_ids:
            document = campaign.documents.filter(doc_id=doc_ids[0]).first()
    terms = topic_terms(topic.title, topic.description) if topic else None
    body = ""
    if document is not None:
        # Sanitised at import (nh3); marking adds only <mark> around escaped text.
        body = mark_safe(highlight_html(document.body_html, terms))
    index = (
        doc_ids.index(document.doc_id)
        if document is not None and document.doc_id in doc_ids
        else -1
    )
    context = {
        "campaign": campaign,
        "topics": [(t, topic_terms(t.title, t.description).words) for t in topics],
        "topic": topic,
        "terms": terms.words if terms else (),
        "document": document,
        "body": body,
        "marks": body.count('<mark class="term">') if body else 0,
        "previous_doc": doc_ids[index - 1] if index > 0 else None,
        "next_doc": doc_ids[index + 1] if 0 <= index < len(doc_ids) - 1 else None,
    }
    return render(request, "assess/organiser/highlighting.html", context)
