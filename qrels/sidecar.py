"""The export's sidecar: one row per assessor judgment, as ``judgments.tsv`` and
``judgments.jsonl``.

Both files are written from :class:`qrels.rows.SidecarRow` by the one formatter here
(:func:`format_rows`), whichever database the rows came from. The TSV keeps the rows' COPY
escapes (see ``ESCAPE_RULE``) and puts a quote before risky text (``SAFETY_RULE``); the JSON
Lines carry the raw values.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from pooljudge.common import RISKY_FIRST, planner_settings
from qrels.rows import Scope, SidecarRow, sidecar_row_batches, unescape

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
