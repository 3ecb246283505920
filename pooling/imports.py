"""Importing runs: all files or none, one row per (run, topic), in bounded memory.

Each file is read into a spill file of packed topics (pooling.formats.read_spilled_run_file):
reading holds one chunk of text and one topic at a time, and so does storing, which streams the
topics back from the spill file. Memory therefore does not grow with the size of a file, nor with
the number of files (measured in bench/memory.py).

Speed (measured in bench/import_runs.py): reading and parsing is most of the work, so with
several large files two worker processes parse ahead (where processes may be started: the
command line, not Celery's prefork workers) while this process checks each file in order and
streams the packed rows into one binary COPY, which PostgreSQL stores meanwhile. Deciding and
writing stay here, in one transaction: a bad file anywhere still means nothing is stored.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import islice
from typing import BinaryIO

from django.db import connection, transaction
from django.utils import timezone

from campaigns.imports import ImportSummary, refuse
from campaigns.models import Campaign, Document
from campaigns.textfiles import MAX_PROBLEMS, ParseError, ProblemCollector, shown
from pooling.formats import (
    PackedTopic,
    RunIndex,
    SpilledRuns,
    copy_to_file,
    read_spilled_run_file,
)
from pooling.models import PoolEntry, Run, RunTopic
from pooljudge.common import ProgressFn, no_progress, refresh_planner_statistics

log = logging.getLogger(__name__)

COPY_COLUMNS = ("run_id", "topic_id", "docids", "scores", "ranks", "length")
COPY_TYPES = ("int8", "int8", "text", "bytea", "bytea", "int4")
# Parse in worker processes only when there is enough to parse: starting them costs ~0.2 s.
PARSE_PROCESSES = 2
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
NO_POOL_YET = (
    "the campaign has no pools yet, so keeping only pooled documents would keep nothing; "
    "build a pool first or import every document."
)


def _topic_rows(
    run_id: int, topics: Iterable[PackedTopic], topic_pks: dict[str, int]
) -> Iterator[tuple]:
    for topic in topics:
        yield (
            run_id,
            topic_pks[topic.topic_id],
            topic.docids,
            topic.scores,
            topic.ranks,
            topic.length,
        )


Source = str | os.PathLike | BinaryIO
Read = SpilledRuns | ParseError


def _source_size(source: Source) -> int:
    """The file's size in bytes, or 0 when it cannot be told without reading it."""
    try:
        if isinstance(source, (str, os.PathLike)):
            return os.path.getsize(source)
        size = getattr(source, "size", None)
        if isinstance(size, int):
            return size
        position = source.tell()
        end = source.seek(0, os.SEEK_END)
        source.seek(position)
        return end - position
    except (OSError, AttributeError, ValueError):
        return 0


def _read_one(
    name: str, source: Source, split_tags: bool, encoding: str | None, directory: str
) -> Read:
    try:
        return read_spilled_run_file(
            source, name=name, split_tags=split_tags, encoding=encoding, directory=directory
        )
    except ParseError as exc:
        return exc


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _start_pool() -> ProcessPoolExecutor | None:
    """PARSE_PROCESSES started worker processes, or None where processes cannot be started: the
    import then parses in this process. Celery's prefork pool runs tasks in daemonic processes,
    which may not have children (they would outlive a killed worker); the command line and the
    embedded server can."""
    if multiprocessing.current_process().daemon:
        return None
    pool = ProcessPoolExecutor(PARSE_PROCESSES, mp_context=multiprocessing.get_context("spawn"))
    try:
        pool.submit(int).result()  # starts the workers
    except (AssertionError, OSError, BrokenProcessPool) as exc:
        log.warning("parsing run files in this process: cannot start workers (%r)", exc)
        pool.shutdown(wait=False, cancel_futures=True)
        return None
    log.info("parsing run files in %d worker processes", PARSE_PROCESSES)
    return pool


def _read_files(
    sources: list[tuple[str, Source]],
    *,
    split_tags: bool,
    encoding: str | None,
    directory: str,
) -> Iterator[Read]:
    """Each file read into a spill file in ``directory``, or the ParseError that refuses it, in
    the order of ``sources``.

    With several files of PARALLEL_MIN_BYTES in all and more than one CPU, PARSE_PROCESSES
    worker processes read and parse the next files while the caller stores one; what they hand
    back is small (the spill file's name and index). The workers only parse (pooling.formats
    imports no Django); the caller decides and writes. Otherwise the files are read here, one
    after another."""
    pool = None
    if (
        len(sources) > 1
        and _cpus() > 1
        and sum(_source_size(source) for _, source in sources) >= PARALLEL_MIN_BYTES
    ):
        pool = _start_pool()
    if pool is None:
        for name, source in sources:
            yield _read_one(name, source, split_tags, encoding, directory)
        return
    pending: deque[Future] = deque()
    waiting = iter(enumerate(sources))

    def submit() -> None:
        for number, (name, source) in waiting:
            if not isinstance(source, (str, os.PathLike)):
                # A worker cannot read this process's file objects: it reads a copy.
                source = copy_to_file(source, os.path.join(directory, f"source-{number}"))
            pending.append(
                pool.submit(
                    read_spilled_run_file,
                    source,
                    name=name,
                    split_tags=split_tags,
                    encoding=encoding,
                    directory=directory,
                )
            )
            if len(pending) >= PARSE_PROCESSES:
                return

    try:
        submit()
        while pending:
            future = pending.popleft()
            submit()
            try:
                result: Read = future.result()
            except ParseError as exc:  # raised in the worker, sent back with its problems
                result = exc
            yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class _RunWriter:
    """Stores the runs of one import inside its transaction.

    On PostgreSQL the topics of every run of every file go through one binary COPY, so the server
    stores a file's rows while the next file is being read and parsed, instead of each file
    waiting for the previous file's COPY to finish. No other statement can run while the COPY is
    open, so the Run rows' ids are reserved from their sequence beforehand and the rows inserted
    after the COPY: the foreign key from run topics to runs is checked at commit (Django declares
    it deferred). Elsewhere (SQLite) each run is inserted, then its topics in batches.

    ``supersede(tags)`` marks the current runs of those tags replaced; it is called before the
    new runs of those tags are inserted (the current tag of a campaign is unique).
    """

    def __init__(
        self, *, topic_pks: dict[str, int], supersede: Callable[[list[str]], None], reserve: int
    ) -> None:
        self.topic_pks = topic_pks
        self.supersede = supersede
        self.copying = connection.vendor == "postgresql"
        self.runs: list[Run] = []
        self._ids: list[int] = []
        self._reserve = max(1, reserve)
        self._copy = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> _RunWriter:
        return self

    def __exit__(self, *exc_info) -> bool | None:
        # Leaving with an exception ends an open COPY with CopyFail; the transaction rolls back.
        return self._stack.__exit__(*exc_info)

    def add(self, run: Run, topics: Iterable[PackedTopic]) -> None:
        """Store ``run`` (not saved yet) with the ranked lists of ``topics``."""
        if not self.copying:
            self.supersede([run.tag])
            run.save(force_insert=True)
            # bulk_create would make a list of every row first: batches keep memory bounded.
            rows = _topic_rows(run.pk, topics, self.topic_pks)
            while batch := list(islice(rows, 50)):
                RunTopic.objects.bulk_create(
                    RunTopic(**dict(zip(COPY_COLUMNS, row, strict=True))) for row in batch
                )
            return
        if not self._ids:
            self._end_copy()
            self._ids = self._reserve_ids(self._reserve)
        run.pk = self._ids.pop(0)
        self.runs.append(run)
        if self._copy is None:
            self._copy = self._start_copy()
        write_row = self._copy.write_row
        for row in _topic_rows(run.pk, topics, self.topic_pks):
            write_row(row)

    def finish(self) -> None:
        """End the COPY and insert the runs it stored the topics of."""
        self._end_copy()
        if self.runs:
            self.supersede([run.tag for run in self.runs])
            Run.objects.bulk_create(self.runs)

    def pause(self) -> None:
        """End the open COPY, if any, so that the connection can run other statements; the next
        ``add`` starts another."""
        self._end_copy()

    def _start_copy(self):
        quote = connection.ops.quote_name
        columns = ", ".join(map(quote, COPY_COLUMNS))
        statement = f"COPY {quote(RunTopic._meta.db_table)} ({columns}) FROM STDIN (FORMAT BINARY)"
        cursor = self._stack.enter_context(connection.cursor())
        copy = self._stack.enter_context(cursor.cursor.copy(statement))
        copy.set_types(COPY_TYPES)
        return copy

    def _end_copy(self) -> None:
        if self._copy is not None:
            self._copy = None
            self._stack.close()  # waits for the server to store what was sent

    @staticmethod
    def _reserve_ids(count: int) -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [Run._meta.db_table, count],
            )
            return [row[0] for row in cursor.fetchall()]


@transaction.atomic
def import_runs(
    *,
    campaign: Campaign,
    sources: list[tuple[str, str | os.PathLike | BinaryIO]],
    replace: bool = False,
    split_tags: bool = False,
    encoding: str | None = None,
    user=None,
    progress: ProgressFn = no_progress,
) -> ImportSummary:
    """Import run files (``topic Q0 docid rank score tag``) into the campaign.

    Every file is read and checked; if any line of any file is bad, or a run names a topic the
    campaign lacks, or a tag is already taken (without ``replace``) or in two files, ParseError
    lists the problems, each with the line it is on, and nothing is stored. ``replace``
    supersedes the current run of that tag in the same transaction (the old one is kept for the
    pools built from it). Memory holds a chunk of text and a topic at a time, whatever the size
    and number of the files (see the module docstring)."""
    topic_pks = dict(campaign.topics.values_list("topic_id", "pk"))
    taken = set(campaign.runs.current().values_list("tag", flat=True))
    problems = _Problems()
    seen_tags: dict[str, tuple[str, int]] = {}  # tag -> (file, line)
    counts = {"runs": 0, "lines": 0, "run topics": 0, "replaced": 0}
    importer = user if user is not None and user.is_authenticated else None

    def supersede(tags: list[str]) -> None:
        replaced = [tag for tag in tags if tag in taken]
        if replaced:
            counts["replaced"] += (
                campaign.runs.current()
                .filter(tag__in=replaced)
                .update(superseded_at=timezone.now())
            )

    with (
        tempfile.TemporaryDirectory(prefix="pooljudge-runs-") as scratch,
        _RunWriter(topic_pks=topic_pks, supersede=supersede, reserve=len(sources)) as writer,
        contextlib.closing(
            _read_files(sources, split_tags=split_tags, encoding=encoding, directory=scratch)
        ) as files,
    ):
        for index, ((name, _source), read) in enumerate(zip(sources, files, strict=True)):
            # A progress report may query (the cancel flag), which an open COPY forbids.
            writer.pause()
            progress(index, len(sources), f"storing {name}")
            if isinstance(read, ParseError):
                problems.take(read)
                continue
            try:
                checks = ProblemCollector(name)
                for run in read.runs:
                    _check_run(run, name, checks, topic_pks, taken, seen_tags, replace)
                problems.take(checks.error() if checks else None)
                if problems:
                    continue  # keep checking the other files, but write nothing more
                for run in read.runs:
                    writer.add(
                        Run(
                            campaign=campaign,
                            tag=run.tag,
                            source_name=name[:255],
                            line_count=run.lines,
                            topic_count=len(run.topics),
                            imported_by=importer,
                        ),
                        read.packed_topics(run),
                    )
                    counts["runs"] += 1
                    counts["lines"] += run.lines
                    counts["run topics"] += len(run.topics)
            finally:
                read.discard()
        if problems:
            raise problems.error()
        writer.finish()
    refresh_planner_statistics(Run, RunTopic)
    progress(len(sources), len(sources), "done")
    if not counts["replaced"]:
        del counts["replaced"]
    return ImportSummary("runs", counts)


class _Problems:
    """The problems of every file of an import, up to MAX_PROBLEMS kept, the rest counted."""

    def __init__(self) -> None:
        self.kept: list = []
        self.more = 0

    def take(self, error: ParseError | None) -> None:
        if error is None:
            return
        room = MAX_PROBLEMS - len(self.kept)
        self.kept += error.problems[:room]
        self.more += error.more + sum(p.occurrences for p in error.problems[room:])

    def __bool__(self) -> bool:
        return bool(self.kept)

    def error(self) -> ParseError:
        return ParseError(self.kept, more=self.more)


def _check_run(
    run: RunIndex,
    name: str,
    checks: ProblemCollector,
    topic_pks: dict[str, int],
    taken: set[str],
    seen_tags: dict[str, tuple[str, int]],
    replace: bool,
) -> None:
    """The campaign's refusals of one run of file ``name``, each at the line it starts from."""
    tag = shown(run.tag)
    for topic, line in run.topics.items():
        if topic not in topic_pks:
            checks.add(
                line,
                f"topic {shown(topic)} (of run {tag}) is not in the campaign; import the topics "
                "first",
            )
    other = seen_tags.setdefault(run.tag, (name, run.first_line))
    if other != (name, run.first_line):
        checks.add(
            run.first_line,
            f"run tag {tag} is also the tag of {other[0]} (line {other[1]}); a tag names one run",
        )
    if run.tag in taken and not replace:
        checks.add(
            run.first_line,
            f"a run tagged {tag} is already imported; import with --replace (on the upload page: "
            "“Replace runs with the same tag”) to supersede it",
        )


def pooled_doc_ids(campaign: Campaign) -> set[str]:
    """Every document id in any of the campaign's pools (for ``import_documents --only-pooled``)."""
    return set(
        PoolEntry.objects.filter(pool__campaign=campaign)
        .values_list("doc_id", flat=True)
        .distinct()
    )


def missing_documents(campaign: Campaign) -> int:
    """How many pooled documents have not been imported yet."""
    pooled = pooled_doc_ids(campaign)
    present = set(
        Document.objects.filter(campaign=campaign, doc_id__in=pooled).values_list(
            "doc_id", flat=True
        )
    )
    return len(pooled - present)


def runs_importer(*, campaign, sources, options, progress, user) -> ImportSummary:
    return import_runs(
        campaign=campaign,
        sources=sources,
        replace=bool(options.get("replace")),
        split_tags=bool(options.get("split_tags")),
        encoding=options.get("encoding") or None,
        user=user,
        progress=progress,
    )


def documents_importer(*, campaign, sources, options, progress, user) -> ImportSummary:
    from campaigns.imports import import_documents

    if len(sources) != 1:
        raise refuse("documents", ["Import one document file at a time."])
    ((name, data),) = sources
    keep = None
    if options.get("only_pooled"):
        keep = pooled_doc_ids(campaign)
        if not keep:
            raise refuse(name, [NO_POOL_YET])
    return import_documents(
        campaign=campaign,
        source=data,
        name=name,
        format=options.get("format") or None,
        keep=keep,
        encoding=options.get("encoding") or None,
        progress=progress,
    )
