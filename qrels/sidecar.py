"""The export's sidecar: one row per assessor judgment, as ``judgments.tsv`` and
``judgments.jsonl``.

Both files are written from :class:`qrels.rows.SidecarRow` by the one formatter here
(:func:`format_block`, a block of rows a column at a time), whichever database the rows came
from. The TSV keeps the rows' COPY
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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict
from functools import partial
from itertools import compress, repeat
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


# The fields of a sidecar row (SidecarRow's order) that the files use, by position.
WIDTH = 22
TOPIC, DOC, LABEL, FIRST, POOL, WHO, SOURCE, ITERATION, RUBRIC, REVISIONS, POSITION = (
    0,
    1,
    2,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    12,
)
SERVED, JUDGED, SECONDS, ACTIVE, STRATUM, PROBABILITY, UNREADABLE, UNSURE, NOTE = range(13, 22)

# The text around a JSON line's 20 values, in SIDECAR_COLUMNS' order. The values that are never
# missing and never escaped (the source, the two judgment times) sit inside quotes written here.
_JSON_PARTS = (
    '{"topic": ',
    ', "docid": ',
    ', "label": ',
    ', "assessor": ',
    ', "source": "',
    '", "iteration": ',
    ', "rubric_version": ',
    ', "revisions": ',
    ', "position": ',
    ', "served_at": ',
    ', "first_judged_at": "',
    '", "judged_at": "',
    '", "seconds_on_screen": ',
    ', "active_seconds": ',
    ', "pool": ',
    ', "stratum": ',
    ', "inclusion_probability": ',
    ', "unreadable": ',
    ', "unsure": ',
    ', "note": ',
    "}\n",
)
_TSV_PARTS = ("",) + ("\t",) * 19 + ("\n",)
# ``list(map(table.get, column, column))``: each value through ``table``, kept when absent.
_NULL_IF_EMPTY = {"": "null"}
_NULL_IF_NOT_A_NUMBER = dict.fromkeys(_NOT_A_NUMBER, "null")  # JSON has no NaN, no Infinity
_TSV_FLAG = {"t": "1"}  # anything else "0"
_JSON_FLAG = {"t": "true"}  # anything else "false"
# A text column holds a cell that may need the quote when its joined text holds one of these.
_RISKY_STARTS = tuple("\n" + char for char in sorted(_MAYBE_RISKY))


def format_block(block: str) -> tuple[str, str, int]:
    """(TSV lines, JSON lines, lines) of a block of sidecar rows: COPY text, whole lines of
    :class:`qrels.rows.SidecarRow`'s fields (:func:`qrels.rows.sidecar_row_blocks`). A row of
    a pooled pair nobody judged has no label and no line.

    The one formatter of the sidecar, for every database. It works a column at a time, each
    column through joins, splits, ``map`` and dictionaries (no Python code per row); a column
    holding anything unusual (an escape, a risky first character, a missing or non-finite
    number) takes a per-value path that gives the same text."""
    width = block.count("\t", 0, block.index("\n")) + 1
    values = block[:-1].replace("\n", "\t").split("\t")
    if width != WIDTH or len(values) % WIDTH:
        raise ValueError(f"Sidecar rows have {WIDTH} values each, not {width}.")
    columns = [values[i::WIDTH] for i in range(WIDTH)]
    del values
    if "" in columns[LABEL]:  # pooled pairs nobody judged: no judgment, no line
        labelled = list(map(bool, columns[LABEL]))
        columns = [list(compress(column, labelled)) for column in columns]
    n = len(columns[LABEL])
    if not n:
        return "", "", 0
    topics, docs, whos, iterations, notes = (
        columns[TOPIC],
        columns[DOC],
        columns[WHO],
        columns[ITERATION],
        columns[NOTE],
    )
    first, judged = _iso_column(columns[FIRST]), _iso_column(columns[JUDGED])
    served = _iso_column(columns[SERVED])
    numbers = [columns[i] for i in (RUBRIC, REVISIONS, POSITION)]
    floats = [columns[i] for i in (SECONDS, ACTIVE)]
    places = [columns[i] for i in (POOL, STRATUM, PROBABILITY)]
    unreadable, unsure = columns[UNREADABLE], columns[UNSURE]
    tsv = _interleave(
        _TSV_PARTS,
        [
            _safe_column(topics),
            _safe_column(docs),
            columns[LABEL],
            _safe_column(whos),
            columns[SOURCE],
            _safe_column(iterations),
            *numbers,
            served,
            first,
            judged,
            *floats,
            *places,
            list(map(_TSV_FLAG.get, unreadable, repeat("0"))),
            list(map(_TSV_FLAG.get, unsure, repeat("0"))),
            _safe_column(notes),
        ],
    )
    jsonl = _interleave(
        _JSON_PARTS,
        [
            _json_column(topics),
            _json_column(docs),
            columns[LABEL],
            _json_column(whos),
            columns[SOURCE],
            _json_column(iterations, null_if_empty=True),
            _map(_NULL_IF_EMPTY, numbers[0]),
            numbers[1],
            _map(_NULL_IF_EMPTY, numbers[2]),
            _json_column(served, null_if_empty=True),
            first,
            judged,
            *(_map(_NULL_IF_NOT_A_NUMBER, column) for column in floats),
            _map(_NULL_IF_EMPTY, places[0]),
            _map(_NULL_IF_EMPTY, places[1]),
            _map(_NULL_IF_NOT_A_NUMBER, places[2]),
            list(map(_JSON_FLAG.get, unreadable, repeat("false"))),
            list(map(_JSON_FLAG.get, unsure, repeat("false"))),
            _json_column(notes),
        ],
    )
    return tsv, jsonl, n


def _interleave(parts: Sequence[str], columns: list[list[str]]) -> str:
    """Lines of ``columns``' values with ``parts`` around them: parts[0], the first column's
    value, parts[1], …, the last column's value, parts[-1]."""
    k = 2 * len(columns) + 1
    template = [""] * k
    template[0::2] = parts
    # Each line's last part and the next line's first part, as one.
    line = template[:-1]
    line[0] = parts[-1] + parts[0]
    pieces = line * len(columns[0])
    pieces[0] = parts[0]
    for i, column in enumerate(columns):
        pieces[2 * i + 1 :: k - 1] = column
    pieces.append(parts[-1])
    return "".join(pieces)


def _map(table: dict[str, str], column: list[str]) -> list[str]:
    """Each value through ``table`` (kept when absent)."""
    if table.keys().isdisjoint(column):
        return column
    return list(map(table.get, column, column))


def _safe_column(column: list[str]) -> list[str]:
    """:func:`_safe` of each cell of a text column (the column itself when no cell can need
    the quote)."""
    joined = "\n" + "\n".join(column)
    if not any(start in joined for start in _RISKY_STARTS):
        return column
    return [_safe(text) if text[:1] in _MAYBE_RISKY else text for text in column]


def _json_column(column: list[str], *, null_if_empty: bool = False) -> list[str]:
    """JSON strings of a text column's values (COPY text): ``null`` for an empty value with
    ``null_if_empty``. A column of a few values (a topic, an assessor) goes through a table of
    them; one that holds nothing JSON or COPY escapes is quoted with one join and split."""
    distinct = set(column)
    if len(distinct) * 8 <= len(column):
        table = {text: _json_text(text) for text in distinct}
        if null_if_empty and "" in table:
            table[""] = "null"
        return list(map(table.__getitem__, column))
    if not (null_if_empty and "" in distinct):
        raw = "".join(column)
        # Nothing to escape: no quote, no backslash, no control character.
        if '"' not in raw and "\\" not in raw and raw.isprintable():
            return ('"' + '"\n"'.join(column) + '"').split("\n")
    if null_if_empty:
        return [_json_text(text) if text else "null" for text in column]
    return list(map(_json_text, column))


def _iso_column(column: list[str]) -> list[str]:
    """Timestamps (COPY text: ``2025-03-01 09:00:00.25+00``, UTC) as ISO 8601 with Z
    (``2025-03-01T09:00:00.25Z``); an empty value stays empty."""
    joined = "\n".join(column) + "\n"
    n = len(column)
    if joined.count(" ") == n and joined.count("+00") == n and joined.count("+00\n") == n:
        # One space (the date's end) and one "+00" (the line's end) in every value.
        return joined.replace(" ", "T").replace("+00\n", "Z\n")[:-1].split("\n")
    return [f"{text[:10]}T{text[11:-3]}Z" if text else text for text in column]


def format_rows(rows: Iterable[Sequence[str]]) -> tuple[list[str], list[str]]:
    """The TSV and JSON lines (without newlines) of rows of :class:`qrels.rows.SidecarRow`'s
    fields, through :func:`format_block`."""
    block = "".join("\t".join(row) + "\n" for row in rows)
    if not block:
        return [], []
    tsv, jsonl, lines = format_block(block)
    if not lines:
        return [], []
    return tsv[:-1].split("\n"), jsonl[:-1].split("\n")  # not splitlines: U+2028 is no end


TSV_DESCRIPTION = "Sidecar: one row per assessor judgment (TSV with a header)."
JSONL_DESCRIPTION = "Sidecar: the same rows as JSON Lines."


class SidecarWriter:
    """``judgments.tsv`` and ``judgments.jsonl`` in ``root``, formatted from blocks of COPY
    text (:func:`qrels.rows.sidecar_row_blocks`) and hashed as they are written (on
    ``background``'s thread when given)."""

    def __init__(self, root: Path, background: Background | None = None):
        self.root = root
        self.tsv = HashedFile(root / "judgments.tsv", background=background)
        self.jsonl = HashedFile(root / "judgments.jsonl", background=background)
        self.tsv.write_block(HEADER + "\n", 1)

    def feed(self, block: bytes) -> None:
        tsv, jsonl, lines = format_block(block.decode())
        if lines:
            self.tsv.write_block(tsv, lines)
            self.jsonl.write_block(jsonl, lines)

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
