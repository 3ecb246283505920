"""Importing runs: all files or none, one row per (run, topic), streamed file by file so memory
stays bounded by the largest file rather than the whole submission set."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from django.db import connection, transaction
from django.utils import timezone

from campaigns.imports import ImportSummary, refuse
from campaigns.models import Campaign, Document
from campaigns.textfiles import MAX_PROBLEMS, ParseError, Problem
from pooling.formats import ParsedRun, read_run_file
from pooling.models import PoolEntry, Run, RunTopic

ProgressFn = Callable[[int, int | None, str], None]
COPY_COLUMNS = ("run_id", "topic_id", "docids", "scores", "ranks", "length")


def _no_progress(done: int, total: int | None, message: str) -> None:
    return None


def _topic_rows(run: Run, parsed: ParsedRun, topic_pks: dict[str, int]) -> Iterator[tuple]:
    for topic_id, ranked in parsed.topics.items():
        yield (
            run.pk,
            topic_pks[topic_id],
            "\n".join(ranked.docids),
            RunTopic.pack_scores(ranked.scores),
            RunTopic.pack_ranks(ranked.ranks),
            len(ranked.docids),
        )


def _write_rows(rows: Iterable[tuple]) -> None:
    if connection.vendor == "postgresql":
        # COPY is several times faster than INSERT for the hundreds of thousands of bytes per row.
        table = RunTopic._meta.db_table
        with connection.cursor() as cursor:
            raw = cursor.cursor
            with raw.copy(f"COPY {table} ({', '.join(COPY_COLUMNS)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        return
    RunTopic.objects.bulk_create(
        (RunTopic(**dict(zip(COPY_COLUMNS, row, strict=True))) for row in rows), batch_size=500
    )


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
    same transaction (the old one is kept for the pools built from it)."""
    topic_pks = dict(campaign.topics.values_list("topic_id", "pk"))
    taken = set(campaign.runs.current().values_list("tag", flat=True))
    problems: list[Problem] = []
    more = 0
    seen_tags: dict[str, str] = {}
    counts = {"runs": 0, "lines": 0, "run topics": 0, "replaced": 0}
    now = timezone.now()

    def problem(source: str, message: str) -> None:
        nonlocal more
        if len(problems) < MAX_PROBLEMS:
            problems.append(Problem(source, None, message))
        else:
            more += 1

    for index, (name, source) in enumerate(sources):
        progress(index, len(sources), f"reading {name}")
        try:
            parsed_runs = read_run_file(source, name=name, split_tags=split_tags, encoding=encoding)
        except ParseError as exc:
            room = MAX_PROBLEMS - len(problems)
            problems.extend(exc.problems[:room])
            more += exc.more + max(0, len(exc.problems) - room)
            continue
        for parsed in parsed_runs:
            unknown = sorted(set(parsed.topics) - topic_pks.keys())
            if unknown:
                shown = ", ".join(unknown[:20]) + (" …" if len(unknown) > 20 else "")
                problem(
                    name,
                    f"run {parsed.tag} names {len(unknown)} topic(s) the campaign does not have: "
                    f"{shown}. Import the topics first.",
                )
            if parsed.tag in seen_tags:
                problem(name, f"run tag {parsed.tag} is also in {seen_tags[parsed.tag]}.")
            seen_tags.setdefault(parsed.tag, name)
            if parsed.tag in taken and not replace:
                problem(
                    name,
                    f"a run tagged {parsed.tag} is already imported; import with replace to "
                    "supersede it.",
                )
            if problems:
                continue  # keep checking the other files, but write nothing more
            if parsed.tag in taken:
                counts["replaced"] += (
                    campaign.runs.current().filter(tag=parsed.tag).update(superseded_at=now)
                )
            run = Run.objects.create(
                campaign=campaign,
                tag=parsed.tag,
                source_name=name[:255],
                line_count=parsed.lines,
                topic_count=len(parsed.topics),
                imported_by=user if user is not None and user.is_authenticated else None,
            )
            _write_rows(_topic_rows(run, parsed, topic_pks))
            counts["runs"] += 1
            counts["lines"] += parsed.lines
            counts["run topics"] += len(parsed.topics)
    if problems:
        raise ParseError(problems, more=more)
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
    keep = pooled_doc_ids(campaign) if options.get("only_pooled") else None
    return import_documents(
        campaign=campaign,
        source=data,
        name=name,
        format=options.get("format") or None,
        keep=keep,
        encoding=options.get("encoding") or None,
        progress=progress,
    )
