"""Uploads cost constant memory: a 300 MB run file goes through the Files page in a process whose
address space is capped at 150 MB above its warmed-up size (``resource.setrlimit``), and is stored
whole. Keeping every chunk in a list (as the upload view once did: a 200 MB upload peaked at
2.2 GB) fails with MemoryError under that cap. ``bench/upload_memory.py`` prints the figures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.conf import settings

from campaigns.uploads import CHUNK_BYTES

# The processes read and write this test's database (a copy of it on SQLite).
from tests.imports.test_cli import process_env  # noqa: F401 (the fixture, requested by name)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def env(request) -> dict[str, str]:
    return request.getfixturevalue("process_env")


CAP_MB = 150


def upload_in_a_capped_process(env: dict[str, str], *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "tests.upload_process", "--cap-mb", str(CAP_MB), *args],
        cwd=settings.BASE_DIR,
        env={**env, "ALLOWED_HOSTS": "testserver"},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_300_mb_upload_is_stored_whole_under_a_memory_cap(campaign, env):
    result = upload_in_a_capped_process(env, "--slug", campaign.slug, "--mb", "300")
    assert (result["status"], result["error"]) == (302, "")
    ((expected,),) = [result["expected"]]
    ((stored,),) = [result["stored"]]
    assert stored["size"] == expected["size"] >= 300 * 1024 * 1024
    assert stored["sha256"] == expected["sha256"]
    assert stored["bytes_match"]
    growth = (result["peak_kb"] - result["baseline_kb"]) * 1024
    print(f"\n300 MB upload: peak RSS {result['peak_kb'] // 1024} MB, grew {growth / 2**20:.1f} MB")
    assert growth < CAP_MB * 1024 * 1024


def test_a_gzipped_upload_is_checked_for_a_bomb_in_constant_memory(campaign, env):
    result = upload_in_a_capped_process(
        env, "--slug", campaign.slug, "--mb", "200", "--gzip", "--files", "2"
    )
    assert (result["status"], result["error"]) == (302, "")
    assert [s["sha256"] for s in result["stored"]] == [e["sha256"] for e in result["expected"]]
    assert all(s["bytes_match"] for s in result["stored"])
    assert all(s["size"] > CHUNK_BYTES for s in result["stored"])  # several chunks each
