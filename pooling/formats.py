"""TREC run files: `topic Q0 docid rank score tag`, read fast and exactly, written back.

Order is trec_eval's: score descending, ties broken by document id descending; the file's rank
column is kept (real runs have 0-based and reversed ranks) but never trusted for order.

Reading is the hot path of a campaign import (hundreds of runs of 50,000 lines), so parse_run
runs a fast pass made of C-level operations only (split, map, groupby, float, sort) that
validates cheaply and, only when something looks off, hands the file to a careful pass that
checks every line and collects every problem with its line number. The careful pass is the
authority: the fast pass may send a valid file to it (a comment line, a private-use character in
an id) but never accepts a file the careful pass would refuse. Nothing here imports Django.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, compress, groupby, islice
from operator import eq
from typing import BinaryIO, NamedTuple, TextIO

from campaigns.textfiles import (
    MAX_ID_LENGTH,
    UTF8_BOM,
    UTF16_BOMS,
    ProblemCollector,
    check_id,
    decode_lines,
    parse_bounded_int,
    read_bytes,
    shown,
    source_name,
    split_lines,
)

RUN_COLUMNS = "topic Q0 docid rank score tag"
# Ranks are stored in a 32-bit integer column.
RANK_LIMIT = 2**31 - 1
_CHUNK_CHARS = 1 << 17  # small enough for the working set to stay in the CPU cache
# Ranks as written in almost every run, to share their int objects and skip int().
_RANKS = {str(rank): rank for rank in range(-1, 10_001)}
_RANK_TEXTS = [str(rank) for rank in range(10_001)]
_RANK_VALUES = [_RANKS[text] for text in _RANK_TEXTS]
# ASCII control characters other than tab, CR and LF: refused in ids, or separators to str.split().
_ASCII_CONTROLS = tuple(chr(c) for c in (*range(0, 9), 11, 12, *range(14, 32), 127))


@dataclass
class RankedList:
    """One topic of one run, in trec_eval order; ranks are the file's column, aligned."""

    docids: list[str]
    scores: list[float]
    ranks: list[int]

    def __len__(self) -> int:
        return len(self.docids)


@dataclass
class ParsedRun:
    """One run: its tag, its topics in file order, how many result lines it had, its file."""

    tag: str
    topics: dict[str, RankedList]
    lines: int
    source: str


def trec_eval_order(
    docids: Sequence[str], scores: Sequence[float], ranks: Sequence[int]
) -> RankedList:
    """The results sorted as trec_eval sorts them: score descending, then docid descending."""
    return _order(list(docids), list(scores), list(ranks))


def _order(docids: list[str], scores: list[float], ranks: list[int]) -> RankedList:
    """trec_eval order of aligned lists that the caller hands over (they may be reordered)."""
    size = len(scores)
    if sorted(scores, reverse=True) == scores:
        # Written in score order, as runs almost always are: only tied stretches (written in
        # any docid order) need sorting, by docid descending.
        tied = list(compress(range(1, size), map(eq, scores, islice(scores, 1, None))))
        if tied:
            _sort_ties(docids, scores, ranks, tied)
        return RankedList(docids, scores, ranks)
    if len(set(scores)) == size:  # no ties: the score alone decides
        positions = sorted(range(size), key=scores.__getitem__, reverse=True)
    else:
        # Two stable sorts: by docid descending, then by score descending.
        positions = sorted(range(size), key=docids.__getitem__, reverse=True)
        positions.sort(key=scores.__getitem__, reverse=True)
    return RankedList(
        list(map(docids.__getitem__, positions)),
        list(map(scores.__getitem__, positions)),
        list(map(ranks.__getitem__, positions)),
    )


def _sort_ties(docids: list[str], scores: list[float], ranks: list[int], tied: list[int]) -> None:
    """Sort each stretch of equal scores by docid descending, in place.

    `tied` lists the positions i whose score equals the score at i - 1. Only the positions in
    such stretches are touched: a few percent of a typical run.
    """
    members = sorted(set(tied).union(map((-1).__add__, tied)))
    # Two stable sorts: docid descending, then score descending (which keeps stretches apart,
    # and keeps 0.0 and -0.0 together as trec_eval does).
    order = sorted(members, key=docids.__getitem__, reverse=True)
    order.sort(key=scores.__getitem__, reverse=True)
    moved = zip(
        members,
        list(map(docids.__getitem__, order)),
        list(map(scores.__getitem__, order)),
        list(map(ranks.__getitem__, order)),
        strict=True,
    )
    for position, docid, score, rank in moved:
        docids[position] = docid
        scores[position] = score
        ranks[position] = rank


def file_rank_order(ranked: RankedList) -> list[str]:
    """The docids by the file's rank column ascending (ties in trec_eval order).

    For the explicit, non-default option of trusting the submitted ranks.
    """
    positions = sorted(range(len(ranked.docids)), key=ranked.ranks.__getitem__)
    return [ranked.docids[i] for i in positions]


# --- Reading -----------------------------------------------------------------------------------


def parse_run(
    lines: Iterable[str], *, source: str = "<run>", split_tags: bool = False
) -> list[ParsedRun]:
    """The runs of a run file's lines; ParseError listing every problem.

    Any whitespace separates the six columns; blank and '#' lines are skipped. A file with
    several tags is refused unless split_tags, which gives one ParsedRun per tag (in order of
    first appearance). The same docid twice in a topic of a run, bad ids, non-integer ranks and
    scores that are not finite numbers are refused.
    """
    if not isinstance(lines, list):
        lines = list(lines)
    runs = _fast_parse("\n".join(lines), source)
    if runs is None:
        runs = _careful_parse(lines, source, split_tags)
    return runs


def parse_run_text(
    text: str, *, source: str = "<run>", split_tags: bool = False
) -> list[ParsedRun]:
    """parse_run for a whole decoded file (lines ending in LF or CRLF)."""
    runs = _fast_parse(text, source)
    if runs is None:
        runs = _careful_parse(split_lines(text), source, split_tags)
    return runs


def _rows(chunk: str) -> tuple[list[str], int, int] | None:
    """(tokens, 6, lines) when every line has six whitespace-separated columns, else None."""
    rows = list(map(str.split, chunk.split("\n")))
    if set(map(len, rows)) != {6}:
        return None
    return list(chain.from_iterable(rows)), 6, len(rows)


def _tokens(chunk: str) -> tuple[list[str], int, int] | None:
    """The chunk's tokens with a stride per line, or None when a line lacks six columns.

    The common file has one separator (a tab or a space) and nothing else: splitting on it, with
    each newline made a token of its own, gives every line's six columns and a newline token, and
    the newline tokens all falling every seventh place proves that each line has six columns.
    Anything else (runs of spaces, mixed separators, non-ASCII text) is split line by line.
    """
    if not chunk.isascii():
        return _rows(chunk)
    if "\r" in chunk:
        chunk = chunk.replace("\r\n", "\n")
        if chunk.endswith("\r"):
            chunk = chunk[:-1]
        if "\r" in chunk:
            return _rows(chunk)
    if any(char in chunk for char in _ASCII_CONTROLS):
        return None  # control characters (or unusual whitespace): the careful pass decides
    separator, other = ("\t", " ") if "\t" in chunk else (" ", "\t")
    if other in chunk:
        return _rows(chunk)
    lines = chunk.count("\n") + 1
    tokens = chunk.replace("\n", separator + "\n" + separator).split(separator)
    if len(tokens) != 7 * lines - 1 or tokens[6::7].count("\n") != lines - 1:
        return _rows(chunk)
    if "" in tokens[1::7]:
        return None  # an empty Q0 column from doubled separators: the careful pass decides
    return tokens, 7, lines


def _fast_parse(text: str, source: str) -> list[ParsedRun] | None:
    """The single run of a clean file, or None when anything needs a closer look.

    Works through the text in chunks of about a megabyte, with only C-level operations per line,
    and checks and orders each topic as soon as it ends, while its data is still in the cache.
    """
    # Each topic's docids, scores and ranks; in trec_eval order once the topic has ended.
    columns: dict[str, tuple[list[str], list[float], list[int]]] = {}
    current = None  # the topic being read, and the set of its docids
    seen: set[str] = set()
    tag = None
    length = len(text) - 1 if text.endswith("\n") else len(text)
    position = 0
    while position < length:
        end = text.find("\n", position + _CHUNK_CHARS, length)
        if end == -1:
            end = length
        chunk = text[position:end]
        position = end + 1
        found = _tokens(chunk)
        if found is None:
            return None
        tokens, stride, lines = found
        docids = tokens[2::stride]
        rank_texts = tokens[3::stride]
        score_texts = tokens[4::stride]
        tags = tokens[5::stride]
        if tag is None:
            tag = tags[0]
        if tags.count(tag) != lines or "" in docids or max(map(len, docids)) > MAX_ID_LENGTH:
            return None
        if not chunk.isascii() and (
            # float() takes non-ASCII digits; ids may hold invisible characters.
            not "".join(score_texts).isascii() or not "".join(docids).isprintable()
        ):
            return None
        if "_" in chunk and "_" in "".join(score_texts):
            return None  # float() takes "1_0" (ranks are checked below)
        try:
            scores = list(map(float, score_texts))
        except ValueError:
            return None
        if not math.isfinite(sum(scores)):  # inf or NaN somewhere (or a false alarm)
            return None
        start = 0
        for topic, stop in _topic_runs(tokens[0::stride]):
            block = docids[start:stop]
            ranks = _rank_values(rank_texts[start:stop])
            if ranks is None:
                return None
            if topic == current:
                seen.update(block)
            else:
                if current is not None and not _finish(columns, current, seen):
                    return None
                current = topic
                if topic not in columns:
                    if not topic or topic[0] == "#" or check_id(topic):
                        return None  # a comment line with six columns, or a bad topic id
                    columns[topic] = (block, scores[start:stop], ranks)
                    seen = set(block)
                    start = stop
                    continue
                # The topic comes back after others: read on, and order it all again.
                seen = set(columns[topic][0])
                seen.update(block)
            entry = columns[topic]
            entry[0].extend(block)
            entry[1].extend(scores[start:stop])
            entry[2].extend(ranks)
            start = stop
    if current is None or not _finish(columns, current, seen) or check_id(tag):
        return None
    topics = {topic: RankedList(*entry) for topic, entry in columns.items()}
    return [ParsedRun(tag, topics, sum(map(len, topics.values())), source)]


def _topic_runs(topics: list[str]) -> Iterator[tuple[str, int]]:
    """(topic, end) for each stretch of equal topics, in order.

    Runs hold few topics per chunk, each in one stretch: counting finds a stretch's end in C;
    many short stretches go through groupby instead.
    """
    start, size = 0, len(topics)
    for _ in range(8):
        topic = topics[start]
        end = start + topics.count(topic)  # right if the topic is one stretch from start
        if end > size or topics[end - 1] != topic or topics[start:end].count(topic) != end - start:
            break
        yield topic, end
        if end == size:
            return
        start = end
    position = start
    for topic, group in groupby(islice(topics, start, None)):
        position += len(list(group))
        yield topic, position


def _rank_values(texts: list[str]) -> list[int] | None:
    """The ranks of a stretch of lines, or None when one is not an integer in range."""
    first = _RANKS.get(texts[0])
    if first is not None and first >= 0:
        # Ranks usually count up by one: compare the texts instead of converting each.
        stop = first + len(texts)
        if texts == _RANK_TEXTS[first:stop]:
            return _RANK_VALUES[first:stop]
    try:
        return list(map(_RANKS.__getitem__, texts))
    except KeyError:
        pass
    joined = "".join(texts)
    if "_" in joined or not joined.isascii():
        return None  # int() takes "1_0" and non-ASCII digits
    try:
        values = list(map(int, texts))
    except ValueError:
        return None
    if max(values) > RANK_LIMIT or min(values) < -RANK_LIMIT:
        return None
    return values


def _finish(
    columns: dict[str, tuple[list[str], list[float], list[int]]], topic: str, seen: set[str]
) -> bool:
    """Put a topic that has ended in trec_eval order; False when it holds a docid twice."""
    docids, scores, ranks = columns[topic]
    if len(seen) != len(docids):
        return False
    ranked = _order(docids, scores, ranks)
    columns[topic] = (ranked.docids, ranked.scores, ranked.ranks)
    return True


def parse_score(text: str) -> tuple[float | None, str | None]:
    """(score, None) or (None, why not): a finite float written with ASCII digits."""
    if not text.isascii() or "_" in text:
        return None, f"score {shown(text)} is not a number"
    try:
        value = float(text)
    except ValueError:
        return None, f"score {shown(text)} is not a number"
    if math.isnan(value):
        return None, f"score {shown(text)} is not a number (NaN)"
    if math.isinf(value):
        return None, f"score {shown(text)} is not a finite number"
    return value, None


def parse_rank(text: str) -> tuple[int | None, str | None]:
    """(rank, None) or (None, why not): an integer written with ASCII digits, in 32 bits."""
    return parse_bounded_int(text, "rank", RANK_LIMIT)


def _careful_parse(lines: list[str], source: str, split_tags: bool) -> list[ParsedRun]:
    """Check every line, collecting every problem; the runs when there are none."""
    problems = ProblemCollector(source)
    # tag -> topic -> (docids, scores, ranks, {docid: line})
    runs: dict[str, dict[str, tuple[list[str], list[float], list[int], dict[str, int]]]] = {}
    counts: dict[str, int] = {}
    checked: dict[tuple[str, str], str | None] = {}  # (kind, id) -> reason, for topics and tags
    entry = None
    key = None
    for number, line in enumerate(lines, 1):
        parts = line.split()
        if not parts or parts[0][0] == "#":
            continue
        if len(parts) != 6:
            problems.add(
                number,
                f"has {len(parts)} column{'s' if len(parts) != 1 else ''}; "
                f"a run line has 6: {RUN_COLUMNS}",
            )
            continue
        topic, _q0, docid, rank_text, score_text, tag = parts
        ok = True
        for what, value in (("topic id", topic), ("run tag", tag)):
            reason = checked.get((what, value), "")
            if reason == "":
                reason = checked[what, value] = check_id(value)
            if reason:
                problems.add(number, f"{what} {shown(value)} {reason}")
                ok = False
        if not (docid.isascii() and docid.isprintable() and len(docid) <= MAX_ID_LENGTH):
            reason = check_id(docid)
            if reason:
                problems.add(number, f"document id {shown(docid)} {reason}")
                ok = False
        score, reason = parse_score(score_text)
        if reason:
            problems.add(number, reason)
            ok = False
        rank = _RANKS.get(rank_text)
        if rank is None:
            rank, reason = parse_rank(rank_text)
            if reason:
                problems.add(number, reason)
                ok = False
        if not ok:
            continue
        counts[tag] = counts.get(tag, 0) + 1
        if key != (tag, topic):
            key = (tag, topic)
            run = runs.setdefault(tag, {})
            entry = run.get(topic)
            if entry is None:
                entry = run[topic] = ([], [], [], {})
        first = entry[3].setdefault(docid, number)
        if first != number:
            problems.add(
                number,
                f"document {shown(docid)} appears twice in topic {shown(topic)} of run "
                f"{shown(tag)} (first at line {first})",
            )
            continue
        entry[0].append(docid)
        entry[1].append(score)
        entry[2].append(rank)
    if len(runs) > 1 and not split_tags:
        problems.add(
            None,
            f"the file holds runs {', '.join(runs)}; import with split_tags to get one run per tag",
        )
    if not runs and not problems:
        problems.add(None, f"has no run lines ({RUN_COLUMNS})")
    problems.raise_if_any()
    return [
        ParsedRun(
            tag,
            {topic: _order(*entry[:3]) for topic, entry in topics.items()},
            counts[tag],
            source,
        )
        for tag, topics in runs.items()
    ]


def read_run_file(
    source: str | os.PathLike | BinaryIO,
    *,
    name: str | None = None,
    split_tags: bool = False,
    encoding: str | None = None,
) -> list[ParsedRun]:
    """The runs of a run file (path or binary file object; gzip by name or magic bytes)."""
    display = source_name(source, name)
    data = read_bytes(source, name=name)
    text = None
    if encoding is None and data[:2] not in UTF16_BOMS and b"\x00" not in data:
        if data[:3] == UTF8_BOM:
            data = data[3:]
        with contextlib.suppress(UnicodeDecodeError):  # decode_lines names every bad line
            text = data.decode("utf-8")
    if text is None:
        lines = decode_lines(data, source=display, encoding=encoding)
        return parse_run(lines, source=display, split_tags=split_tags)
    del data
    return parse_run_text(text, source=display, split_tags=split_tags)


# --- Packing for storage -----------------------------------------------------------------------


class PackedTopic(NamedTuple):
    """One topic of a run as the database stores it (pooling.models.RunTopic): the ranked list
    in trec_eval order as three values instead of thousands."""

    topic_id: str
    docids: str  # joined by newlines
    scores: bytes  # float64, native byte order
    ranks: bytes  # int64, native byte order: the file's rank column
    length: int


@dataclass
class PackedRun:
    """A run ready to store: its tag, its topics packed in file order, its line count, its file."""

    tag: str
    topics: list[PackedTopic]
    lines: int
    source: str


def pack_run(run: ParsedRun) -> PackedRun:
    """The run with each topic packed for storage. Consumes ``run``: each topic's lists are
    dropped as soon as they are packed, so packing needs little memory beyond the parse."""
    packed = []
    topics = run.topics
    for topic_id in list(topics):
        ranked = topics.pop(topic_id)
        packed.append(
            PackedTopic(
                topic_id,
                "\n".join(ranked.docids),
                array("d", ranked.scores).tobytes(),
                array("q", ranked.ranks).tobytes(),
                len(ranked.docids),
            )
        )
    return PackedRun(run.tag, packed, run.lines, run.source)


def read_packed_run_file(
    source: str | os.PathLike | BinaryIO | bytes,
    *,
    name: str | None = None,
    split_tags: bool = False,
    encoding: str | None = None,
) -> list[PackedRun]:
    """read_run_file, packed for storage (see pack_run); also takes the file's bytes.

    Everything it takes and returns can be pickled, so imports can run it in worker processes;
    a refused file raises ParseError, which pickles with its problems."""
    if isinstance(source, bytes):
        source = io.BytesIO(source)
    runs = read_run_file(source, name=name, split_tags=split_tags, encoding=encoding)
    return [pack_run(runs.pop(0)) for _ in range(len(runs))]


# --- Writing -----------------------------------------------------------------------------------


def write_run(run: ParsedRun, out: TextIO) -> None:
    """Write `topic Q0 docid rank score tag` lines in trec_eval order, ranks 1-based.

    Scores are written with repr(), which reads back as the same float.
    """
    tag = run.tag
    for topic, ranked in run.topics.items():
        out.write(
            "".join(
                f"{topic} Q0 {docid} {rank} {score!r} {tag}\n"
                for rank, (docid, score) in enumerate(
                    zip(ranked.docids, ranked.scores, strict=True), 1
                )
            )
        )
