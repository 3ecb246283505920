"""Benchmark: importing 100 runs into PostgreSQL, against TrecTools reading them and a floor.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        /work/venv/bin/python bench/import_runs.py [--runs 100] [--topics 50] [--depth 1000]

DATABASE_URL names a PostgreSQL server the benchmark may create databases on: it creates a
throwaway database (``pj_bench_<random>``, or ``--database NAME``), migrates it, and drops it at
the end (``--keep`` keeps it). Nothing else on the server is touched.

Data: runs x topics x depth lines (the default is 5M lines, about 200 MB) written to a temporary
directory, or to ``--dir`` (reused when it already holds run files). Like submitted runs: odd runs
tab-separated, even runs space-separated; scores written as ``%.6f`` in half the runs and with
repr() in the other half, with stretches of tied scores (about 5% of lines); document ids like
``doc0012345`` drawn from a 5M-document collection; every tenth run has 0-based ranks.

Contenders, each in a process of its own, started by a small measuring process whose only child
it is, so that ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` there is that contender's peak alone:
  (a) import   ``pooling.imports.import_runs`` of every file into a fresh campaign (topics
               created beforehand), committed, as ``manage.py import_runs`` does. The PostgreSQL
               server's own memory is not in the figure (it is another process).
  (b) trectools  ``TrecRun(path)`` for every file, kept in a list.
  (c) floor    a Python loop that only reads each file and splits each line.
Wall time is the work only (Django, pandas and the campaign setup excluded); peak RSS is the whole
process. Targets: (a) at most 1/2 of (b)'s time and 1/3 of its peak memory; (a) within 4x of (c).
``--repeat N`` keeps the best time of N trials (and the lowest peak). Prints figures; asserts
nothing. ``--profile`` prints a cProfile of (a) instead.
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

COLLECTION = 5_000_000
PARSE_PROCESSES = 2  # pooling.imports.PARSE_PROCESSES
TIE_SHARE = 0.05


# --- Data -----------------------------------------------------------------------------------------


def generate(directory: Path, *, runs: int, topics: int, depth: int) -> None:
    import numpy as np

    rng = np.random.default_rng(2026)
    for number in range(runs):
        tag = f"run_{number:03d}"
        separator = "\t" if number % 2 else " "
        start = 0 if number % 10 == 9 else 1
        lines = []
        for topic in range(1, topics + 1):
            scores = np.sort(rng.random(depth) * 30)[::-1]
            if number % 4 < 2:
                scores = np.round(scores, 6)  # what "%.6f" reads back as
                texts = [f"{value:.6f}" for value in scores.tolist()]
            else:
                texts = None
            tied = np.flatnonzero(rng.random(depth - 1) < TIE_SHARE) + 1
            for position in tied.tolist():  # in order, so a stretch shares one score
                scores[position] = scores[position - 1]
                if texts is not None:
                    texts[position] = texts[position - 1]
            if texts is None:
                texts = list(map(repr, scores.tolist()))
            docs = rng.choice(COLLECTION, size=depth, replace=False).tolist()
            lines += [
                f"{topic}{separator}Q0{separator}doc{doc:07d}{separator}{rank}{separator}"
                f"{text}{separator}{tag}"
                for rank, (doc, text) in enumerate(zip(docs, texts, strict=True), start)
            ]
        (directory / f"{tag}.txt").write_text("\n".join(lines) + "\n")


def run_files(directory: Path) -> list[Path]:
    return sorted(path for path in directory.glob("run_*.txt") if path.is_file())


# --- Database -------------------------------------------------------------------------------------


def database_url(server_url: str, name: str) -> str:
    return urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))


def admin(server_url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(database_url(server_url, "postgres"), autocommit=True) as conn:
        conn.execute(statement)


def child_env(url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    if url:
        env.update(
            DATABASE_URL=url,
            DJANGO_SETTINGS_MODULE="pooljudge.settings",
            SECRET_KEY=os.environ.get("SECRET_KEY", "bench-" + "x" * 50),
            DEBUG="0",
        )
    return env


# --- Steps (each in a process of its own) ---------------------------------------------------------


def django_setup() -> None:
    import django

    django.setup()
    if os.environ.get("BENCH_IN_PROCESS"):
        import pooling.imports

        pooling.imports.PARALLEL_MIN_BYTES = sys.maxsize  # no parsing processes


def fresh_campaign(slug: str, topics: int):
    from campaigns.models import Campaign, Topic

    Campaign.objects.filter(slug=slug).delete()
    campaign = Campaign.objects.create(slug=slug, title="Benchmark")
    Topic.objects.bulk_create(
        Topic(campaign=campaign, topic_id=str(t), position=t) for t in range(1, topics + 1)
    )
    return campaign


def delete_campaign(campaign) -> None:
    from pooling.models import Run

    Run.objects.filter(campaign=campaign).delete()  # run topics protect the topics they name
    campaign.delete()


def step_migrate(directory: Path, topics: int) -> dict:
    django_setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return {}


def step_import(directory: Path, topics: int) -> dict:
    django_setup()
    from pooling.imports import import_runs
    from pooling.models import RunTopic

    campaign = fresh_campaign(f"bench-{os.getpid()}", topics)
    files = run_files(directory)
    server = server_cpu_seconds()
    cpu = time.process_time()
    start = time.perf_counter()
    summary = import_runs(campaign=campaign, sources=[(str(path), path) for path in files])
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    server = server_cpu_seconds() - server
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)  # parsing processes, if any ran
    stored = RunTopic.objects.filter(run__campaign=campaign).count()
    delete_campaign(campaign)  # the next trial starts from the same empty tables
    return {
        "seconds": seconds,
        "lines": summary.counts["lines"],
        "rows": stored,
        "cpu": cpu,
        "server_cpu": server,
        "workers_cpu": workers.ru_utime + workers.ru_stime,
        "worker_peak_mb": workers.ru_maxrss / 1024,
        "self_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def server_cpu_seconds() -> float:
    """CPU time of this connection's PostgreSQL backend so far (NaN unless it runs here)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def step_profile(directory: Path, topics: int) -> dict:
    import cProfile
    import pstats

    django_setup()
    from pooling.imports import import_runs

    campaign = fresh_campaign(f"bench-{os.getpid()}", topics)
    files = run_files(directory)
    profile = cProfile.Profile()
    profile.enable()
    import_runs(campaign=campaign, sources=[(str(path), path) for path in files])
    profile.disable()
    delete_campaign(campaign)
    stats = pstats.Stats(profile, stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(25)
    return {}


def step_trectools(directory: Path, topics: int) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    from trectools import TrecRun

    files = run_files(directory)
    start = time.perf_counter()
    runs = [TrecRun(str(path)) for path in files]
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "lines": sum(len(run.run_data) for run in runs)}


def step_floor(directory: Path, topics: int) -> dict:
    files = run_files(directory)
    start = time.perf_counter()
    lines = 0
    for path in files:
        with path.open(encoding="utf-8") as file:
            for line in file:
                line.split()
                lines += 1
    return {"seconds": time.perf_counter() - start, "lines": lines}


STEPS = {
    "migrate": step_migrate,
    "import": step_import,
    "profile": step_profile,
    "trectools": step_trectools,
    "floor": step_floor,
}


def measure(argv: list[str]) -> None:
    """Run one contender as this process's only child; report its result and its peak RSS."""
    child = subprocess.run(argv, capture_output=True, text=True, check=False)
    sys.stderr.write(child.stderr[-6000:])
    if child.returncode != 0:
        sys.exit(child.returncode)
    result = json.loads(child.stdout.strip().splitlines()[-1])
    result["peak_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux: KiB
    print(json.dumps(result))


def run_step(step: str, directory: Path, topics: int, url: str | None, *extra: str) -> dict:
    argv = [sys.executable, __file__, "--step", step, "--dir", str(directory), *extra]
    result = subprocess.run(
        [sys.executable, __file__, "--measure", "--", *argv, "--topics", str(topics)],
        env=child_env(url),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"step {step} failed (exit {result.returncode})")
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- Driver ---------------------------------------------------------------------------------------


def main() -> None:
    if sys.argv[1:2] == ["--measure"]:
        measure(sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--dir", type=Path, help="Where the run files are (or are to be made).")
    parser.add_argument("--repeat", type=int, default=1, help="Best of N for each contender.")
    parser.add_argument("--database", help="Name of the database to create (and drop).")
    parser.add_argument("--keep", action="store_true", help="Keep the database afterwards.")
    parser.add_argument("--profile", action="store_true", help="Profile the import only.")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="(a) parses every file in the importing process (no parsing processes).",
    )
    parser.add_argument(
        "--only", choices=("import", "trectools", "floor"), action="append", help=argparse.SUPPRESS
    )
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.step:
        if args.in_process:
            os.environ["BENCH_IN_PROCESS"] = "1"
        print(json.dumps(STEPS[args.step](args.dir, args.topics)))
        return

    server = os.environ.get("DATABASE_URL")
    if not server or not server.startswith(("postgres://", "postgresql://")):
        sys.exit("Set DATABASE_URL to a PostgreSQL server (postgres://user@host:port/any).")
    with tempfile.TemporaryDirectory(prefix="pj-bench-") as scratch:
        directory = args.dir or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        if not run_files(directory):
            start = time.perf_counter()
            generate(directory, runs=args.runs, topics=args.topics, depth=args.depth)
            print(f"generated in {time.perf_counter() - start:.1f} s")
        files = run_files(directory)
        size_mb = sum(path.stat().st_size for path in files) / 1e6
        print(f"{len(files)} run files, {size_mb:.0f} MB, in {directory}")
        name = args.database or f"pj_bench_{secrets.token_hex(4)}"
        url = database_url(server, name)
        admin(server, f'CREATE DATABASE "{name}"')
        try:
            run_step("migrate", directory, args.topics, url)
            if args.profile:
                run_step("profile", directory, args.topics, url, "--in-process")
                return
            results = {}
            for step in args.only or ("import", "trectools", "floor"):
                extra = ["--in-process"] if args.in_process else []
                trials = [
                    run_step(
                        step, directory, args.topics, url if step == "import" else None, *extra
                    )
                    for _ in range(args.repeat)
                ]
                for trial in trials:
                    if trial.get("worker_peak_mb"):
                        # Count every parsing process, not only the largest process.
                        trial["peak_mb"] = (
                            trial["self_peak_mb"] + PARSE_PROCESSES * trial["worker_peak_mb"]
                        )
                best = min(trials, key=lambda trial: trial["seconds"])
                best["peak_mb"] = min(trial["peak_mb"] for trial in trials)
                results[step] = best
            report(results, args.repeat)
        finally:
            if not args.keep:
                admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def report(results: dict, repeat: int) -> None:
    labels = {
        "import": "(a) import_runs into PostgreSQL, committed",
        "trectools": "(b) TrecTools: TrecRun(path) for each file",
        "floor": "(c) floor: read and split every line",
    }
    print(f"\nbest of {repeat}; each contender the only child of its measuring process")
    print(f"{'':46} {'lines':>11} {'seconds':>9} {'peak RSS MB':>12}")
    for step, result in results.items():
        print(
            f"{labels[step]:46} {result['lines']:11,} {result['seconds']:9.2f} "
            f"{result['peak_mb']:12.0f}"
        )
    if "import" in results:
        a = results["import"]
        print(
            f"(a) CPU: {a['cpu']:.2f} s importing process, {a['workers_cpu']:.2f} s parsing "
            f"processes, {a['server_cpu']:.2f} s its PostgreSQL backend (they overlap)"
        )
        if a["worker_peak_mb"]:
            print(
                f"(a) peak RSS above: {a['self_peak_mb']:.0f} MB importing process + "
                f"{PARSE_PROCESSES} x {a['worker_peak_mb']:.0f} MB parsing processes (ru_maxrss "
                "alone would show the largest single process)"
            )
    if len(results) < 3:
        return
    a, b, c = results["import"], results["trectools"], results["floor"]
    print()
    print(f"(a)/(b) time    {a['seconds'] / b['seconds']:6.2f}   (target <= 0.50)")
    print(f"(a)/(b) memory  {a['peak_mb'] / b['peak_mb']:6.2f}   (target <= 0.33)")
    print(f"(a)/(c) time    {a['seconds'] / c['seconds']:6.2f}   (target <= 4)")


if __name__ == "__main__":
    main()
