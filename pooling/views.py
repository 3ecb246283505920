"""The organiser's runs, pools and depth planner. Every view starts from ``get_campaign_for``:
assessors and outsiders get a 404, whatever they ask for."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh, HttpResponseStopPolling

from campaigns.access import get_campaign_for
from campaigns.models import Campaign
from pooling import plots
from pooling.forms import BuildPoolForm, PlannerForm
from pooling.models import Pool, Run
from pooling.pools import (
    PoolDefinitionError,
    create_pool,
    judging_progress,
    plan,
    seconds_per_judgment,
)

# --- Context pieces shared by the pages -----------------------------------------------------------


def _pool_versions(campaign: Campaign) -> list[Pool]:
    pools = list(
        campaign.pools.select_related("job").annotate(
            run_count=Count("runs", distinct=True), topic_count=Count("topics", distinct=True)
        )
    )
    return pools


def _planner(campaign: Campaign, query) -> dict[str, Any]:
    form = PlannerForm(query)
    measured, is_measured = seconds_per_judgment(campaign)
    context: dict[str, Any] = {
        "planner_form": form,
        "measured_seconds": measured,
        "seconds_are_measured": is_measured,
        "seconds_typed": form.planner_seconds() is not None,
        "planner": None,
    }
    if not campaign.runs.current().exists():
        return context
    try:
        result = plan(
            campaign=campaign, depths=form.planner_depths(), seconds=form.planner_seconds()
        )
    except ValueError as exc:  # PoolDefinitionError included: nothing the form let through
        context["planner_error"] = str(exc)
        return context
    context["planner"] = result
    context["planner_plot"] = plots.depth_plot(
        result["rows"], runs=result["runs"], topics=result["topics"]
    )
    context["planner_has_qrels"] = any(row.relevant_found is not None for row in result["rows"])
    return context


def _pools_page(request: HttpRequest, campaign: Campaign, form: BuildPoolForm) -> dict[str, Any]:
    current = list(campaign.runs.current().order_by("tag"))
    superseded = list(
        campaign.runs.filter(superseded_at__isnull=False).order_by("tag", "-imported_at")
    )
    pools = _pool_versions(campaign)
    return {
        "campaign": campaign,
        "form": form,
        "runs": current,
        "superseded": superseded,
        "pools": pools,
        "any_building": any(p.status == Pool.Status.BUILDING for p in pools),
        "topic_count": campaign.topics.count(),
        "line_count": sum(run.line_count for run in current),
        **_planner(campaign, request.GET),
    }


# --- Runs & pools ---------------------------------------------------------------------------------


@login_required
@require_GET
def pools(request: HttpRequest, slug: str) -> HttpResponse:
    """Runs, pool versions, the build form and the planner on one page."""
    campaign = get_campaign_for(request, slug)
    form = BuildPoolForm(campaign=campaign)
    return render(request, "pooling/pools.html", _pools_page(request, campaign, form))


@login_required
@require_POST
def build(request: HttpRequest, slug: str) -> HttpResponse:
    """Record a new pool version, queue its job, and show it building."""
    campaign = get_campaign_for(request, slug)
    form = BuildPoolForm(request.POST, campaign=campaign)
    if form.is_valid():
        try:
            pool = create_pool(campaign=campaign, user=request.user, **form.definition)
        except PoolDefinitionError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Pool v{pool.version} ({pool.describe()}) queued.")
            return redirect("pooling:pool", slug=slug, version=pool.version)
    return render(request, "pooling/pools.html", _pools_page(request, campaign, form), status=400)


@login_required
@require_GET
def versions(request: HttpRequest, slug: str) -> HttpResponse:
    """The pool versions table, for htmx to poll while a pool builds; stops polling (HTTP 286)
    once none is building."""
    campaign = get_campaign_for(request, slug)
    if not request.htmx:
        return redirect("pooling:pools", slug=slug)
    pools = _pool_versions(campaign)
    any_building = any(p.status == Pool.Status.BUILDING for p in pools)
    response = render(
        request,
        "pooling/pools.html#versions",
        {"campaign": campaign, "pools": pools, "any_building": any_building},
    )
    if not any_building:
        response.status_code = HttpResponseStopPolling.status_code
    return response


@login_required
@require_GET
def planner(request: HttpRequest, slug: str) -> HttpResponse:
    """The depth planner on a page of its own (and as the fragment its form swaps in)."""
    campaign = get_campaign_for(request, slug)
    context = {"campaign": campaign, **_planner(campaign, request.GET)}
    if request.htmx:
        # The form sits on the Runs & pools page too; either way the card swaps in place.
        shown_on = urlsplit(request.htmx.current_url_abs_path or "").path
        context["standalone"] = shown_on == request.path
        return render(request, "pooling/_planner.html", context)
    return render(request, "pooling/planner.html", context)


# --- One pool -------------------------------------------------------------------------------------


def _get_pool(request: HttpRequest, slug: str, version: int) -> tuple[Campaign, Pool]:
    campaign = get_campaign_for(request, slug)
    pool = campaign.pools.select_related("job", "created_by").filter(version=version).first()
    if pool is None:
        raise Http404("No such pool.")
    return campaign, pool


def _params_for_display(pool: Pool, tags: dict[str, str]) -> str:
    params = dict(pool.params)
    if params.get("depth_per_run"):
        params["depth_per_run"] = {
            tags.get(key, key): value for key, value in params["depth_per_run"].items()
        }
    return json.dumps(params, indent=2, sort_keys=True, ensure_ascii=False)


def _tables(pool: Pool, runs: list[Run]) -> dict[str, Any]:
    """Per-topic and per-run rows: the statistics recorded at build time beside the judging
    progress read now."""
    stats = pool.stats or {}
    live = judging_progress(pool=pool)
    topic_rows = []
    for topic in pool.topics.all():
        recorded = stats.get("per_topic", {}).get(topic.topic_id, {})
        now = live["per_topic"].get(topic.topic_id, {})
        to_judge = now.get("to_judge", 0)
        judged = now.get("judged", 0)
        topic_rows.append(
            {
                "topic": topic,
                "pooled": now.get("entries", 0),
                "to_judge": to_judge,
                "proposals": recorded.get("proposals", 0),
                "distinct_share": recorded.get("distinct_share", 0.0),
                "already_judged": recorded.get("already_judged", 0),
                "judged": judged,
                "relevant": now.get("relevant", 0),
                "done": to_judge > 0 and judged >= to_judge,
            }
        )
    by_key = {str(run.pk): run for run in runs}
    run_rows = []
    for key, recorded in stats.get("per_run", {}).items():
        now = live["per_run"].get(key, {})
        run_rows.append(
            {
                **recorded,
                "run": by_key.get(key),
                "key": key,
                "judged_now": now.get("judged", 0),
                "relevant_now": now.get("relevant", 0),
            }
        )
    run_rows.sort(key=lambda row: row["run"].tag if row["run"] else row["key"])
    to_judge = sum(row["to_judge"] for row in topic_rows)
    judged = sum(row["judged"] for row in topic_rows)
    return {
        "topic_rows": topic_rows,
        "run_rows": run_rows,
        "live": {
            "to_judge": to_judge,
            "judged": judged,
            "relevant": sum(row["relevant"] for row in topic_rows),
            "share": judged / to_judge if to_judge else 0.0,
            "topics_done": sum(row["done"] for row in topic_rows),
        },
        "progress_plot": plots.progress_plot(
            [
                plots.TopicBar(
                    row["topic"].topic_id, row["to_judge"], row["judged"], row["relevant"]
                )
                for row in topic_rows
            ]
        ),
    }


@login_required
@require_GET
def pool_detail(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    """What a pool was built from and how its judging is going; while it builds, its job."""
    campaign, pool = _get_pool(request, slug, version)
    runs = sorted(pool.runs.all(), key=lambda run: run.tag)
    tags = {str(run.pk): run.tag for run in runs}
    context: dict[str, Any] = {
        "campaign": campaign,
        "pool": pool,
        "runs": runs,
        "topic_count": pool.topics.count(),
        "params_json": _params_for_display(pool, tags),
        "totals": (pool.stats or {}).get("totals", {}),
    }
    if pool.status == Pool.Status.BUILT:
        context.update(_tables(pool, runs))
    return render(request, "pooling/pool_detail.html", context)


@login_required
@require_GET
def pool_status(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    """Polled by the page of a building pool: nothing (204) while it builds, then a refresh so
    the page shows the pool (or why it was not built). Without htmx, the pool's page."""
    _campaign, pool = _get_pool(request, slug, version)
    if not request.htmx:
        return redirect("pooling:pool", slug=slug, version=version)
    if pool.status == Pool.Status.BUILDING:
        return HttpResponse(status=204)
    return HttpResponseClientRefresh()


# --- Adaptive order -------------------------------------------------------------------------------

# Replays on the page are done per request; beyond this many pooled documents the page points to
# ``manage.py replay`` instead of making the organiser wait.
PAGE_REPLAY_LIMIT = 20_000
# The page's replays ask the stopping estimate after every 2 % of a topic's pool (manage.py replay:
# 0.5 %): the stops it shows land at most that late, for a quarter of the model fits.
PAGE_STOP_CHECK = 0.02


@login_required
@require_GET
def adjudication(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    """An adaptive pool's topics (judged, relevant, estimated remaining, suggested stop) and, for
    any built pool, the orders replayed on the campaign's judgments so far."""
    from pooling import adaptive
    from pooling.adjudication import ORDERS, RECALL_POINTS, gain_curve

    campaign, pool = _get_pool(request, slug, version)
    if pool.status != Pool.Status.BUILT:
        raise Http404("The pool is not built.")
    opts = adaptive.options(pool)
    context: dict[str, Any] = {
        "campaign": campaign,
        "pool": pool,
        "options": opts,
        "states": adaptive.topic_states(pool) if opts else [],
        "recall_points": [round(f * 100) for f in RECALL_POINTS],
        "too_big": pool.size > PAGE_REPLAY_LIMIT,
    }
    target = opts["target"] if opts else 0.8
    labels = adaptive.campaign_labels(pool) if not context["too_big"] else {}
    if labels:
        replays = adaptive.replay_orders(
            adaptive.pool_lists(pool),
            labels,
            orders=ORDERS,
            relevant_from=campaign.relevance_threshold,
            burn_in=opts["burn_in"] if opts else 0,
            credit=opts["credit"] if opts else "prefix",
            target=target,
            check_every=PAGE_STOP_CHECK,
        )
        first = replays["depth"]
        context.update(
            compared_topics=len(first),
            compared_judged=sum(t.judged for t in first),
            compared_relevant=sum(t.relevant_total for t in first),
            comparison=[
                {
                    "order": plots.ORDER_NAMES[order],
                    "needed": [sum(t.needed(f) or t.judged for t in topics) for f in RECALL_POINTS],
                    "stops": sum(1 for t in topics if t.stop_at is not None),
                    "stop_recalls": [t.recall_at(t.stop_at) for t in topics if t.stop_at],
                }
                for order, topics in replays.items()
            ],
            gain_plot=plots.gain_plot(
                {order: gain_curve(topics, points=50) for order, topics in replays.items()},
                target=target,
            ),
        )
        for row in context["comparison"]:
            recalls = sorted(row.pop("stop_recalls"))
            row["stop_recall"] = recalls[len(recalls) // 2] if recalls else None
    return render(request, "pooling/adjudication.html", context)
