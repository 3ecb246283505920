"""PostgreSQL's COPY text format, the one representation of a row's values in ``qrels``.

A row (:mod:`qrels.rows`) is a line of text: values separated by tabs, NULL written as the empty
string, text backslash-escaped (:func:`unescape` undoes it), integers in decimal, floats as
PostgreSQL writes them (:func:`pg_float`), booleans ``t``/``f``, timestamps in UTC as
``2025-03-01 09:00:00.25+00``. PostgreSQL sends rows so through ``COPY … TO STDOUT``; the
converters here (``as_*``) make the same text from values read through a cursor elsewhere.

This module imports no Django: the sidecar's formatting process (:mod:`qrels.sidecar`) uses it.
"""

from __future__ import annotations

from datetime import UTC

NULL = ""
COPY_ESCAPES = str.maketrans(
    {"\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
)
_UNESCAPES = {"\\": "\\", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def unescape(text: str) -> str:
    """Undo COPY-text escaping (``\\\\ \\t \\n \\r \\b \\f \\v``)."""
    if "\\" not in text:
        return text
    out = []
    chars = iter(text)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append(_UNESCAPES.get(following, following))
        else:
            out.append(char)
    return "".join(out)


# Converters: a value read through a cursor as the COPY text PostgreSQL would have sent.


def as_text(value) -> str:
    return NULL if value is None else str(value).translate(COPY_ESCAPES)


def as_int(value) -> str:
    return NULL if value is None else str(value)


def pg_float(value: float) -> str:
    """A float as PostgreSQL writes it: the shortest text that reads back to the same value,
    without a trailing ``.0``; NaN and Infinity spelled its way."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def as_float(value) -> str:
    return NULL if value is None else pg_float(float(value))


def as_flag(value) -> str:
    return NULL if value is None else ("t" if value else "f")


def as_timestamp(value) -> str:
    """A timestamp read through a cursor (SQLite's stored text, or a datetime) as PostgreSQL
    writes a timestamptz in UTC: ``2025-03-01 09:00:00.25+00``."""
    if value is None:
        return NULL
    if not isinstance(value, str):  # a datetime (PostgreSQL, or a SQLite converter)
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        value = str(value)
    text = value[:26].replace("T", " ")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text + "+00"


def iso_timestamp(text: str) -> str:
    """A row's timestamp as ISO 8601 with Z: ``2025-03-01T09:00:00.25Z``."""
    return text[:10] + "T" + text[11:-3] + "Z"


def sortable_timestamp(text: str) -> str:
    """A row's timestamp with all six fraction digits, so that text order is time order."""
    text = text[:-3]
    if "." not in text:
        return text + ".000000"
    return text.ljust(26, "0")
