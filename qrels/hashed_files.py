"""Files of a bundle written through a buffer and hashed (SHA-256) as they are written, with
the thread that does the hashing and writing beside the formatting.

This module imports no Django: the sidecar's formatting process (:mod:`qrels.sidecar`) writes
its two files with it.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO

FLUSH_LINES = 8192


@dataclass(frozen=True)
class BundleFile:
    path: str
    sha256: str
    bytes: int
    lines: int
    description: str
    labels: dict[str, int] | None = None  # qrels files: lines per label


class Background:
    """Hashing and file writes, in order, on one thread beside the main loop: hashlib and file
    writes release the GIL, so they run while the next rows are formatted. At most ``depth``
    blocks wait, so memory stays bounded."""

    def __init__(self, depth: int = 8):
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="export-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            task = self._queue.get()
            try:
                if task is None:
                    return
                if self._error is None:
                    task()
            except BaseException as exc:  # reported by the next submit or drain
                self._error = exc
            finally:
                self._queue.task_done()

    def submit(self, task: Callable[[], None]) -> None:
        self._raise()
        self._queue.put(task)

    def drain(self) -> None:
        """Wait until everything submitted is done; raise what failed."""
        self._queue.join()
        self._raise()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error


class HashedFile:
    """A UTF-8 text file written through a buffer, hashed and counted as it goes.

    With ``lines`` each ``write`` is one line given without its newline (the buffer is joined
    with newlines); otherwise ``write`` takes text with its newlines, one line per call.
    ``keep_open=False`` reopens the file for each flush, for the many small per-assessor files
    (no file-descriptor limit to meet). With ``background``, hashing and writing happen there.
    """

    def __init__(
        self,
        path: Path,
        *,
        flush_lines: int = FLUSH_LINES,
        keep_open: bool = True,
        lines: bool = False,
        background: Background | None = None,
    ):
        self.path = path
        self.lines = 0
        self.bytes = 0
        self._parts: list[str] = []
        self._block_lines = 0  # lines of write_block beyond one per part
        self._flush_lines = flush_lines
        self._digest = hashlib.sha256()
        self._separator = "\n" if lines else ""
        self._background = background
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: BinaryIO | None = open(path, "wb") if keep_open else None  # noqa: SIM115
        if not keep_open:
            path.write_bytes(b"")

    def write(self, line: str) -> None:
        self._parts.append(line)
        if len(self._parts) >= self._flush_lines:
            self.flush()

    @property
    def append(self) -> Callable[[str], None]:
        """The buffer's own ``append``, for hot loops that call :meth:`flush` themselves."""
        return self._parts.append

    def extend(self, parts: list[str]) -> None:
        self._parts.extend(parts)
        if len(self._parts) >= self._flush_lines:
            self.flush()

    def write_block(self, text: str, lines: int) -> None:
        """``lines`` whole lines at once, with their newlines (a file without ``lines``)."""
        self._parts.append(text)
        self._block_lines += lines - 1
        if len(self._parts) + self._block_lines >= self._flush_lines:
            self.flush()

    def flush(self) -> None:
        if not self._parts:
            return
        lines = len(self._parts) + self._block_lines
        if self._separator:
            self._parts.append("")  # the last line's newline, without copying the text again
        data = self._separator.join(self._parts).encode()
        self.lines += lines
        self._block_lines = 0
        self._parts.clear()  # in place: the bound append stays valid
        self.bytes += len(data)
        if self._background is not None:
            self._background.submit(partial(self._store, data))
        else:
            self._store(data)

    def _store(self, data: bytes) -> None:
        self._digest.update(data)
        if self._file is not None:
            self._file.write(data)
        else:
            with open(self.path, "ab") as handle:
                handle.write(data)

    def close(self, root: Path, description: str, labels=None) -> BundleFile:
        self.flush()
        if self._background is not None:
            self._background.drain()
        if self._file is not None:
            self._file.close()
        return BundleFile(
            path=self.path.relative_to(root).as_posix(),
            sha256=self._digest.hexdigest(),
            bytes=self.bytes,
            lines=self.lines,
            description=description,
            labels=labels,
        )


class HashingStream:
    """A write-only, non-seekable wrapper counting and hashing what passes to ``target``."""

    def __init__(self, target: BinaryIO):
        self.target = target
        self.size = 0
        self.digest = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        self.target.write(data)
        return len(data)

    def flush(self) -> None:
        flush = getattr(self.target, "flush", None)
        if flush is not None:
            flush()
