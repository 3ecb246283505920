"""TREC run files: `topic Q0 docid rank score tag`, read fast, exactly and in bounded memory,
written back.

Order is trec_eval's, at trec_eval's precision: score descending compared as a 32-bit float
(trec_eval and pytrec_eval hold a run's scores in C floats, so scores that differ only beyond a
float's 7 digits tie there), ties broken by document id descending (code-point order, what
strcmp gives on UTF-8). So the top k of a ranked list here is exactly the top k trec_eval
evaluates. The scores themselves are kept as written (float64); the file's rank column is kept
(real runs have 0-based and reversed ranks) but never trusted for order.

Reading is the hot path of a campaign import (hundreds of runs of 50,000 lines, or one file of
gigabytes), so the reader works through the text in chunks of about 128K characters: a fast pass
made of C-level operations only (split, map, groupby, float, sort) validates a chunk cheaply and,
only when something in it looks off, hands that chunk to a careful pass that checks every line
and collects every problem with its line number. The careful pass is the authority: the fast pass
may send a valid chunk to it (a comment line, a private-use character in an id) but never accepts
a line the careful pass would refuse. Each topic of each run is ordered as soon as its lines end
and handed to a sink: a list in memory (:func:`parse_run`, :func:`read_run_file`) or a spill
file of packed topics (:func:`read_spilled_run_file`, what imports use), so an import holds one
chunk and one topic at a time, whatever the size of the file. Nothing here imports Django.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import pickle
import shutil
import tempfile
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, groupby, islice
from operator import eq
from typing import BinaryIO, NamedTuple, Protocol, TextIO

from campaigns.textfiles import (
    MAX_ID_LENGTH,
    OTHER_WHITESPACE,
    ParseError,
    ProblemCollector,
    check_id,
    iter_text_blocks,
    parse_bounded_int,
    shown,
    source_name,
    split_fields,
)
from pooljudge.common import trec_eval_keys

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
    """The results sorted as trec_eval sorts them: score (as a 32-bit float) descending, then
    docid descending."""
    return _order(list(docids), list(scores), list(ranks))


def _order(docids: list[str], scores: list[float], ranks: list[int]) -> RankedList:
    """trec_eval order of aligned lists that the caller hands over (they may be reordered)."""
    keys = trec_eval_keys(scores)
    size = len(keys)
    if sorted(keys, reverse=True) == keys:
        # Written in score order, as runs almost always are: only tied stretches (written in
        # any docid order) need sorting, by docid descending.
        tied = list(compress(range(1, size), map(eq, keys, islice(keys, 1, None))))
        if tied:
            _sort_ties(docids, keys, scores, ranks, tied)
        return RankedList(docids, scores, ranks)
    if len(set(keys)) == size:  # no ties: the score alone decides
        positions = sorted(range(size), key=keys.__getitem__, reverse=True)
    else:
        # Two stable sorts: by docid descending, then by score descending.
        positions = sorted(range(size), key=docids.__getitem__, reverse=True)
        positions.sort(key=keys.__getitem__, reverse=True)
    return RankedList(
        list(map(docids.__getitem__, positions)),
        list(map(scores.__getitem__, positions)),
        list(map(ranks.__getitem__, positions)),
    )


def _sort_ties(
    docids: list[str], keys: list[float], scores: list[float], ranks: list[int], tied: list[int]
) -> None:
    """Sort each stretch of equal keys by docid descending, in place.

    `tied` lists the positions i whose key equals the key at i - 1. Only the positions in such
    stretches are touched: a few percent of a typical run.
    """
    members = sorted(set(tied).union(map((-1).__add__, tied)))
    # Two stable sorts: docid descending, then key descending (which keeps stretches apart,
    # and keeps 0.0 and -0.0 together as trec_eval does).
    order = sorted(members, key=docids.__getitem__, reverse=True)
    order.sort(key=keys.__getitem__, reverse=True)
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

MULTIPLE_TAGS = (
    "import with --split-tags (on the upload page: “Split a file with several tags into several "
    "runs”) to get one run per tag"
)
Key = tuple[str, str]  # (run tag, topic id)


@dataclass
class RunIndex:
    """What reading a file found of one run: its tag, the line it first appears on, how many
    result lines it has, and each of its topics (in file order) with the line it starts on."""

    tag: str
    first_line: int
    lines: int = 0
    topics: dict[str, int] = field(default_factory=dict)


class _Sink(Protocol):
    def add(self, key: Key, ranked: RankedList, first_line: int) -> None:
        """One stretch of a (tag, topic)'s lines, in trec_eval order."""

    def finish(self) -> dict[Key, set[str]]:
        """Every stretch is in: merge the topics that came back after others; return the
        documents found in two of their stretches, by (tag, topic)."""


class _Stretch:
    """Lines of one (tag, topic) that follow one another in the file (blank and comment lines
    aside): what is ordered and handed to the sink as one piece when another (tag, topic)
    starts. Remembers where each run of consecutive lines came from, to name the lines of a
    document given twice."""

    __slots__ = ("docids", "first", "key", "line_at", "ranks", "scores", "seen", "starts")

    def __init__(self, key: Key, first_line: int) -> None:
        self.key = key
        self.first = first_line
        self.docids: list[str] = []
        self.scores: list[float] = []
        self.ranks: list[int] = []
        self.seen: set[str] = set()
        self.starts = [0]  # index in the lists where each run of consecutive lines starts
        self.line_at = [first_line]  # and the line it starts on

    def _mark(self, line: int) -> None:
        size = len(self.docids)
        if size and line != self.line_at[-1] + size - self.starts[-1]:
            self.starts.append(size)
            self.line_at.append(line)

    def extend(self, docids: list[str], scores: list[float], ranks: list[int], line: int) -> None:
        """Add the results of consecutive lines, the first of them ``line``."""
        self._mark(line)
        self.docids += docids
        self.scores += scores
        self.ranks += ranks
        self.seen.update(docids)

    def append(self, docid: str, score: float, rank: int, line: int) -> None:
        self._mark(line)
        self.docids.append(docid)
        self.scores.append(score)
        self.ranks.append(rank)
        self.seen.add(docid)

    def line(self, index: int) -> int:
        run = bisect_right(self.starts, index) - 1
        return self.line_at[run] + index - self.starts[run]


class _RunReader:
    """Reads a run file's text, fed in blocks of whole lines, into a sink; collects every
    problem with its line. See the module docstring."""

    def __init__(self, source: str, *, split_tags: bool, sink: _Sink, careful: bool = False):
        self.source = source
        self.split_tags = split_tags
        self.sink = sink
        self.careful = careful
        self.problems = ProblemCollector(source)
        self.runs: dict[str, RunIndex] = {}
        self.stretch: _Stretch | None = None
        self.checked: dict[tuple[str, str], str | None] = {}  # (kind, id) -> reason
        self.careful_chunks = 0  # chunks the fast pass handed over (tests look at it)

    def feed(self, first_line: int, text: str) -> int:
        """Read the lines of ``text`` (joined by "\\n", without the last one's newline), the
        first of them numbered ``first_line``; return how many lines it held."""
        number = first_line
        position, length = 0, len(text)
        while True:
            end = text.find("\n", position + _CHUNK_CHARS)
            if end == -1:
                end = length
            chunk = text[position:end]
            lines = chunk.count("\n") + 1
            if self.careful or not self._fast(chunk, number, lines):
                self.careful_chunks += 1
                self._careful(chunk.split("\n"), number)
            number += lines
            if end >= length:
                return number - first_line
            position = end + 1

    def feed_lines(self, first_line: int, lines: list[str]) -> None:
        """Read lines given one by one (each one line, whatever characters it holds)."""
        self._careful(lines, first_line)

    def close(self, again: Callable[[], Iterable[tuple[int, str]]] | None = None) -> list[RunIndex]:
        """The runs read, in file order; ParseError with every problem (in line order).

        ``again`` gives the blocks once more: to name both lines of a document given twice in
        a topic whose lines are in several places of the file (rare, so not remembered)."""
        self._end()
        repeated = self.sink.finish()
        problems = self.problems
        if repeated:
            _locate_repeats(again() if again is not None else (), repeated, problems)
        if len(self.runs) > 1 and not self.split_tags:
            first, second = list(self.runs.values())[:2]
            problems.add(
                second.first_line,
                f"has a second run tag, {shown(second.tag)} (line {first.first_line} has "
                f"{shown(first.tag)}; the file holds runs {', '.join(self.runs)}): "
                f"{MULTIPLE_TAGS}",
            )
        if not self.runs and not problems:
            problems.add(None, f"has no run lines ({RUN_COLUMNS})")
        if problems:
            error = problems.error()
            error.problems.sort(key=lambda problem: (problem.line is None, problem.line or 0))
            raise error
        return list(self.runs.values())

    # --- stretches

    def _begin(self, key: Key, line: int) -> _Stretch:
        tag, topic = key
        run = self.runs.get(tag)
        if run is None:
            run = self.runs[tag] = RunIndex(tag, line)
        run.topics.setdefault(topic, line)
        self.stretch = _Stretch(key, line)
        return self.stretch

    def _end(self) -> None:
        stretch, self.stretch = self.stretch, None
        if stretch is None:
            return
        if len(stretch.seen) != len(stretch.docids):
            self._report_repeats(stretch)
            return
        ranked = _order(stretch.docids, stretch.scores, stretch.ranks)
        self.sink.add(stretch.key, ranked, stretch.first)

    def _report_repeats(self, stretch: _Stretch) -> None:
        tag, topic = stretch.key
        first: dict[str, int] = {}
        for index, docid in enumerate(stretch.docids):
            earlier = first.setdefault(docid, index)
            if earlier != index:
                self.problems.add(
                    stretch.line(index),
                    f"document {shown(docid)} appears twice in topic {shown(topic)} of run "
                    f"{shown(tag)} (first at line {stretch.line(earlier)})",
                )

    # --- the two passes

    def _fast(self, chunk: str, first_line: int, count: int) -> bool:
        """Read a chunk of ordinary lines with C-level operations only; False (nothing read)
        when anything in it needs a closer look."""
        found = _tokens(chunk)
        if found is None:
            return False
        tokens, stride, lines = found
        docids = tokens[2::stride]
        rank_texts = tokens[3::stride]
        score_texts = tokens[4::stride]
        tags = tokens[5::stride]
        tag = tags[0]
        if tags.count(tag) != lines or "" in docids or max(map(len, docids)) > MAX_ID_LENGTH:
            return False
        run = self.runs.get(tag)
        if run is None and (self.runs or check_id(tag)):
            return False  # a second tag, or a bad one: the careful pass says which line
        if not chunk.isascii() and (
            # float() takes non-ASCII digits; ids may hold invisible characters.
            not "".join(score_texts).isascii() or not "".join(docids).isprintable()
        ):
            return False
        if "_" in chunk and "_" in "".join(score_texts):
            return False  # float() takes "1_0"
        try:
            scores = list(map(float, score_texts))
        except ValueError:
            return False
        if not math.isfinite(sum(scores)):  # inf or NaN somewhere (or a false alarm)
            return False
        ranks = _rank_values(rank_texts)
        if ranks is None:
            return False
        stretches = list(_topic_runs(tokens[0::stride]))
        for topic, _stop in stretches:
            if (run is None or topic not in run.topics) and (
                not topic or topic[0] == "#" or check_id(topic)
            ):
                return False  # a comment line with six columns, or a bad topic id
        start = 0
        stretch = self.stretch
        for topic, stop in stretches:
            key = (tag, topic)
            if stretch is None or stretch.key != key:
                self._end()
                stretch = self._begin(key, first_line + start)
            stretch.extend(
                docids[start:stop], scores[start:stop], ranks[start:stop], first_line + start
            )
            start = stop
        self.runs[tag].lines += lines
        return True

    def _careful(self, lines: Iterable[str], first_line: int) -> None:
        """Check every line, collecting every problem."""
        problems = self.problems
        checked = self.checked
        for number, line in enumerate(lines, first_line):
            parts = split_fields(line)
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
            stretch = self.stretch
            if stretch is None or stretch.key != (tag, topic):
                self._end()
                stretch = self._begin((tag, topic), number)
            stretch.append(docid, score, rank, number)
            self.runs[tag].lines += 1


def _repeated(docids: list[str]) -> set[str]:
    if len(set(docids)) == len(docids):
        return set()
    return {docid for docid, count in Counter(docids).items() if count > 1}


def _locate_repeats(
    blocks: Iterable[tuple[int, str]], repeated: dict[Key, set[str]], problems: ProblemCollector
) -> None:
    """Report each of the ``repeated`` documents of a (tag, topic) at every line that gives it
    again, with the line that gave it first (a second, slow pass: only for refused files)."""
    first: dict[tuple[str, str, str], int] = {}
    for first_line, text in blocks:
        for number, line in enumerate(text.split("\n"), first_line):
            parts = split_fields(line)
            if len(parts) != 6 or parts[2] not in repeated.get((parts[5], parts[0]), ()):
                continue
            topic, _q0, docid, _rank, _score, tag = parts
            earlier = first.setdefault((tag, topic, docid), number)
            if earlier != number:
                problems.add(
                    number,
                    f"document {shown(docid)} appears twice in topic {shown(topic)} of run "
                    f"{shown(tag)} (first at line {earlier})",
                )
    for (tag, topic), docids in repeated.items():  # only when the lines could not be read again
        for docid in sorted(docids):
            if (tag, topic, docid) not in first:
                problems.add(
                    None,
                    f"document {shown(docid)} appears twice in topic {shown(topic)} of run "
                    f"{shown(tag)}",
                )


class _InMemory:
    """The sink of parse_run and read_run_file: every ranked list, in memory."""

    def __init__(self) -> None:
        self.topics: dict[Key, RankedList] = {}
        self.segments: dict[Key, int] = {}  # how many stretches each (tag, topic) came in

    def add(self, key: Key, ranked: RankedList, first_line: int) -> None:
        held = self.topics.get(key)
        if held is None:
            self.topics[key] = ranked
            self.segments[key] = 1
            return
        held.docids += ranked.docids
        held.scores += ranked.scores
        held.ranks += ranked.ranks
        self.segments[key] += 1

    def finish(self) -> dict[Key, set[str]]:
        repeated = {}
        for key, segments in self.segments.items():
            if segments > 1:
                held = self.topics[key]
                found = _repeated(held.docids)
                if found:
                    repeated[key] = found
                else:
                    self.topics[key] = _order(held.docids, held.scores, held.ranks)
        return repeated

    def runs(self, index: list[RunIndex], source: str) -> list[ParsedRun]:
        return [
            ParsedRun(
                run.tag,
                {topic: self.topics[(run.tag, topic)] for topic in run.topics},
                run.lines,
                source,
            )
            for run in index
        ]


def _read(
    blocks: Callable[[], Iterable[tuple[int, str]]], source: str, split_tags: bool, sink: _Sink
) -> list[RunIndex]:
    """Feed a reader the blocks that ``blocks()`` gives (called again only on the error path
    that needs a second look) and close it."""
    reader = _RunReader(source, split_tags=split_tags, sink=sink)
    for first_line, text in blocks():
        reader.feed(first_line, text)
    return reader.close(again=blocks)


def _file_blocks(
    source: str | os.PathLike | BinaryIO, name: str | None, encoding: str | None
) -> Callable[[], Iterable[tuple[int, str]]]:
    """A function giving the file's text blocks, from its start each time it is called (a file
    object is rewound; one that cannot be gives nothing the second time)."""
    calls = 0

    def blocks() -> Iterable[tuple[int, str]]:
        nonlocal calls
        calls += 1
        if calls > 1 and not isinstance(source, (str, os.PathLike)):
            try:
                source.seek(0)
            except (AttributeError, OSError, ValueError):
                return ()
        return iter_text_blocks(source, name=name, encoding=encoding)

    return blocks


def parse_run(
    lines: Iterable[str], *, source: str = "<run>", split_tags: bool = False
) -> list[ParsedRun]:
    """The runs of a run file's lines; ParseError listing every problem.

    Any ASCII whitespace separates the six columns (as in trec_eval); blank and '#' lines are
    skipped. A file with several tags is refused unless split_tags, which gives one ParsedRun
    per tag (in order of first appearance). The same docid twice in a topic of a run, bad ids,
    non-integer ranks and scores that are not finite numbers are refused.
    """
    if not isinstance(lines, list):
        lines = list(lines)
    sink = _InMemory()
    reader = _RunReader(source, split_tags=split_tags, sink=sink)
    if any("\n" in line for line in lines):
        reader.feed_lines(1, lines)  # joined, they would be more lines than they are
        again = None
    else:
        text = "\n".join(lines)
        if lines:
            reader.feed(1, text)
        again = (lambda: [(1, text)]) if lines else None
    return sink.runs(reader.close(again=again), source)


def parse_run_text(
    text: str, *, source: str = "<run>", split_tags: bool = False
) -> list[ParsedRun]:
    """parse_run for a whole decoded file (lines ending in LF or CRLF)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if text.endswith(("\n", "\r")):  # a final newline ends the last line; a final CR goes
        text = text[:-1]
    sink = _InMemory()
    return sink.runs(_read(lambda: [(1, text)] if text else [], source, split_tags, sink), source)


def _fast_parse(text: str, source: str) -> list[ParsedRun] | None:
    """The runs of a text that the fast pass reads whole and finds nothing wrong in, else None:
    what tests of the fast pass look at."""
    sink = _InMemory()
    reader = _RunReader(source, split_tags=False, sink=sink)
    reader.feed(1, text.removesuffix("\n"))
    if reader.careful_chunks:
        return None
    try:
        return sink.runs(reader.close(), source)
    except ParseError:
        return None


def _careful_parse(lines: list[str], source: str, split_tags: bool) -> list[ParsedRun]:
    """parse_run with every line checked by the careful pass: the fast pass's oracle."""
    sink = _InMemory()
    reader = _RunReader(source, split_tags=split_tags, sink=sink, careful=True)
    reader.feed_lines(1, lines)
    return sink.runs(reader.close(again=lambda: [(1, "\n".join(lines))]), source)


def _rows(chunk: str) -> tuple[list[str], int, int] | None:
    """(tokens, 6, lines) when every line has six whitespace-separated columns, else None."""
    if OTHER_WHITESPACE.search(chunk):
        return None  # whitespace inside a column, to trec_eval: the careful pass decides
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


def read_run_file(
    source: str | os.PathLike | BinaryIO,
    *,
    name: str | None = None,
    split_tags: bool = False,
    encoding: str | None = None,
) -> list[ParsedRun]:
    """The runs of a run file (path or binary file object; gzip by name or magic bytes), read
    block by block: memory holds the ranked lists, not the file's text."""
    display = source_name(source, name)
    sink = _InMemory()
    blocks = _file_blocks(source, name, encoding)
    return sink.runs(_read(blocks, display, split_tags, sink), display)


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


# --- Reading into a spill file, for imports ---------------------------------------------------


def _pack(topic_id: str, ranked: RankedList) -> PackedTopic:
    return PackedTopic(
        topic_id,
        "\n".join(ranked.docids),
        array("d", ranked.scores).tobytes(),
        array("q", ranked.ranks).tobytes(),
        len(ranked.docids),
    )


def _unpack(packed: PackedTopic) -> RankedList:
    scores, ranks = array("d"), array("q")
    scores.frombytes(packed.scores)
    ranks.frombytes(packed.ranks)
    docids = packed.docids.split("\n") if packed.length else []
    return RankedList(docids, scores.tolist(), ranks.tolist())


class _Spill:
    """The sink of imports: each stretch of a topic packed as the database stores it and
    appended to a file, so reading holds one chunk and one topic, whatever the file's size."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.size = 0
        # (tag, topic) -> (offset, first line, length) of each stretch, in file order
        self.segments: dict[Key, list[tuple[int, int, int]]] = {}

    def add(self, key: Key, ranked: RankedList, first_line: int) -> None:
        data = pickle.dumps(_pack(key[1], ranked), protocol=pickle.HIGHEST_PROTOCOL)
        self.file.write(data)
        self.segments.setdefault(key, []).append((self.size, first_line, len(ranked)))
        self.size += len(data)

    def finish(self) -> dict[Key, set[str]]:
        self.file.flush()
        repeated = {}
        for key, segments in self.segments.items():
            if len(segments) > 1:
                docids: list[str] = []
                for offset, _line, _length in segments:
                    docids += _unpack(_load(self.file, offset)).docids
                found = _repeated(docids)
                if found:
                    repeated[key] = found
        return repeated


def _load(file: BinaryIO, offset: int) -> PackedTopic:
    file.seek(offset)
    return pickle.load(file)  # noqa: S301 (a file this module wrote a moment ago)


@dataclass
class SpilledRuns:
    """The runs of one file, read into a spill file of packed topics: the tags, topics and lines
    an import checks (small), then the topics it stores, read back one at a time. Pickles, so
    that worker processes can read files and hand this over; :meth:`discard` removes the file."""

    source: str
    path: str
    runs: list[RunIndex]
    segments: dict[Key, list[tuple[int, int, int]]]

    def packed_topics(self, run: RunIndex) -> Iterator[PackedTopic]:
        """The run's topics in file order, packed for storage, each in trec_eval order (a topic
        that came back after others is merged and ordered again)."""
        with open(self.path, "rb") as file:
            for topic in run.topics:
                segments = self.segments[(run.tag, topic)]
                if len(segments) == 1:
                    yield _load(file, segments[0][0])
                    continue
                docids: list[str] = []
                scores: list[float] = []
                ranks: list[int] = []
                for offset, _line, _length in segments:
                    part = _unpack(_load(file, offset))
                    docids += part.docids
                    scores += part.scores
                    ranks += part.ranks
                yield _pack(topic, _order(docids, scores, ranks))

    def discard(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def read_spilled_run_file(
    source: str | os.PathLike | BinaryIO,
    *,
    name: str | None = None,
    split_tags: bool = False,
    encoding: str | None = None,
    directory: str | os.PathLike | None = None,
) -> SpilledRuns:
    """Read a run file into a spill file in ``directory`` (default: the system's temporary
    directory), in memory bounded by a chunk and the largest topic. Raises ParseError (and
    leaves no file behind) for a refused file."""
    display = source_name(source, name)
    with tempfile.NamedTemporaryFile(
        prefix="pooljudge-run-", suffix=".spill", dir=directory, delete=False
    ) as file:
        sink = _Spill(file)
        try:
            index = _read(_file_blocks(source, name, encoding), display, split_tags, sink)
        except BaseException:
            file.close()
            os.unlink(file.name)
            raise
    return SpilledRuns(display, file.name, index, sink.segments)


def copy_to_file(source: BinaryIO, path: str | os.PathLike) -> str:
    """A file object's bytes copied to ``path`` in blocks (for a worker process to read)."""
    with open(path, "wb") as out:
        shutil.copyfileobj(source, out, 1 << 20)
    return os.fspath(path)


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
