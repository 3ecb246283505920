"""Load benchmark of the judging screen: simulated assessors against gunicorn + PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/judge_load.py \
        [--assessors 60] [--rate 1.0] [--duration 120] [--saturation 30] [--workers 4]

It creates a throwaway database (pooljudge_bench_load), a campaign with one topic and one primary
assignment per simulated assessor, starts gunicorn on loopback, and then:

1. paced phase: every assessor logs in and judges in a loop (submit + next document, ONE request
   per judgment, as the htmx screen does) at about ``--rate`` requests a second each;
2. saturation phase: the same assessors judge as fast as the server answers.

It prints latency percentiles of submit-and-next, throughput, errors, judgments stored against
judgments submitted (every submission must be stored exactly once), PostgreSQL sessions opened per
100 requests, and the judging page's weight (htmx included, the document excluded).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
DB_NAME = "pooljudge_bench_load"
PASSWORD = "bench-password-0123456789"  # noqa: S105 (throwaway accounts)
FIELDS = re.compile(r'name="(submission|version|served|csrfmiddlewaretoken)" value="([^"]*)"')
ITEM = re.compile(r'data-item="([^"]+)"')
FORM_ACTION = re.compile(r'hx-post="([^"]+)"')


def database_urls(base: str) -> tuple[str, str]:
    parts = urlsplit(base)
    admin = urlunsplit(parts._replace(path="/postgres"))
    bench = urlunsplit(parts._replace(path=f"/{DB_NAME}"))
    return admin, bench


def manage(env: dict, *args: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


SETUP = """
import django, os
django.setup()
from django.contrib.auth import get_user_model
from django.db import transaction
from campaigns.members import add_member
from campaigns.models import Campaign, Document, Topic
from campaigns.scales import SCALES
from assess.assignments import assign
from pooling.models import Run, RunTopic
from pooling.pools import build_pool, create_pool

n, docs = int(os.environ["BENCH_ASSESSORS"]), int(os.environ["BENCH_DOCS"])
scale = SCALES["trecdl"]
campaign = Campaign.objects.create(slug="load", title="Load test", relevance_threshold=2)
campaign.save_rubric(list(scale.labels))
topics = Topic.objects.bulk_create(
    Topic(campaign=campaign, topic_id=f"{i:03d}", title=f"Topic {i}", description="What is asked.",
          narrative="What counts as relevant.", position=i) for i in range(n))
doc_ids = [f"doc{i:05d}" for i in range(docs)]
sentence = "A paragraph of an ordinary news article about nothing in particular. "
body = "<p>" + sentence * 40 + "</p>"
Document.objects.bulk_create(Document(campaign=campaign, doc_id=d, title=f"Document {d}",
                                      body=body, body_html=body) for d in doc_ids)
run = Run.objects.create(campaign=campaign, tag="bench")
RunTopic.objects.bulk_create(
    RunTopic(run=run, topic=t, docids="\\n".join(doc_ids), scores=RunTopic.pack_scores(
        [float(-i) for i in range(docs)]), ranks=RunTopic.pack_ranks(list(range(1, docs + 1))),
        length=docs) for t in topics)
with transaction.atomic():
    pool = create_pool(campaign=campaign, strategy="depth", params={"depth": docs})
pool.refresh_from_db()
if pool.status != "built":
    with transaction.atomic():
        build_pool(pool=pool)
    pool.refresh_from_db()
User = get_user_model()
for i, topic in enumerate(topics):
    user = User.objects.create_user(f"assessor{i:03d}", password=os.environ["BENCH_PASSWORD"])
    add_member(campaign=campaign, user=user, role="assessor")
    assign(campaign=campaign, pool=pool, user=user, topics=[topic], seed=i)
print("setup done")
"""


class Assessor:
    def __init__(self, client: httpx.AsyncClient, name: str):
        self.client = client
        self.name = name
        self.cookies: dict[str, str] = {}
        self.fields: dict[str, str] = {}
        self.action = ""

    def _headers(self, **extra: str) -> dict[str, str]:
        cookie = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        return {"Cookie": cookie, "X-Forwarded-Proto": "https", **extra}

    def _keep(self, response: httpx.Response) -> None:
        for header in response.headers.get_list("set-cookie"):
            name, _, rest = header.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]

    def _read_panel(self, html: str) -> None:
        self.fields = dict(FIELDS.findall(html))
        found = FORM_ACTION.search(html)
        self.action = found.group(1) if found else ""

    async def login(self) -> None:
        page = await self.client.get("/accounts/login/", headers=self._headers())
        self._keep(page)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        response = await self.client.post(
            "/accounts/login/",
            data={"username": self.name, "password": PASSWORD, "csrfmiddlewaretoken": token},
            headers=self._headers(
                Referer=f"https://{self.client.base_url.netloc.decode()}/accounts/login/"
            ),
        )
        self._keep(response)
        home = await self.client.get("/c/load/judge/", headers=self._headers())
        start = re.search(r'href="(/c/load/judge/[^/"]+/)"', home.text).group(1)
        # Redirects by hand: httpx drops a hand-set Cookie header when it follows one.
        first = await self.client.get(start, headers=self._headers())
        while first.status_code in (301, 302, 303):
            first = await self.client.get(first.headers["location"], headers=self._headers())
        self._read_panel(first.text)

    async def judge(self) -> tuple[float, bool]:
        """One submit-and-next: returns (seconds, ok)."""
        data = {**self.fields, "label": str(random.choice([0, 1, 2, 3])), "active_ms": "2500"}
        started = time.perf_counter()
        response = await self.client.post(
            self.action,
            data=data,
            headers=self._headers(
                **{
                    "HX-Request": "true",
                    "Referer": f"https://{self.client.base_url.netloc.decode()}/",
                }
            ),
        )
        elapsed = time.perf_counter() - started
        ok = response.status_code == 200 and "data-item" in response.text
        if ok:
            self._read_panel(response.text)
        return elapsed, ok


async def run_phase(assessors: list[Assessor], *, duration: float, rate: float | None):
    latencies: list[float] = []
    errors = 0
    submitted = 0
    deadline = time.perf_counter() + duration

    async def loop(assessor: Assessor) -> None:
        nonlocal errors, submitted
        if rate:
            await asyncio.sleep(random.random() / rate)
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            elapsed, ok = await assessor.judge()
            submitted += 1
            latencies.append(elapsed)
            if not ok:
                errors += 1
            if rate:
                pause = random.expovariate(rate) - (time.perf_counter() - began)
                await asyncio.sleep(max(0.0, pause))

    began = time.perf_counter()
    await asyncio.gather(*(loop(a) for a in assessors))
    return latencies, errors, submitted, time.perf_counter() - began


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] * 1000


def sessions(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = %s", [DB_NAME]
        ).fetchone()[0]


def page_weight(base: str, assessor: Assessor) -> dict[str, int]:
    """Bytes of the judging page without its document, plus its scripts and stylesheet, as
    sent (gzip, as WhiteNoise serves them) and uncompressed."""
    with httpx.Client(base_url=base) as client:
        page = client.get(assessor.action, headers=assessor._headers())
        html = page.text
        document = re.search(r'<div class="doc-body" hx-disable>(.*?)</div>', html, re.S)
        upcoming = re.search(r"<template id=\"upcoming\">.*?</template>", html, re.S)
        html_bytes = len(html.encode())
        for part in (document, upcoming):
            if part:
                html_bytes -= len(part.group(0).encode())
        assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', html)
        raw = gz = 0
        for asset in assets:
            plain = client.get(asset)
            zipped = client.get(asset, headers={"Accept-Encoding": "gzip"})
            raw += len(plain.content)
            gz += int(zipped.headers.get("content-length", len(zipped.content)))
    return {"html": html_bytes, "assets_raw": raw, "assets_gzip": gz}


async def main_async(args, env, bench_url) -> None:
    base = f"http://127.0.0.1:{args.port}"
    limits = httpx.Limits(max_connections=args.assessors, max_keepalive_connections=args.assessors)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:
        assessors = [Assessor(client, f"assessor{i:03d}") for i in range(args.assessors)]
        # Password hashing (PBKDF2, 1M iterations) makes logins slow by design: a few at a time.
        gate = asyncio.Semaphore(args.workers)

        async def login(assessor: Assessor) -> None:
            async with gate:
                await assessor.login()

        await asyncio.gather(*(login(a) for a in assessors))
        before = sessions(bench_url)
        paced = await run_phase(assessors, duration=args.duration, rate=args.rate)
        mid = sessions(bench_url)
        saturated = await run_phase(assessors, duration=args.saturation, rate=None)
        after = sessions(bench_url)
    weight = page_weight(base, assessors[0])
    with psycopg.connect(bench_url) as conn:
        stored = conn.execute("SELECT count(*) FROM campaigns_judgmentrevision").fetchone()[0]
    for label, (lat, errors, submitted, wall), opened in (
        ("paced", paced, mid - before),
        ("saturation", saturated, after - mid),
    ):
        print(
            f"\n{label}: {submitted} submits in {wall:.1f} s = {submitted / wall:.1f} judgments/s, "
            f"{errors} errors"
        )
        print(
            f"  submit-and-next latency ms: p50 {pct(lat, 50):.1f}  p95 {pct(lat, 95):.1f}  "
            f"p99 {pct(lat, 99):.1f}  max {max(lat) * 1000:.1f}"
        )
        print(
            f"  PostgreSQL sessions opened: {opened} ({100 * opened / max(1, submitted):.2f} "
            "per 100 requests)"
        )
    submitted = paced[2] + saturated[2]
    errors = paced[1] + saturated[1]
    print(
        f"\njudgments submitted {submitted}, answered OK {submitted - errors}, stored {stored}, "
        f"lost {submitted - errors - stored}"
    )
    total_raw = weight["html"] + weight["assets_raw"]
    total_gz = weight["assets_gzip"] + weight["html"]
    print(
        f"judging page weight without the document: html {weight['html'] / 1024:.1f} KiB, "
        f"scripts+css {weight['assets_raw'] / 1024:.1f} KiB raw / "
        f"{weight['assets_gzip'] / 1024:.1f} KiB gzip; total {total_raw / 1024:.1f} KiB raw, "
        f"{total_gz / 1024:.1f} KiB as sent"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--assessors", type=int, default=60)
    parser.add_argument("--rate", type=float, default=1.0, help="requests per second per assessor")
    parser.add_argument("--duration", type=float, default=120)
    parser.add_argument("--saturation", type=float, default=30)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--docs", type=int, default=600)
    args = parser.parse_args()
    base_url = os.environ.get("DATABASE_URL")
    if not base_url or not base_url.startswith("postgres"):
        sys.exit(
            "Set DATABASE_URL to a PostgreSQL server (the benchmark creates its own database)."
        )
    admin_url, bench_url = database_urls(base_url)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    env = {
        **os.environ,
        "DATABASE_URL": bench_url,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECRET_KEY": "bench-" + "x" * 50,
        "POOLJUDGE_DATA_DIR": str(ROOT / "var" / "bench"),
        "BENCH_ASSESSORS": str(args.assessors),
        "BENCH_DOCS": str(args.docs),
        "BENCH_PASSWORD": PASSWORD,
        "DJANGO_SETTINGS_MODULE": "pooljudge.settings",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("REDIS_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    print("migrating and creating the campaign …")
    manage(env, "migrate", "--noinput")
    manage(env, "collectstatic", "--noinput")
    subprocess.run([sys.executable, "-c", SETUP], cwd=ROOT, env=env, check=True)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "pooljudge.wsgi",
            "--bind",
            f"127.0.0.1:{args.port}",
            "--workers",
            str(args.workers),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{args.port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        print(
            f"{args.assessors} assessors, {args.rate}/s each for {args.duration:.0f} s, then "
            f"saturation for {args.saturation:.0f} s; gunicorn {args.workers} sync workers, "
            f"{os.cpu_count()} CPUs shared with PostgreSQL and this client"
        )
        asyncio.run(main_async(args, env, bench_url))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
