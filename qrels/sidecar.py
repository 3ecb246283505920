"""The export's sidecar: one row per assessor judgment, as ``judgments.tsv`` and
``judgments.jsonl``.

Both files are written from :class:`qrels.rows.SidecarRow` by the one formatter here
(:func:`format_rows`), whichever database the rows came from. The TSV keeps the rows' COPY
escapes (see ``ESCAPE_RULE``) and puts a quote before risky text (``SAFETY_RULE``); the JSON
Lines carry the raw values.

An export streams the rows as blocks of COPY text (:func:`qrels.rows.sidecar_row_blocks`) to a
:class:`SidecarWriter`, which formats and writes both files. A large export runs that writer
in a second process (:class:`SidecarProcess`, this module run as ``python -m qrels.sidecar``),
so that formatting the sidecar overlaps reading the rows and resolving the qrels; the bytes are
the same either way. This module imports no Django at import time, so that process starts
without it.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pooljudge.common import RISKY_FIRST, planner_settings
from qrels.copytext import unescape
from qrels.hashed_files import Background, BundleFile, HashedFile

if TYPE_CHECKING:
    from qrels.rows import Scope, SidecarRow

log = logging.getLogger(__name__)

SIDECAR_COLUMNS = (
    "topic",
    "docid",
    "label",
    "assessor",
    "source",
    "iteration",
    "rubric_version",
    "revisions",
    "position",
    "served_at",
    "first_judged_at",
    "judged_at",
    "seconds_on_screen",
    "active_seconds",
    "pool",
    "stratum",
    "inclusion_probability",
    "unreadable",
    "unsure",
    "note",
)
TEXT_COLUMNS = ("topic", "docid", "assessor", "source", "iteration", "note")
SAFETY_RULE = (
    "Text cells (topic, docid, assessor, source, iteration, note) that start with = + - @ ' or "
    "a tab or carriage return get one extra ' in front, so no spreadsheet reads them as a "
    "formula. "
    "To recover the value, remove one leading ' from a text cell that starts with one. "
    "Labels and other numbers are never changed."
)
ESCAPE_RULE = (
    "Inside TSV cells, backslash, tab, newline and carriage return are written `\\\\` `\\t` "
    "`\\n` `\\r` (and backspace, form feed, vertical tab `\\b` `\\f` `\\v`): PostgreSQL's COPY "
    "text format. Decode the escapes first, then the leading quote. Empty cells are missing "
    "values. judgments.jsonl carries the same rows as JSON, with the raw strings (no quote, no "
    "escapes)."
)
HEADER = "\t".join(SIDECAR_COLUMNS)

# A cell whose first character is one of these may need the quote (an escaped tab or carriage
# return starts with a backslash); _safe decides.
_MAYBE_RISKY = RISKY_FIRST | {"\\"}
_json_string = json.encoder.encode_basestring  # the C encoder json.dumps(ensure_ascii=False) uses
_NOT_A_NUMBER = frozenset({"", "NaN", "Infinity", "-Infinity"})  # JSON has none of these


def _safe(text: str) -> str:
    """Spreadsheet-safe TSV cell from COPY-escaped text: one ' in front when the raw value
    starts with = + - @ ' tab or carriage return (escaped, those two begin \\t and \\r)."""
    first = text[:1]
    if first in RISKY_FIRST or (first == "\\" and text[1:2] in ("t", "r")):
        return "'" + text
    return text


def decode_cell(cell: str) -> str:
    """A TSV text cell back to its value: undo the escapes, then remove one leading quote."""
    value = unescape(cell)
    return value[1:] if value.startswith("'") else value


def _json_text(text: str) -> str:
    return _json_string(unescape(text) if "\\" in text else text)


def format_rows(rows: Iterable[SidecarRow]) -> tuple[list[str], list[str]]:
    """The sidecar lines (TSV, JSON; without newlines) of the rows that are judgments (a row
    of a pooled pair nobody judged has no label and no line).

    The one formatter of the sidecar, for every database. A hot loop (one call per few
    thousand rows): fields are unpacked by position, in SidecarRow's order, and the JSON of a
    topic or assessor is reused while it repeats."""
    tsv: list[str] = []
    jsonl: list[str] = []
    add_tsv, add_json = tsv.append, jsonl.append
    maybe_risky, safe, string, not_a_number = _MAYBE_RISKY, _safe, _json_string, _NOT_A_NUMBER
    last_topic = last_who = None
    json_topic = json_who = ""
    for (
        topic,
        doc,
        label,
        _,
        _,
        first,
        pool,
        who,
        source,
        iteration,
        rubric,
        revisions,
        position,
        served,
        judged,
        seconds,
        active,
        stratum,
        probability,
        unreadable,
        unsure,
        note,
    ) in rows:
        if not label:
            continue
        if topic != last_topic:
            last_topic = topic
            json_topic = _json_text(topic)
        if who != last_who:
            last_who = who
            json_who = _json_text(who)
        first = f"{first[:10]}T{first[11:-3]}Z"
        judged = f"{judged[:10]}T{judged[11:-3]}Z"
        if served:
            served = f"{served[:10]}T{served[11:-3]}Z"
        unreadable = unreadable == "t"
        unsure = unsure == "t"
        flags = ("1\t1" if unsure else "1\t0") if unreadable else ("0\t1" if unsure else "0\t0")
        add_tsv(
            f"{safe(topic) if topic[:1] in maybe_risky else topic}\t"
            f"{safe(doc) if doc[:1] in maybe_risky else doc}\t{label}\t"
            f"{safe(who) if who[:1] in maybe_risky else who}\t{source}\t"
            f"{safe(iteration) if iteration[:1] in maybe_risky else iteration}\t{rubric}\t"
            f"{revisions}\t{position}\t{served}\t{first}\t{judged}\t{seconds}\t{active}\t"
            f"{pool}\t{stratum}\t{probability}\t{flags}\t"
            f"{safe(note) if note[:1] in maybe_risky else note}"
        )
        json_doc = string(doc) if "\\" not in doc else _json_text(doc)
        json_served = '"' + served + '"' if served else "null"
        json_note = _json_text(note) if note else '""'
        json_iteration = _json_text(iteration) if iteration else "null"
        add_json(
            f'{{"topic": {json_topic}, "docid": {json_doc}, "label": {label}, '
            f'"assessor": {json_who}, "source": "{source}", "iteration": {json_iteration}, '
            f'"rubric_version": {rubric or "null"}, "revisions": {revisions}, '
            f'"position": {position or "null"}, "served_at": {json_served}, '
            f'"first_judged_at": "{first}", "judged_at": "{judged}", '
            f'"seconds_on_screen": {"null" if seconds in not_a_number else seconds}, '
            f'"active_seconds": {"null" if active in not_a_number else active}, '
            f'"pool": {pool or "null"}, "stratum": {stratum or "null"}, '
            f'"inclusion_probability": {"null" if probability in not_a_number else probability}, '
            f'"unreadable": {"true" if unreadable else "false"}, '
            f'"unsure": {"true" if unsure else "false"}, "note": {json_note}}}'
        )
    return tsv, jsonl


def block_rows(block: str) -> Iterator[tuple[str, ...]]:
    """The rows of a block of COPY text (whole lines, each ending with a newline) as tuples of
    its values, split at once: in the COPY text format a tab or newline inside a value is
    escaped, so every tab and newline of the block separates values."""
    width = block.count("\t", 0, block.index("\n")) + 1
    values = block[:-1].replace("\n", "\t").split("\t")
    if len(values) % width:
        raise ValueError("A block of COPY text whose lines have different numbers of values.")
    return zip(*[iter(values)] * width, strict=True)


TSV_DESCRIPTION = "Sidecar: one row per assessor judgment (TSV with a header)."
JSONL_DESCRIPTION = "Sidecar: the same rows as JSON Lines."


class SidecarWriter:
    """``judgments.tsv`` and ``judgments.jsonl`` in ``root``, formatted from blocks of COPY
    text (:func:`qrels.rows.sidecar_row_blocks`) and hashed as they are written (on
    ``background``'s thread when given)."""

    def __init__(self, root: Path, background: Background | None = None):
        self.root = root
        self.tsv = HashedFile(root / "judgments.tsv", lines=True, background=background)
        self.jsonl = HashedFile(root / "judgments.jsonl", lines=True, background=background)
        self.tsv.write(HEADER)

    def feed(self, block: bytes) -> None:
        tsv, jsonl = format_rows(block_rows(block.decode()))
        self.tsv.extend(tsv)
        self.jsonl.extend(jsonl)

    def close(self) -> list[BundleFile]:
        return [
            self.tsv.close(self.root, TSV_DESCRIPTION),
            self.jsonl.close(self.root, JSONL_DESCRIPTION),
        ]

    def abort(self) -> None:
        return None


# Below this many rows the sidecar is formatted in the exporting process.
SIDECAR_PROCESS_MIN_ROWS = 50_000
_FRAME = struct.Struct("<Q")  # a block's length in bytes, before the block, on the pipe
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the directory holding the qrels package


class SidecarProcess:
    """A :class:`SidecarWriter` in a second process (``python -m qrels.sidecar ROOT``): the
    blocks go to it through a pipe (written by a thread, so a slow reader does not stop this
    process), the files' hashes and sizes come back when it is closed. Raises OSError when the
    process cannot be started: the caller then writes in its own process."""

    def __init__(self, root: Path):
        if not sys.executable:
            raise OSError("no Python interpreter to start")
        path = os.environ.get("PYTHONPATH")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(_PACKAGE_ROOT)] + ([path] if path else [])),
        }
        self.root = root
        self._process = subprocess.Popen(  # noqa: S603 (this interpreter, this module)
            [sys.executable, "-m", "qrels.sidecar", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self._pipe: BinaryIO = self._process.stdin  # type: ignore[assignment]
        self._sender = Background()

    def feed(self, block: bytes) -> None:
        try:
            self._sender.submit(partial(self._send, block))
        except BrokenPipeError:
            self._fail()

    def _send(self, block: bytes) -> None:
        self._pipe.write(_FRAME.pack(len(block)))
        self._pipe.write(block)

    def close(self) -> list[BundleFile]:
        try:
            self._sender.drain()
        except BrokenPipeError:
            self._fail()
        finally:
            self._sender.stop()
        output, errors = self._process.communicate()
        if self._process.returncode:
            raise RuntimeError(f"The sidecar process failed: {errors.decode(errors='replace')}")
        return [BundleFile(**entry) for entry in json.loads(output)]

    def _fail(self) -> None:
        self._sender.stop()
        self._process.stdin.close()  # type: ignore[union-attr]
        errors = self._process.stderr.read().decode(errors="replace")  # type: ignore[union-attr]
        self._process.wait()
        raise RuntimeError(f"The sidecar process failed: {errors}")

    def abort(self) -> None:
        """Stop the process (the export failed or was cancelled); its files are left as they
        are, for the caller to remove."""
        self._process.kill()
        self._process.wait()
        self._sender.stop()


def _serve(root: Path, source: BinaryIO, out: BinaryIO) -> None:
    """The sidecar process: frames from ``source`` into a :class:`SidecarWriter`, then the
    files' entries as JSON to ``out``."""
    background = Background()
    try:
        writer = SidecarWriter(root, background)
        while header := source.read(_FRAME.size):
            (size,) = _FRAME.unpack(header)
            block = source.read(size)
            if len(block) != size:
                raise EOFError("The export stopped in the middle of a block.")
            writer.feed(block)
        files = writer.close()
    finally:
        background.stop()
    out.write(json.dumps([asdict(f) for f in files]).encode())


def open_sidecar(root: Path, background: Background, rows: int) -> SidecarWriter | SidecarProcess:
    """The writer of an export's sidecar over about ``rows`` rows: a :class:`SidecarProcess`
    when the export is large enough to repay starting one (about 0.3 s of CPU) and the
    machine has a second CPU, else (or when no process can be started) a
    :class:`SidecarWriter` here."""
    if rows >= SIDECAR_PROCESS_MIN_ROWS and (os.cpu_count() or 1) > 1:
        try:
            return SidecarProcess(root)
        except OSError as exc:
            log.warning("formatting the sidecar in this process: cannot start one (%r)", exc)
    return SidecarWriter(root, background)


def sidecar_blocks(
    s: Scope, *, usernames: bool = False, pooled_unjudged: bool = False
) -> Iterator[bytes]:
    """The sidecar's rows as blocks of COPY text (:func:`qrels.rows.sidecar_row_blocks`), read
    with the planner settings of :func:`sidecar_batches`."""
    from qrels.rows import sidecar_row_blocks

    blocks = sidecar_row_blocks(s, usernames=usernames, pooled_unjudged=pooled_unjudged)
    with planner_settings(work_mem="128MB", enable_nestloop="off"):
        try:
            yield from blocks
        finally:
            blocks.close()  # ends the COPY before the settings are restored


def sidecar_batches(
    s: Scope,
    *,
    usernames: bool = False,
    pooled_unjudged: bool = False,
    use_copy: bool | None = None,
) -> Iterator[list[SidecarRow]]:
    """The sidecar's rows (:func:`qrels.rows.sidecar_row_batches`) a few thousand at a time,
    read with the planner settings that keep the query's sort in memory and its joins hashed
    (:func:`pooljudge.common.planner_settings`; measured: the COPY takes about half as long,
    with or without planner statistics)."""
    from qrels.rows import sidecar_row_batches

    batches = sidecar_row_batches(
        s, usernames=usernames, pooled_unjudged=pooled_unjudged, use_copy=use_copy
    )
    with planner_settings(work_mem="128MB", enable_nestloop="off"):
        try:
            yield from batches
        finally:
            batches.close()  # ends the COPY before the settings are restored


def sidecar_rows(
    s: Scope,
    *,
    usernames: bool = False,
    pooled_unjudged: bool = False,
    use_copy: bool | None = None,
) -> Iterator[tuple[SidecarRow, str, str]]:
    """(row, TSV line, JSON line) for each row of :func:`sidecar_batches`; the lines are empty
    for a pooled pair nobody judged."""
    for batch in sidecar_batches(
        s, usernames=usernames, pooled_unjudged=pooled_unjudged, use_copy=use_copy
    ):
        for row in batch:
            if row.label:
                (tsv,), (jsonl,) = format_rows((row,))
                yield row, tsv, jsonl
            else:
                yield row, "", ""


if __name__ == "__main__":
    _serve(Path(sys.argv[1]), sys.stdin.buffer, sys.stdout.buffer)
