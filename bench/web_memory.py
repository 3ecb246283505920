"""Benchmark: a web process's memory with every URLconf loaded, and a cold worker's first request.

    .venv/bin/python bench/web_memory.py [--root DIR] [--repeat 3]

Runs on a throwaway SQLite data directory (nothing else is touched). Three figures, each from a
fresh Python process (so nothing is shared between them):

  urlconfs   RSS (VmRSS) after ``django.setup()`` and loading every URLconf, i.e. importing every
             view module: what each gunicorn worker holds before its first request. The target
             (issue 17) is at most 100 MB.
  first      wall (and CPU) time of a cold process's first request to the evaluation page of a small
             judged campaign (the page that scores runs, so it pays every lazy import a report
             needs), and the RSS after it; then the second request's time.
  baseline   RSS after ``django.setup()`` alone, for scale.

``--root DIR`` runs another checkout (e.g. the old code, exported with ``git archive``) against
the same kind of data, for a before/after comparison. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SETUP = """
import django
django.setup()
from django.contrib.auth import get_user_model
from campaigns.members import add_member
from campaigns.models import Campaign
from campaigns.scales import SCALES
from tests.factories import small_campaign
from tests.reports import judge
scale = SCALES["graded3"]
campaign = Campaign.objects.create(slug="bench", title="Bench", relevance_threshold=scale.threshold)
campaign.save_rubric(list(scale.labels), note="preset")
small_campaign(campaign, docs=6)
judge(campaign, "ann", [("301", "d01", 2), ("301", "d02", 0), ("302", "d03", 1)], kind="person")
judge(campaign, "ben", [("301", "d01", 2), ("301", "d02", 1), ("302", "d03", 0)], kind="person")
user = get_user_model().objects.create_user(username="olivia", password="x")
add_member(campaign=campaign, user=user, role="organiser")
"""

RSS = """
def rss_mb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
"""

BASELINE = (
    RSS
    + """
import django
django.setup()
print(rss_mb())
"""
)

URLCONFS = (
    RSS
    + """
import django
django.setup()
from django.urls import get_resolver

def load(resolver):
    for pattern in resolver.url_patterns:
        if hasattr(pattern, "url_patterns"):
            load(pattern)

load(get_resolver())
print(rss_mb())
"""
)

FIRST = (
    RSS
    + """
import time
start, cpu = time.perf_counter(), time.process_time()
import django
django.setup()
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
client = Client(HTTP_HOST="localhost")
client.force_login(get_user_model().objects.get(username="olivia"))
url = reverse("qrels:evaluation", args=["bench"])
ready, ready_cpu = time.perf_counter(), time.process_time()
response = client.get(url, secure=True)
assert response.status_code == 200, response.status_code
first, first_cpu = time.perf_counter() - ready, time.process_time() - ready_cpu
again = time.perf_counter()
client.get(url, secure=True)
second = time.perf_counter() - again
print(ready - start, first, second, rss_mb(), ready_cpu - cpu, first_cpu, time.process_time() - cpu)
"""
)


def run(code: str, root: Path, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode:
        sys.exit(result.stderr)
    return result.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout to measure")
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per figure")
    args = parser.parse_args()
    root = args.root.resolve()
    with tempfile.TemporaryDirectory(prefix="pj-web-memory-") as data:
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"}
        }
        env |= {
            "POOLJUDGE_DATA_DIR": data,
            "DJANGO_SETTINGS_MODULE": "pooljudge.settings",
            "PYTHONPATH": str(root),
        }
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
            cwd=root,
            env=env,
            check=True,
        )
        run(SETUP, root, env)
        baseline = [float(run(BASELINE, root, env)) for _ in range(args.repeat)]
        urlconfs = [float(run(URLCONFS, root, env)) for _ in range(args.repeat)]
        firsts = [[float(x) for x in run(FIRST, root, env).split()] for _ in range(args.repeat)]
    print(f"checkout: {root}")
    print(f"django.setup() only:          RSS {statistics.median(baseline):6.1f} MB")
    print(
        f"every URLconf loaded:         RSS {statistics.median(urlconfs):6.1f} MB (target <= 100)"
    )
    columns = [statistics.median(column) for column in zip(*firsts, strict=True)]
    setup, first, second, after, setup_cpu, first_cpu, total_cpu = columns
    print(f"cold process: setup {setup:.2f} s, first request {first:.2f} s, second {second:.3f} s")
    # CPU seconds too: on a shared machine wall time mostly measures the neighbours.
    print(
        f"  CPU: setup {setup_cpu:.2f} s, first request {first_cpu:.2f} s, "
        f"start to first response {total_cpu:.2f} s"
    )
    print(f"after the first request:      RSS {after:6.1f} MB")


if __name__ == "__main__":
    main()
