"""The sidecar's formatter (qrels.sidecar.format_rows) against what its files promise: the JSON
Lines carry the raw values, each TSV cell decodes back to its value and no text cell starts as a
spreadsheet formula. Rows of every kind: escapes, quotes, control characters, risky first
characters, missing and non-finite numbers, pooled pairs nobody judged.

No database: the rows are generated as the queries send them (COPY text, qrels.rows.SidecarRow).
"""

from __future__ import annotations

import json
import math
import random

import pytest

from pooljudge.common import RISKY_FIRST
from qrels.copytext import COPY_ESCAPES, unescape
from qrels.sidecar import SIDECAR_COLUMNS, TEXT_COLUMNS, block_rows, decode_cell, format_rows

ODD_TEXT = [
    "=x",
    "+1",
    "-2",
    "@me",
    "'q",
    "\t",
    "\r",
    "\n",
    "\\",
    '"',
    'say "hi"',
    "é ü \u2028 😀",
    "\x01\x1f\x7f",
    "\x00",
    "\u00a0nb",
    "\\t",
    " sp",
    "a b",
]
FLOATS = ["", "NaN", "Infinity", "-Infinity", "1e-05", "3.25", "0", "12"]


class Rows:
    """Random sidecar rows as COPY text; ``odd`` is the chance of an unusual value."""

    def __init__(self, seed: int, odd: float):
        self.rng = random.Random(seed)
        self.odd = odd

    def text(self, plain: str) -> str:
        rng = self.rng
        if rng.random() >= self.odd:
            return plain
        value = "".join(rng.choice(ODD_TEXT) for _ in range(rng.randrange(1, 4)))
        return value.translate(COPY_ESCAPES)

    def timestamp(self, nullable: bool = False) -> str:
        rng = self.rng
        if nullable and rng.random() < 0.3:
            return ""
        fraction = "" if rng.random() < 0.2 else "." + str(rng.randrange(1, 999_999)).rstrip("0")
        return (
            f"2025-0{rng.randrange(1, 10)}-{rng.randrange(1, 29):02d} "
            f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}{fraction}+00"
        )

    def number(self, nullable: bool) -> str:
        if nullable and self.rng.random() < self.odd:
            return ""
        return str(self.rng.randrange(0, 100))

    def float(self) -> str:
        if self.rng.random() < self.odd:
            return self.rng.choice(FLOATS)
        return str(round(self.rng.uniform(0, 90), 3))

    def row(self, topic: str, who: str) -> list[str]:
        rng = self.rng
        return [
            self.text(topic),
            self.text(f"doc{rng.randrange(10**6):06d}"),
            "" if rng.random() < self.odd / 2 else str(rng.randrange(0, 3)),  # "": unjudged
            str(rng.randrange(1, 10)),  # assessor id
            "p-abc",
            self.timestamp(),
            self.number(True),  # pool
            self.text(who),
            rng.choice(["person", "imported", "model"]),
            "" if rng.random() < 0.7 else self.text("Q0"),
            self.number(True),  # rubric version
            self.number(False),  # revisions
            self.number(True),  # position
            self.timestamp(nullable=True),  # served
            self.timestamp(),
            self.float(),
            self.float(),
            self.number(True),  # stratum
            self.float(),
            rng.choice("tf"),
            rng.choice("tf"),
            "" if rng.random() < 0.8 else self.text("a note"),
        ]


def iso(text: str) -> str | None:
    return f"{text[:10]}T{text[11:-3]}Z" if text else None


def number(text: str) -> float | None:
    value = float(text) if text else None
    return None if value is None or not math.isfinite(value) else value


def expected(values: list[str]) -> dict:
    """The row as its JSON line must say it: raw strings, numbers, null for what is missing."""
    (topic, doc, label, _, _, first, pool, who, source, iteration, rubric, revisions) = values[:12]
    (position, served, judged, seconds, active, stratum, probability) = values[12:19]
    unreadable, unsure, note = values[19:]
    return {
        "topic": unescape(topic),
        "docid": unescape(doc),
        "label": int(label),
        "assessor": unescape(who),
        "source": source,
        "iteration": unescape(iteration) or None,
        "rubric_version": int(rubric) if rubric else None,
        "revisions": int(revisions),
        "position": int(position) if position else None,
        "served_at": iso(served),
        "first_judged_at": iso(first),
        "judged_at": iso(judged),
        "seconds_on_screen": number(seconds),
        "active_seconds": number(active),
        "pool": int(pool) if pool else None,
        "stratum": int(stratum) if stratum else None,
        "inclusion_probability": number(probability),
        "unreadable": unreadable == "t",
        "unsure": unsure == "t",
        "note": unescape(note),
    }


def check(rows: list[list[str]]) -> None:
    block = "".join("\t".join(row) + "\n" for row in rows)
    tsv, jsonl = format_rows(block_rows(block))
    judged = [row for row in rows if row[2]]  # a pooled pair nobody judged has no line
    assert len(tsv) == len(jsonl) == len(judged)
    for row, tsv_line, json_line in zip(judged, tsv, jsonl, strict=True):
        assert "\n" not in tsv_line
        assert "\n" not in json_line
        want = expected(row)
        got = json.loads(json_line)
        assert list(got) == list(SIDECAR_COLUMNS)
        assert got == want, json_line
        cells = dict(zip(SIDECAR_COLUMNS, tsv_line.split("\t"), strict=True))
        for column in TEXT_COLUMNS:
            if column == "source":
                assert cells[column] == want[column]
                continue
            assert decode_cell(cells[column]) == (want[column] or ""), (column, tsv_line)
            # What a spreadsheet reads (the escapes undone) never starts a formula.
            assert unescape(cells[column])[:1] not in RISKY_FIRST - {"'"}
        for column in ("served_at", "first_judged_at", "judged_at"):
            assert cells[column] == (want[column] or "")
        assert (cells["unreadable"], cells["unsure"]) == (
            str(int(want["unreadable"])),
            str(int(want["unsure"])),
        )
        for column in ("seconds_on_screen", "active_seconds", "inclusion_probability"):
            assert cells[column] == row[SIDECAR_ROW_INDEX[column]]  # as the database wrote it


SIDECAR_ROW_INDEX = {"seconds_on_screen": 15, "active_seconds": 16, "inclusion_probability": 18}


@pytest.mark.parametrize("odd", [0.0, 0.02, 0.3, 1.0])
def test_blocks_of_every_kind_of_row(odd):
    rows = Rows(seed=int(odd * 100), odd=odd)
    for size in (1, 2, 3, 17, 400):
        for topic, who in (("051", "alice"), ("=1", "+bob")):
            block = []
            for i in range(size):
                block.append(rows.row(topic if i % 7 else f"t{i}", who if i % 3 else "carol"))
            assert len(block[0]) == len(SIDECAR_COLUMNS) + 2  # and assessor id, pseudonym
            check(block)
