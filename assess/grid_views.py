"""The grid's actions (assess.grid): a cell's panel (give, move, end), dealing selected topics
round-robin, and giving a share of selected topics to second assessors (overlap). Each POST
without ``confirm`` answers with the preview (what moves, what stays judged); the preview's
button posts the same fields with ``confirm`` and applies it. With htmx the panel swaps in
place; without JavaScript every step is an ordinary page and form."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from assess.assignments import AssignmentError
from assess.forms import parse_fraction
from assess.grid import (
    ACTIONS,
    MOVE,
    apply_cell,
    apply_deal,
    apply_overlap,
    cell_work,
    plan_cell,
    plan_deal,
    plan_overlap,
)
from assess.organiser import _render_workspace as render_workspace
from campaigns.access import get_campaign_for
from campaigns.models import Assessor, Campaign, Membership
from pooling.models import Pool


def _pool(campaign: Campaign, version: int) -> Pool:
    pool = campaign.pools.built().filter(version=version).first()
    if pool is None:
        raise Http404("No such built pool.")
    return pool


def _people(campaign: Campaign):
    """The campaign's assessors with a login (work can be given only to them), by name."""
    return Assessor.objects.filter(
        campaign=campaign,
        kind=Assessor.Kind.PERSON,
        user__memberships__campaign=campaign,
        user__memberships__role=Membership.Role.ASSESSOR,
    ).order_by("name")


def _grid_url(campaign: Campaign, pool: Pool) -> str:
    return reverse("assess:assessors", args=[campaign.slug]) + f"?pool={pool.version}#grid"


def _done(request: HttpRequest, campaign: Campaign, pool: Pool, message: str) -> HttpResponse:
    messages.success(request, message)
    url = _grid_url(campaign, pool)
    if request.htmx:
        # The whole workspace changed (grid, members' work, forms): it replaces itself, with
        # the message, instead of the panel the request came from.
        response = render_workspace(request, campaign, pool)
        response["HX-Retarget"] = "#workspace"
        response["HX-Reswap"] = "outerHTML"
        return response
    return redirect(url)


def _fragment(request: HttpRequest) -> bool:
    return bool(request.htmx) and not request.htmx.history_restore_request


@login_required
@require_http_methods(["GET", "POST"])
def grid_cell(request: HttpRequest, slug: str, version: int, topic: int, assessor: int):
    """One cell of the grid: what the assessor holds of the topic, and the actions that apply
    (give when nobody holds it as primary work, move to another assessor, end)."""
    campaign = get_campaign_for(request, slug)
    pool = _pool(campaign, version)
    the_topic = pool.topics.filter(pk=topic).first()
    person = _people(campaign).filter(pk=assessor).first()
    if the_topic is None or person is None:
        raise Http404("No such cell.")
    others = [a for a in _people(campaign) if a.pk != person.pk]
    plan, error, status = None, "", 200
    action = request.POST.get("action", "")
    if request.method == "POST":
        to = None
        if action == MOVE:
            to = next((a for a in others if str(a.pk) == request.POST.get("to", "")), None)
        try:
            if action not in ACTIONS:
                raise AssignmentError("Choose what to do with this cell.")
            plan = plan_cell(pool=pool, topic=the_topic, assessor=person, action=action, to=to)
            if request.POST.get("confirm"):
                changed = apply_cell(campaign=campaign, pool=pool, plan=plan, by=request.user)
                return _done(request, campaign, pool, f"{plan.summary} Done ({changed}).")
        except AssignmentError as exc:
            plan, error, status = None, str(exc), 400
    work = cell_work(pool=pool, topic=the_topic, assessor=person)
    context = {
        "campaign": campaign,
        "pool": pool,
        "topic": the_topic,
        "assessor": person,
        "others": others,
        "work": work,
        "plan": plan,
        "error": error,
        "action": action,
        "grid_url": _grid_url(campaign, pool),
        "cell_url": request.path,
    }
    template = (
        "assess/organiser/_grid_cell.html"
        if _fragment(request)
        else ("assess/organiser/grid_cell.html")
    )
    return render(request, template, context, status=status)


@login_required
@require_POST
def grid_deal(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    """Deal the chosen topics round-robin over the chosen assessors, balanced by pool size:
    the plan first, then (``confirm`` with the plan's signature) the assignments."""
    campaign = get_campaign_for(request, slug)
    pool = _pool(campaign, version)
    wanted_topics = set(request.POST.getlist("topics"))
    wanted_people = set(request.POST.getlist("assessors"))
    topics = [t for t in pool.topics.order_by("position", "topic_id") if str(t.pk) in wanted_topics]
    people = [a for a in _people(campaign) if str(a.pk) in wanted_people]
    plan, error, status = None, "", 200
    try:
        plan = plan_deal(pool=pool, topics=topics, assessors=people)
        # Nothing dealable is shown as a preview (the skipped topics and why), not applied.
        if request.POST.get("confirm") and not plan.dealt:
            raise AssignmentError(
                "Every chosen topic is already someone's primary work: move it from its cell."
            )
        if request.POST.get("confirm"):
            if request.POST.get("signature") != plan.signature():
                error, status = (
                    "The assignments changed since the preview: here is the deal as it stands.",
                    409,
                )
            else:
                apply_deal(campaign=campaign, pool=pool, plan=plan, by=request.user)
                dealt = plan.dealt
                return _done(
                    request,
                    campaign,
                    pool,
                    f"Dealt {dealt} topic{'s' if dealt != 1 else ''} over {len(people)} "
                    f"assessor{'s' if len(people) != 1 else ''}.",
                )
    except AssignmentError as exc:
        plan, error, status = None, str(exc), 400
    context = {
        "campaign": campaign,
        "pool": pool,
        "plan": plan,
        "error": error,
        "topics": topics,
        "people": people,
        "grid_url": _grid_url(campaign, pool),
        "deal_url": request.path,
    }
    template = (
        "assess/organiser/_grid_deal.html"
        if _fragment(request)
        else ("assess/organiser/grid_deal.html")
    )
    return render(request, template, context, status=status)


@login_required
@require_POST
def grid_overlap(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    """Give ``overlap`` (a share such as 10% or 0.1) of each chosen topic held as primary work
    to a second assessor among the chosen ones, for agreement, balanced by documents: the plan
    first, then (``confirm`` with the plan's signature) the overlap assignments. A preview the
    assignments have changed since is refused (409) with the plan as it now stands."""
    campaign = get_campaign_for(request, slug)
    pool = _pool(campaign, version)
    wanted_topics = set(request.POST.getlist("topics"))
    wanted_people = set(request.POST.getlist("assessors"))
    topics = [t for t in pool.topics.order_by("position", "topic_id") if str(t.pk) in wanted_topics]
    people = [a for a in _people(campaign) if str(a.pk) in wanted_people]
    raw = request.POST.get("overlap", "")
    plan, error, status = None, "", 200
    try:
        try:
            fraction = parse_fraction(raw)
        except ValueError as exc:
            raise AssignmentError(f"Overlap: {exc}") from None
        plan = plan_overlap(pool=pool, topics=topics, assessors=people, fraction=fraction)
        if request.POST.get("confirm"):
            if not plan.shares:
                raise AssignmentError("None of the chosen topics can be overlapped: see why above.")
            if request.POST.get("signature") != plan.signature():
                error, status = (
                    "The assignments changed since the preview: here is the overlap as it stands.",
                    409,
                )
            else:
                made = apply_overlap(pool=pool, plan=plan, by=request.user)
                topics_done = len(plan.shares)
                return _done(
                    request,
                    campaign,
                    pool,
                    f"Overlap of {raw.strip()} set on {topics_done} topic"
                    f"{'s' if topics_done != 1 else ''} ({len(made)} overlap assignment"
                    f"{'s' if len(made) != 1 else ''}).",
                )
    except AssignmentError as exc:
        error, status = str(exc), 400
        # A refused confirm keeps its preview when there is one to show.
        plan = plan if plan is not None and plan.shares else None
    context = {
        "campaign": campaign,
        "pool": pool,
        "plan": plan,
        "error": error,
        "topics": topics,
        "people": people,
        "overlap": raw.strip(),
        "grid_url": _grid_url(campaign, pool),
        "overlap_url": request.path,
    }
    template = (
        "assess/organiser/_grid_overlap.html"
        if _fragment(request)
        else "assess/organiser/grid_overlap.html"
    )
    return render(request, template, context, status=status)
