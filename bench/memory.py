"""Benchmark: peak memory of importing one large run file, and of scoring the TREC-COVID runs.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/memory.py [--sizes 47,95] [--database NAME]

Without DATABASE_URL the commands run on a throwaway SQLite file instead. With it, the benchmark
creates a throwaway database (``pj_bench_memory_<random>``, or ``--database NAME``), migrates
it, and drops it at the end (``--keep`` keeps it). Nothing else on the server is touched.

Each step is a ``manage.py`` command, as an organiser runs it, started by a small measuring
process whose only child it is, so that ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` there is the
command's peak RSS alone (the PostgreSQL server is another process and not in the figure):

  import  ``import_runs`` of ONE run file of about SIZE MB (1,000 documents per topic, as many
          topics as it takes; scores with repr(), ties, tab-separated), for each ``--sizes``.
  evaluate  where ``../shared/data`` exists: the 143 TREC-COVID round-1 runs imported (not
          measured), then ``evaluate --qrels qrels-rnd1.txt`` (its default measures, every run).

The target (issue 18): at most 300 MB whatever the size of one file. Prints figures; asserts
nothing. ``--root DIR`` runs the commands of another checkout (e.g. the old code, exported
with ``git archive``) against the same data, for a before/after comparison.
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
COVID = ROOT.parent / "shared" / "data" / "trec-covid-round1"
DEPTH = 1000
TARGET_MB = 300


def generate(path: Path, megabytes: float) -> int:
    """One run file of about ``megabytes`` MB; returns its number of topics."""
    import numpy as np

    rng = np.random.default_rng(18)
    written = topic = 0
    with path.open("w", encoding="ascii") as out:
        while written < megabytes * 1e6:
            topic += 1
            scores = np.sort(rng.random(DEPTH) * 30)[::-1]
            tied = np.flatnonzero(rng.random(DEPTH - 1) < 0.05) + 1
            for position in tied.tolist():
                scores[position] = scores[position - 1]
            docs = rng.choice(5_000_000, size=DEPTH, replace=False).tolist()
            block = "".join(
                f"{topic}\tQ0\tdoc{doc:07d}\t{rank}\t{score!r}\tbig_run\n"
                for rank, (doc, score) in enumerate(zip(docs, scores.tolist(), strict=True), 1)
            )
            out.write(block)
            written += len(block)
    return topic


def measure(argv: list[str]) -> None:
    """Run one command as this process's only child; print its peak RSS (MB) and seconds."""
    start = time.perf_counter()
    child = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if child.returncode != 0:
        sys.stderr.write(child.stdout[-3000:] + child.stderr[-3000:])
        sys.exit(child.returncode)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux: KiB
    print(json.dumps({"peak_mb": peak, "seconds": seconds, "out": child.stdout[-400:]}))


class Commands:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env

    def run(self, *args: str, measured: bool = False) -> dict:
        argv = [sys.executable, str(self.root / "manage.py"), *args]
        if measured:
            argv = [sys.executable, __file__, "--measure", "--", *argv]
        result = subprocess.run(
            argv, env=self.env, cwd=self.root, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            sys.exit(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return json.loads(result.stdout.strip().splitlines()[-1]) if measured else {}


def topics_file(directory: Path, topics: int) -> Path:
    path = directory / f"topics-{topics}.tsv"
    path.write_text("".join(f"{t}\tTopic {t}\n" for t in range(1, topics + 1)))
    return path


def main() -> None:
    if sys.argv[1:2] == ["--measure"]:
        measure(sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="47,95", help="MB of the one run file, comma-separated.")
    parser.add_argument("--root", type=Path, default=ROOT, help="The checkout whose code runs.")
    parser.add_argument("--database", help="Name of the PostgreSQL database to create and drop.")
    parser.add_argument("--keep", action="store_true", help="Keep the database afterwards.")
    parser.add_argument("--no-evaluate", action="store_true", help="Skip the TREC-COVID step.")
    args = parser.parse_args()
    sizes = [float(size) for size in args.sizes.split(",") if size.strip()]

    server = os.environ.get("DATABASE_URL", "")
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    with tempfile.TemporaryDirectory(prefix="pj-bench-memory-") as scratch:
        directory = Path(scratch)
        env["POOLJUDGE_DATA_DIR"] = str(directory / "var")
        name = None
        if server:
            import psycopg

            name = args.database or f"pj_bench_memory_{secrets.token_hex(4)}"
            admin = urlunsplit(urlsplit(server)._replace(path="/postgres"))
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            env.update(
                DATABASE_URL=urlunsplit(urlsplit(server)._replace(path=f"/{name}")),
                SECRET_KEY=env.get("SECRET_KEY", "bench-" + "x" * 50),
                DEBUG="0",
            )
        try:
            commands = Commands(args.root, env)
            commands.run("migrate", "--verbosity", "0")
            print(f"code: {args.root}; database: {'PostgreSQL ' + name if name else 'SQLite'}")
            print(f"{'step':52} {'peak RSS MB':>12} {'seconds':>8}")
            for number, size in enumerate(sizes):
                path = directory / f"run-{size:g}MB.txt"
                topics = generate(path, size)
                slug = f"mem-{number}"
                commands.run("create_campaign", slug, "--title", "Memory")
                commands.run("import_topics", slug, str(topics_file(directory, topics)))
                result = commands.run("import_runs", slug, str(path), measured=True)
                what = f"import_runs: one file, {path.stat().st_size / 1e6:.0f} MB"
                print(f"{what:52} {result['peak_mb']:12.0f} {result['seconds']:8.1f}")
                path.unlink()
            if COVID.exists() and not args.no_evaluate:
                commands.run("create_campaign", "covid", "--title", "TREC-COVID round 1")
                commands.run("import_topics", "covid", str(topics_file(directory, 30)))
                runs = sorted(str(p) for p in (COVID / "runs").iterdir())
                commands.run("import_runs", "covid", *runs)
                qrels = str(COVID / "qrels" / "qrels-rnd1.txt")
                result = commands.run("evaluate", "covid", "--qrels", qrels, measured=True)
                what = f"evaluate: {len(runs)} TREC-COVID runs, default measures"
                print(f"{what:52} {result['peak_mb']:12.0f} {result['seconds']:8.1f}")
            print(f"(target: at most {TARGET_MB} MB each)")
        finally:
            if name and not args.keep:
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
