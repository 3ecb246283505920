"""TREC qrels files: `topic iteration docid label`, read exactly and written in a stable order.

The iteration column is opaque and kept (seen: 0, Q0, 0.5, 1). Labels are integers and may be
negative (-1 = pooled but not judged): never clamped. A pair judged twice is resolved by an
explicit policy, never by line order. Nothing here imports Django.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO, TextIO

from campaigns.textfiles import (
    MAX_PROBLEMS,
    ProblemCollector,
    check_id,
    decode_lines,
    parse_bounded_int,
    read_bytes,
    shown,
    source_name,
    split_fields,
)

CONFLICT_POLICIES = ("refuse", "max", "min", "first")
QRELS_COLUMNS = "topic iteration docid label"
# Labels are stored in a 32-bit integer column.
LABEL_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class QrelsJudgment:
    topic_id: str
    doc_id: str
    label: int
    iteration: str
    line: int


@dataclass
class ParsedQrels:
    judgments: list[QrelsJudgment]  # one per (topic, doc) pair, in file order of first appearance
    warnings: list[str]  # e.g. "line 40 repeats line 12 (same label): collapsed"
    policy: str


def parse_label(text: str) -> tuple[int | None, str | None]:
    """(label, None) or (None, why not): an integer in ASCII digits, sign allowed."""
    return parse_bounded_int(text, "label", LABEL_LIMIT)


def parse_qrels(
    lines: Iterable[str], *, source: str = "<qrels>", on_conflict: str = "refuse"
) -> ParsedQrels:
    """Every judgment of a qrels file; ParseError listing every problem.

    A pair given twice with the same label is collapsed (with a warning). Conflicting labels
    follow `on_conflict`: "refuse" (every conflict is reported), "max", "min" or "first"; the
    judgment kept carries the line and iteration of the occurrence whose label was kept.
    """
    problems = ProblemCollector(source)
    if on_conflict not in CONFLICT_POLICIES:
        problems.add(
            None,
            f"unknown conflict policy {on_conflict!r}; expected one of "
            + ", ".join(CONFLICT_POLICIES),
        )
        problems.raise_if_any()
    judgments: dict[tuple[str, str], QrelsJudgment] = {}
    warnings: list[str] = []
    extra_warnings = 0

    def warn(message: str) -> None:
        nonlocal extra_warnings
        if len(warnings) < MAX_PROBLEMS:
            warnings.append(message)
        else:
            extra_warnings += 1

    for number, line in enumerate(lines, 1):
        parts = split_fields(line)
        if not parts or parts[0][0] == "#":
            continue
        if len(parts) != 4:
            hint = " (is the iteration column missing?)" if len(parts) == 3 else ""
            problems.add(
                number,
                f"has {len(parts)} column{'s' if len(parts) != 1 else ''}; "
                f"a qrels line has 4: {QRELS_COLUMNS}{hint}",
            )
            continue
        topic, iteration, doc, label_text = parts
        ok = True
        for what, value in (("topic id", topic), ("document id", doc)):
            reason = check_id(value)
            if reason:
                problems.add(number, f"{what} {shown(value)} {reason}")
                ok = False
        label, reason = parse_label(label_text)
        if reason:
            problems.add(number, reason)
            ok = False
        if not ok:
            continue
        key = (topic, doc)
        earlier = judgments.get(key)
        if earlier is None:
            judgments[key] = QrelsJudgment(topic, doc, label, iteration, number)
            continue
        if earlier.label == label:
            warn(f"line {number} repeats line {earlier.line} (same label): collapsed")
            continue
        pair = f"topic {shown(topic)} document {shown(doc)}"
        if on_conflict == "refuse":
            problems.add(
                number,
                f"{pair}: label {label} conflicts with label {earlier.label} at line "
                f"{earlier.line}",
            )
            continue
        keep_new = (on_conflict == "max" and label > earlier.label) or (
            on_conflict == "min" and label < earlier.label
        )
        kept = label if keep_new else earlier.label
        warn(
            f"line {number}: {pair} label {label} conflicts with label {earlier.label} at line "
            f"{earlier.line}; kept {kept} (policy {on_conflict})"
        )
        if keep_new:
            # Same place in the output (first appearance), the occurrence that won.
            judgments[key] = QrelsJudgment(topic, doc, label, iteration, number)
    if not judgments and not problems:
        problems.add(None, f"has no judgments ({QRELS_COLUMNS})")
    problems.raise_if_any()
    if extra_warnings:
        warnings.append(f"… and {extra_warnings} more warnings")
    return ParsedQrels(list(judgments.values()), warnings, on_conflict)


def read_qrels_file(
    source: str | os.PathLike | BinaryIO,
    *,
    name: str | None = None,
    on_conflict: str = "refuse",
    encoding: str | None = None,
) -> ParsedQrels:
    """The judgments of a qrels file (path or binary file object; gzip by name or magic)."""
    display = source_name(source, name)
    lines = decode_lines(read_bytes(source, name=name), source=display, encoding=encoding)
    return parse_qrels(lines, source=display, on_conflict=on_conflict)


def qrels_sort_key(topic_id: str, doc_id: str) -> tuple[str, str]:
    """The documented stable order of exported qrels: topic id, then doc id, both as plain
    code-point strings (what `LC_ALL=C sort` gives for ASCII ids; "10" sorts before "9")."""
    return (topic_id, doc_id)


def write_qrels(rows: Iterable[tuple[str, str, int]], out: TextIO, *, iteration: str = "0") -> int:
    """Write (topic_id, doc_id, label) rows as `topic 0 docid label` lines; return how many.

    The caller sorts (see qrels_sort_key). Raises ValueError for an id or iteration that would
    not read back (whitespace, control characters, empty) or a label that is not an integer.
    """
    reason = check_id(iteration)
    if reason:
        raise ValueError(f"iteration {iteration!r} {reason}")
    count = 0
    for topic_id, doc_id, label in rows:
        for what, value in (("topic id", topic_id), ("document id", doc_id)):
            reason = check_id(value)
            if reason:
                raise ValueError(f"{what} {value!r} {reason}")
        if isinstance(label, bool) or not isinstance(label, int):
            raise ValueError(f"label {label!r} is not an integer")
        out.write(f"{topic_id} {iteration} {doc_id} {label}\n")
        count += 1
    return count
