"""Load benchmark of the judging flow (issue 9): simulated assessors against the deployed stack.

    .venv/bin/python bench/load.py           # 60 assessors, 300 s at about 1 action/s, then a ramp
    .venv/bin/python bench/load.py --quick   # smoke run: 30 s steady, 8 s ramp steps

One command sets everything up on loopback, measures, and tears the servers down again:

* a fresh PostgreSQL database ``pj_load`` (dropped and created on postgres@127.0.0.1:5432),
  migrated; static files collected into a temporary STATIC_ROOT (hashed and gzipped by the
  manifest storage, served by WhiteNoise from gunicorn, as in production);
* a campaign built through the normal import paths: the demo collection's documents and rubric
  (pooljudge/demo/), one topic per assessor (a topic has one primary assessor), a run ranking
  enough documents for each, a depth pool built by the pool job, and one primary assignment per
  assessor, long enough that nobody runs out during the ramp; plus one spare assessor ("probe");
* gunicorn (sync workers; ``--workers``, default 2 x CPUs + 1) with DEBUG=0, SECRET_KEY,
  ALLOWED_HOSTS=127.0.0.1 and REDIS_URL=redis://127.0.0.1:6379/5, and a Celery worker on that
  broker, as docker-compose.yml runs them; the application is preloaded with its URLconf (see
  ``warm_wsgi``: cold workers are not what is measured).

Plain HTTP on loopback needs no settings override: the client plays the TLS-terminating proxy that
the deployment requires (docker-compose.yml: "it must send X-Forwarded-Proto") and sends
``X-Forwarded-Proto: https``, which the settings trust (BEHIND_TLS_PROXY, on by default). So every
production security setting stays on as deployed: SSL redirect, HSTS, Secure cookies, CSRF origin
checks. The client keeps each assessor's cookies itself (a cookie jar would not send Secure cookies
over http://, and must not mix assessors).

Each simulated assessor does what the browser does (templates/assess/judge.html, static/js/
judge.js, htmx): logs in (login page, POST, home, campaign page, "Start judging" redirect, the
judging page and its static files, once), then judges: one htmx POST per judgment with the form's
submission id and version, answered with the next document's panel. Every 40th action is "next
unjudged" instead (the ] key: a redirect and a full page).

Phases: logins (PBKDF2 is slow on purpose: reported, not part of the targets); steady: every
assessor about ``--rate`` actions a second (Poisson) for ``--duration`` seconds; then the ramp,
``--step`` seconds each at 2, 4 and 8 actions a second per assessor, and last with no pause at all
("max": each assessor waits only for the server; its throughput is the saturation figure).

Figures per phase:

* latency p50/p95/p99/max of the judging requests (judgment POSTs, next-unjudged redirects,
  judging pages), measured by the client, so on this shared machine they include the client's
  own delays; throughput; judgments a second (POSTs answered with the next document);
* errors: any unexpected status or content, timeout or connection error;
* database connections per 100 requests: PostgreSQL sessions opened on pj_load during the phase
  (delta of ``pg_stat_database.sessions``; the benchmark's monitor connects once, before) x 100 /
  requests. Persistent connections (CONN_MAX_AGE) should make it 0 once each gunicorn worker has
  served its first request; "peak backends" is the most connections open at once
  (``pg_stat_activity``, sampled every second);
* CPU milliseconds per request spent by the client, gunicorn (master and workers) and the
  PostgreSQL backends (/proc), and how busy the whole machine was (the part that is none of these
  is other users of the machine: noise).

Afterwards every submission id sent is looked up in the database: lost = acknowledged (answered
with the next document) but not stored; wrong label = stored with another label than sent. Also:
the judging page's weight (HTML plus its scripts, stylesheet and icon, raw and as sent with gzip;
fetched through gunicorn/WhiteNoise like a browser, and cross-checked against STATIC_ROOT) and the
SQL queries of one judgment and of one judging page (Django's test client on the probe account,
in a separate process after the run).

Exit status 1 when a judgment was lost or a request failed; latency and throughput targets missed
on a noisy machine only show as "MISSED". The database is kept for inspection (the next run drops
it); gunicorn and the Celery worker are always stopped, by process group, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import http.cookiejar
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "pooljudge" / "demo"
POSTGRES = "postgres://postgres@127.0.0.1:5432"
DB_NAME = "pj_load"
DB_URL = f"{POSTGRES}/{DB_NAME}"
REDIS_URL = "redis://127.0.0.1:6379/5"
CELERY_QUEUE = "pooljudge"  # settings.CELERY_TASK_DEFAULT_QUEUE
HOST = "127.0.0.1"
SLUG = "load"
USER_PREFIX = "load"
PROBE_USER = "probe"
PASSWORD = "load-bench-password-4711"  # noqa: S105 (throwaway accounts in a throwaway database)

RAMP_RATES = (2.0, 4.0, 8.0)  # actions a second per assessor, before the unpaced step
NAVIGATE_EVERY = 40  # every n-th action is "next unjudged" (] key) instead of a judgment
# Sizes the assignments for the unpaced step: far above what a small machine serves, so that
# nobody runs out of documents however fast the server turns out to be.
SATURATION_CEILING = 1000
TIMEOUT = 30.0
# The judging requests whose latency the targets are about (logins and static files are not).
JUDGING_KINDS = ("judge", "next", "page")

TARGET_P95_MS = 50.0
TARGET_P99_MS = 150.0
TARGET_SATURATION = 250.0
TARGET_PAGE_KB = 60.0

HIDDEN = re.compile(r'name="(csrfmiddlewaretoken|submission|version|served)" value="([^"]*)"')
LABEL_VALUES = re.compile(r'name="label" value="(-?\d+)"')
# The judging form's address (judge.js posts it with fetch; older templates had hx-post).
ACTION = re.compile(r'<form method="post" action="([^"]+)"\s+class="judge-form"|hx-post="([^"]+)"')
HX_CSRF = re.compile(r"hx-headers='\{\"x-csrftoken\": \"([^\"]+)\"\}'")
START_LINK = re.compile(r'href="(/c/' + SLUG + r'/judge/[^/"]+/)"')
ASSET = re.compile(r'<(?:script|link)\b[^>]*?\b(?:src|href)="(/static/[^"]+)"')
PANEL = 'data-item="'
FINISHED = 'class="done-panel"'
DOCUMENT_TEXT = re.compile(
    r'<div class="doc-body" hx-disable>.*?</div>\s*<p class="doc-id|<template id="upcoming">.*?'
    r"</template>",
    re.S,
)
TICK = os.sysconf("SC_CLK_TCK")


# --- The simulated assessors ------------------------------------------------------------------


@dataclass
class Sample:
    phase: str
    kind: str
    seconds: float
    ok: bool


@dataclass
class Recorder:
    phase: str = "logins"
    samples: list[Sample] = field(default_factory=list)
    # submission id -> [label sent, acknowledged with the next document]
    submissions: dict[str, list[Any]] = field(default_factory=dict)
    # "kind: status or exception" -> count, to say what went wrong
    failures: Counter[str] = field(default_factory=Counter)


class Assessor:
    """One browser: its own cookies, the page on screen, and the judging form's fields."""

    def __init__(self, client: httpx.AsyncClient, origin: str, name: str, rec: Recorder):
        self.client = client
        self.origin = origin
        self.name = name
        self.rec = rec
        self.cookies: dict[str, str] = {}
        self.start = ""  # the assignment's "Start judging" URL (also what ] goes to)
        self.page = ""  # path in the address bar (htmx pushes each new document's URL)
        self.action = ""
        self.csrf = ""  # <body hx-headers> token, sent by htmx as X-CSRFToken
        self.fields: dict[str, str] = {}
        self.labels: list[int] = []
        self.shown = 0.0
        self.actions = 0
        self.exhausted = False
        self.assets: list[str] = []

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"X-Forwarded-Proto": "https"}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        return {**headers, **(extra or {})}

    def _keep_cookies(self, response: httpx.Response) -> None:
        for header in response.headers.get_list("set-cookie"):
            name, _, rest = header.partition("=")
            value = rest.split(";", 1)[0]
            if value and "max-age=0" not in header.lower():
                self.cookies[name.strip()] = value
            else:
                self.cookies.pop(name.strip(), None)

    async def send(
        self,
        kind: str,
        method: str,
        path: str,
        *,
        expect: Sequence[int] = (200,),
        data: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        check: Callable[[httpx.Response], bool] | None = None,
    ) -> httpx.Response | None:
        """One request, recorded under the phase it started in; None when it failed."""
        phase = self.rec.phase
        started = time.perf_counter()
        try:
            response = await self.client.request(
                method, path, data=data, headers=self._headers(headers)
            )
        except httpx.HTTPError as exc:
            self.rec.samples.append(Sample(phase, kind, time.perf_counter() - started, False))
            self.rec.failures[f"{kind}: {type(exc).__name__}"] += 1
            return None
        elapsed = time.perf_counter() - started
        self._keep_cookies(response)
        ok = response.status_code in expect and (check is None or check(response))
        self.rec.samples.append(Sample(phase, kind, elapsed, ok))
        if not ok:
            self.rec.failures[f"{kind}: HTTP {response.status_code}"] += 1
            return None
        return response

    def _read_page(self, html: str, path: str) -> None:
        self.page = path
        found = HX_CSRF.search(html)
        self.csrf = found.group(1) if found else self.csrf
        self._read_panel(html)

    def _read_panel(self, html: str) -> None:
        self.fields = dict(HIDDEN.findall(html))
        found = ACTION.search(html)
        self.action = (found.group(1) or found.group(2)) if found else ""
        self.labels = [int(value) for value in LABEL_VALUES.findall(html)]
        self.shown = time.perf_counter()

    async def login(self) -> bool:
        page = await self.send("login", "GET", "/accounts/login/")
        if page is None:
            return False
        token = dict(HIDDEN.findall(page.text)).get("csrfmiddlewaretoken", "")
        posted = await self.send(
            "login",
            "POST",
            "/accounts/login/",
            expect=(302,),
            data={
                "csrfmiddlewaretoken": token,
                "username": self.name,
                "password": PASSWORD,
                "next": "",
            },
            headers={"Origin": self.origin, "Referer": f"{self.origin}/accounts/login/"},
        )
        if posted is None or await self.send("login", "GET", "/") is None:
            return False
        home = await self.send("login", "GET", f"/c/{SLUG}/judge/")
        found = START_LINK.search(home.text) if home else None
        if found is None:
            return False
        self.start = found.group(1)
        if not await self.navigate(kind="login"):
            return False
        # A browser fetches the page's scripts, stylesheet and icon once (they are cached for a
        # year under hashed names), so they belong to the login, not to each judgment.
        page_html = await self.send("login", "GET", self.page)
        self.assets = sorted(set(ASSET.findall(page_html.text))) if page_html else []
        for asset in self.assets:
            await self.send("static", "GET", asset)
        return True

    async def navigate(self, *, kind: str = "next") -> bool:
        """ "Next unjudged": the assignment's start URL redirects to the first open document."""
        referer = {"Referer": f"{self.origin}{self.page or '/'}"}
        response = await self.send(kind, "GET", self.start, expect=(200, 302), headers=referer)
        if response is None:
            return False
        if response.status_code == 200:  # the "all judged" page
            self.exhausted = True
            return True
        target = urlsplit(response.headers["location"])
        path = target.path + (f"?{target.query}" if target.query else "")
        page = await self.send(
            "page" if kind == "next" else kind,
            "GET",
            path,
            headers=referer,
            check=lambda r: PANEL in r.text,
        )
        if page is None:
            return False
        self._read_page(page.text, path)
        return True

    async def judge(self) -> None:
        """Press a label key: htmx posts the form and swaps in the next document's panel."""
        label = random.choice(self.labels)
        submission = self.fields.get("submission", "")
        current = f"{self.origin}{self.page}"
        data = {
            **self.fields,
            # judge.js stamps the time the tab was visible and focused on this document
            "active_ms": str(int((time.perf_counter() - self.shown) * 1000)),
            "note": "",
            "label": str(label),
        }
        self.rec.submissions[submission] = [label, False]
        response = await self.send(
            "judge",
            "POST",
            self.action,
            data=data,
            headers={
                "HX-Request": "true",
                "HX-Current-URL": current,
                "HX-Target": "judge",
                "HX-Trigger": "judge-form",
                "X-CSRFToken": self.csrf,
                "Origin": self.origin,
                "Referer": current,
            },
            check=lambda r: PANEL in r.text or FINISHED in r.text,
        )
        if response is None:
            # judge.js reloads the page after a failed save; here: start again from "next
            # unjudged", and do not hammer a failing server in a tight loop.
            if not await self.navigate():
                await asyncio.sleep(1.0)
            return
        self.rec.submissions[submission][1] = True
        if PANEL not in response.text:
            self.exhausted = True
            return
        self._read_panel(response.text)
        self.page = response.headers.get("HX-Push-Url", self.page)

    async def act(self) -> None:
        self.actions += 1
        if self.actions % NAVIGATE_EVERY == 0:
            await self.navigate()
        else:
            await self.judge()


async def run_phase(
    assessors: Sequence[Assessor], rec: Recorder, name: str, rate: float | None, seconds: float
) -> None:
    """Every assessor acts about ``rate`` times a second (None: as fast as answered) until the
    phase ends; requests still in flight at the end finish (and count) in this phase."""
    rec.phase = name
    deadline = time.perf_counter() + seconds

    async def loop(assessor: Assessor) -> None:
        due = time.perf_counter() + (random.expovariate(rate) if rate else 0.0)
        while not assessor.exhausted:
            if rate:
                if due >= deadline:
                    return
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
            elif time.perf_counter() >= deadline:
                return
            await assessor.act()
            if rate:
                # Poisson arrivals; after a slow answer no burst of missed actions (a person
                # waits for the screen, then goes on reading).
                due = max(due + random.expovariate(rate), time.perf_counter())

    await asyncio.gather(*(loop(assessor) for assessor in assessors))


# --- Resource monitoring ------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def process_tree(root: int) -> list[int]:
    """``root`` and its children (gunicorn's master and workers)."""
    pids = [root]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == root:
                pids.append(int(entry.name))
    return pids


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


@dataclass
class Snapshot:
    at: float
    sessions: int
    client: float
    web: dict[int, float]
    db: dict[int, float]
    machine: tuple[int, int]


class Monitor:
    """One PostgreSQL connection, opened before the clients start, for the counters and a
    once-a-second sample of the backends."""

    def __init__(self, conn: psycopg.AsyncConnection, gunicorn_pid: int):
        self.conn = conn
        self.gunicorn_pid = gunicorn_pid
        self.peak: Counter[str] = Counter()

    async def _backends(self) -> list[int]:
        cursor = await self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [DB_NAME],
        )
        return [row[0] for row in await cursor.fetchall()]

    async def snapshot(self) -> Snapshot:
        # Statistics are cached per transaction; read fresh ones.
        await self.conn.execute("SELECT pg_stat_clear_snapshot()")
        cursor = await self.conn.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = %s", [DB_NAME]
        )
        sessions = (await cursor.fetchone())[0]
        times = os.times()
        web = {pid: cpu_seconds(pid) for pid in process_tree(self.gunicorn_pid)}
        db = {pid: cpu_seconds(pid) for pid in await self._backends()}
        return Snapshot(
            at=time.perf_counter(),
            sessions=sessions,
            client=times.user + times.system,
            web={pid: s for pid, s in web.items() if s is not None},
            db={pid: s for pid, s in db.items() if s is not None},
            machine=machine_jiffies(),
        )

    async def sample(self, rec: Recorder) -> None:
        while True:
            self.peak[rec.phase] = max(self.peak[rec.phase], len(await self._backends()))
            await asyncio.sleep(1.0)


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


# --- Figures ------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, in milliseconds."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] * 1000


@dataclass
class PhaseResult:
    name: str
    offered: float | None  # actions a second offered by all assessors (None: unpaced)
    samples: list[Sample]
    start: Snapshot
    end: Snapshot
    peak_backends: int

    @property
    def wall(self) -> float:
        return self.end.at - self.start.at

    @property
    def judging(self) -> list[Sample]:
        return [s for s in self.samples if s.kind in JUDGING_KINDS]

    def latency(self, q: float, kind: str | None = None) -> float:
        chosen = self.judging if kind is None else [s for s in self.samples if s.kind == kind]
        return percentile([s.seconds for s in chosen], q)

    @property
    def judgments_per_second(self) -> float:
        return sum(1 for s in self.samples if s.kind == "judge" and s.ok) / self.wall

    @property
    def errors(self) -> int:
        return sum(1 for s in self.samples if not s.ok)

    @property
    def connections_per_100(self) -> float:
        return 100 * (self.end.sessions - self.start.sessions) / max(1, len(self.samples))

    def cpu_ms_per_request(self) -> tuple[float, float, float]:
        n = max(1, len(self.samples))
        return (
            1000 * (self.end.client - self.start.client) / n,
            1000 * cpu_delta(self.start.web, self.end.web) / n,
            1000 * cpu_delta(self.start.db, self.end.db) / n,
        )

    def machine_busy(self) -> tuple[float, float]:
        """(busy share of all CPUs, share used by client + gunicorn + PostgreSQL), in %."""
        busy = self.end.machine[0] - self.start.machine[0]
        total = max(1, self.end.machine[1] - self.start.machine[1])
        ours = (
            (self.end.client - self.start.client)
            + cpu_delta(self.start.web, self.end.web)
            + cpu_delta(self.start.db, self.end.db)
        ) * TICK
        return 100 * busy / total, 100 * ours / total


# --- Page weight --------------------------------------------------------------------------------


async def page_weight(assessor: Assessor, static_root: Path) -> dict[str, Any]:
    """The judging page as a browser loads it: the HTML (with its document and the prefetched
    next one) and each script, stylesheet and icon it links, fetched raw and with gzip."""
    client = assessor.client
    page = await client.get(assessor.page, headers=assessor._headers())
    if page.status_code != 200 or PANEL not in page.text:
        raise RuntimeError(f"judging page answered {page.status_code}")
    html = page.content
    documents = sum(len(m.group(0).encode()) for m in DOCUMENT_TEXT.finditer(page.text))
    assets = []
    for path in sorted(set(ASSET.findall(page.text))):
        raw = await client.get(path, headers=assessor._headers({"Accept-Encoding": "identity"}))
        async with client.stream(
            "GET", path, headers=assessor._headers({"Accept-Encoding": "gzip"})
        ) as zipped:
            await zipped.aread()
            wire = zipped.num_bytes_downloaded  # bytes on the wire, before httpx decodes
            encoding = zipped.headers.get("content-encoding", "identity")
        if raw.status_code != 200 or zipped.status_code != 200:
            raise RuntimeError(f"{path} answered {raw.status_code}/{zipped.status_code}")
        on_disk = static_root / path.removeprefix("/static/")
        if on_disk.stat().st_size != len(raw.content):
            raise RuntimeError(f"{path}: served {len(raw.content)} bytes, {on_disk} differs")
        assets.append({"path": path, "raw": len(raw.content), "sent": wire, "encoding": encoding})
    return {
        "html": len(html),
        "html_gzip": len(gzip.compress(html, 6)),
        "documents": documents,
        "assets": assets,
    }


# --- Orchestration ------------------------------------------------------------------------------


async def drive(
    args: argparse.Namespace, port: int, gunicorn_pid: int, static_root: Path
) -> tuple[Recorder, list[PhaseResult], dict[str, Any], int]:
    """Log every assessor in, run the phases, weigh the judging page; returns the recorder,
    the phases, the page weight and how many assessors ran out of documents."""
    origin = f"https://{HOST}:{port}"  # what the browser's address bar shows behind the proxy
    rec = Recorder()
    # A jar that accepts nothing: each Assessor sends its own Cookie header.
    jar = http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
    limits = httpx.Limits(max_connections=args.assessors + 8)
    async with (
        httpx.AsyncClient(
            base_url=f"http://{HOST}:{port}",
            limits=limits,
            timeout=TIMEOUT,
            cookies=jar,
            trust_env=False,  # never through an HTTP proxy from the environment
        ) as client,
        await psycopg.AsyncConnection.connect(DB_URL, autocommit=True) as conn,
    ):
        monitor = Monitor(conn, gunicorn_pid)
        assessors = [
            Assessor(client, origin, f"{USER_PREFIX}{i:03d}", rec) for i in range(args.assessors)
        ]
        sampler = asyncio.create_task(monitor.sample(rec))
        results: list[PhaseResult] = []
        try:
            print(f"logging in {len(assessors)} assessors …", flush=True)
            gate = asyncio.Semaphore(args.workers)  # PBKDF2: a few logins at a time

            async def login(assessor: Assessor) -> bool:
                async with gate:
                    return await assessor.login()

            start = await monitor.snapshot()
            logged_in = await asyncio.gather(*(login(a) for a in assessors))
            end = await monitor.snapshot()
            results.append(
                PhaseResult("logins", None, list(rec.samples), start, end, monitor.peak["logins"])
            )
            if not all(logged_in):
                raise RuntimeError(f"{logged_in.count(False)} logins failed: {dict(rec.failures)}")
            phases: list[tuple[str, float | None, float]] = [
                (f"steady {args.rate:g}/s", args.rate, args.duration)
            ]
            phases += [(f"ramp {r:g}/s", r, args.step) for r in RAMP_RATES]
            phases.append(("ramp max", None, args.step))
            for name, rate, seconds in phases:
                print(f"{name}: {seconds:.0f} s …", flush=True)
                first = len(rec.samples)
                start = await monitor.snapshot()
                await run_phase(assessors, rec, name, rate, seconds)
                end = await monitor.snapshot()
                offered = rate * len(assessors) if rate else None
                results.append(
                    PhaseResult(name, offered, rec.samples[first:], start, end, monitor.peak[name])
                )
            weight = await page_weight(assessors[0], static_root)
        finally:
            sampler.cancel()
    exhausted = sum(a.exhausted for a in assessors)
    return rec, results, weight, exhausted


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def recreate_database() -> None:
    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as conn:
        name = sql.Identifier(DB_NAME)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))


def run_python(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout


def internal(env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run a step of this script that needs Django in its own process (so this one holds no
    database connection of its own, and keeps its environment); it prints JSON last."""
    try:
        out = run_python(env, str(Path(__file__).resolve()), "--internal", *args)
    except subprocess.CalledProcessError as exc:
        sys.stderr.write(exc.stdout + exc.stderr)
        raise
    return json.loads(out.strip().splitlines()[-1])


def start_process(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        # Own session (process group): killed as a group, and Ctrl-C in the terminal reaches
        # only this script, which then stops them in order.
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_process(process: subprocess.Popen) -> None:
    """SIGTERM to the process group (gunicorn's or Celery's master and its workers), SIGKILL to
    whatever is left after 20 s; also when the master itself already died."""
    deadline = time.monotonic() + 20
    with contextlib.suppress(ProcessLookupError):  # raised once the group is empty
        os.killpg(process.pid, signal.SIGTERM)
        while time.monotonic() < deadline:
            process.poll()  # reap the master, or the group never empties
            os.killpg(process.pid, 0)
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def wait_healthy(port: int, server: subprocess.Popen, log: Path) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn exited ({server.returncode}):\n{log.read_text()}")
        try:
            response = httpx.get(f"http://{HOST}:{port}/healthz", timeout=2, trust_env=False)
            if response.status_code == 200:
                return response.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"gunicorn did not answer /healthz within 60 s:\n{log.read_text()}")


def redis_queue_length() -> int:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        return int(client.llen(CELERY_QUEUE))
    finally:
        client.close()


def items_needed(args: argparse.Namespace) -> int:
    """Documents per assessor for the whole run, with room to spare."""
    steady = args.rate * args.duration
    ramp = sum(RAMP_RATES) * args.step + SATURATION_CEILING * args.step / args.assessors
    return math.ceil(1.2 * (steady + ramp)) + 10


# --- Report -------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def kb(n: float) -> str:
    return f"{n / 1000:.1f} KB"


def report(
    args: argparse.Namespace,
    setup: dict[str, Any],
    results: list[PhaseResult],
    rec: Recorder,
    weight: dict[str, Any],
    analysis: dict[str, Any],
    extra: dict[str, Any],
) -> bool:
    print()
    print(f"command: {extra['command']}")
    print(
        f"stack: gunicorn {args.workers} sync workers + Celery worker, PostgreSQL "
        f"{extra['pg_version']}, Redis broker {REDIS_URL}; DEBUG=0, behind a simulated TLS proxy; "
        f"{os.cpu_count()} CPUs shared by client, server, database and other users of the machine"
    )
    print(
        f"campaign: {args.assessors} assessors, one topic and {setup['items']} documents each "
        f"(of {setup['documents']} demo documents); every {NAVIGATE_EVERY}th action is "
        "'next unjudged' (redirect + full page), the rest are judgments (one htmx POST each)"
    )
    print()
    head = (
        f"{'phase':<14}{'offered/s':>10}{'requests':>10}{'req/s':>8}{'judg/s':>8}"
        f"{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'max ms':>8}{'errors':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        judging = r.judging if r.name != "logins" else r.samples
        maximum = max((s.seconds for s in judging), default=math.nan) * 1000
        p = (
            (r.latency(50), r.latency(95), r.latency(99))
            if r.name != "logins"
            else tuple(r.latency(q, "login") for q in (50, 95, 99))
        )
        offered = f"{r.offered:.0f}" if r.offered else ("max" if r.name != "logins" else "")
        print(
            f"{r.name:<14}{offered:>10}{len(r.samples):>10}{len(r.samples) / r.wall:>8.1f}"
            f"{r.judgments_per_second:>8.1f}{p[0]:>8.1f}{p[1]:>8.1f}{p[2]:>8.1f}"
            f"{maximum:>8.0f}{r.errors:>8}"
        )
    print("(latency: judging requests; for logins: every request of the login sequence)")
    print()
    head = (
        f"{'phase':<14}{'wall s':>8}{'db conns/100 req':>18}{'peak backends':>15}"
        f"{'CPU ms/req client':>19}{'gunicorn':>10}{'postgres':>10}{'machine busy %':>16}"
        f"{'ours %':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        client, web, db = r.cpu_ms_per_request()
        busy, ours = r.machine_busy()
        print(
            f"{r.name:<14}{r.wall:>8.1f}{r.connections_per_100:>18.2f}{r.peak_backends:>15}"
            f"{client:>19.2f}{web:>10.2f}{db:>10.2f}{busy:>16.0f}{ours:>8.0f}"
        )
    print(
        "(db conns = PostgreSQL sessions opened; machine busy = all CPUs, ours = client + "
        "gunicorn + PostgreSQL backends; the rest is other users of the machine)"
    )

    steady = results[1]
    print()
    print("steady phase by request kind (ms):")
    for kind in JUDGING_KINDS:
        chosen = [s.seconds for s in steady.samples if s.kind == kind]
        if chosen:
            print(
                f"  {kind:<6} n={len(chosen):<7} p50 {percentile(chosen, 50):6.1f}  "
                f"p95 {percentile(chosen, 95):6.1f}  p99 {percentile(chosen, 99):6.1f}"
            )
    if rec.failures:
        print("failures: " + ", ".join(f"{k} x{v}" for k, v in rec.failures.most_common()))

    a = analysis
    print()
    print(
        f"judgments: submitted {a['submitted']}, acknowledged {a['acknowledged']}, stored "
        f"{a['stored']} ({a['stored_acknowledged']} of the acknowledged, "
        f"{a['stored_unacknowledged']} of the failed), lost {a['lost']}, wrong label "
        f"{a['wrong_label']}, stored but never sent {a['unknown']}; Judgment rows "
        f"{a['judgment_rows']}; assessors who ran out of documents: {extra['exhausted']}"
    )
    print(
        f"Celery tasks enqueued during the run: {extra['tasks_enqueued']} (the judging path "
        "enqueues none)"
    )

    assets_raw = sum(x["raw"] for x in weight["assets"])
    assets_sent = sum(x["sent"] for x in weight["assets"])
    total_raw = weight["html"] + assets_raw
    total_sent = weight["html"] + assets_sent
    total_gzip = weight["html_gzip"] + assets_sent
    print()
    print("judging page weight (first visit; later pages are one htmx panel each):")
    print(
        f"  HTML {kb(weight['html'])} raw, {kb(weight['html_gzip'])} gzip (Django sends it "
        f"uncompressed unless the proxy compresses); of which document text (on screen + "
        f"prefetched next) {kb(weight['documents'])}"
    )
    for x in weight["assets"]:
        print(f"  {x['path']:<48} {kb(x['raw']):>9} raw {kb(x['sent']):>9} sent ({x['encoding']})")
    print(
        f"  total {kb(total_raw)} raw, {kb(total_sent)} as sent (HTML raw + assets gzip), "
        f"{kb(total_gzip)} all gzip"
    )

    q = a["queries"]
    print()
    print(
        "SQL queries (probe account, Django test client, after the run): one judgment (submit "
        f"+ next panel) {q['judge']['total']} taking {q['judge']['db_ms']:.1f} ms "
        f"{q['judge']['by_kind']}; one judging page {q['page']['total']} taking "
        f"{q['page']['db_ms']:.1f} ms {q['page']['by_kind']}"
    )
    if args.show_queries:
        for which in ("judge", "page"):
            print(f"  {which}:")
            for statement in q[which]["sql"]:
                print(f"    {statement}")

    top = results[-1]
    per_request = sum(top.cpu_ms_per_request())
    cpus = os.cpu_count() or 1
    print(
        f"capacity: at saturation a request cost {per_request:.1f} CPU ms (client + gunicorn + "
        f"PostgreSQL), so {cpus} idle CPUs would serve at most about "
        f"{cpus * 1000 / per_request:.0f} requests/s; "
        f"{100 - top.machine_busy()[1]:.0f}% of the machine went to others during that step"
    )

    saturation = max(r.judgments_per_second for r in results[1:])
    errors = sum(r.errors for r in results)
    targets = [
        (f"p95 at {args.assessors} assessors <= {TARGET_P95_MS:.0f} ms", steady.latency(95),
         steady.latency(95) <= TARGET_P95_MS, "ms"),
        (f"p99 at {args.assessors} assessors <= {TARGET_P99_MS:.0f} ms", steady.latency(99),
         steady.latency(99) <= TARGET_P99_MS, "ms"),
        (f"judgments/s at saturation >= {TARGET_SATURATION:.0f}", saturation,
         saturation >= TARGET_SATURATION, "/s"),
        ("errors == 0", errors, errors == 0, ""),
        ("lost judgments == 0", a["lost"], a["lost"] == 0 and a["wrong_label"] == 0, ""),
        (f"judging page < {TARGET_PAGE_KB:.0f} KB as sent (gzip)", total_sent / 1000,
         total_sent / 1000 < TARGET_PAGE_KB, "KB"),
        (f"judging page < {TARGET_PAGE_KB:.0f} KB raw", total_raw / 1000,
         total_raw / 1000 < TARGET_PAGE_KB, "KB"),
    ]  # fmt: skip
    print()
    print("targets:")
    for name, value, ok, unit in targets:
        shown = f"{value:.1f}" if isinstance(value, float) else str(value)
        print(f"  {name:<44} {shown:>8} {unit:<3} {verdict(ok)}")
    return errors == 0 and a["lost"] == 0 and a["wrong_label"] == 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--assessors", type=int, default=60, help="simulated assessors (60)")
    parser.add_argument("--duration", type=float, help="steady phase, seconds (300; --quick: 30)")
    parser.add_argument("--rate", type=float, default=1.0, help="actions/s per assessor, steady")
    parser.add_argument("--step", type=float, help="seconds per ramp step (30; --quick: 8)")
    parser.add_argument(
        "--workers",
        type=int,
        default=2 * (os.cpu_count() or 1) + 1,
        help="gunicorn sync workers (2 x CPUs + 1)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: shorter phases")
    parser.add_argument("--show-queries", action="store_true", help="print the probe's SQL")
    parser.add_argument("--internal", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.internal:
        return run_internal(args.internal)
    if args.duration is None:
        args.duration = 30.0 if args.quick else 300.0
    if args.step is None:
        args.step = 8.0 if args.quick else 30.0
    command = " ".join([".venv/bin/python", "bench/load.py", *sys.argv[1:]])

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # whatever the signal: run the finally block that stops servers

    # SIGINT set explicitly as well: a shell that starts this in the background makes it ignore
    # SIGINT, and Python then never raises KeyboardInterrupt.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupted)
    work = Path(tempfile.mkdtemp(prefix="pj-load-"))
    processes: list[subprocess.Popen] = []
    logs = {"gunicorn": work / "gunicorn.log", "celery": work / "celery.log"}
    try:
        env = {
            **os.environ,
            "DATABASE_URL": DB_URL,
            "DEBUG": "0",
            "SECRET_KEY": "load-bench-" + "k" * 50,
            "ALLOWED_HOSTS": HOST,
            "POOLJUDGE_DATA_DIR": str(work),  # STATIC_ROOT is DATA_DIR/staticfiles
            "DJANGO_SETTINGS_MODULE": "pooljudge.settings",
            "LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT),
        }
        for name in ("REDIS_URL", "CELERY_BROKER_URL", "CONN_MAX_AGE", "CELERY_QUEUE"):
            env.pop(name, None)
        print(f"fresh database {DB_NAME}, migrate, collectstatic …", flush=True)
        recreate_database()
        run_python(env, "manage.py", "migrate", "--noinput")
        run_python(env, "manage.py", "collectstatic", "--noinput")
        needed = items_needed(args)
        print(f"campaign: {args.assessors} assessors x {needed} documents …", flush=True)
        # No broker yet: the pool job runs in the setup process (Celery's eager mode).
        setup = internal(env, "setup", str(args.assessors), str(needed))
        if setup["items"] < needed:
            print(
                f"note: only {setup['items']} documents per assessor (the collection's size); "
                "fast assessors may run out during the ramp (counted below)"
            )
        server_env = {**env, "REDIS_URL": REDIS_URL}
        queued_before = redis_queue_length()
        port = free_port()
        processes.append(
            start_process(
                [
                    sys.executable, "-m", "gunicorn", "--preload",
                    "--pythonpath", str(Path(__file__).resolve().parent), "load:warm_wsgi()",
                    "--bind", f"{HOST}:{port}", "--workers", str(args.workers),
                    "--log-level", "warning",
                ],
                server_env,
                logs["gunicorn"],
            )
        )  # fmt: skip
        processes.append(
            start_process(
                [
                    sys.executable, "-m", "celery", "-A", "pooljudge", "worker",
                    "-Q", CELERY_QUEUE, "--concurrency", "1", "-l", "WARNING",
                    "-n", f"load-bench-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
                ],
                server_env,
                logs["celery"],
            )
        )  # fmt: skip
        health = wait_healthy(port, processes[0], logs["gunicorn"])
        print(f"gunicorn on {HOST}:{port}, {args.workers} workers; healthz {health}", flush=True)
        rec, results, weight, exhausted = asyncio.run(
            drive(args, port, processes[0].pid, work / "staticfiles")
        )
        tasks_enqueued = redis_queue_length() - queued_before
        for process in processes:
            stop_process(process)
        submissions = work / "submissions.json"
        submissions.write_text(json.dumps(rec.submissions))
        analysis = internal(env, "analyse", str(submissions))
        with psycopg.connect(DB_URL) as conn:
            pg_version = conn.execute("SHOW server_version").fetchone()[0]
        ok = report(
            args,
            setup,
            results,
            rec,
            weight,
            analysis,
            {
                "command": command,
                "pg_version": pg_version,
                "exhausted": exhausted,
                "tasks_enqueued": tasks_enqueued,
            },
        )
        if not ok:
            for name, log in logs.items():
                tail = log.read_text(errors="replace").splitlines()[-30:]
                if tail:
                    print(f"\nlast lines of the {name} log:\n" + "\n".join(tail))
        return 0 if ok else 1
    except KeyboardInterrupt:
        print("\ninterrupted; stopping the servers", file=sys.stderr)
        return 130
    finally:
        for process in processes:
            stop_process(process)
        shutil.rmtree(work, ignore_errors=True)


def warm_wsgi() -> Callable[..., Any]:
    """gunicorn's application (``--preload``): pooljudge.wsgi's, with the URLconf loaded in the
    master before the workers fork.

    Django imports the URLconf on a worker's first request, and with it everything the views
    import (qrels' statistics: statsmodels, pandas, scipy). On two shared CPUs five workers doing
    that at once took longer than gunicorn's 30 s timeout, so they were killed and restarted in a
    loop. Loaded once here, every worker starts warm and the benchmark measures the steady state.
    """
    from django.db import connections
    from django.urls import get_resolver

    from pooljudge.wsgi import application

    get_resolver().url_patterns  # noqa: B018 (evaluated for its side effect: the imports)
    connections.close_all()  # nothing the workers would inherit
    return application


# --- Steps that run inside Django (``--internal``, in a child process) --------------------------


def run_internal(argv: list[str]) -> int:
    import django

    sys.path.insert(0, str(ROOT))
    django.setup()
    step, *rest = argv
    if step == "setup":
        result = setup_campaign(int(rest[0]), int(rest[1]))
    elif step == "analyse":
        result = analyse(Path(rest[0]))
    else:
        raise SystemExit(f"unknown internal step {step!r}")
    print(json.dumps(result))
    return 0


def setup_campaign(assessors: int, items: int) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.db import connection, transaction

    from assess.assignments import assign
    from campaigns.imports import import_documents, import_topics
    from campaigns.members import add_member
    from campaigns.models import Campaign, LabelSpec, Membership, Topic
    from pooling.imports import import_runs
    from pooling.models import Pool
    from pooling.pools import create_pool

    rubric = json.loads((DEMO / "rubric.json").read_text())
    campaign = Campaign.objects.create(
        slug=SLUG,
        title="Load benchmark",
        description=rubric["description"],
        guidelines=rubric["guidelines"],
        relevance_threshold=rubric["threshold"],
    )
    # The demo's rubric and documents: the judging page carries realistic labels and texts.
    campaign.save_rubric(
        [
            LabelSpec(x["value"], x["name"], x["description"], x["example"], x["key"])
            for x in rubric["labels"]
        ],
        note="demo rubric",
        threshold=rubric["threshold"],
    )
    import_documents(
        campaign=campaign, source=str(DEMO / "documents.jsonl.gz"), name="documents.jsonl.gz"
    )
    import_topics(campaign=campaign, source=str(DEMO / "topics.xml"), name="topics.xml")
    texts = list(campaign.topics.order_by("position"))
    accounts = [f"{USER_PREFIX}{i:03d}" for i in range(assessors)] + [PROBE_USER]
    # One topic per account (texts borrowed from the demo topics): a topic has one primary
    # assessor. The demo topics themselves get no run, so they stay out of the pool.
    topics = Topic.objects.bulk_create(
        Topic(
            campaign=campaign,
            topic_id=f"L{i:03d}",
            title=texts[i % len(texts)].title,
            description=texts[i % len(texts)].description,
            narrative=texts[i % len(texts)].narrative,
            position=len(texts) + 1 + i,
        )
        for i in range(len(accounts))
    )
    doc_ids = list(campaign.documents.values_list("doc_id", flat=True))
    items = min(items, len(doc_ids))
    rng = random.Random(9)
    run_file = Path(tempfile.mkdtemp(prefix="pj-load-run-")) / "load.run"
    with run_file.open("w") as out:
        for topic in topics:
            for rank, doc in enumerate(rng.sample(doc_ids, items), 1):
                out.write(f"{topic.topic_id} Q0 {doc} {rank} {items - rank + 1} load\n")
    import_runs(campaign=campaign, sources=[("load.run", str(run_file))])
    shutil.rmtree(run_file.parent)
    with transaction.atomic():
        pool = create_pool(
            campaign=campaign,
            strategy=Pool.Strategy.DEPTH,
            params={"depth": items},
            note="load benchmark",
        )
    pool.refresh_from_db()  # the job ran on commit (no broker: eager)
    if pool.status != Pool.Status.BUILT:
        raise SystemExit(f"the pool did not build: {pool.status}")
    User = get_user_model()
    # One PBKDF2 hash for every account: hashing 60 passwords one by one takes half a minute.
    hashed = make_password(PASSWORD)
    users = User.objects.bulk_create(User(username=name, password=hashed) for name in accounts)
    for seed, (user, topic) in enumerate(zip(users, topics, strict=True)):
        add_member(campaign=campaign, user=user, role=Membership.Role.ASSESSOR)
        assign(campaign=campaign, pool=pool, user=user, topics=[topic], seed=seed)
    # Fresh statistics, as autovacuum would gather after a bulk load. (The shared development
    # server runs with autovacuum off: without statistics the planner sorts every open item of
    # the assignment for each next-document query, about 4 ms instead of 0.2 ms.)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return {"documents": len(doc_ids), "items": items, "pool": pool.size}


def analyse(submissions: Path) -> dict[str, Any]:
    """Stored judgments against the ones submitted, then the SQL of one judgment and of one
    judging page on the probe account."""
    from campaigns.models import Judgment, JudgmentRevision

    sent: dict[str, list[Any]] = json.loads(submissions.read_text())
    load = {"judgment__campaign__slug": SLUG}
    stored = {
        str(sid): label
        for sid, label in JudgmentRevision.objects.filter(**load)
        .exclude(judgment__assessor__user__username=PROBE_USER)
        .values_list("submission_id", "label")
    }
    acknowledged = {sid for sid, (_, ok) in sent.items() if ok}
    failed = set(sent) - acknowledged
    return {
        "submitted": len(sent),
        "acknowledged": len(acknowledged),
        "stored": len(stored),
        "stored_acknowledged": len(acknowledged & stored.keys()),
        "stored_unacknowledged": len(failed & stored.keys()),
        "lost": len(acknowledged - stored.keys()),
        "wrong_label": sum(
            1 for sid, label in stored.items() if sid in sent and sent[sid][0] != label
        ),
        "unknown": len(stored.keys() - sent.keys()),
        "judgment_rows": Judgment.objects.filter(campaign__slug=SLUG)
        .exclude(assessor__user__username=PROBE_USER)
        .count(),
        "queries": probe_queries(),
    }


def probe_queries() -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(headers={"Host": HOST, "X-Forwarded-Proto": "https"})
    client.force_login(get_user_model().objects.get(username=PROBE_USER))
    home = client.get(f"/c/{SLUG}/judge/")
    start = START_LINK.search(home.content.decode()).group(1)
    page_url = client.get(start)["Location"]

    def post(html: str, url: str):
        fields = dict(HIDDEN.findall(html))
        label = LABEL_VALUES.findall(html)[0]
        data = {**fields, "label": label, "active_ms": "3000", "note": ""}
        return client.post(url, data, headers={"HX-Request": "true"})

    # Warm up first (the first request of a process fills caches a worker keeps), then measure
    # a judgment and a reload of the page it leads to.
    def shown_url(answer) -> str:
        # The answer's panel names the document it shows (HX-Push-Url only on older code).
        if answer.has_header("HX-Push-Url"):
            return answer["HX-Push-Url"]
        token = re.search(r'data-item="([^"]+)"', answer.content.decode()).group(1)
        return page_url.rsplit("/", 2)[0] + f"/{token}/"

    first = client.get(page_url).content.decode()
    answer = post(first, page_url)
    url = shown_url(answer)
    with CaptureQueriesContext(connection) as judged:
        answer = post(answer.content.decode(), url)
    assert answer.status_code == 200, answer.status_code
    with CaptureQueriesContext(connection) as page:
        shown = client.get(shown_url(answer))
    assert shown.status_code == 200, shown.status_code

    def summary(captured: CaptureQueriesContext) -> dict[str, Any]:
        queries = captured.captured_queries
        kinds = Counter(q["sql"].split(None, 1)[0].upper() for q in queries)
        return {
            "total": len(queries),
            "by_kind": dict(kinds.most_common()),
            # wall time as Django measured it: round trip to PostgreSQL included
            "db_ms": 1000 * sum(float(q["time"]) for q in queries),
            "sql": [f"{1000 * float(q['time']):6.2f} ms  {q['sql'][:200]}" for q in queries],
        }

    return {"judge": summary(judged), "page": summary(page)}


if __name__ == "__main__":
    sys.exit(main())
