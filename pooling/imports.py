"""Importing runs: all files or none, one row per (run, topic), streamed file by file so memory
stays bounded by the largest file rather than the whole submission set.

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
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import BinaryIO

from django.db import connection, transaction
from django.utils import timezone

from campaigns.imports import ImportSummary, refuse
from campaigns.models import Campaign, Document
from campaigns.textfiles import MAX_PROBLEMS, ParseError, Problem
from pooling.formats import PackedRun, read_packed_run_file
from pooling.models import PoolEntry, Run, RunTopic

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int | None, str], None]
COPY_COLUMNS = ("run_id", "topic_id", "docids", "scores", "ranks", "length")
COPY_TYPES = ("int8", "int8", "text", "bytea", "bytea", "int4")
# Parse in worker processes only when there is enough to parse: starting them costs ~0.2 s.
PARSE_PROCESSES = 2
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
NO_POOL_YET = (
    "the campaign has no pools yet, so keeping only pooled documents would keep nothing; "
    "build a pool first or import every document."
)


def _no_progress(done: int, total: int | None, message: str) -> None:
    return None


def _topic_rows(run_id: int, run: PackedRun, topic_pks: dict[str, int]) -> Iterator[tuple]:
    for topic in run.topics:
        yield (
            run_id,
            topic_pks[topic.topic_id],
            topic.docids,
            topic.scores,
            topic.ranks,
            topic.length,
        )


Source = str | os.PathLike | BinaryIO
Read = list[PackedRun] | ParseError


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


def _read_one(name: str, source: Source, split_tags: bool, encoding: str | None) -> Read:
    try:
        return read_packed_run_file(source, name=name, split_tags=split_tags, encoding=encoding)
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
    sources: list[tuple[str, Source]], *, split_tags: bool, encoding: str | None
) -> Iterator[Read]:
    """Each file's runs, packed as they are stored, or the ParseError that refuses it, in the
    order of ``sources``.

    With several files of PARALLEL_MIN_BYTES in all and more than one CPU, PARSE_PROCESSES
    worker processes read and parse the next files while the caller stores one: memory stays
    bounded by a few files. The workers only parse (pooling.formats imports no Django); the
    caller decides and writes. Otherwise the files are read here, one after another."""
    pool = None
    if (
        len(sources) > 1
        and _cpus() > 1
        and sum(_source_size(source) for _, source in sources) >= PARALLEL_MIN_BYTES
    ):
        pool = _start_pool()
    if pool is None:
        for name, source in sources:
            yield _read_one(name, source, split_tags, encoding)
        return
    pending: deque[Future] = deque()
    waiting = iter(sources)

    def submit() -> None:
        for name, source in waiting:
            if not isinstance(source, (str, os.PathLike)):
                source = source.read()  # a worker cannot read this process's file objects
            pending.append(
                pool.submit(
                    read_packed_run_file,
                    source,
                    name=name,
                    split_tags=split_tags,
                    encoding=encoding,
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

    def add(self, run: Run, packed: PackedRun) -> None:
        """Store ``run`` (not saved yet) with the ranked lists of ``packed``."""
        if not self.copying:
            self.supersede([run.tag])
            run.save(force_insert=True)
            RunTopic.objects.bulk_create(
                (
                    RunTopic(**dict(zip(COPY_COLUMNS, row, strict=True)))
                    for row in _topic_rows(run.pk, packed, self.topic_pks)
                ),
                batch_size=500,
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
        for row in _topic_rows(run.pk, packed, self.topic_pks):
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
    progress: ProgressFn = _no_progress,
) -> ImportSummary:
    """Import run files (``topic Q0 docid rank score tag``) into the campaign.

    Every file is read and checked; if any line of any file is bad, or a run names a topic the
    campaign lacks, or a tag is already taken (without ``replace``), ParseError lists the
    problems and nothing is stored. ``replace`` supersedes the current run of that tag in the
    same transaction (the old one is kept for the pools built from it). Files are read one at a
    time: memory stays bounded by the largest file, not the whole set."""
    topic_pks = dict(campaign.topics.values_list("topic_id", "pk"))
    taken = set(campaign.runs.current().values_list("tag", flat=True))
    problems: list[Problem] = []
    more = 0
    seen_tags: dict[str, str] = {}
    counts = {"runs": 0, "lines": 0, "run topics": 0, "replaced": 0}
    importer = user if user is not None and user.is_authenticated else None

    def problem(source: str, message: str) -> None:
        nonlocal more
        if len(problems) < MAX_PROBLEMS:
            problems.append(Problem(source, None, message))
        else:
            more += 1

    def supersede(tags: list[str]) -> None:
        replaced = [tag for tag in tags if tag in taken]
        if replaced:
            counts["replaced"] += (
                campaign.runs.current()
                .filter(tag__in=replaced)
                .update(superseded_at=timezone.now())
            )

    reader = _read_files(sources, split_tags=split_tags, encoding=encoding)
    with (
        _RunWriter(topic_pks=topic_pks, supersede=supersede, reserve=len(sources)) as writer,
        contextlib.closing(reader) as files,
    ):
        for index, ((name, _source), read) in enumerate(zip(sources, files, strict=True)):
            # A progress report may query (the cancel flag), which an open COPY forbids.
            writer.pause()
            progress(index, len(sources), f"storing {name}")
            if isinstance(read, ParseError):
                room = MAX_PROBLEMS - len(problems)
                problems.extend(read.problems[:room])
                more += read.more + max(0, len(read.problems) - room)
                continue
            for packed in read:
                topic_ids = {topic.topic_id for topic in packed.topics}
                unknown = sorted(topic_ids - topic_pks.keys())
                if unknown:
                    listed = ", ".join(unknown[:20]) + (" …" if len(unknown) > 20 else "")
                    problem(
                        name,
                        f"run {packed.tag} names {len(unknown)} topic(s) the campaign does not "
                        f"have: {listed}. Import the topics first.",
                    )
                if packed.tag in seen_tags:
                    problem(name, f"run tag {packed.tag} is also in {seen_tags[packed.tag]}.")
                seen_tags.setdefault(packed.tag, name)
                if packed.tag in taken and not replace:
                    problem(
                        name,
                        f"a run tagged {packed.tag} is already imported; import with replace to "
                        "supersede it.",
                    )
                if problems:
                    continue  # keep checking the other files, but write nothing more
                run = Run(
                    campaign=campaign,
                    tag=packed.tag,
                    source_name=name[:255],
                    line_count=packed.lines,
                    topic_count=len(packed.topics),
                    imported_by=importer,
                )
                writer.add(run, packed)
                counts["runs"] += 1
                counts["lines"] += packed.lines
                counts["run topics"] += len(packed.topics)
            # Reading the next file must not hold this one's rows as well.
            packed = read = None
        if problems:
            raise ParseError(problems, more=more)
        writer.finish()
    progress(len(sources), len(sources), "done")
    if not counts["replaced"]:
        del counts["replaced"]
    return ImportSummary("runs", counts)


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
