"""Benchmark: the export bundle over 1,000,000 judgments, against a COPY floor.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/pj_export python bench/export.py
    DATABASE_URL=sqlite:////tmp/pj_export.sqlite3 python bench/export.py   # SQLite alongside

DATABASE_URL names the server (and the prefix of the throwaway database): the benchmark creates
``<name>_bench`` (for SQLite, the file ``<path>_bench``), migrates it, fills it (COPY on
PostgreSQL) and drops it at the end (``--keep`` keeps it for a rerun with ``--reuse``). The
data: 10 assessors, 50 topics (``--topics``) of 18,000 pooled-and-judged documents each
(900,000 pairs, each topic owned by one primary assessor), plus 100,000 overlap judgments by a
second assessor (1,000,000 judgments in all, labels 0-2, 1% with notes, some of them
spreadsheet-risky) and 2,000 pooled but unjudged documents per topic (pool of 1,000,000).

Printed, for each planner-statistics mode (``--statistics``: none, fresh or both), each the
best of --repeat runs:
  floor           COPY (SELECT the judgments joined to topics, assessors, rubric versions and
                  pool entries: the sidecar's rows, unordered) TO STDOUT, iterated with psycopg
                  and written to /dev/null (SQLite: the same query read through a cursor)
  floor, sorted   the same with the export's own query (qrels order: its ORDER BY, without the
                  sidecar columns)
  export dir      a subprocess running qrels.export.export_bundle into a directory (qrels.txt,
                  judgments.tsv, judgments.jsonl, README.md, campaign.json with agreement,
                  SHA256SUMS): wall time of the subprocess (interpreter and Django start-up
                  included), the export's own time measured inside it, its peak RSS (its VmHWM;
                  and that of the process formatting the sidecar beside it) and the CPU seconds of
                  both (best of the runs: on a shared machine, wall time follows the load and the
                  processes' nice level, CPU time much less), with the exporting process's time
                  in the garbage collector (gc.callbacks)
  export zip      the same bundle as one zip (deflate level 6) streamed to a file (skipped with
                  --directory-only)
  phases          where the fastest run's time went, from its progress messages: checking the
                  statistics and counting, waiting for the sorted query's first row, the pass
                  (qrels and tallies here, the sidecar in its process), agreement, documentation
and the ratios to the floor. Targets: export <= 3x the floor, peak RSS < 300 MB, the export
without statistics within 1.5x of the export with them. No assertions.
Judgment revisions are not created (the export reads current verdicts only).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.statistics_modes import MODES, set_mode  # noqa: E402

TOPICS = 50
ASSESSORS = 10
DOCS_PER_TOPIC = 18_000
OVERLAP_PER_TOPIC = 2_000
UNJUDGED_PER_TOPIC = 2_000
SLUG = "bench-export"


def is_sqlite(url: str) -> bool:
    return urlsplit(url).scheme == "sqlite"


def bench_url(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    if is_sqlite(url):
        return url + "_bench", parts.path[1:] + "_bench"
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        sys.exit("bench/export.py needs DATABASE_URL=postgres://… or sqlite:////path")
    name = parts.path.lstrip("/") + "_bench"
    return urlunsplit(parts._replace(path="/" + name)), name


def admin_url(url: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/postgres"))


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("SECRET_KEY", "bench-export-secret-key-0123456789-abcdefghijklmnop")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pooljudge.settings")
    import django

    django.setup()


# --- Data -----------------------------------------------------------------------------------------


def create_database(url: str, name: str) -> None:
    """Create and migrate the database ``name`` on ``url``'s server (``url`` names it)."""
    if is_sqlite(url):
        Path(name).unlink(missing_ok=True)
    else:
        import psycopg

        with psycopg.connect(admin_url(url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "bench-export-secret-key-0123456789"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True
    )


def drop_database(url: str, name: str) -> None:
    if is_sqlite(url):
        Path(name).unlink(missing_ok=True)
        return
    import psycopg

    with psycopg.connect(admin_url(url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fill() -> None:
    """The campaign, its assessors, topics, pool and 1,000,000 judgments (through COPY on
    PostgreSQL), without planner statistics: each mode of main() sets its own."""
    from django.db import connection, transaction

    from assess.models import Assignment
    from campaigns.models import Assessor, Campaign, Judgment, Topic
    from campaigns.scales import SCALES
    from pooling.models import Pool, PoolEntry, Run

    rng = random.Random(7)
    with transaction.atomic():
        campaign = Campaign.objects.create(
            slug=SLUG, title="Export benchmark", relevance_threshold=1
        )
        rubric = campaign.save_rubric(list(SCALES["graded3"].labels), note="preset")
        assessors = [
            Assessor.objects.create(campaign=campaign, name=f"assessor{i:02d}")
            for i in range(ASSESSORS)
        ]
        topics = [
            Topic.objects.create(
                campaign=campaign, topic_id=f"{n:03d}", title=f"Topic {n}", position=n
            )
            for n in range(1, TOPICS + 1)
        ]
        runs = [Run.objects.create(campaign=campaign, tag=f"run{i:02d}") for i in range(20)]
        pool = Pool.objects.create(
            campaign=campaign,
            version=1,
            strategy=Pool.Strategy.DEPTH,
            params={"depth": 100},
            software_version="bench",
            status=Pool.Status.BUILT,
            size=TOPICS * (DOCS_PER_TOPIC + UNJUDGED_PER_TOPIC),
        )
        pool.runs.set(runs)
        pool.topics.set(topics)
        for index, topic in enumerate(topics):
            assignment = Assignment.objects.create(
                campaign=campaign,
                pool=pool,
                assessor=assessors[index % ASSESSORS],
                mode=Assignment.Mode.PRIMARY,
                seed=index,
            )
            assignment.topics.add(topic)

        judgment_columns = (
            "campaign_id, topic_id, doc_id, assessor_id, label, rubric_version_id, source, "
            "position, served_at, judged_at, first_judged_at, seconds_on_screen, active_seconds, "
            "note, unreadable, unsure, version, iteration"
        )
        notes = [
            '=HYPERLINK("http://x")',
            "+1 looks relevant",
            "-2 off topic",
            "@me check",
            "long\tnote\nwith breaks",
            "plain remark",
        ]

        def judgments():
            for index, topic in enumerate(topics):
                primary = assessors[index % ASSESSORS]
                second = assessors[(index + 1) % ASSESSORS]
                for d in range(DOCS_PER_TOPIC):
                    doc = f"doc{d:07d}"
                    label = rng.choice((0, 0, 0, 1, 2))
                    for who, position in ((primary, d + 1),) + (
                        ((second, d + 1),) if d < OVERLAP_PER_TOPIC else ()
                    ):
                        if who is second:
                            label = label if rng.random() < 0.7 else rng.choice((0, 1, 2))
                        minute = rng.randrange(100_000)
                        stamp = (
                            f"2025-0{1 + minute % 9}-{1 + minute % 28:02d} "
                            f"{minute % 24:02d}:{minute % 60:02d}:{d % 60:02d}.{d:06d}"
                        )
                        note = notes[d % len(notes)] if d % 100 == 0 else ""
                        yield (
                            (
                                campaign.pk,
                                topic.pk,
                                doc,
                                who.pk,
                                label,
                                rubric.pk,
                                "judged",
                                position,
                                stamp,
                                stamp,
                                stamp,
                                round(rng.uniform(2, 90), 3),
                                round(rng.uniform(1, 60), 3),
                                note,
                                d % 500 == 0,
                                d % 250 == 0,
                                1,
                                "",
                            )
                        )

        entries = (
            (pool.pk, topic.pk, f"doc{d:07d}", "[]", True)
            for topic in topics
            for d in range(DOCS_PER_TOPIC + UNJUDGED_PER_TOPIC)
        )
        entry_columns = "pool_id, topic_id, doc_id, provenance, sampled"
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                raw = cursor.cursor
                table = Judgment._meta.db_table
                with raw.copy(f"COPY {table} ({judgment_columns}) FROM STDIN") as copy:
                    for row in judgments():
                        copy.write_row(row[:8] + tuple(f"{t}+00" for t in row[8:11]) + row[11:])
                table = PoolEntry._meta.db_table
                with raw.copy(f"COPY {table} ({entry_columns}) FROM STDIN") as copy:
                    for row in entries:
                        copy.write_row(row)
            else:
                marks = ", ".join(["%s"] * 18)
                cursor.executemany(
                    f"INSERT INTO {Judgment._meta.db_table} ({judgment_columns}) VALUES ({marks})",  # noqa: S608 (constants)
                    judgments(),
                )
                cursor.executemany(
                    f"INSERT INTO {PoolEntry._meta.db_table} ({entry_columns}) "  # noqa: S608
                    "VALUES (%s, %s, %s, %s, %s)",
                    entries,
                )


# --- Measurements ---------------------------------------------------------------------------------


def floor_seconds(url: str) -> tuple[float, float]:
    """(unordered floor, the export's own query) in seconds, each COPY to /dev/null (SQLite:
    each read through a cursor)."""
    from django.db import connection

    from campaigns.models import Campaign
    from qrels.rows import judgment_rows_sql, scope

    campaign = Campaign.objects.get(slug=SLUG)
    s = scope(campaign=campaign)
    ordered_sql, params = judgment_rows_sql(s)
    plain_sql = (
        "SELECT t.topic_id, j.doc_id, j.label, a.pseudonym, j.source, rv.number, j.version, "
        "j.position, j.served_at, j.first_judged_at, j.judged_at, j.seconds_on_screen, "
        "j.active_seconds, pe.stratum, pe.inclusion_probability, j.unreadable, j.unsure, j.note "
        "FROM campaigns_judgment j JOIN campaigns_topic t ON t.id = j.topic_id "
        "JOIN campaigns_assessor a ON a.id = j.assessor_id "
        "LEFT JOIN campaigns_rubricversion rv ON rv.id = j.rubric_version_id "
        "LEFT JOIN pooling_poolentry pe ON pe.pool_id = %s AND pe.topic_id = j.topic_id "
        "AND pe.doc_id = j.doc_id WHERE j.campaign_id = %s"
    )
    pool_id = campaign.pools.get().pk
    results = []
    if is_sqlite(url):
        for sql, args in ((plain_sql, (pool_id, campaign.pk)), (ordered_sql, params)):
            start = time.perf_counter()
            with connection.cursor() as cursor:
                cursor.execute(sql, args)
                while cursor.fetchmany(20_000):
                    pass
            results.append(time.perf_counter() - start)
        return results[0], results[1]
    import psycopg

    connection.close()
    with psycopg.connect(url) as conn, open(os.devnull, "wb") as sink:
        for sql, args in ((plain_sql, (pool_id, campaign.pk)), (ordered_sql, params)):
            start = time.perf_counter()
            with conn.cursor() as cursor, cursor.copy(f"COPY ({sql}) TO STDOUT", args) as copy:
                for block in copy:
                    sink.write(block)
            results.append(time.perf_counter() - start)
            conn.rollback()
    return results[0], results[1]


def run_child(url: str, out: Path, zipped: bool) -> tuple[float, float, float, dict]:
    """(subprocess wall seconds, export seconds inside it, peak RSS MB, counts)."""
    command = [sys.executable, __file__, "--child", str(out)] + (["--zip"] if zipped else [])
    env = {**os.environ, "DATABASE_URL": url}
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, cwd=ROOT)
    output = process.stdout.read()
    _, status = os.waitpid(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"export child failed: {output.decode()}")
    report = json.loads(output)
    # The child's own high-water mark: wait4's ru_maxrss also counts the parent's memory the
    # child had before exec (a parent that has just filled the database is large).
    return wall, report["seconds"], report["peak_rss_kb"] / 1024, report


def child(out: Path, zipped: bool) -> None:
    from django.db import transaction

    from campaigns.models import Campaign
    from qrels.export import export_bundle, use_snapshot

    campaign = Campaign.objects.get(slug=SLUG)
    phases: dict[str, float] = {}  # progress message -> seconds from the start, when first seen

    def progress(done: int, total: int | None, message: str) -> None:
        phases.setdefault(message, time.perf_counter() - start)

    collector = [0.0, 0.0]  # seconds in the garbage collector, start of the current collection

    def collecting(phase: str, info: dict) -> None:
        if phase == "start":
            collector[1] = time.perf_counter()
        else:
            collector[0] += time.perf_counter() - collector[1]

    gc.callbacks.append(collecting)
    start = time.perf_counter()
    cpu = time.process_time()
    with transaction.atomic():
        use_snapshot()
        if zipped:
            target = out / "bundle.zip"
            with open(target, "wb") as handle:
                result = export_bundle(
                    campaign=campaign, destination=handle, zip=True, progress=progress
                )
        else:
            result = export_bundle(campaign=campaign, destination=out / "bundle", progress=progress)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    gc.callbacks.remove(collecting)
    size = result.zip_bytes if zipped else sum(f.bytes for f in result.files)
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    # The sidecar's formatting process (qrels.sidecar.SidecarProcess), this child's only child.
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    sidecar = children.ru_maxrss
    print(
        json.dumps(
            {
                "seconds": seconds,
                "bytes": size,
                "peak_rss_kb": peak,
                "sidecar_peak_rss_kb": sidecar,
                "cpu": cpu,
                "sidecar_cpu": children.ru_utime + children.ru_stime,
                "gc_seconds": collector[0],
                "phases": phases,
                **result.counts,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--topics", type=int, default=50, help="20,000 judgments each (default: 50)"
    )
    parser.add_argument("--keep", action="store_true", help="Keep the benchmark database.")
    parser.add_argument("--reuse", action="store_true", help="Reuse a kept benchmark database.")
    parser.add_argument(
        "--statistics",
        choices=("both", *MODES),
        default="both",
        help="measure without planner statistics (none), after ANALYZE (fresh), or both",
    )
    parser.add_argument(
        "--directory-only", action="store_true", help="measure the directory bundle, not the zip"
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--zip", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL")
    if not url:
        sys.exit("Set DATABASE_URL=postgres://… or sqlite:////path (<name>_bench is made there).")
    if args.child:
        setup_django(url)
        child(args.child, args.zip)
        return
    global TOPICS
    TOPICS = args.topics
    target_url, name = bench_url(url)
    if not args.reuse:
        print(f"creating database {name} …", flush=True)
        create_database(target_url, name)
    setup_django(target_url)
    try:
        if not args.reuse:
            start = time.perf_counter()
            fill()
            print(f"filled in {time.perf_counter() - start:.1f} s", flush=True)
        from django.db import connection

        from campaigns.models import Judgment

        count = Judgment.objects.count()
        print(
            f"{connection.vendor}: judgments={count:,} assessors={ASSESSORS} "
            f"(best of {args.repeat})"
        )
        for mode in MODES if args.statistics == "both" else (args.statistics,):
            set_mode(mode)
            print(f"--- planner statistics: {mode} ---", flush=True)
            measure(
                target_url,
                args.repeat,
                zips=(False,) if args.directory_only else (False, True),
                mode=mode,
            )
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(url, name)


def measure(
    target_url: str, repeat: int, zips: tuple[bool, ...] = (False, True), mode: str = "fresh"
) -> None:
    # Floors and exports alternate, so that a change in the machine's load (a shared box)
    # touches both alike; each figure is the best of its runs. The mode is set again before
    # each run: an export analyses tables it finds without statistics (analyse_stale_tables).
    floors, exports = [], {zipped: [] for zipped in zips}
    for _ in range(repeat):
        set_mode(mode)
        floors.append(floor_seconds(target_url))
        for zipped in zips:
            with tempfile.TemporaryDirectory(prefix="pj-bench-export-") as tmp:
                exports[zipped].append(run_child(target_url, Path(tmp), zipped))
    floor = min(f[0] for f in floors)
    floor_sorted = min(f[1] for f in floors)
    print(f"floor (COPY of the joined rows to /dev/null):        {floor:6.2f} s")
    print(f"floor, sorted (COPY of the export's own query):      {floor_sorted:6.2f} s")
    for zipped, runs in exports.items():
        wall = min(r[0] for r in runs)
        inside = min(r[1] for r in runs)
        rss = max(r[2] for r in runs)
        report = runs[0][3]
        sidecar_rss = max(r[3]["sidecar_peak_rss_kb"] for r in runs) / 1024
        cpu = min(r[3]["cpu"] for r in runs)
        sidecar_cpu = min(r[3]["sidecar_cpu"] for r in runs)
        collecting = min(r[3]["gc_seconds"] for r in runs)
        label = "zip (deflate 6)" if zipped else "directory"
        print(
            f"export {label:16s} wall {wall:6.2f} s, export itself {inside:6.2f} s "
            f"({inside / floor:4.2f}x the floor), {report['bytes'] / 1e6:,.0f} MB written, "
            f"peak RSS {rss:5.0f} MB (sidecar process {sidecar_rss:3.0f} MB); "
            f"wall/floor {wall / floor:4.2f}x; CPU {cpu:.1f} s exporting (of which "
            f"{collecting:.1f} s collecting garbage) + {sidecar_cpu:.1f} s sidecar process"
        )
        fastest = min(runs, key=lambda r: r[1])[3]
        print(f"  {label} phases (the fastest run): " + phase_line(fastest))


def phase_line(report: dict) -> str:
    """Where an export's time went, from the first time each progress message was seen: the
    statistics check, the scope and the progress count before "reading judgments"; the wait for
    the sorted query's first row; the pass; agreement; documentation (and the zip)."""
    seen = sorted(report["phases"].items(), key=lambda item: item[1])
    marks = [("start", 0.0), *seen, ("end", report["seconds"])]
    names = {
        "start": "count",
        "reading judgments": "first row",
        "writing qrels and sidecar": "pass",
        "computing agreement": "agreement",
        "writing documentation": "documentation",
        "zipping": "zip",
    }
    return ", ".join(
        f"{names.get(name, name)} {following - at:.2f} s"
        for (name, at), (_, following) in itertools.pairwise(marks)
    )


if __name__ == "__main__":
    main()
