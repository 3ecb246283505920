"""Benchmark: the web process's memory for one upload on the Files page, by file size.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/pj_i18b .venv/bin/python bench/upload_memory.py
    .venv/bin/python bench/upload_memory.py --mb 10 100 200 --gzip      # SQLite, gzipped runs
    .venv/bin/python bench/upload_memory.py --mb --qrels-mb 20          # the evaluation page only

DATABASE_URL names the server (and the prefix of the throwaway database): the benchmark creates
``<name>_upload_bench``, migrates it and drops it at the end. Without DATABASE_URL it migrates a
SQLite file in a temporary directory. Each size runs in a fresh process (``tests/upload_process``)
that posts a multipart body streamed from a file through Django's WSGI handler, as gunicorn
would, after a warm-up upload of 0.25 MB.

Printed per size: the resident set after warm-up, the peak during the upload, the growth, the
growth in stored chunks (``campaigns.uploads.CHUNK_BYTES``), and the seconds. Target: the growth
stays within 2 chunks whatever the size. With ``--qrels-mb N``, the same for a qrels file of N MB
posted to the evaluation page (which once parsed it inside the request: 20 MB took 22 s, past
gunicorn's 30 s timeout once the process was cold). No assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]


def throwaway_database(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    name = parts.path.lstrip("/") + "_upload_bench"
    return urlunsplit(parts._replace(path="/" + name)), name


def admin(url: str, statement: str) -> None:
    import psycopg

    server = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(statement)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, nargs="*", default=[10, 100, 200])
    parser.add_argument("--gzip", action="store_true", help="gzipped run files")
    parser.add_argument("--qrels-mb", type=float, nargs="*", default=[], help="evaluation page")
    args = parser.parse_args()

    server = os.environ.get("DATABASE_URL", "")
    with tempfile.TemporaryDirectory(prefix="pooljudge-upload-bench-") as scratch:
        if server:
            url, name = throwaway_database(server)
            admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin(server, f'CREATE DATABASE "{name}"')
        else:
            url, name = f"sqlite:///{scratch}/bench.sqlite3", ""
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "SECRET_KEY": "bench-upload-memory-secret-key-0123456789-abcdefghijklmnopqrstuv",
            "ALLOWED_HOSTS": "testserver",
            "POOLJUDGE_DATA_DIR": scratch,
        }
        env.pop("REDIS_URL", None)
        env.pop("CELERY_BROKER_URL", None)
        try:
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True
            )
            print(f"database: {'PostgreSQL ' + name if name else 'SQLite'}; gzip: {args.gzip}")
            print(
                f"{'file':>8} {'after warm-up':>14} {'peak':>10} {'growth':>10} "
                f"{'chunks':>7} {'s':>7}"
            )
            sizes = [(mb, "runs") for mb in args.mb] + [(mb, "evaluation") for mb in args.qrels_mb]
            for mb, to in sizes:
                command = [sys.executable, "-m", "tests.upload_process", "--mb", str(mb)]
                command += ["--to", to] + (["--gzip"] if args.gzip else [])
                done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                ok = result["status"] == 302 and all(s["bytes_match"] for s in result["stored"])
                growth = result["peak_kb"] - result["baseline_kb"]
                chunks = growth * 1024 / result["chunk_bytes"]
                print(
                    f"{mb:>5g} MB {result['baseline_kb'] / 1024:>11.0f} MB "
                    f"{result['peak_kb'] / 1024:>7.0f} MB {growth / 1024:>7.0f} MB "
                    f"{chunks:>7.1f} {result['seconds']:>7.1f}"
                    + ("  (qrels, evaluation page)" if to == "evaluation" else "")
                    + ("" if ok else f"  FAILED: status {result['status']} {result['error']}")
                )
        finally:
            if name:
                admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
