"""Every URL pattern of the project, found by walking the resolver, checked three ways:

1. headers: every response carries the production security headers (CSP without unsafe script
   sources, no framing, HSTS, nosniff, a referrer policy) and every cookie is Secure, SameSite
   and (but for the CSRF cookie) HttpOnly;
2. authorisation: every role x every URL (with this campaign's ids, another campaign's, and the
   two mixed) x GET and POST is allowed or refused exactly as the policy table says; a refusal
   shows none of the campaigns' private strings and writes no row; the other campaign's ids in
   a form's fields are refused too;
3. CSRF: a POST without a token (or with a wrong one) is refused and writes nothing, on every
   URL; with the token every endpoint that takes a POST accepts it. Logout is POST only.

The walk is the source of truth: a new URL pattern is exercised automatically, and one the tests
cannot fill with real ids, or that the policy table does not mention, fails until it is added
below. Every request runs in a transaction that is rolled back, so the cells cannot disturb each
other and the same data serves all of them.
"""

from __future__ import annotations

import re
import runpy
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.cookies import Morsel, SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from django.apps import apps
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.auth.tokens import default_token_generator
from django.contrib.contenttypes.models import ContentType
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.http import HttpResponseBase
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse
from django.urls.resolvers import RegexPattern, RoutePattern
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from assess.assignments import assign
from assess.judging import next_item, submit
from assess.models import Assignment, AssignmentItem
from campaigns import jobs
from campaigns.judgments import Timing
from campaigns.members import add_member
from campaigns.models import Assessor, Campaign, Job, Judgment
from campaigns.scales import SCALES
from campaigns.uploads import store_upload
from pooling.models import Pool, Run
from qrels.models import Export
from qrels.tasks import REPORT_KIND, export_task, report_task
from tests.conftest import PASSWORD, HttpsClient
from tests.factories import make_documents, make_pool, make_run, make_topics, model_labels

pytestmark = pytest.mark.django_db

User = get_user_model()

# The walk must find at least this many patterns (138 when written, 40 of them the project's
# own), so that a broken walk cannot pass by checking nothing.
MIN_PATTERNS = 120
MIN_PROJECT_PATTERNS = 40

# Patterns deliberately not requested, with the reason. Static files are not URL patterns
# (WhiteNoise serves them before any view), so nothing needs to be here today.
SKIPPED: dict[str, str] = {}

ROLES = (
    "anonymous",
    "outsider",
    "assessor_a",
    "assessor_b",
    "organiser",
    "other_organiser",
    "adjudicator",
)


# --- Production security settings ------------------------------------------------------------

# The names settings.py sets only when DEBUG is off (the deployed configuration).
PRODUCTION_ONLY = (
    "SECURE_SSL_REDIRECT",
    "SECURE_REDIRECT_EXEMPT",
    "SECURE_PROXY_SSL_HEADER",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
)


def production_security_settings(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """settings.py evaluated as a deployment evaluates it (DEBUG off), for the security names.

    In CI (DATABASE_URL set) these are already the live settings; on the embedded SQLite
    default DEBUG is on and they are absent, so the headers would go unchecked. Reading them from
    the real settings file (not a copy typed here) keeps the test honest in both places."""
    monkeypatch.setenv("DEBUG", "0")
    # Without DEBUG the settings insist on a key; the embedded default has none in the env.
    monkeypatch.setenv("SECRET_KEY", django_settings.SECRET_KEY)
    module = runpy.run_path(str(Path(django_settings.BASE_DIR) / "pooljudge" / "settings.py"))
    return {name: module[name] for name in PRODUCTION_ONLY if name in module}


@pytest.fixture(autouse=True)
def _production_security(settings, monkeypatch) -> None:
    """Every test here runs with the deployed security settings. Clients must be created after
    this: SecurityMiddleware reads its settings once, when a client first loads it."""
    with monkeypatch.context() as env:
        values = production_security_settings(env)
    assert values.get("SECURE_HSTS_SECONDS"), "production settings set no HSTS"
    for name, value in values.items():
        setattr(settings, name, value)
    # Eight accounts are made per test; the deployed hasher would spend seconds on them.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # A session seen once is not saved again during the test, so any row a watched request
    # writes is the request's own doing (see rows_written).
    settings.SESSION_REFRESH_SECONDS = 24 * 3600


# --- Walking the URL patterns ----------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One URL pattern, with everything on the way to it from the root URLconf."""

    route: str  # as ResolverMatch.route reports it
    name: str | None  # namespaced ("pooling:pool"); None for unnamed patterns
    parts: tuple[RoutePattern | RegexPattern, ...]
    kwargs: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.name or self.route

    @property
    def is_admin(self) -> bool:
        return self.route.startswith("admin/")


def _join_route(first: str, second: str) -> str:
    # Django's own rule (URLResolver._join_route): a nested regex drops its leading caret.
    if not first:
        return second
    return first + second.removeprefix("^")


def _captured(pattern: RoutePattern | RegexPattern) -> list[str]:
    if isinstance(pattern, RoutePattern):
        return list(pattern.converters)
    return list(pattern.regex.groupindex)


def walk(
    patterns: list, parts: tuple = (), route: str = "", namespace: str | None = None
) -> Iterator[Route]:
    """Every URLPattern under ``patterns``, depth first, in resolution order."""
    for entry in patterns:
        here = _join_route(route, str(entry.pattern))
        if isinstance(entry, URLResolver):
            inner = entry.namespace
            ns = f"{namespace}:{inner}" if namespace and inner else inner or namespace
            yield from walk(entry.url_patterns, (*parts, entry.pattern), here, ns)
        elif isinstance(entry, URLPattern):
            name = None
            if entry.name:
                name = f"{namespace}:{entry.name}" if namespace else entry.name
            all_parts = (*parts, entry.pattern)
            kwargs = tuple(k for part in all_parts for k in _captured(part))
            yield Route(here, name, all_parts, kwargs)


def all_routes() -> list[Route]:
    return list(walk(get_resolver().url_patterns))


def build_url(route: Route, kwargs: dict[str, Any]) -> str:
    """The URL of ``route`` with ``kwargs`` filled in; also works for unnamed patterns, which
    reverse() cannot build."""
    pieces = []
    for part in route.parts:
        text = str(part)
        if isinstance(part, RoutePattern):
            text = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: quote(str(kwargs[m[1]]), safe="/"), text)
        else:
            text = text.removeprefix("^").removesuffix("$").removeprefix("\\A")
            text = re.sub(r"\(\?P<(\w+)>[^()]*\)", lambda m: quote(str(kwargs[m[1]])), text)
            if re.search(r"[\\^$()*+?\[\]|]", text):
                raise ValueError(f"cannot build a URL from the regex of {route.route!r}")
        pieces.append(text)
    url = "/" + "".join(pieces)
    match = resolve(url)
    # The URL must reach this very pattern, or the walk would claim coverage it does not have.
    assert match.route == route.route, (url, match.route, route.route)
    return url


# --- The data: two campaigns with everything a URL can name ----------------------------------


@dataclass
class Side:
    """One campaign and its objects; ``first``/``second`` are its two assessors."""

    name: str
    campaign: Campaign
    organiser: Any
    first: Any
    second: Any
    topics: list
    runs: list[Run]
    pool: Pool
    assignments: dict[str, Assignment]  # "first"/"second" -> that assessor's assignment
    open_items: dict[str, AssignmentItem]  # an unjudged item of each
    assessors: tuple[Assessor, Assessor]
    job: Job
    report_job: Job
    export: Export
    markers: dict[str, str] = field(default_factory=dict)  # what -> private string
    judged: tuple[int, str] = (0, "")  # (topic pk, document id) of a pair both assessors judged
    adjudicator: Any = None  # the campaign's adjudicator, if it has one

    @property
    def slug(self) -> str:
        return self.campaign.slug


@dataclass
class World:
    users: dict[str, Any]  # role -> user (no entry for anonymous)
    own: Side
    other: Side
    superuser: Any
    group: Group

    def sides(self) -> tuple[Side, Side]:
        return (self.own, self.other)

    def role_of(self, user) -> str | None:
        return next((role for role, u in self.users.items() if u.pk == user.pk), None)


def _user(username: str):
    return User.objects.create_user(username=username, password=PASSWORD)


def _side(name: str, slug: str, organiser, first, second) -> Side:
    """A campaign whose every private string carries the marker ``pjsec-<name>-``, with topics,
    documents, two runs, a built pool, assignments with items, judgments by both assessors, a
    finished import job with its upload, a finished report job and a ready export bundle."""
    mark = f"pjsec-{name}"
    scale = SCALES["graded3"]
    campaign = Campaign.objects.create(
        slug=slug, title=f"{mark}-title", relevance_threshold=scale.threshold
    )
    campaign.save_rubric(list(scale.labels), note="preset")
    add_member(campaign=campaign, user=organiser, role="organiser")
    add_member(campaign=campaign, user=first, role="assessor")
    add_member(campaign=campaign, user=second, role="assessor")
    topics = make_topics(campaign, ["301", "302"])
    for i, topic in enumerate(topics, start=1):
        topic.title = f"{mark}-topic-{i}"
        topic.save(update_fields=["title"])
    doc_ids = [f"d{i:02d}" for i in range(1, 7)]
    make_documents(campaign, doc_ids, body=f"{mark}-document-text")
    runs = [
        make_run(
            campaign,
            f"{mark}-run-{tag}",
            {t: [(d, base - i * step) for i, d in enumerate(doc_ids)] for t in ("301", "302")},
        )
        for tag, base, step in (("alpha", 100.0, 1.5), ("beta", 9.0, 0.25))
    ]
    pool = make_pool(campaign, depth=len(doc_ids))
    # The first assessor holds topic 301 with half of it shared with the second, who holds
    # topic 302 alone: there is work to judge, to move (302 to the first) and to rebalance.
    primary, overlap = assign(
        campaign=campaign,
        pool=pool,
        user=first,
        topics=[topics[0]],
        overlap=0.5,
        partner=second,
        seed=7,
    )
    assign(campaign=campaign, pool=pool, user=second, topics=[topics[1]], seed=8)
    rubric = campaign.current_rubric()
    for who, assignment in (("first", primary), ("second", overlap)):
        submit(
            item=next_item(assignment),
            label=1,
            rubric_version=rubric,
            submission_id=uuid.uuid4(),
            expected_version=0,
            timing=Timing(),
            note=f"{mark}-note-{who}",
        )
    # A model's labels on every pooled pair (issue 20): its name, rationale and round are
    # private strings for the assessors, who must never see a model's verdict.
    model_labels(
        pool, name=f"{mark}-model", note=f"{mark}-model-note", iteration=f"{mark}-model-round"
    )
    upload = store_upload(
        campaign=campaign,
        kind="topics",
        file=SimpleUploadedFile("topics.tsv", f"303\t{mark}-uploaded-topic\n".encode()),
        user=organiser,
    )
    job = Job.objects.create(
        campaign=campaign,
        kind="import_topics",
        task_name="campaigns.tasks.import_topics_task",
        status=Job.Status.DONE,
        params={"uploads": [upload.pk], "files": ["topics.tsv"], "options": {}},
        finished_at=timezone.now(),
        created_by=organiser,
    )
    upload.job = job
    upload.save(update_fields=["job"])
    # A computed evaluation report, started as the page starts it, so the report pages show
    # scores per run (organisers only) rather than an empty state.
    starter = HttpsClient()
    starter.force_login(organiser)
    assert starter.post(reverse("qrels:evaluation", args=[slug])).status_code == 302
    report_job = campaign.jobs.get(kind=REPORT_KIND)
    report_task.apply(args=[report_job.pk])
    report_job.refresh_from_db()
    assert report_job.status == Job.Status.DONE, report_job.error
    export = Export.objects.create(
        campaign=campaign, options={}, file_name=f"{slug}-bundle.zip", created_by=organiser
    )
    export.job = jobs.enqueue(
        kind="export_qrels",
        task=export_task,
        campaign=campaign,
        params={"export": export.pk, "files": [export.file_name]},
        user=organiser,
    )
    export.save(update_fields=["job"])
    export_task.apply(args=[export.job.pk])  # in this process, whatever the Celery mode
    export.refresh_from_db()
    assert export.is_ready, export.job.error
    assessors = (
        Assessor.objects.for_user(campaign, first),
        Assessor.objects.for_user(campaign, second),
    )
    judged = (
        Judgment.objects.filter(campaign=campaign)
        .order_by("pk")
        .values_list("topic_id", "doc_id")
        .first()
    )
    markers = {
        "title": campaign.title,
        "topic-1": topics[0].title,
        "topic-2": topics[1].title,
        "document": f"{mark}-document-text",
        "run-alpha": runs[0].tag,
        "run-beta": runs[1].tag,
        "note-first": f"{mark}-note-first",
        "note-second": f"{mark}-note-second",
        "model": f"{mark}-model",
        "model-note": f"{mark}-model-note",
        "model-round": f"{mark}-model-round",
        "uploaded": f"{mark}-uploaded-topic",
        "organiser": organiser.username,
        "first": first.username,
        "second": second.username,
    }
    return Side(
        name=name,
        campaign=campaign,
        organiser=organiser,
        first=first,
        second=second,
        topics=topics,
        runs=runs,
        pool=pool,
        assignments={"first": primary, "second": overlap},
        open_items={"first": next_item(primary), "second": next_item(overlap)},
        assessors=assessors,
        job=job,
        report_job=report_job,
        export=export,
        markers=markers,
        judged=judged,
    )


@pytest.fixture
def world(db) -> World:
    users = {
        "outsider": _user("pjsec_mallory"),
        "assessor_a": _user("pjsec_alice"),
        "assessor_b": _user("pjsec_bob"),
        "organiser": _user("pjsec_olivia"),
        "other_organiser": _user("pjsec_oscar"),
        "adjudicator": _user("pjsec_ada"),
    }
    # Organisers may create campaigns (as `manage.py local_accounts` sets them up); the other
    # campaign's organiser may not, so the permission check is seen both ways.
    users["organiser"].user_permissions.add(
        Permission.objects.get(codename="add_campaign", content_type__app_label="campaigns")
    )
    own = _side("own", "pjsec-own", users["organiser"], users["assessor_a"], users["assessor_b"])
    # The other campaign's assessors are nobody in the matrix: their work is off limits to all.
    other = _side(
        "oth", "pjsec-oth", users["other_organiser"], _user("pjsec_carol"), _user("pjsec_dave")
    )
    # The adjudicator of this campaign only: reads agreement, settles pairs, administers nothing.
    add_member(campaign=own.campaign, user=users["adjudicator"], role="adjudicator")
    own.adjudicator = users["adjudicator"]
    superuser = User.objects.create_superuser(username="pjsec_root", password=PASSWORD)
    return World(users, own, other, superuser, Group.objects.create(name="pjsec-group"))


# --- Filling a pattern's kwargs with real ids ------------------------------------------------

# URL name -> side -> {variant: (kwargs beyond the slug, who owns the object or None)}.
Fill = Callable[[Side], dict[str, tuple[dict[str, Any], Any]]]


def _judge_fill(side: Side) -> dict[str, tuple[dict[str, Any], Any]]:
    a, b = side.assignments["first"], side.assignments["second"]
    item_a, item_b = side.open_items["first"], side.open_items["second"]
    return {
        "first": ({"token": a.token, "item": item_a.token}, side.first),
        "second": ({"token": b.token, "item": item_b.token}, side.second),
        # The first assessor's own token with the other assessor's item: nobody's.
        "mixed": ({"token": a.token, "item": item_b.token}, None),
    }


def _topic_fill(side: Side) -> dict[str, tuple[dict[str, Any], Any]]:
    # Both assignments hold topic 301; only the second assessor's primary work holds 302.
    a, b = side.assignments["first"], side.assignments["second"]
    first, second = side.topics
    return {
        "first": ({"token": a.token, "topic": first.pk}, side.first),
        "second": ({"token": b.token, "topic": first.pk}, side.second),
        "mixed": ({"token": a.token, "topic": second.pk}, None),
    }


def _assignment_fill(side: Side) -> dict[str, tuple[dict[str, Any], Any]]:
    return {
        "first": ({"token": side.assignments["first"].token}, side.first),
        "second": ({"token": side.assignments["second"].token}, side.second),
    }


FILL: dict[str, Fill] = {
    "campaigns:upload": lambda s: {"": ({"kind": "topics"}, None)},
    "campaigns:job": lambda s: {"": ({"pk": s.job.pk}, None)},
    "campaigns:job_cancel": lambda s: {"": ({"pk": s.job.pk}, None)},
    "campaigns:job_retry": lambda s: {"": ({"pk": s.job.pk}, None)},
    "pooling:pool": lambda s: {"": ({"version": s.pool.version}, None)},
    "pooling:pool_status": lambda s: {"": ({"version": s.pool.version}, None)},
    "pooling:adjudication": lambda s: {"": ({"version": s.pool.version}, None)},
    "assess:start": _assignment_fill,
    "assess:judge": _judge_fill,
    "assess:keys": _assignment_fill,
    "assess:judged": _topic_fill,
    "assess:skip": _judge_fill,
    "assess:next": _judge_fill,
    "assess:assign": lambda s: {"": ({"version": s.pool.version}, None)},
    "assess:move": lambda s: {"": ({"version": s.pool.version}, None)},
    "assess:hybrid": lambda s: {"": ({"version": s.pool.version}, None)},
    "assess:rebalance": lambda s: {"": ({"version": s.pool.version}, None)},
    "assess:assignment_end": lambda s: {"": ({"pk": s.assignments["first"].pk}, None)},
    "assess:member_password_link": lambda s: {"": ({"pk": s.first.pk}, None)},
    "qrels:export_download": lambda s: {"": ({"pk": s.export.pk}, None)},
    "qrels:export_readme": lambda s: {"": ({"pk": s.export.pk}, None)},
    "qrels:agreement_pair": lambda s: {
        "": ({"a": s.assessors[0].pk, "b": s.assessors[1].pk}, None)
    },
    "qrels:agreement_pairs": lambda s: {
        "": ({"a": s.assessors[0].pk, "b": s.assessors[1].pk}, None)
    },
    "qrels:adjudicate": lambda s: {"": ({"topic": s.judged[0], "doc": s.judged[1]}, None)},
    "assess:grid_cell": lambda s: {
        "": (
            {"version": s.pool.version, "topic": s.topics[0].pk, "assessor": s.assessors[0].pk},
            None,
        )
    },
    "assess:grid_deal": lambda s: {"": ({"version": s.pool.version}, None)},
    "assess:grid_overlap": lambda s: {"": ({"version": s.pool.version}, None)},
    # A pooled document of both topics. Document ids are strings of the campaign's own (both
    # campaigns have d01..d06): the slug alone scopes them, so there is no other campaign's id
    # to try through this slug.
    "qrels:document": lambda s: {"": ({"doc": "d01"}, None)},
    "qrels:evaluation_run": lambda s: {"": ({"pk": s.runs[0].pk}, None)},
    "qrels:report_job_status": lambda s: {"": ({"pk": s.report_job.pk}, None)},
}


# Site pages (no campaign in the URL) whose patterns still take values: URL name -> kwargs.
SITE_FILL: dict[str, Callable[[World], dict[str, Any]]] = {
    # A real one-time link of the outsider (spent once a cell logs them in: then it is the
    # "link does not work" page, which every role may see too).
    "password_reset_confirm": lambda w: {
        "uidb64": urlsafe_base64_encode(force_bytes(w.users["outsider"].pk)),
        "token": default_token_generator.make_token(w.users["outsider"]),
    },
}


def _admin_kwargs(route: Route, world: World) -> dict[str, Any]:
    """Admin patterns name a model in their path: fill object_id with a real row of it."""
    kwargs: dict[str, Any] = {}
    found = re.match(r"admin/(\w+)/(\w+)/", route.route)
    model = None
    if found:
        try:
            model = apps.get_model(found[1], found[2])
        except LookupError:  # admin/password_change/done/ and the like
            model = None
    for name in route.kwargs:
        if name == "object_id" and model is not None:
            row = model._base_manager.order_by("pk").first()
            assert row is not None, f"no {model.__name__} row for {route.route}"
            kwargs[name] = row.pk
        elif name == "id":  # auth/user/<id>/password/
            kwargs[name] = world.users["organiser"].pk
        elif name == "content_type_id":
            kwargs[name] = ContentType.objects.get_for_model(Campaign).pk
        elif name == "object_id":
            kwargs[name] = world.own.campaign.pk
        elif name == "app_label":
            kwargs[name] = "campaigns"
        elif name == "url":  # the admin's final catch-all
            kwargs[name] = "no-such-page/"
        else:
            raise KeyError(f"no value for {name!r} in admin pattern {route.route!r}")
    return kwargs


@dataclass(frozen=True)
class Target:
    """One concrete URL of a pattern, and what it is about."""

    route: Route
    url: str
    side: str | None  # the campaign named by the slug ("own"/"oth"), None for site pages
    consistent: bool  # every id in the URL belongs to that campaign
    owner: str | None  # the role whose assignment a judging URL names
    label: str

    def __str__(self) -> str:
        return f"{self.route.key} [{self.label}] {self.url}"


def targets_for(route: Route, world: World) -> list[Target]:
    """The URLs to request for ``route``: this campaign's ids, the other campaign's, and this
    campaign's slug with the other campaign's ids (an id must never work through a slug it does
    not belong to)."""
    if route.is_admin:
        return [Target(route, build_url(route, _admin_kwargs(route, world)), None, True, None, "")]
    if not route.kwargs:
        return [Target(route, build_url(route, {}), None, True, None, "")]
    if route.key in SITE_FILL:
        return [Target(route, build_url(route, SITE_FILL[route.key](world)), None, True, None, "")]
    if "slug" not in route.kwargs or (set(route.kwargs) != {"slug"} and route.key not in FILL):
        raise KeyError(f"{route.key}: add a FILL entry giving real ids for {route.kwargs}")
    fill = FILL.get(route.key, lambda s: {"": ({}, None)})
    sides = {side.name: fill(side) for side in world.sides()}
    targets = []
    for side in world.sides():
        for variant, (kwargs, owner) in sides[side.name].items():
            owner_role = world.role_of(owner) if owner is not None else None
            url = build_url(route, {"slug": side.slug, **kwargs})
            label = f"{side.name}" + (f" {variant}" if variant else "")
            targets.append(Target(route, url, side.name, True, owner_role, label))
    for variant, (kwargs, _owner) in sides[world.other.name].items():
        if kwargs and kwargs != sides[world.own.name][variant][0]:
            url = build_url(route, {"slug": world.own.slug, **kwargs})
            label = f"own slug, oth ids{f' {variant}' if variant else ''}"
            targets.append(Target(route, url, world.own.name, False, None, label))
    return targets


def all_targets(world: World) -> tuple[list[Route], list[Target]]:
    routes = all_routes()
    targets = [t for route in routes if route.key not in SKIPPED for t in targets_for(route, world)]
    return routes, targets


def assert_coverage(routes: list[Route], exercised: set[str]) -> None:
    """The walk found enough patterns, and each was requested or is skipped with a reason."""
    project = [r for r in routes if not r.is_admin]
    assert len(routes) >= MIN_PATTERNS, f"the URL walk found only {len(routes)} patterns"
    assert len(project) >= MIN_PROJECT_PATTERNS, f"only {len(project)} project patterns"
    missed = [r.route for r in routes if r.route not in exercised and r.key not in SKIPPED]
    assert not missed, f"patterns never requested: {missed}"
    stale = set(SKIPPED) - {r.key for r in routes}
    assert not stale, f"SKIPPED names patterns that no longer exist: {stale}"


# --- Requests, rolled back -------------------------------------------------------------------


def rows_written() -> object:
    """What the database has written in this transaction so far (rows inserted, updated or
    deleted), so that any write a refused request makes, an UPDATE included, is caught:
    PostgreSQL's per-transaction table statistics (by table, sessions left out), SQLite's
    total_changes (on SQLite the tests make sure no session is saved by the requests they
    watch, see ``logged_in_clients``). One query: counting every table's rows as well, twice
    per refused cell, took a quarter of this module's time on PostgreSQL and caught nothing
    this misses."""
    connection.ensure_connection()
    if connection.vendor == "sqlite":
        return connection.connection.total_changes
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables "
            "WHERE relname <> 'django_session' AND n_tup_ins + n_tup_upd + n_tup_del > 0 "
            "ORDER BY relname"
        )
        return cursor.fetchall()


def changes(before: object, after: object) -> list[str]:
    """What was written between two readings of :func:`rows_written`: the tables and their
    (inserted, updated, deleted) counts on PostgreSQL, the number of rows on SQLite."""
    if before == after:
        return []
    if isinstance(before, int) and isinstance(after, int):
        return [f"{after - before} rows written"]
    was = {name: tuple(counts) for name, *counts in before}  # type: ignore[attr-defined]
    return [
        f"{name} (inserted, updated, deleted) {was.get(name, (0, 0, 0))} -> {tuple(counts)}"
        for name, *counts in after  # type: ignore[attr-defined]
        if tuple(counts) != was.get(name, (0, 0, 0))
    ]


@dataclass
class Outcome:
    status: int
    location: str
    body: str
    headers: str
    response: HttpResponseBase | None
    changed: list[str]
    error: str = ""


def _read_body(response: HttpResponseBase) -> str:
    if getattr(response, "streaming", False):
        content = b"".join(response.streaming_content)
    else:
        content = response.content
    return content.decode("utf-8", "replace")


def send(
    client: HttpsClient,
    method: str,
    url: str,
    data: dict[str, Any] | None = None,
    *,
    watch: bool = False,
    **extra: Any,
) -> Outcome:
    """One request in a transaction that is rolled back afterwards (with the client's cookies put
    back), so a cell that logs out, ends an assignment or creates a campaign leaves the next cell
    the same world. With ``watch``, the tables are compared before and after."""
    saved_cookies = {name: morsel.value for name, morsel in client.cookies.items()}
    changed: list[str] = []
    try:
        with transaction.atomic():
            before = rows_written() if watch else None
            if method == "GET":
                response = client.get(url, **extra)
            else:
                response = client.post(url, data or {}, **extra)
            body = _read_body(response)
            if before is not None:
                changed = changes(before, rows_written())
            transaction.set_rollback(True)
    except Exception as exc:  # a 500: reported as this cell's failure, the others still run
        return Outcome(500, "", "", "", None, [], error=f"{type(exc).__name__}: {exc}")
    finally:
        client.cookies = SimpleCookie()
        for name, value in saved_cookies.items():
            client.cookies[name] = value
    headers = " ".join(f"{k}: {v}" for k, v in response.items() if k.lower() != "location")
    return Outcome(
        response.status_code, response.get("Location", ""), body, headers, response, changed
    )


def login_url_for(target: Target) -> str:
    return reverse("admin:login") if target.route.is_admin else reverse("login")


def is_login_redirect(outcome: Outcome, target: Target) -> bool:
    return outcome.status == 302 and urlsplit(outcome.location).path == login_url_for(target)


# --- 1. Headers and cookies ------------------------------------------------------------------

SAFE_REFERRER_POLICIES = {
    "no-referrer",
    "same-origin",
    "strict-origin",
    "strict-origin-when-cross-origin",
}
ONE_YEAR = 31536000  # what HSTS preload lists require, and what settings.py asks for


def _csp_directives(policy: str) -> dict[str, list[str]]:
    directives = {}
    for chunk in policy.split(";"):
        words = chunk.split()
        if words:
            directives[words[0].lower()] = [w.lower() for w in words[1:]]
    return directives


def _is_deletion(morsel: Morsel) -> bool:
    # A cookie being deleted (logout) carries no value; Django sends it without flags.
    return not morsel.value and (morsel["max-age"] in (0, "0") or "1970" in morsel["expires"])


def header_problems(response: HttpResponseBase, *, logged_in: bool) -> list[str]:
    """What ``response`` lacks of the deployed security headers and cookie flags; a response to
    a logged-in user must also forbid storing it (``Cache-Control: no-store, private``)."""
    problems = []
    if logged_in:
        directives = {d.strip().lower() for d in response.get("Cache-Control", "").split(",")}
        if not {"no-store", "private"} <= directives:
            problems.append(f"logged in, but Cache-Control is {response.get('Cache-Control')!r}")
    csp = response.get("Content-Security-Policy")
    if not csp:
        problems.append("no Content-Security-Policy")
    else:
        directives = _csp_directives(csp)
        scripts = directives.get("script-src", directives.get("default-src"))
        if scripts is None:
            problems.append("CSP limits no scripts (neither script-src nor default-src)")
        elif {"'unsafe-inline'", "'unsafe-eval'", "*"} & set(scripts):
            problems.append(f"CSP script-src allows {' '.join(scripts)}")
        framing = directives.get("frame-ancestors")
        if framing != ["'none'"] and response.get("X-Frame-Options", "").upper() != "DENY":
            problems.append("framing allowed (no frame-ancestors 'none', no X-Frame-Options DENY)")
    hsts = response.get("Strict-Transport-Security", "")
    age = re.search(r"max-age=(\d+)", hsts)
    if not age or int(age[1]) < ONE_YEAR:
        problems.append(f"Strict-Transport-Security missing or short: {hsts!r}")
    elif "preload" in hsts and "includesubdomains" not in hsts.lower():
        problems.append("HSTS preload without includeSubDomains")
    if response.get("X-Content-Type-Options", "").lower() != "nosniff":
        problems.append("no X-Content-Type-Options: nosniff")
    referrer = {p.strip() for p in response.get("Referrer-Policy", "").split(",") if p.strip()}
    if not referrer or not referrer <= SAFE_REFERRER_POLICIES:
        problems.append(f"Referrer-Policy missing or leaky: {referrer or None}")
    if response.get("Cross-Origin-Opener-Policy") != "same-origin":
        problems.append("no Cross-Origin-Opener-Policy: same-origin")
    for name, morsel in response.cookies.items():
        if _is_deletion(morsel):
            continue
        if not morsel["secure"]:
            problems.append(f"cookie {name} not Secure")
        # The CSRF cookie alone may be readable by scripts: Django documents that HttpOnly on it
        # protects nothing (the same token is in every form), and CSRF_COOKIE_HTTPONLY is unset.
        if not morsel["httponly"] and name != django_settings.CSRF_COOKIE_NAME:
            problems.append(f"cookie {name} not HttpOnly")
        if str(morsel["samesite"]).lower() not in ("lax", "strict"):
            problems.append(f"cookie {name} has SameSite={morsel['samesite'] or 'unset'}")
    return problems


def test_every_response_carries_the_security_headers_and_safe_cookies(world):
    routes, targets = all_targets(world)
    clients = {"anonymous": HttpsClient(), "organiser": HttpsClient(), "superuser": HttpsClient()}
    clients["organiser"].force_login(world.users["organiser"])
    clients["superuser"].force_login(world.superuser)
    failures: list[str] = []
    cookies: set[str] = set()
    checked = private = 0
    exercised: set[str] = set()

    def check(
        response: HttpResponseBase | None, what: str, error: str = "", *, logged_in: bool
    ) -> None:
        nonlocal checked, private
        if response is None:
            failures.append(f"{what}: raised {error}")
            return
        checked += 1
        private += logged_in
        cookies.update(n for n, m in response.cookies.items() if not _is_deletion(m))
        problems = header_problems(response, logged_in=logged_in)
        failures.extend(f"{what}: {problem}" for problem in problems)

    for target in targets:
        # The superuser sees the admin pages themselves, not only the redirect to its login.
        who = ("anonymous", "organiser") + (("superuser",) if target.route.is_admin else ())
        for role in who:
            outcome = send(clients[role], "GET", target.url)
            logged_in = role != "anonymous"
            check(outcome.response, f"GET {target} as {role}", outcome.error, logged_in=logged_in)
            exercised.add(target.route.route)
        if not target.route.is_admin and target.side == "own":
            # htmx requests get fragments and polling answers (204, 286) from other code paths.
            outcome = send(clients["organiser"], "GET", target.url, HTTP_HX_REQUEST="true")
            what = f"GET {target} as organiser (htmx)"
            check(outcome.response, what, outcome.error, logged_in=True)

    # The responses that set cookies for real: the login form, logging in, a message after a
    # POST, logging out.
    browser = HttpsClient(enforce_csrf_checks=True)
    page = browser.get(reverse("login"))
    check(page, "GET login (fresh visitor)", logged_in=False)
    token = page.cookies[django_settings.CSRF_COOKIE_NAME].value
    steps = [
        (
            reverse("login"),
            {"username": world.users["organiser"].username, "password": PASSWORD},
            True,
        ),
        (reverse("campaigns:job_retry", args=[world.own.slug, world.own.job.pk]), {}, True),
        (reverse("logout"), {}, False),
    ]
    for url, data, logged_in in steps:
        response = browser.post(url, {**data, "csrfmiddlewaretoken": token})
        assert response.status_code == 302, (url, response.status_code)
        check(response, f"POST {url}", logged_in=logged_in)
        token = browser.cookies[django_settings.CSRF_COOKIE_NAME].value

    assert_coverage(routes, exercised)
    expected_cookies = {
        django_settings.SESSION_COOKIE_NAME,
        django_settings.CSRF_COOKIE_NAME,
        "messages",
    }
    assert expected_cookies <= cookies, (
        f"cookies never seen, so never checked: {expected_cookies - cookies}"
    )
    print(
        f"\nheaders: {checked} responses checked over {len(routes)} URL patterns "
        f"({len(targets)} URLs), {private} of them to a logged-in user (no-store, private), "
        f"cookies {sorted(cookies)}, {len(failures)} failures"
    )
    assert not failures, "\n".join(failures[:80])


# --- 2. Who may do what: the policy, read from the views -------------------------------------

# URL name -> (who may GET, who may POST). The audiences:
#   everyone    anonymous visitors included
#   users       anyone logged in
#   creators    holders of campaigns.add_campaign (here: the organiser)
#   members     anyone in the URL's campaign (an assessor is redirected to their judging home)
#   organisers  organisers of the URL's campaign
#   adjudicating  its organisers and adjudicators (the agreement pages and adjudication)
#   assessors   assessors of the URL's campaign
#   owner       the assessor whose assignment the URL names
#   nobody      none of the six roles (the method is refused, or the page is staff only)
# Views without a method restriction (home, the campaign pages, the assessor's home and start)
# answer a POST as they answer a GET, so their POST audience is their GET audience.
POLICY: dict[str, tuple[str, str]] = {
    "home": ("users", "users"),
    "healthz": ("everyone", "nobody"),
    "login": ("everyone", "everyone"),
    "logout": ("nobody", "everyone"),  # Django 5's LogoutView: POST only
    "password_change": ("users", "users"),
    "password_reset": ("everyone", "everyone"),
    "password_reset_done": ("everyone", "nobody"),
    "password_reset_confirm": ("everyone", "everyone"),
    "admin:login": ("everyone", "everyone"),  # the form; no role is staff, so nobody gets in
    "campaigns:create": ("creators", "creators"),
    "campaigns:detail": ("members", "members"),
    "campaigns:guide": ("members", "members"),
    "campaigns:settings": ("organisers", "organisers"),
    "campaigns:rubric": ("organisers", "organisers"),
    "campaigns:rubric_history": ("organisers", "organisers"),
    "campaigns:files": ("organisers", "organisers"),
    "campaigns:upload": ("nobody", "organisers"),
    "campaigns:jobs": ("organisers", "organisers"),
    "campaigns:job": ("organisers", "organisers"),
    "campaigns:job_cancel": ("nobody", "organisers"),
    "campaigns:job_retry": ("nobody", "organisers"),
    "pooling:pools": ("organisers", "nobody"),
    "pooling:build": ("nobody", "organisers"),
    "pooling:versions": ("organisers", "nobody"),
    "pooling:planner": ("organisers", "nobody"),
    "pooling:pool": ("organisers", "nobody"),
    "pooling:pool_status": ("organisers", "nobody"),
    "pooling:adjudication": ("organisers", "nobody"),
    "assess:campaign_home": ("assessors", "assessors"),
    "assess:start": ("owner", "owner"),
    "assess:judge": ("owner", "owner"),
    "assess:keys": ("owner", "nobody"),
    "assess:judged": ("owner", "nobody"),
    "assess:skip": ("nobody", "owner"),
    "assess:next": ("owner", "nobody"),
    "assess:assessors": ("organisers", "nobody"),
    "assess:assessor_create": ("nobody", "organisers"),
    "assess:model_judges": ("organisers", "organisers"),
    "assess:gullibility": ("organisers", "organisers"),
    "assess:member_add": ("nobody", "organisers"),
    "assess:member_password_link": ("nobody", "organisers"),
    "assess:assign": ("nobody", "organisers"),
    "assess:move": ("nobody", "organisers"),
    "assess:hybrid": ("organisers", "organisers"),
    "assess:rebalance": ("nobody", "organisers"),
    "assess:assignment_end": ("nobody", "organisers"),
    "assess:progress": ("organisers", "nobody"),
    "assess:highlighting": ("organisers", "nobody"),
    "qrels:export": ("organisers", "organisers"),
    "qrels:export_download": ("organisers", "nobody"),
    "qrels:export_readme": ("organisers", "nobody"),
    "qrels:reports": ("organisers", "nobody"),
    "qrels:agreement": ("adjudicating", "nobody"),
    "qrels:agreement_pair": ("adjudicating", "nobody"),
    "qrels:agreement_pairs": ("adjudicating", "nobody"),
    "qrels:adjudicate": ("adjudicating", "adjudicating"),
    "assess:grid_cell": ("organisers", "organisers"),
    "assess:grid_deal": ("nobody", "organisers"),
    "assess:grid_overlap": ("nobody", "organisers"),
    "qrels:documents": ("adjudicating", "nobody"),
    "qrels:document": ("adjudicating", "nobody"),
    "qrels:adjudications": ("adjudicating", "nobody"),
    "qrels:evaluation": ("organisers", "organisers"),
    "qrels:evaluation_run": ("organisers", "nobody"),
    "qrels:stability": ("organisers", "organisers"),
    "qrels:pool_bias": ("organisers", "organisers"),
    "qrels:report_job_status": ("organisers", "nobody"),
}
# Django's admin: staff only, and no campaign role is staff.
ADMIN_POLICY = ("nobody", "nobody")
# Where success is a redirect to the login page.
ENDS_AT_LOGIN = {"logout"}
# Forms that answer everyone but let no role through: success is the form again (200), never a
# redirect (which would mean a campaign role got into the admin).
LETS_NOBODY_IN = {"admin:login"}


def policy_for(route: Route) -> tuple[str, str]:
    if route.key in POLICY:
        return POLICY[route.key]
    if route.is_admin:
        return ADMIN_POLICY
    raise KeyError(f"{route.key}: add it to POLICY (who may GET and POST it)")


def side_named(world: World, name: str | None) -> Side | None:
    return next((side for side in world.sides() if side.name == name), None)


def may(audience: str, role: str, target: Target, world: World) -> bool:
    """Whether ``role`` belongs to ``audience`` for this URL."""
    if audience == "everyone":
        return True
    if audience == "nobody" or role == "anonymous":
        return False
    user = world.users[role]
    if audience == "users":
        return True
    if audience == "creators":
        return user.has_perm("campaigns.add_campaign")
    side = side_named(world, target.side)
    if side is None or not target.consistent:
        return False
    assessors = {side.first.pk, side.second.pk}
    if audience == "organisers":
        return user.pk == side.organiser.pk
    if audience == "assessors":
        return user.pk in assessors
    if audience == "members":
        return user.pk in assessors | {side.organiser.pk} | _adjudicators(side)
    if audience == "adjudicating":
        return user.pk in {side.organiser.pk} | _adjudicators(side)
    if audience == "owner":
        return target.owner == role
    raise ValueError(f"unknown audience {audience!r}")


def _adjudicators(side: Side) -> set[int]:
    return {side.adjudicator.pk} if side.adjudicator is not None else set()


def private_strings(role: str, world: World, *, refused: bool) -> list[str]:
    """What must not appear in a response to ``role``: on a refusal, nothing of any campaign; on
    an allowed page, nothing of campaigns the role is not in, and for an assessor nothing that
    unblinds or identifies others (run tags, the other assessor's name and note, the
    organiser's name)."""
    me = world.users.get(role)
    found = []
    for side in world.sides():
        member = me is not None and me.pk in {
            side.organiser.pk,
            side.first.pk,
            side.second.pk,
            *_adjudicators(side),
        }
        if refused or not member:
            found += side.markers.values()
        elif me.pk in {side.first.pk, side.second.pk}:
            other = "second" if me.pk == side.first.pk else "first"
            found += [
                side.markers[k]
                for k in (
                    "run-alpha",
                    "run-beta",
                    f"note-{other}",
                    other,
                    "organiser",
                    "model",
                    "model-note",
                    "model-round",
                )
            ]
    return [s for s in found if me is None or s != me.username]


def _rubric_post(world: World, side: Side, role: str) -> dict[str, Any]:
    return {
        "labels-TOTAL_FORMS": "2",
        "labels-INITIAL_FORMS": "0",
        "labels-MIN_NUM_FORMS": "0",
        "labels-MAX_NUM_FORMS": "12",
        "labels-0-value": "0",
        "labels-0-name": "Off topic",
        "labels-0-key": "a",
        "labels-1-value": "1",
        "labels-1-name": "On topic",
        "labels-1-key": "s",
        "threshold": "1",
        "note": "two levels",
    }


def _build_post(world: World, side: Side, role: str) -> dict[str, Any]:
    return {
        "strategy": "depth",
        "depth": "3",
        "rrf_k": "60",
        "rbp_p": "0.8",
        "rbp_aggregate": "sum",
        "order": "trec_eval",
        "runs": [str(run.pk) for run in side.runs],
    }


def _own_credentials(world: World, side: Side, role: str) -> dict[str, Any]:
    # A visitor logs in as the outsider; a logged-in role offers its own name and password.
    user = world.users.get(role, world.users["outsider"])
    return {"username": user.username, "password": PASSWORD}


# URL name -> what a role posts there, with the ids of the URL's campaign: a valid form, so an
# allowed POST is seen to succeed, not merely to fail validation. Other URLs get an empty POST.
PAYLOADS: dict[str, Callable[[World, Side, str], dict[str, Any]]] = {
    "login": _own_credentials,
    "password_change": lambda w, s, r: {
        "old_password": PASSWORD,
        "new_password1": "a-new-long-passphrase",
        "new_password2": "a-new-long-passphrase",
    },
    "admin:login": _own_credentials,
    "campaigns:create": lambda w, s, r: {
        "title": "A new campaign",
        "slug": "pjsec-new",
        "scale": "binary",
    },
    "campaigns:rubric": _rubric_post,
    "campaigns:settings": lambda w, s, r: {
        "title": "Renamed",
        "description": "",
        "guidelines": "Judge the document.",
        "topic_breaks": "on",
        "highlight_terms": "on",
    },
    "campaigns:upload": lambda w, s, r: {
        "topics-files": SimpleUploadedFile("more.tsv", b"901\tA further topic\n")
    },
    "pooling:build": _build_post,
    "assess:judge": lambda w, s, r: {
        "label": "1",
        "submission": str(uuid.uuid4()),
        "version": "0",
    },
    "assess:skip": lambda w, s, r: {"submission": str(uuid.uuid4())},
    # End the first assessor's work on topic 301, applied (not only previewed).
    "assess:grid_cell": lambda w, s, r: {"action": "end", "confirm": "1"},
    # Both topics are someone's primary work: the preview says so, and changes nothing.
    "assess:grid_deal": lambda w, s, r: {
        "topics": [t.pk for t in s.topics],
        "assessors": [a.pk for a in s.assessors],
    },
    # Topic 302 is the second assessor's primary work with no overlap: the preview.
    "assess:grid_overlap": lambda w, s, r: {
        "topics": [s.topics[1].pk],
        "assessors": [a.pk for a in s.assessors],
        "overlap": "50%",
    },
    "qrels:adjudicate": lambda w, s, r: {
        "label": "2",
        "reason": "the narrative settles it",
        "version": "0",
        "submission_id": str(uuid.uuid4()),
    },
    "assess:assessor_create": lambda w, s, r: {
        "username": "pjsec_newbie",
        "password": "a-long-enough-passphrase",
    },
    "assess:member_add": lambda w, s, r: {
        "username": w.users["outsider"].username,
        "role": "assessor",
    },
    # Both topics have their primary assessor; a shared queue can still be given out.
    "assess:assign": lambda w, s, r: {
        "assessor": s.first.pk,
        "topics": [s.topics[1].pk],
        "mode": "queue",
    },
    "assess:move": lambda w, s, r: {
        "topic": s.topics[1].pk,
        "from_user": s.second.pk,
        "to_user": s.first.pk,
    },
    # Both topics are given in primary mode: the budget is refused, with its reason, as a page.
    "assess:hybrid": lambda w, s, r: {
        "action": "budget",
        "model": f"{s.markers['model']}",
        "routing": "uncertain",
        "every": "50%",
    },
    "assess:rebalance": lambda w, s, r: {
        "topic": s.topics[0].pk,
        "users": [s.first.pk, s.second.pk],
    },
    "qrels:export": lambda w, s, r: {
        "policy": "",
        "unjudged": "omit",
        "include_imported": "on",
        "pool": "",
    },
}


def payload(target: Target, world: World, role: str) -> dict[str, Any]:
    side = side_named(world, target.side) or world.own
    make = PAYLOADS.get(target.route.key)
    return make(world, side, role) if make else {}


def logged_in_clients(world: World, **client_options: Any) -> dict[str, HttpsClient]:
    """A client per role, each logged in and past its first page: that page saves the session's
    last-seen time (and sets the CSRF cookie), so the watched requests after it write nothing
    of their own accord."""
    clients = {role: HttpsClient(**client_options) for role in ROLES}
    for role, user in world.users.items():
        clients[role].force_login(user)
        assert clients[role].get(reverse("home")).status_code == 200
    assert clients["anonymous"].get(reverse("login")).status_code == 200
    return clients


def judge_cell(
    role: str, method: str, target: Target, outcome: Outcome, world: World, allowed: bool
) -> list[str]:
    """What is wrong with ``outcome`` for this cell of the matrix."""
    what = f"{method} {target} as {role} ({'allowed' if allowed else 'refused'})"
    if outcome.error:
        return [f"{what}: raised {outcome.error}"]
    problems = []
    if allowed:
        ok = 200 <= outcome.status < 400
        if is_login_redirect(outcome, target) and target.route.key not in ENDS_AT_LOGIN:
            ok = False
        if target.route.key in LETS_NOBODY_IN and outcome.status != 200:
            ok = False
        if not ok:
            problems.append(f"{what}: got {outcome.status} {outcome.location}".rstrip())
    else:
        refusals = (403, 404, 405)
        # Anonymous visitors are sent to log in; so is everyone at the admin (Django's design:
        # a logged-in user without staff status gets the admin's own login form, or from its
        # logout URL the admin index, which sends them to that form).
        sent_away = is_login_redirect(outcome, target) and (
            role == "anonymous" or target.route.is_admin
        )
        if target.route.is_admin and outcome.status == 302:
            sent_away = urlsplit(outcome.location).path in (
                reverse("admin:login"),
                reverse("admin:index"),
            )
        if outcome.status not in refusals and not sent_away:
            problems.append(f"{what}: got {outcome.status} {outcome.location}".rstrip())
        if outcome.changed:
            problems.append(f"{what}: changed {', '.join(outcome.changed)}")
    text = (outcome.body + " " + outcome.headers).lower()
    leaked = [s for s in private_strings(role, world, refused=not allowed) if s.lower() in text]
    if leaked:
        problems.append(f"{what}: shows {leaked}")
    return problems


def test_the_watch_on_refused_requests_sees_an_update_and_an_insert(world):
    """The matrix's write detector, on its own: an UPDATE changes no row count, and is caught
    all the same; an INSERT too; a read is not."""
    campaign = world.own.campaign
    before = rows_written()
    Campaign.objects.filter(pk=campaign.pk).count()
    assert changes(before, rows_written()) == []
    Campaign.objects.filter(pk=campaign.pk).update(title="renamed")
    updated = rows_written()
    assert changes(before, updated)
    Assessor.objects.create(campaign=campaign, name="watched", kind=Assessor.Kind.IMPORTED)
    assert changes(updated, rows_written())


def test_every_role_reaches_exactly_what_the_policy_allows(world):
    routes, targets = all_targets(world)
    clients = logged_in_clients(world)
    failures: list[str] = []
    cells = allowed_cells = 0
    per_role: dict[str, set[bool]] = {role: set() for role in ROLES}
    markers = [m for side in world.sides() for m in side.markers.values()]
    shown: set[str] = set()
    for target in targets:
        get_audience, post_audience = policy_for(target.route)
        for role in ROLES:
            for method, audience in (("GET", get_audience), ("POST", post_audience)):
                allowed = may(audience, role, target, world)
                data = payload(target, world, role) if method == "POST" else None
                # Refused requests are watched for any change to any row; allowed ones change
                # things by design (and are rolled back like every other).
                outcome = send(clients[role], method, target.url, data, watch=not allowed)
                failures += judge_cell(role, method, target, outcome, world, allowed)
                if allowed:
                    text = outcome.body.lower()
                    shown.update(m for m in markers if m.lower() in text)
                cells += 1
                allowed_cells += allowed
                per_role[role].add(allowed)
    # Every role is both let in somewhere and kept out somewhere: the matrix tests both ways.
    assert all(seen == {True, False} for seen in per_role.values()), per_role
    assert_coverage(routes, {target.route.route for target in targets})
    # The private strings are ones the app does show to those allowed (notes and the uploaded
    # file are never rendered; the other campaign's documents only to its assessors, who are
    # no role here), so their absence from every refusal means something.
    rendered = (
        "title",
        "topic-1",
        "topic-2",
        "run-alpha",
        "run-beta",
        "organiser",
        "first",
        "model",
    )
    expected = {side.markers[k] for side in world.sides() for k in (*rendered, "second")}
    expected.add(world.own.markers["document"])
    assert expected <= shown, f"never shown even to those allowed: {sorted(expected - shown)}"
    print(
        f"\nauthorisation matrix: {cells} cells ({len(ROLES)} roles x {len(targets)} URLs of "
        f"{len(routes)} patterns x GET/POST), {allowed_cells} allowed, "
        f"{cells - allowed_cells} refused, {len(failures)} failures"
    )
    assert not failures, "\n".join(failures[:80])


# --- 3. CSRF ---------------------------------------------------------------------------------


def test_every_post_needs_a_csrf_token(world):
    """Each endpoint that takes a POST, as each role allowed to post there: refused (403, no row
    changed) without a token or with a wrong one; accepted with the token as a form field and as
    the X-CSRFToken header htmx sends. Every other URL refuses a tokenless POST as well, before
    its view could answer 405: no view is exempt."""
    _routes, targets = all_targets(world)
    clients = logged_in_clients(world, enforce_csrf_checks=True)
    # The first page each client saw set its CSRF cookie; forms and htmx post the same token.
    cookie = django_settings.CSRF_COOKIE_NAME
    tokens = {role: client.cookies[cookie].value for role, client in clients.items()}
    failures: list[str] = []
    endpoints: set[str] = set()
    cells = others = 0

    def refused(client: HttpsClient, what: str, url: str, data: dict[str, Any]) -> None:
        outcome = send(client, "POST", url, data, watch=True)
        if outcome.status != 403 or outcome.changed or outcome.error:
            failures.append(f"{what}: {outcome.status} {outcome.changed} {outcome.error}")

    for target in targets:
        post_audience = policy_for(target.route)[1]
        posters = [role for role in ROLES if may(post_audience, role, target, world)]
        if not posters:
            others += 1
            refused(clients["organiser"], f"POST {target} without a token", target.url, {})
            continue
        endpoints.add(target.url)
        for role in posters:
            cells += 1
            client, token = clients[role], tokens[role]
            what = f"POST {target} as {role}"
            data = payload(target, world, role)
            refused(client, f"{what} without a token", target.url, data)
            wrong = {**payload(target, world, role), "csrfmiddlewaretoken": "x" * 32}
            refused(client, f"{what} with a wrong token", target.url, wrong)
            for label, data, extra in (
                ("form", {**payload(target, world, role), "csrfmiddlewaretoken": token}, {}),
                ("header", payload(target, world, role), {"HTTP_X_CSRFTOKEN": token}),
            ):
                outcome = send(client, "POST", target.url, data, **extra)
                if not 200 <= outcome.status < 400:
                    failures.append(f"{what} with the {label} token: {outcome.status}")
    # The policy names 27 POST endpoints; with both campaigns' URLs that is 50-odd.
    assert len(endpoints) >= 40, f"only {len(endpoints)} endpoints take a POST"
    print(
        f"\ncsrf: {len(endpoints)} POST endpoints ({cells} endpoint x allowed-role cells) each "
        f"refused without a token and with a wrong one, accepted with it as field and as header; "
        f"{others} other URLs refuse a tokenless POST; {len(failures)} failures"
    )
    assert not failures, "\n".join(failures[:80])


def test_logout_is_post_only_and_needs_the_token(world):
    client = logged_in_clients(world, enforce_csrf_checks=True)["organiser"]
    token = client.cookies[django_settings.CSRF_COOKIE_NAME].value
    home, logout = reverse("home"), reverse("logout")
    assert client.get(logout).status_code == 405  # a link or an <img> cannot log anyone out
    assert client.get(home).status_code == 200
    assert client.post(logout).status_code == 403  # nor can another site's form
    assert client.get(home).status_code == 200
    response = client.post(logout, {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert urlsplit(response["Location"]).path == reverse("login")
    after = client.get(home)
    assert after.status_code == 302
    assert urlsplit(after["Location"]).path == reverse("login")


# Forms whose fields name objects of the campaign (runs, assessors, topics).
FORMS_WITH_IDS = ("pooling:build", "assess:assign", "assess:move", "assess:rebalance")


def test_another_campaigns_ids_in_a_form_change_nothing(world):
    """The organiser posts, to their own campaign's forms, the other campaign's runs, assessors
    and topics: each is a form error, and nothing is written."""
    _routes, targets = all_targets(world)
    client = logged_in_clients(world)["organiser"]
    failures = []
    posted = 0
    for target in targets:
        if target.route.key not in FORMS_WITH_IDS or target.side != world.own.name:
            continue
        make = PAYLOADS[target.route.key]
        posted += 1
        foreign = send(
            client, "POST", target.url, make(world, world.other, "organiser"), watch=True
        )
        if foreign.status not in (400, 404) or foreign.changed:
            failures.append(f"POST {target} with oth ids: {foreign.status} {foreign.changed}")
        # The same form with the campaign's own ids goes through: the refusal was about the ids.
        own = send(client, "POST", target.url, make(world, world.own, "organiser"))
        if not 200 <= own.status < 400:
            failures.append(f"POST {target} with own ids: {own.status}")
    assert posted == len(FORMS_WITH_IDS), posted
    assert not failures, "\n".join(failures)
