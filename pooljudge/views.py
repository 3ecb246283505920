"""Project-level pages: the home page (which spans apps) and the health check."""

from __future__ import annotations

import logging
import sys

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse, HttpResponseServerError, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from campaigns.access import ADJUDICATOR, ASSESSOR, ORGANISER, campaigns_for

log = logging.getLogger(__name__)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    mine = campaigns_for(request.user)
    context = {
        "organised": mine[ORGANISER],
        "judged": mine[ASSESSOR],
        "adjudicating": mine[ADJUDICATOR],
        "can_create": request.user.has_perm("campaigns.add_campaign"),
    }
    return render(request, "home.html", context)


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception:
        log.exception("healthz: database check failed")
        return False


def _broker_ok() -> bool | None:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return None
    url = settings.CELERY_BROKER_URL
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        log.exception("healthz: broker check failed")
        return False


def _workers() -> dict:
    from campaigns.jobs import worker_status

    try:
        return worker_status().as_dict()
    except Exception:
        log.exception("healthz: worker check failed")
        return {"ok": False}


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database (and the broker, when one is configured) answer; 503 otherwise.

    ``?deep=1`` also asks whether a Celery worker has beaten within JOB_STALE_AFTER_SECONDS (its
    row in the WorkerBeat table): 503 when none has, with when the last one was heard from. The
    plain check stays cheap and independent of the workers, for the web container's own health
    check (a web server is healthy while its workers restart)."""
    checks = {"database": _database_ok()}
    broker = _broker_ok()
    if broker is not None:
        checks["broker"] = broker
    body: dict = {}
    if request.GET.get("deep") in ("1", "true", "yes"):
        workers = _workers() if checks["database"] else {"ok": False}
        checks["worker"] = workers.pop("ok")
        body["workers"] = workers
    healthy = all(checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", "checks": checks, **body},
        status=200 if healthy else 503,
    )


# Seconds a client is asked to wait before sending a request again after the database failed.
DATABASE_RETRY_AFTER = 5
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500. A database that did not answer (a killed backend, a failover, a restart) is a
    503 the client can act on, whichever layer met it (a view, or the session and authentication
    middleware before any view ran): Retry-After for scripts (the judging page sends its verdict
    again with the same submission id), and for a form posted without JavaScript a button that
    sends the same fields again, so nothing typed is lost. Every other error is the plain 500.

    Rendered without context processors and without base.html: they would ask the database who
    the user is, and the database is what failed."""
    error = sys.exc_info()[1]
    if not isinstance(error, (OperationalError, InterfaceError)):
        return HttpResponseServerError(
            render_to_string("500.html"), content_type="text/html; charset=utf-8"
        )
    log.warning("database unavailable for %s %s: %s", request.method, request.path, error)
    fields: list[tuple[str, str]] = []
    if request.method == "POST" and request.content_type in FORM_TYPES:
        try:
            # Files cannot be put back in a page: an upload is simply sent again from its form.
            if not request.FILES:
                fields = [(name, value) for name, vals in request.POST.lists() for value in vals]
        except Exception:  # an unreadable body: offer to reload instead
            fields = []
    response = HttpResponse(
        render_to_string(
            "503.html",
            {"fields": fields, "action": request.path, "retry_after": DATABASE_RETRY_AFTER},
        ),
        status=503,
        content_type="text/html; charset=utf-8",
    )
    response["Retry-After"] = str(DATABASE_RETRY_AFTER)
    response["Cache-Control"] = "no-store"
    return response
