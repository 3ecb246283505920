"""Topic and document files: TREC SGML, TSV, JSONL and SMART (Cranfield, CISI, CACM, MED).

Plain Python over lines (strings, or (line number, line) pairs from ``textfiles.iter_lines``);
nothing here imports Django. Every problem is collected with its line number and raised at the
end as one ParseError: nothing is returned from a file with a bad line.

Choices other code relies on:
- Ids are strings, kept exactly (``.I 001`` is topic ``"001"``).
- Topic text fields (title, description, narrative) are whitespace-collapsed to single lines in
  every format.
- Document titles are collapsed to one line; bodies keep their line structure. JSONL and TSV
  bodies are kept exactly as given. TREC SGML bodies lose the DOCNO/DOCHDR/DOCOLDNO/DOCID
  elements, the title element, SGML comments and the tags (not the content) of known TREC fields
  (<TEXT>, <DATE>, <BYLINE>…); HTML inside them is kept raw for ``sanitize.render_body``.
- SMART documents: the body is the .W text, preceded by an "Authors: …" and a "Source: …" line
  (from .A and .B, when not empty) and a blank line. Other fields (.X, .N, .K…) are ignored. A
  field marker repeated inside a record (Cranfield documents 240 and 578 have stray .A/.B/.W
  lines inside their abstracts) is kept as a text line of the field being read.
- A TSV line holding a carriage return (other than in a CRLF line end) is refused: lines end at
  LF, so a file with old Mac CR line endings would be one line whose rows run into its columns.
"""

from __future__ import annotations

import bisect
import html
import itertools
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

from campaigns.textfiles import (
    ParseError,
    ProblemCollector,
    check_id,
    is_skippable,
    numbered,
    shown,
)

TOPIC_FORMATS = ("trec", "tsv", "jsonl", "smart")
DOCUMENT_FORMATS = ("trec", "jsonl", "tsv", "smart")

TOPIC_ID_KEYS = ("id", "topic_id", "qid", "query_id", "number")
TOPIC_TITLE_KEYS = ("title", "query", "text")
TOPIC_DESCRIPTION_KEYS = ("description", "desc", "question")
TOPIC_NARRATIVE_KEYS = ("narrative", "narr")
DOCUMENT_ID_KEYS = ("id", "docid", "_id", "doc_id", "docno")
DOCUMENT_TEXT_KEYS = ("text", "contents", "body", "abstract")
GUESS_LINES = 200


@dataclass(frozen=True)
class TopicRecord:
    topic_id: str
    title: str
    description: str = ""
    narrative: str = ""
    line: int = 0
    original_id: str = ""  # the file's own id, when topic_id is the topic's position


@dataclass(frozen=True)
class DocumentRecord:
    doc_id: str
    title: str
    body: str
    line: int


def collapse(text: str) -> str:
    """The text on one line, runs of whitespace turned into single spaces."""
    return " ".join(text.split())


# --- Guessing the format ------------------------------------------------------------------------
# Structure decides first: markup, a line that parses as a JSON object, tab-separated columns.
# What an id happens to look like (".X", "{a") only breaks a tie that the structure leaves open,
# and a tie that stays open is refused with a request to choose the format.


def _content_lines(lines: Iterable[str]) -> list[str]:
    """The lines that are not blank or # comments, as given (a leading tab is a TSV column)."""
    return [line for line in lines if not is_skippable(line)]


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


def _cannot_tell(what: str, formats: tuple[str, ...], source: str, why: str = "") -> ParseError:
    return ParseError.single(
        source,
        None,
        f"cannot tell the {what} format from the first lines{why}; choose one of "
        + ", ".join(formats),
    )


def _guess_plain_format(
    content: list[str], what: str, formats: tuple[str, ...], source: str
) -> str:
    """jsonl, tsv or smart for content lines that are not SGML; ParseError when it cannot tell."""
    first = content[0].lstrip()
    tabbed = "\t" in content[0]
    every_line_tabbed = all("\t" in line for line in content)
    if first.startswith("{"):
        if _is_json_object(first) or not tabbed:
            return "jsonl"  # a broken JSON line is best reported as JSON
        if every_line_tabbed:
            return "tsv"  # an id such as "{a" in a tab-separated file
        raise _cannot_tell(
            what,
            formats,
            source,
            ": the first line starts like a JSON object but is not one, and has tabs like TSV",
        )
    marker = _smart_marker(first)
    if marker is not None:
        if not tabbed:
            return "smart"
        if every_line_tabbed:
            return "tsv"  # an id such as ".X" in a tab-separated file
        if any(_smart_marker(line) and "\t" not in line for line in content[1:]):
            return "smart"  # SMART field lines (".W") have no tabs
        raise _cannot_tell(
            what,
            formats,
            source,
            f": the first line could start a SMART record (.{marker}) or be a TSV line (it has "
            "tabs)",
        )
    if tabbed:
        return "tsv"
    raise _cannot_tell(what, formats, source)


def guess_topic_format(lines: Sequence[str], *, source: str = "<topics>") -> str:
    """The topics format, from the first lines with content; ParseError if it cannot tell."""
    content = _content_lines(lines)
    if not content:
        raise _cannot_tell("topics", TOPIC_FORMATS, source)
    first = content[0].lstrip()
    lowered = first.lower()
    if lowered.startswith(("<top", "<?xml", "<!--", "<num>")) or (
        "<num>" in lowered and "\t" not in first
    ):
        return "trec"
    return _guess_plain_format(content, "topics", TOPIC_FORMATS, source)


def guess_document_format(head_lines: Sequence[str], *, source: str = "<documents>") -> str:
    """The documents format, from the first lines with content; ParseError if it cannot tell."""
    content = _content_lines(head_lines)
    if not content:
        raise _cannot_tell("documents", DOCUMENT_FORMATS, source)
    if _DOC_START.match(content[0].lstrip()):
        return "trec"
    return _guess_plain_format(content, "documents", DOCUMENT_FORMATS, source)


def _refuse_empty(pairs: Sequence[tuple[int, str]], source: str) -> None:
    """Refuse a file with nothing in it (there is no format to tell): ParseError."""
    if not any(line.strip() for _, line in pairs):
        raise ParseError.single(source, None, "is empty")
    if all(is_skippable(line) for _, line in pairs):
        raise ParseError.single(source, None, "holds only blank lines and # comments")


def _check_format(format: str, known: tuple[str, ...], what: str, source: str) -> None:
    if format not in known:
        raise ParseError.single(
            source, None, f"unknown {what} format {format!r}; expected one of {', '.join(known)}"
        )


# --- JSON helpers -------------------------------------------------------------------------------


def _json_object(line: str, number: int, problems: ProblemCollector) -> dict | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as error:
        reason = error.msg if isinstance(error, json.JSONDecodeError) else "too deeply nested"
        column = f" (column {error.colno})" if isinstance(error, json.JSONDecodeError) else ""
        problems.add(number, f"is not valid JSON: {reason}{column}")
        return None
    if not isinstance(value, dict):
        problems.add(number, f"is a JSON {type(value).__name__}, not an object")
        return None
    return value


def _json_id(
    record: dict, keys: tuple[str, ...], what: str, number: int, problems: ProblemCollector
) -> str | None:
    for key in keys:
        if key in record:
            value = record[key]
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                kind = "null" if value is None else type(value).__name__
                problems.add(
                    number, f"{what} id {key!r} must be a string or an integer, not {kind}"
                )
                return None
            return value if isinstance(value, str) else str(value)
    problems.add(number, f"has no {what} id (expected one of the keys {', '.join(keys)})")
    return None


def _json_text(
    record: dict, keys: tuple[str, ...], number: int, problems: ProblemCollector
) -> tuple[str | None, bool]:
    """(text or None when invalid, whether one of the keys was present)."""
    for key in keys:
        if key in record:
            value = record[key]
            if value is None:
                return "", True
            if not isinstance(value, str):
                problems.add(number, f"{key!r} must be a string, not {type(value).__name__}")
                return None, True
            reason = _storable(value)
            if reason:
                problems.add(number, f"{key!r} {reason}")
                return None, True
            return value, True
    return "", False


def _storable(text: str) -> str | None:
    """Why a decoded JSON string cannot be stored (NUL, lone surrogate), or None."""
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired surrogate (invalid Unicode)"
    return None


# --- Topics -------------------------------------------------------------------------------------


def parse_topics(
    lines: Iterable[str] | Iterable[tuple[int, str]],
    *,
    format: str | None = None,
    source: str = "<topics>",
    positional_ids: bool = False,
    skipped: list[int] | None = None,
) -> list[TopicRecord]:
    """Every topic of a topics file, in file order; ParseError listing every problem.

    With positional_ids the ids are "1".."N" by position in the file (Cranfield's qrels number
    queries by position, not by their .I ids), and each record keeps the file's own id in
    ``original_id``; meant for SMART files but applies to any format. The lines of records
    left out because they are empty (a SMART file's trailing ".I") are appended to ``skipped``.
    """
    pairs = list(numbered(lines))
    if format is None:
        _refuse_empty(pairs, source)
        format = guess_topic_format([line for _, line in pairs[:GUESS_LINES]], source=source)
    _check_format(format, TOPIC_FORMATS, "topics", source)
    problems = ProblemCollector(source)
    parser = {
        "trec": _trec_topics,
        "tsv": _tsv_topics,
        "jsonl": _jsonl_topics,
        "smart": partial(_smart_topics, skipped=skipped),
    }[format]
    records = parser(pairs, problems, positional_ids=positional_ids)
    if positional_ids:
        records = [
            TopicRecord(
                str(position), r.title, r.description, r.narrative, r.line, original_id=r.topic_id
            )
            for position, r in enumerate(records, 1)
        ]
    else:
        seen: dict[str, int] = {}
        for record in records:
            first = seen.setdefault(record.topic_id, record.line)
            if first != record.line:
                problems.add(
                    record.line,
                    f"topic id {shown(record.topic_id)} repeats the topic of line {first}",
                )
    if not records and not problems:
        problems.add(None, "has no topics")
    problems.raise_if_any()
    return records


# A topic id is the first column of every run and qrels line, where a leading "#" makes the line a
# comment: the topic's lines would vanish on their way back in (trec_eval, which knows no
# comments, would count them), so such an id is refused where topics enter.
COMMENT_TOPIC_ID = (
    "starts with '#': in runs and qrels a line that starts with '#' is a comment, so this "
    "topic's lines would be dropped; rename the topic"
)


def _topic(
    topic_id: str,
    title: str,
    description: str,
    narrative: str,
    number: int,
    problems: ProblemCollector,
    *,
    check: bool = True,
) -> TopicRecord | None:
    ok = True
    if check:
        reason = check_id(topic_id) or (topic_id.startswith("#") and COMMENT_TOPIC_ID)
        if reason:
            problems.add(number, f"topic id {shown(topic_id)} {reason}")
            ok = False
    title, description, narrative = collapse(title), collapse(description), collapse(narrative)
    if not title:
        problems.add(number, f"topic {shown(topic_id)} has no title")
        ok = False
    return TopicRecord(topic_id, title, description, narrative, number) if ok else None


TSV_CARRIAGE_RETURN = (
    "has a carriage return (CR) inside the line; TSV lines end at LF, so save the file with LF "
    "or CRLF line endings (not old Mac CR ones)"
)


def _tsv_topics(pairs, problems, *, positional_ids):
    records = []
    for number, line in pairs:
        if is_skippable(line):
            continue
        if "\r" in line:
            problems.add(number, TSV_CARRIAGE_RETURN)
            continue
        columns = line.split("\t")
        if not 2 <= len(columns) <= 4:
            problems.add(
                number,
                f"has {len(columns)} tab-separated column{'s' if len(columns) != 1 else ''}; "
                "expected 2 (id, title), 3 (id, title, description) "
                "or 4 (id, title, description, narrative)",
            )
            continue
        columns += [""] * (4 - len(columns))
        topic_id = columns[0].strip()
        record = _topic(topic_id, *columns[1:4], number, problems, check=not positional_ids)
        if record:
            records.append(record)
    return records


def _jsonl_topics(pairs, problems, *, positional_ids):
    records = []
    for number, line in pairs:
        if is_skippable(line):
            continue
        data = _json_object(line, number, problems)
        if data is None:
            continue
        topic_id = _json_id(data, TOPIC_ID_KEYS, "topic", number, problems)
        title, has_title = _json_text(data, TOPIC_TITLE_KEYS, number, problems)
        description, _ = _json_text(data, TOPIC_DESCRIPTION_KEYS, number, problems)
        narrative, _ = _json_text(data, TOPIC_NARRATIVE_KEYS, number, problems)
        if not has_title:
            problems.add(
                number,
                f"has no topic title (expected one of the keys {', '.join(TOPIC_TITLE_KEYS)})",
            )
            continue
        if topic_id is None or title is None or description is None or narrative is None:
            continue
        record = _topic(
            topic_id, title, description, narrative, number, problems, check=not positional_ids
        )
        if record:
            records.append(record)
    return records


class _LineMap:
    """Offsets in the joined text of a file back to the file's line numbers."""

    def __init__(self, pairs: Sequence[tuple[int, str]]) -> None:
        self.starts: list[int] = []
        self.numbers = [number for number, _ in pairs]
        offset = 0
        for _, line in pairs:
            self.starts.append(offset)
            offset += len(line) + 1
        self.text = "\n".join(line for _, line in pairs)

    def line(self, offset: int) -> int:
        index = bisect.bisect_right(self.starts, offset) - 1
        return self.numbers[max(index, 0)] if self.numbers else 1


# SGML topics: any tag, comments and processing instructions; unknown tags count as text.
_TOKEN = re.compile(r"<!--.*?-->|<[?!][^<>]*>|<(/?)([A-Za-z][\w.-]*)((?:\s[^<>]*)?)/?>", re.S)
_RECORD_TAGS = frozenset({"top", "topic"})
_TOPIC_FIELDS = {
    "num": "num",
    "title": "title",
    "query": "query",
    "desc": "desc",
    "description": "desc",
    "question": "question",
    "narr": "narr",
    "narrative": "narr",
}
# Fields of older TREC topics (and the Web track's subtopics) that Pooljudge does not keep.
_IGNORED_TOPIC_FIELDS = frozenset(
    {"dom", "smry", "con", "def", "fac", "nat", "head", "subtopic", "tail"}
)
_FIELD_PREFIXES = {
    "num": re.compile(r"^\s*number\s*:", re.I),
    "title": re.compile(r"^\s*topic\s*:", re.I),
    "desc": re.compile(r"^\s*description\s*:", re.I),
    "narr": re.compile(r"^\s*narrative\s*:", re.I),
}
_NUMBER_ATTRIBUTE = re.compile(r"""\bnumber\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.I)


class _SgmlTopic:
    def __init__(self, tag: str, line: int, attributes: str) -> None:
        self.tag = tag
        self.line = line
        self.xml = tag.lower() == "topic"
        self.fields: dict[str, list[str]] = {}
        match = _NUMBER_ATTRIBUTE.search(attributes)
        self.number = next((g for g in match.groups() if g is not None), None) if match else None


def _trec_topics(pairs, problems, *, positional_ids):
    text_map = _LineMap(pairs)
    text = text_map.text
    records: list[TopicRecord] = []
    topic: _SgmlTopic | None = None
    field: str | None = None  # a key of topic.fields, "" for an ignored field

    def feed(chunk: str, offset: int) -> None:
        if not chunk or chunk.isspace():
            if field and chunk:
                topic.fields[field].append(chunk)
            return
        where = text_map.line(offset + len(chunk) - len(chunk.lstrip()))
        if topic is None:
            problems.add(where, "has text outside a <top> … </top> topic")
        elif field is None:
            problems.add(where, f"has text outside the fields of the topic of line {topic.line}")
        elif field:
            topic.fields[field].append(chunk)

    position = 0
    for match in _TOKEN.finditer(text):
        feed(text[position : match.start()], position)
        position = match.end()
        name = match.group(2)
        if name is None:  # comment, doctype, processing instruction
            continue
        closing, tag = match.group(1), name.lower()
        where = text_map.line(match.start())
        if tag in _RECORD_TAGS:
            if closing:
                if topic is None:
                    problems.add(where, f"has </{name}> without a topic to close")
                else:
                    record = _finish_sgml_topic(topic, problems, positional_ids)
                    if record:
                        records.append(record)
                    topic, field = None, None
            else:
                if topic is not None:
                    problems.add(
                        where, f"opens <{name}> before the topic of line {topic.line} is closed"
                    )
                topic, field = _SgmlTopic(name, where, match.group(3)), None
            continue
        if topic is None:
            continue  # wrapper elements such as <topics>
        if tag in _TOPIC_FIELDS:
            key = _TOPIC_FIELDS[tag]
            if closing:
                if field == key:
                    field = None
                continue
            if key in topic.fields:
                problems.add(where, f"has a second <{name}> in the topic of line {topic.line}")
            topic.fields[key] = []
            field = key
        elif tag in _IGNORED_TOPIC_FIELDS or field is None:
            if not closing:
                field = ""
            elif field == "":
                field = None
        else:
            feed(match.group(0), match.start())
    feed(text[position:], position)
    if topic is not None:
        problems.add(topic.line, f"has a <{topic.tag}> that is never closed by </{topic.tag}>")
    return records


def _finish_sgml_topic(
    topic: _SgmlTopic, problems: ProblemCollector, positional_ids: bool
) -> TopicRecord | None:
    values = {}
    for key, parts in topic.fields.items():
        value = "".join(parts)
        if topic.xml:
            value = html.unescape(value)
        prefix = _FIELD_PREFIXES.get(key)
        if prefix:
            value = prefix.sub("", value, count=1)
        values[key] = collapse(value)
    topic_id = values.get("num") or topic.number or ""
    if not topic_id and not positional_ids:
        problems.add(topic.line, "has a topic without a <num> (its id)")
        return None
    return _topic(
        topic_id,
        values.get("title") or values.get("query", ""),
        values.get("desc") or values.get("question", ""),
        values.get("narr", ""),
        topic.line,
        problems,
        check=not positional_ids,
    )


class _SmartRecord:
    __slots__ = ("field", "fields", "id", "line")

    def __init__(self, record_id: str, line: int) -> None:
        self.id = record_id
        self.line = line
        self.fields: dict[str, list[str]] = {}
        self.field: str | None = None  # the field being read


def _smart_marker(line: str) -> str | None:
    if (
        len(line) >= 2
        and line[0] == "."
        and "A" <= line[1] <= "Z"
        and (len(line) == 2 or line[2].isspace())
    ):
        return line[1]
    return None


def _smart_records(
    pairs, problems: ProblemCollector, skipped: list[int] | None = None
) -> Iterator[_SmartRecord]:
    """SMART records with their fields' lines; an empty trailing .I record is dropped (and its
    line appended to ``skipped``)."""
    record: _SmartRecord | None = None
    for number, line in pairs:
        marker = _smart_marker(line)
        if marker == "I":
            if record is not None:
                yield record
            record = _SmartRecord(line[2:].strip(), number)
            continue
        if record is None:
            if line.strip():
                problems.add(number, "has text before the first .I record")
            continue
        if marker is not None and marker not in record.fields:
            record.fields[marker] = [line[2:].strip()] if line[2:].strip() else []
            record.field = marker
            continue
        if record.field is None:
            if line.strip():
                problems.add(
                    number, f"has text before the first field of the .I of line {record.line}"
                )
            continue
        record.fields[record.field].append(line)
    if record is not None and (record.id or record.fields):
        yield record
    elif record is not None and skipped is not None:
        skipped.append(record.line)


def _smart_text(lines: list[str]) -> str:
    """A field's lines, without leading and trailing blank lines or trailing spaces."""
    kept = [line.rstrip() for line in lines]
    while kept and not kept[-1]:
        kept.pop()
    while kept and not kept[0]:
        kept.pop(0)
    return "\n".join(kept)


def _smart_topics(pairs, problems, *, positional_ids, skipped=None):
    records = []
    for record in _smart_records(pairs, problems, skipped):
        if not record.id and not positional_ids:
            problems.add(record.line, "has a .I line without an id")
            continue
        if "W" not in record.fields:
            problems.add(record.line, f"topic {shown(record.id)} has no .W text")
            continue
        topic = _topic(
            record.id,
            "\n".join(record.fields["W"]),
            "",
            "",
            record.line,
            problems,
            check=not positional_ids,
        )
        if topic:
            records.append(topic)
    return records


# --- Documents ----------------------------------------------------------------------------------


def iter_documents(
    lines: Iterable[tuple[int, str]] | Iterable[str],
    *,
    format: str | None = None,
    source: str = "<documents>",
    skipped: list[int] | None = None,
) -> Iterator[DocumentRecord]:
    """Yield every valid document as it is read; at the end raise ParseError if any were bad.

    Streaming, for collections of gigabytes: the caller stores records as they come inside a
    transaction and rolls back on ParseError. Only the ids seen (and their lines) are held, to
    refuse a document id that appears twice. The lines of records left out because they are
    empty (a SMART file's trailing ".I") are appended to ``skipped``.
    """
    pairs = numbered(lines)
    if format is None:
        head = list(itertools.islice(pairs, GUESS_LINES))
        if len(head) < GUESS_LINES:
            _refuse_empty(head, source)
        format = guess_document_format([line for _, line in head], source=source)
        pairs = itertools.chain(head, pairs)
    _check_format(format, DOCUMENT_FORMATS, "documents", source)
    problems = ProblemCollector(source)
    parser = {
        "trec": _trec_documents,
        "tsv": _tsv_documents,
        "jsonl": _jsonl_documents,
        "smart": partial(_smart_documents, skipped=skipped),
    }[format]
    seen: dict[str, int] = {}
    for record in parser(pairs, problems):
        first = seen.setdefault(record.doc_id, record.line)
        if first != record.line:
            problems.add(
                record.line,
                f"document id {shown(record.doc_id)} repeats the document of line {first}",
            )
            continue
        reason = check_id(record.doc_id)
        if reason:
            problems.add(record.line, f"document id {shown(record.doc_id)} {reason}")
            continue
        yield record
    if not seen and not problems:
        problems.add(None, "has no documents")
    problems.raise_if_any()


def parse_documents(
    lines: Iterable[tuple[int, str]] | Iterable[str],
    *,
    format: str | None = None,
    source: str = "<documents>",
) -> list[DocumentRecord]:
    """All documents as a list (for small files and tests); see iter_documents."""
    return list(iter_documents(lines, format=format, source=source))


def _tsv_documents(pairs, problems):
    for number, line in pairs:
        if is_skippable(line):
            continue
        if "\r" in line:
            problems.add(number, TSV_CARRIAGE_RETURN)
            continue
        columns = line.split("\t")
        if len(columns) == 2:
            yield DocumentRecord(columns[0].strip(), "", columns[1], number)
        elif len(columns) == 3:
            yield DocumentRecord(columns[0].strip(), collapse(columns[1]), columns[2], number)
        else:
            problems.add(
                number,
                f"has {len(columns)} tab-separated column{'s' if len(columns) != 1 else ''}; "
                "expected 2 (id, text) or 3 (id, title, text)",
            )


def _jsonl_documents(pairs, problems):
    for number, line in pairs:
        if is_skippable(line):
            continue
        data = _json_object(line, number, problems)
        if data is None:
            continue
        doc_id = _json_id(data, DOCUMENT_ID_KEYS, "document", number, problems)
        title, _ = _json_text(data, ("title",), number, problems)
        body, has_body = _json_text(data, DOCUMENT_TEXT_KEYS, number, problems)
        if not has_body:
            problems.add(
                number,
                f"has no document text (expected one of the keys {', '.join(DOCUMENT_TEXT_KEYS)})",
            )
            continue
        if doc_id is None or title is None or body is None:
            continue
        yield DocumentRecord(doc_id, collapse(title), body, number)


_DOC_START = re.compile(r"<DOC(?:\s[^<>]*)?>", re.I)
_DOC_END = re.compile(r"</DOC\s*>", re.I)
_DOCNO = re.compile(r"<DOCNO(?:\s[^<>]*)?>(.*?)</DOCNO\s*>", re.I | re.S)
_DROPPED_ELEMENTS = re.compile(
    r"<(DOCOLDNO|DOCHDR|DOCID)(?:\s[^<>]*)?>.*?</\1\s*>|<!--.*?-->", re.I | re.S
)
_TITLE_ELEMENTS = ("HEADLINE", "TITLE", "HL", "TI", "DOCTITLE", "HEAD")
_TITLE_OPENING = re.compile(rf"<({'|'.join(_TITLE_ELEMENTS)})(?:\s[^<>]*)?>", re.I)
_TITLE_PATTERNS = {
    name: re.compile(rf"<{name}(?:\s[^<>]*)?>(.*?)</{name}\s*>", re.I | re.S)
    for name in _TITLE_ELEMENTS
}
# Tags of TREC SGML fields (news, FR, FBIS, AP, WSJ, LA Times) whose content is document text.
_TREC_FIELDS = frozenset(
    {
        "TEXT", "DATE", "DATE1", "DATELINE", "BYLINE", "SECTION", "LENGTH", "GRAPHIC",
        "CORRECTION", "CORRECTION-DATE", "TYPE", "SUBJECT", "PAGE", "PUB", "PROFILE", "FILEID",
        "FIRST", "SECOND", "NOTE", "SO", "DD", "AN", "IN", "CO", "CN", "G", "GV", "MS", "NS",
        "RE", "HT", "HEADER", "LP", "AU", "SUMMARY", "AGENCY", "ACTION", "SIGNER", "SIGNJOB",
        "BILLING", "FRFILING", "RINDOCK", "CFRNO", "USDEPT", "USBUREAU", "IMPORT", "ADDRESS",
        "FURTHER", "SUPPLEM", "FOOTCITE", "FOOTNAME", "FOOTNOTE", "F", "FIG", "PHRASE", "ABS",
        "H7", "H8", "DESCRIPT", "ST",
    }
)  # fmt: skip
_TREC_FIELD_TAGS = re.compile(
    r"</?(?:" + "|".join(sorted(_TREC_FIELDS, key=len, reverse=True)) + r")(?:\s[^<>]*)?>",
    re.I,
)
_TAGS = re.compile(r"<[^<>]*>")
_EXTRA_BLANK_LINES = re.compile(r"\n(?:[ \t]*\n)+")
_TRAILING_SPACE = re.compile(r"[ \t\f\v\r]+$", re.M)


def _trec_documents(pairs, problems):
    buffer: list[str] | None = None
    start = 0
    for number, line in pairs:
        if buffer is not None and "<" not in line:
            buffer.append(line)  # most lines: text inside a document
            continue
        rest = line
        while True:
            if buffer is None:
                match = _DOC_START.search(rest) if "<" in rest else None
                if match is None:
                    if rest.strip():
                        problems.add(number, "has text outside a <DOC> … </DOC> document")
                    break
                if rest[: match.start()].strip():
                    problems.add(number, "has text outside a <DOC> … </DOC> document")
                buffer, start = [], number
                rest = rest[match.end() :]
            if "<" not in rest:
                buffer.append(rest)
                break
            end = _DOC_END.search(rest)
            opened = _DOC_START.search(rest, 0, end.start() if end else len(rest))
            if opened:
                problems.add(number, f"opens <DOC> before the document of line {start} is closed")
                buffer, start = [], number
                rest = rest[opened.end() :]
                continue
            if end is None:
                buffer.append(rest)
                break
            buffer.append(rest[: end.start()])
            record = _trec_document("\n".join(buffer), start, problems)
            if record:
                yield record
            buffer = None
            rest = rest[end.end() :]
            if not rest.strip():
                break
    if buffer is not None:
        problems.add(start, "has a <DOC> that is never closed by </DOC>")


def _trec_document(text: str, line: int, problems: ProblemCollector) -> DocumentRecord | None:
    numbers = _DOCNO.findall(text)
    if not numbers:
        problems.add(line, "has a document without a <DOCNO> (its id)")
        return None
    if len(numbers) > 1:
        problems.add(line, f"has a document with {len(numbers)} <DOCNO> elements")
        return None
    doc_id = numbers[0].strip()
    text = _DOCNO.sub("", text, count=1)
    text = _DROPPED_ELEMENTS.sub("", text)
    title = ""
    present = {name.upper() for name in _TITLE_OPENING.findall(text)}
    for name in _TITLE_ELEMENTS:
        if name not in present:
            continue
        match = _TITLE_PATTERNS[name].search(text)
        if match is None or (name == "HEAD" and "<" in match.group(1)):
            continue  # not closed, or an HTML <head> rather than AP's headline
        title = collapse(html.unescape(_TAGS.sub(" ", match.group(1))))
        text = text[: match.start()] + text[match.end() :]
        break
    text = _TREC_FIELD_TAGS.sub("", text)
    body = _EXTRA_BLANK_LINES.sub("\n\n", _TRAILING_SPACE.sub("", text))
    return DocumentRecord(doc_id, title, body.strip("\n"), line)


def _smart_documents(pairs, problems, skipped=None):
    for record in _smart_records(pairs, problems, skipped):
        if not record.id:
            problems.add(record.line, "has a .I line without an id")
            continue
        fields = record.fields
        header = []
        authors = collapse("\n".join(fields.get("A", [])))
        source = collapse("\n".join(fields.get("B", [])))
        if authors:
            header.append(f"Authors: {authors}")
        if source:
            header.append(f"Source: {source}")
        text = _smart_text(fields.get("W", []))
        body = "\n".join(header) + ("\n\n" if header and text else "") + text
        yield DocumentRecord(record.id, collapse("\n".join(fields.get("T", []))), body, record.line)
