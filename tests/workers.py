"""A real ``celery worker`` subprocess for tests: start, wait until ready, crash, stop."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from django.conf import settings

# Worker settings under which Redis hands a dead worker's unacknowledged message to the next
# worker after 6 s (the default visibility timeout is an hour), looked for every second.
FAST_REDELIVERY = {
    "CELERY_VISIBILITY_TIMEOUT": "6",
    "CELERY_TASK_TIME_LIMIT": "5",
    "CELERY_UNACKED_RESTORE_INTERVAL": "1",
    "CELERY_UNACKED_RESTORE_THROTTLE": "1",
}


class WorkerProcess:
    def __init__(self, *, env: dict[str, str], queue: str, log_path: Path, concurrency: int = 1):
        self.env = env
        self.queue = queue
        self.log_path = log_path
        self.concurrency = concurrency
        self.name = f"test-{uuid.uuid4().hex[:8]}@%h"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> None:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "pooljudge",
                "worker",
                "-Q",
                self.queue,
                "-c",
                str(self.concurrency),
                "-P",
                "prefork",
                "-I",
                "tests.worker_tasks",
                "-n",
                self.name,
                "-l",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=settings.BASE_DIR,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"celery worker exited at start:\n{self.log()}")
            if b" ready." in self.log_path.read_bytes():
                return
            time.sleep(0.2)
        raise RuntimeError(f"celery worker not ready after {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def pool_pids(self) -> list[int]:
        """Pids of the prefork children that run the tasks."""
        assert self.process is not None
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid:
                children.append(int(stat.parent.name))
        return children

    def kill_all(self) -> None:
        """SIGKILL the whole worker (main process and pool) at once, as an OOM killer would."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._log.close()
