"""Benchmark: a depth-100 pool built and committed through the job path, against TrecTools.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        /work/venv/bin/python bench/build_pool.py [--runs 100] [--topics 50] [--length 1000]

DATABASE_URL names a PostgreSQL server the benchmark may create databases on: it creates a
throwaway database (``pj_bench_<random>``, or ``--database NAME``), migrates it, and drops it at the
end (``--keep`` keeps it). Nothing else on the server is touched.

Data: runs x topics x length TREC run files in a temporary directory. Each topic has its own
vocabulary of ``--vocabulary`` documents with Zipf-like prior weights (w_i = 1 / i); each run ranks
a weighted sample without replacement (Gumbel-top-k), so runs agree near the top and differ in the
tail, as submitted runs do (~28% of runs x k distinct at depth 100; TREC-COVID round 1: 27%).
The files are imported once with ``pooling.imports.import_runs``.

Contenders, each in a subprocess of its own so that its peak memory (``ru_maxrss``) is its own:
  (a) job        create_pool(depth=100) in a transaction; on commit the build_pool job runs
                 eagerly in the same process (Celery's embedded mode): it claims the job row,
                 reads the runs from PostgreSQL, pools, COPYs the entries, computes the
                 statistics and commits. Timed from create_pool to the commit of the job.
  (b) trectools  TrecRun(path) for every file (read), then
                 TrecPoolMaker().make_pool(runs, strategy="topX", topX=100) (pool).
  (c) floor      plain Python: read and split the files, sort each topic by (score, docid)
                 descending (read); a set union of every run's top 100 per topic (pool).
  planner        pooling.pools.plan(campaign=..., depths=(1, 5, 10, 20, 50, 100)), from the
                 database.
Peak memory is reported as the process's peak RSS and as the growth over the RSS it had after its
imports (Django and psycopg, or pandas and TrecTools), which is what the work itself cost.
Targets: (a) at most 1/10 of TrecTools' pooling time and 1/3 of its peak memory; planner < 1 s.
Prints figures only; asserts nothing. ``--profile`` prints a cProfile of the job instead.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SLUG = "bench"
DEPTH = 100
PLANNER_DEPTHS = (1, 5, 10, 20, 50, 100)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


# --- Data -----------------------------------------------------------------------------------------


def generate(directory: Path, *, runs: int, topics: int, length: int, vocabulary: int) -> None:
    import numpy as np

    rng = np.random.default_rng(2026)
    log_weights = -np.log(np.arange(1, vocabulary + 1))
    for r in range(runs):
        tag = f"run{r:03d}"
        lines = []
        for t in range(1, topics + 1):
            keys = log_weights + rng.gumbel(size=vocabulary)
            top = np.argpartition(-keys, length)[:length]
            order = top[np.argsort(-keys[top])]
            scores = keys[order].tolist()
            lines += [
                f"{t}\tQ0\tT{t:02d}-D{i:05d}\t{rank}\t{score:.6f}\t{tag}\n"
                for rank, (i, score) in enumerate(zip(order.tolist(), scores, strict=True), 1)
            ]
        (directory / f"{tag}.run").write_text("".join(lines))


# --- Database -------------------------------------------------------------------------------------


def database_url(server_url: str, name: str) -> str:
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def admin(server_url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(database_url(server_url, "postgres"), autocommit=True) as conn:
        conn.execute(statement)


def child_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    env.update(
        DATABASE_URL=url,
        DJANGO_SETTINGS_MODULE="pooljudge.settings",
        SECRET_KEY=os.environ.get("SECRET_KEY", "bench-" + "x" * 50),
        DEBUG="0",
    )
    return env


def run_child(step: str, url: str, directory: Path, *extra: str) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--step", step, "--dir", str(directory), *extra],
        env=child_env(url),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"step {step} failed:\n{result.stderr[-4000:]}")
    if step == "profile":
        print(result.stdout)
        return {}
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- Steps (each in its own process) --------------------------------------------------------------


def django_setup() -> None:
    import django

    django.setup()


def step_setup(directory: Path) -> dict:
    django_setup()
    from django.core.management import call_command

    from campaigns.models import Campaign, Topic
    from pooling.imports import import_runs

    call_command("migrate", verbosity=0)
    campaign = Campaign.objects.create(slug=SLUG, title="Benchmark")
    files = sorted(directory.glob("*.run"))
    topics = sorted({line.split("\t", 1)[0] for line in files[0].open()}, key=int)
    Topic.objects.bulk_create(
        Topic(campaign=campaign, topic_id=t, position=i) for i, t in enumerate(topics)
    )
    start = time.perf_counter()
    summary = import_runs(campaign=campaign, sources=[(p.name, p) for p in files])
    return {"seconds": time.perf_counter() - start, "lines": summary.counts["lines"]}


def step_job(directory: Path) -> dict:
    django_setup()
    from django.db import transaction

    from campaigns.models import Campaign, Job
    from pooling.models import Pool
    from pooling.pools import create_pool

    campaign = Campaign.objects.get(slug=SLUG)
    Pool.objects.filter(campaign=campaign).delete()
    base = peak_rss_mb()
    start = time.perf_counter()
    with transaction.atomic():
        pool = create_pool(campaign=campaign, strategy="depth", params={"depth": DEPTH})
    seconds = time.perf_counter() - start  # the job ran (and committed) on the commit above
    job = Job.objects.get(pk=pool.job_id)
    pool.refresh_from_db()
    if job.status != Job.Status.DONE:
        raise SystemExit(f"the job did not finish: {job.status} {job.error}")
    return {"seconds": seconds, "peak": peak_rss_mb(), "base": base, "size": pool.size}


def step_profile(directory: Path) -> dict:
    import cProfile
    import pstats

    django_setup()
    from django.db import transaction

    from campaigns.models import Campaign
    from pooling.models import Pool
    from pooling.pools import create_pool

    campaign = Campaign.objects.get(slug=SLUG)
    Pool.objects.filter(campaign=campaign).delete()
    profile = cProfile.Profile()
    profile.enable()
    with transaction.atomic():
        create_pool(campaign=campaign, strategy="depth", params={"depth": DEPTH})
    profile.disable()
    pstats.Stats(profile, stream=sys.stdout).sort_stats("cumulative").print_stats(30)
    return {}


def step_planner(directory: Path) -> dict:
    django_setup()
    from campaigns.models import Campaign
    from pooling.pools import plan

    campaign = Campaign.objects.get(slug=SLUG)
    base = peak_rss_mb()
    start = time.perf_counter()
    result = plan(campaign=campaign, depths=PLANNER_DEPTHS)
    seconds = time.perf_counter() - start
    total = next(row.total_docs for row in result["rows"] if row.depth == DEPTH)
    return {"seconds": seconds, "peak": peak_rss_mb(), "base": base, "size": total}


def step_trectools(directory: Path) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    from trectools import TrecPoolMaker, TrecRun

    base = peak_rss_mb()
    start = time.perf_counter()
    runs = [TrecRun(str(path)) for path in sorted(directory.glob("*.run"))]
    read = time.perf_counter() - start
    after_read = peak_rss_mb()
    start = time.perf_counter()
    pool = TrecPoolMaker().make_pool(runs, strategy="topX", topX=DEPTH)
    pooled = time.perf_counter() - start
    size = sum(len(docs) for docs in pool.pool.values())
    return {
        "read": read,
        "seconds": pooled,
        "base": base,
        "after_read": after_read,
        "peak": peak_rss_mb(),
        "size": size,
    }


def step_floor(directory: Path) -> dict:
    base = peak_rss_mb()
    start = time.perf_counter()
    runs: list[dict[str, list[str]]] = []
    for path in sorted(directory.glob("*.run")):
        by_topic: dict[str, list[tuple[float, str]]] = {}
        with path.open() as lines:
            for line in lines:
                topic, _q0, doc, _rank, score, _tag = line.split()
                by_topic.setdefault(topic, []).append((float(score), doc))
        runs.append(
            {t: [d for _s, d in sorted(scored, reverse=True)] for t, scored in by_topic.items()}
        )
    read = time.perf_counter() - start
    after_read = peak_rss_mb()
    start = time.perf_counter()
    pool: dict[str, set[str]] = {}
    for run in runs:
        for topic, docs in run.items():
            pool.setdefault(topic, set()).update(docs[:DEPTH])
    ordered = {topic: sorted(docs) for topic, docs in pool.items()}
    pooled = time.perf_counter() - start
    return {
        "read": read,
        "seconds": pooled,
        "base": base,
        "after_read": after_read,
        "peak": peak_rss_mb(),
        "size": sum(map(len, ordered.values())),
    }


STEPS = {
    "setup": step_setup,
    "job": step_job,
    "profile": step_profile,
    "planner": step_planner,
    "trectools": step_trectools,
    "floor": step_floor,
}


# --- Driver ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--length", type=int, default=1000)
    parser.add_argument("--vocabulary", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3, help="Best of N for each contender.")
    parser.add_argument("--database", help="Name of the database to create (and drop).")
    parser.add_argument("--keep", action="store_true", help="Keep the database afterwards.")
    parser.add_argument("--profile", action="store_true", help="Profile the job path only.")
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.step:
        print(json.dumps(STEPS[args.step](args.dir)))
        return

    server = os.environ.get("DATABASE_URL")
    if not server or not server.startswith(("postgres://", "postgresql://")):
        sys.exit("Set DATABASE_URL to a PostgreSQL server (postgres://user@host:port/any).")
    name = args.database or f"pj_bench_{secrets.token_hex(4)}"
    url = database_url(server, name)
    with tempfile.TemporaryDirectory(prefix="pj-bench-") as tmp:
        directory = Path(tmp)
        start = time.perf_counter()
        generate(
            directory,
            runs=args.runs,
            topics=args.topics,
            length=args.length,
            vocabulary=args.vocabulary,
        )
        size_mb = sum(p.stat().st_size for p in directory.iterdir()) / 2**20
        print(
            f"{args.runs} runs x {args.topics} topics x {args.length} documents "
            f"({size_mb:.0f} MB of run files) generated in {time.perf_counter() - start:.1f} s"
        )
        admin(server, f'CREATE DATABASE "{name}"')
        try:
            setup = run_child("setup", url, directory)
            print(f"database {name}: {setup['lines']:,} lines imported in {setup['seconds']:.1f} s")
            if args.profile:
                run_child("profile", url, directory)
                return
            results = {}
            for step in ("job", "trectools", "floor", "planner"):
                trials = [run_child(step, url, directory) for _ in range(args.repeat)]
                results[step] = min(trials, key=lambda r: r["seconds"])
                results[step]["peak"] = min(t["peak"] for t in trials)
            report(results, args)
        finally:
            if not args.keep:
                admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def report(results: dict, args) -> None:
    job, tt, floor, planner = (results[k] for k in ("job", "trectools", "floor", "planner"))
    print(
        f"depth-{DEPTH} pool size: job {job['size']:,}, planner {planner['size']:,}, plain Python "
        f"{floor['size']:,} (all three in trec_eval order), TrecTools {tt['size']:,} (TrecTools "
        "breaks score ties by document id ascending, trec_eval descending: a tie at rank 100 "
        "can let in another document)"
    )
    print(f"best of {args.repeat}, each contender in a fresh process\n")
    rows = [
        ("(a) job path: create_pool + build job, committed", None, job),
        ("(b) TrecTools TrecRun() x runs (read)", "read", tt),
        ("(b) TrecTools make_pool(topX=100) (pool)", "seconds", tt),
        ("(b) TrecTools read + pool", "both", tt),
        ("(c) plain Python: read and sort files", "read", floor),
        ("(c) plain Python: set union of top 100 (pool)", "seconds", floor),
        ("planner: plan() for 6 depths, from the database", None, planner),
    ]
    print(f"{'':52} {'seconds':>9} {'peak RSS MB':>12} {'growth MB':>10}")
    for label, part, r in rows:
        if part is None or part == "seconds":
            seconds = r["seconds"]
        elif part == "read":
            seconds = r["read"]
        else:
            seconds = r["read"] + r["seconds"]
        growth = r["peak"] - r["base"]
        print(f"{label:52} {seconds:9.3f} {r['peak']:12.0f} {growth:10.0f}")
    tt_growth = tt["peak"] - tt["base"]
    job_growth = job["peak"] - job["base"]
    print()
    print("ratios (a) / TrecTools                             time      peak RSS   growth")
    print(
        f"  against make_pool alone (target <= 0.10 / 0.33)  {job['seconds'] / tt['seconds']:7.3f}"
        f"  {job['peak'] / tt['peak']:9.3f}  {job_growth / tt_growth:7.3f}"
    )
    print(
        f"  against read + make_pool                        "
        f"{job['seconds'] / (tt['read'] + tt['seconds']):7.3f}"
        f"  {job['peak'] / tt['peak']:9.3f}  {job_growth / tt_growth:7.3f}"
    )
    print(
        f"  (a) against the plain-Python floor (read + pool): "
        f"{job['seconds'] / (floor['read'] + floor['seconds']):.2f}x its time; "
        f"against its pool step alone: {job['seconds'] / floor['seconds']:.1f}x"
    )
    print(f"  planner: {planner['seconds']:.3f} s (target < 1 s)")


if __name__ == "__main__":
    main()
