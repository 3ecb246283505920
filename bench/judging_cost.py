"""Service cost of the judging round trip (issue 13): what one judgment and one judging page
cost the server, in-process and deterministic (no network, no concurrency).

    .venv/bin/python bench/judging_cost.py            # 500 judgments
    .venv/bin/python bench/judging_cost.py --n 200
    .venv/bin/python bench/judging_cost.py --mode queue      # or adaptive: shared-queue claims

On a fresh PostgreSQL database ``pj_cost`` (dropped and re-created on postgres@127.0.0.1:5432,
migrated, then VACUUM ANALYZE as autovacuum would after a bulk load), with production settings
(DEBUG=0, so Django records no queries): one assessor with a primary assignment of 2 topics x (n
+ 130) documents of ~2.5 KB each. Django's test client (it calls the WSGI handler with every
middleware; session, CSRF and auth as deployed) judges n documents one after the other: GET the
judging panel (htmx), then POST a label with the form's submission id and version and, as the
page's script does, the prefetched document's token (``upcoming``), answered with only what
changed (older code: the next document's whole panel). With ``--mode queue`` (or ``adaptive``:
the queue judged in adaptive bandit order) the assignment is a shared queue: the page prefetches
nothing, and each answer claims the next document.

Per request, printed as median (and p90) over the n requests:

* SQL statements, counted at the connection (an execute wrapper sees every statement Django
  sends, savepoints included), plus the health check's ``SELECT 1`` when CONN_HEALTH_CHECKS is
  on (psycopg runs it directly, at the start of every request on a reused connection);
* Django CPU: process CPU time of the request (time.process_time: the view, templates,
  middleware and psycopg's client side; the test client's own share is small);
* PostgreSQL CPU per POST and per GET: the backend process's user + system time (/proc) over the
  n requests, divided by n (the backend serves this process alone);
* bytes of the POST answer: raw, and gzipped at level 6 (what a proxy's gzip would send).

The same command run on an older checkout (``PYTHONPATH=<checkout> .venv/bin/python
<checkout-or-this>/bench/judging_cost.py``) gives the before figures.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
POSTGRES = "postgres://postgres@127.0.0.1:5432"
DB_NAME = os.environ.get("PJ_COST_DB", "pj_cost")  # a helper sharing the server picks its own
HIDDEN = re.compile(r'name="(submission|version|served)" value="([^"]*)"')
LABEL_VALUES = re.compile(r'name="label" value="(-?\d+)"')
# The prefetched document's token: the page posts it as ``upcoming`` and shows that document
# without asking (the slim answer, assess/answer.py). Older code has none: it answers with the
# next document's panel and its address in HX-Push-Url.
UPCOMING = re.compile(r'<template id="upcoming" data-token="([^"]+)"')
JUDGE_FORM = re.compile(r'<form method="post" action="(/[^"]+/judge/[^"]+/[^"]+/)"')
BODY = (
    "Pooljudge measures what one judgment costs. " * 8 + "\n\n"
) * 7  # ~2.5 KB: a news article's abstract-length body


def _configure() -> None:
    os.environ.update(
        {
            "DATABASE_URL": f"{POSTGRES}/{DB_NAME}",
            "DEBUG": "0",
            "SECRET_KEY": "judging-cost-bench-" + "x" * 40,
            "ALLOWED_HOSTS": "testserver",
        }
    )
    os.environ.pop("REDIS_URL", None)  # the pool is built in-process
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pooljudge.settings")
    sys.path.insert(0, str(ROOT))


def _recreate_database() -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB_NAME))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB_NAME)))


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _setup(n: int, mode: str = "primary"):
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from assess.assignments import assign
    from campaigns.members import add_member
    from campaigns.models import Campaign
    from campaigns.scales import SCALES
    from tests.factories import make_documents, make_pool, make_run, make_topics

    call_command("migrate", verbosity=0)
    scale = SCALES["graded3"]
    campaign = Campaign.objects.create(
        slug="cost", title="Judging cost", relevance_threshold=scale.threshold
    )
    campaign.save_rubric(list(scale.labels), note="preset")
    topics = ["401", "402"]
    make_topics(campaign, topics)
    docs = [f"d{i:04d}" for i in range(n + 130)]
    make_documents(campaign, docs, body=BODY)
    for name, base in (("alpha", 100.0), ("beta", 50.0)):
        make_run(
            campaign, name, {t: [(d, base - i * 0.01) for i, d in enumerate(docs)] for t in topics}
        )
    adaptive = {"adjudication": {"order": "bandit", "burn_in": 5}} if mode == "adaptive" else {}
    pool = make_pool(campaign, depth=len(docs), **adaptive)
    user = get_user_model().objects.create_user(username="costly", password="x" * 20)
    add_member(campaign=campaign, user=user, role="assessor")
    (assignment,) = assign(
        campaign=campaign,
        pool=pool,
        user=user,
        topics=list(campaign.topics.all()),
        seed=1,
        mode="primary" if mode == "primary" else "queue",
    )
    # Planner statistics, as autovacuum gathers them after a bulk load (the shared development
    # server runs with autovacuum off; without them a queue's claim plans as if every table
    # held one row).
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return user, assignment


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, execute, sql, params, many, context):
        self.n += 1
        return execute(sql, params, many, context)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=500, help="judgments measured (500)")
    parser.add_argument(
        "--mode",
        choices=["primary", "queue", "adaptive"],
        default="primary",
        help="the assignment judged: primary (prefetching, slim answers), a shared queue (each "
        "answer claims the next document), or a queue in adaptive bandit order",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="then profile 100 more POSTs (cProfile, process CPU time: cumulative, own)",
    )
    args = parser.parse_args()
    _configure()
    _recreate_database()
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.decorators import login_required
    from django.db import connection
    from django.http import HttpResponse
    from django.test import Client
    from django.urls import clear_url_caches, path, reverse

    from assess.judging import next_item
    from pooljudge import urls

    user, assignment = _setup(args.n, args.mode)
    client = Client(headers={"X-Forwarded-Proto": "https"})
    client.force_login(user)
    hx = {"HX-Request": "true"}
    health = 1 if settings.DATABASES["default"].get("CONN_HEALTH_CHECKS") else 0
    item = next_item(assignment)
    url = reverse("assess:judge", args=["cost", assignment.token, item.token])

    # Warm-up: the first requests of a process fill what a worker keeps (URLconf, templates,
    # the rubric); a session is refreshed at most every few minutes, not per request.
    def following(answer, html: str) -> str:
        if answer.has_header("HX-Push-Url"):
            return answer["HX-Push-Url"]
        if (upcoming := UPCOMING.search(html)) is not None:
            token = upcoming.group(1)
            return reverse("assess:judge", args=["cost", assignment.token, token])
        # A queue's answer is the claimed document's panel: its form posts to its address.
        return JUDGE_FORM.search(answer.content.decode()).group(1)

    def form_of(html: str) -> dict[str, str]:
        form = {**dict(HIDDEN.findall(html)), "label": LABEL_VALUES.findall(html)[0]}
        if (upcoming := UPCOMING.search(html)) is not None:
            form["upcoming"] = upcoming.group(1)
        return form

    def post(target: str, form: dict[str, str]):
        # As judge.js sends it (URLSearchParams), not the test client's default multipart.
        return client.post(
            target, urlencode(form), content_type="application/x-www-form-urlencoded", headers=hx
        )

    for _ in range(5):
        html = client.get(url, headers=hx).content.decode()
        answer = post(url, form_of(html))
        url = following(answer, html)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]

    figures: dict[str, list[float]] = {
        k: []
        for k in (
            *("get_sql", "get_cpu", "post_sql", "post_cpu", "raw", "gz", "select"),
            *("floor_sql", "floor_cpu"),
        )
    }
    from pooling import adaptive

    if args.mode == "adaptive" and hasattr(adaptive, "choose_from"):
        # The adaptive order's own CPU per claim (issue 15's budget: <= 2 ms): folding the new
        # revisions and choosing, timed around pooling.adaptive.choose_from.
        choose_from = adaptive.choose_from

        def timed_choice(**kwargs):
            cpu = time.process_time()
            try:
                return choose_from(**kwargs)
            finally:
                figures["select"].append(time.process_time() - cpu)

        adaptive.choose_from = timed_choice
    pg = {"get": 0, "post": 0}
    counter = Counter()
    with connection.execute_wrapper(counter):
        for _ in range(args.n):
            counter.n, ticks, cpu = 0, _cpu_ticks(backend), time.process_time()
            page = client.get(url, headers=hx)
            figures["get_cpu"].append(time.process_time() - cpu)
            pg["get"] += _cpu_ticks(backend) - ticks
            figures["get_sql"].append(counter.n + health)
            html = page.content.decode()
            form = {**form_of(html), "active_ms": "3000"}
            counter.n, ticks, cpu = 0, _cpu_ticks(backend), time.process_time()
            answer = post(url, form)
            figures["post_cpu"].append(time.process_time() - cpu)
            pg["post"] += _cpu_ticks(backend) - ticks
            figures["post_sql"].append(counter.n + health)
            assert answer.status_code == 200, answer.status_code
            figures["raw"].append(len(answer.content))
            figures["gz"].append(len(gzip.compress(answer.content, 6)))
            url = following(answer, html)

    # The floor of any logged-in request, in the same process: every middleware, the session and
    # the user read, an empty answer (a view only this benchmark has).
    urls.urlpatterns.append(path("bench/signed-in", login_required(lambda r: HttpResponse("ok"))))
    clear_url_caches()
    client.get("/bench/signed-in")
    for _ in range(args.n):
        counter.n, cpu = 0, time.process_time()
        with connection.execute_wrapper(counter):
            assert client.get("/bench/signed-in").status_code == 200
        figures["floor_cpu"].append(time.process_time() - cpu)
        figures["floor_sql"].append(counter.n + health)

    if args.profile:
        import cProfile
        import pstats

        # Process CPU time, not wall time: waiting for PostgreSQL is not Django's CPU.
        profiler = cProfile.Profile(time.process_time)
        for _ in range(100):
            html = client.get(url, headers=hx).content.decode()
            profiler.enable()
            answer = post(url, form_of(html))
            profiler.disable()
            url = following(answer, html)
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(25)
        if os.environ.get("PJ_PROFILE_DUMP"):
            stats.dump_stats(os.environ["PJ_PROFILE_DUMP"])

    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")

    def med(key: str, scale: float = 1.0, digits: int = 1) -> str:
        values = sorted(figures[key])
        p90 = values[int(0.9 * len(values))]
        return f"{statistics.median(values) * scale:.{digits}f} (p90 {p90 * scale:.{digits}f})"

    print(
        f"judging round trip, {args.mode} assignment, {args.n} judgments, PostgreSQL, DEBUG=0, "
        f"CONN_HEALTH_CHECKS {bool(health)}"
    )
    print(f"  POST statements        {med('post_sql')}")
    print(f"  GET statements         {med('get_sql')}")
    print(f"  POST Django CPU ms     {med('post_cpu', 1000)}")
    print(f"  GET Django CPU ms      {med('get_cpu', 1000)}")
    floor = statistics.median(figures["floor_cpu"])
    print(
        f"  logged-in floor        {med('floor_sql')} statements, {med('floor_cpu', 1000)} ms "
        "Django CPU (an empty page behind login)"
    )
    print(
        f"  POST / floor CPU       {statistics.median(figures['post_cpu']) / floor:.2f}x; "
        f"GET / floor {statistics.median(figures['get_cpu']) / floor:.2f}x"
    )
    print(f"  POST PostgreSQL CPU ms {pg['post'] * tick_ms / args.n:.2f} (mean)")
    print(f"  GET PostgreSQL CPU ms  {pg['get'] * tick_ms / args.n:.2f} (mean)")
    print(f"  POST answer bytes      raw {med('raw')}, gzip {med('gz')}")
    if figures["select"]:
        print(f"  adaptive selection CPU ms {med('select', 1000, 2)} (per choice)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
