"""Importing topics and documents, all or nothing.

The parsers (``campaigns/formats.py``) collect every problem with its line number; nothing is
written unless the whole file is good. Documents stream: a collection of any size is read line by
line inside one transaction, and a problem anywhere rolls the whole import back.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.db import transaction
from django.db.models.functions import MD5

from campaigns.formats import DocumentRecord, iter_documents, parse_topics
from campaigns.models import Campaign, Document, Topic
from campaigns.sanitize import render_body
from campaigns.textfiles import ParseError, Problem, decode_lines, iter_lines, read_bytes
from pooljudge.common import ProgressFn, no_progress, refresh_planner_statistics

Source = str | BinaryIO
DOCUMENT_BATCH = 1000


@dataclass
class ImportSummary:
    kind: str
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # sentences the summary ends with

    def message(self) -> str:
        parts = ", ".join(f"{value:,} {key}" for key, value in self.counts.items())
        return f"Imported {self.kind}: {parts}." + "".join(f" {note}." for note in self.notes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "counts": self.counts,
            "warnings": self.warnings[:100],
            "notes": self.notes,
            "message": self.message(),
        }


def skipped_note(lines: list[int]) -> list[str]:
    """The summary's word on empty records left out (a SMART file's trailing ".I")."""
    if not lines:
        return []
    where = ", ".join(map(str, lines[:10])) + (" …" if len(lines) > 10 else "")
    plural = "s" if len(lines) != 1 else ""
    return [
        f"Skipped {len(lines):,} empty record{plural} (a .I with nothing after it): "
        f"line{plural} {where}"
    ]


def refuse(source: str, messages: Iterable[str]) -> ParseError:
    """A ParseError for problems found by cross-checks against the campaign, not by the parser."""
    return ParseError([Problem(source, None, message) for message in messages])


@transaction.atomic
def import_topics(
    *,
    campaign: Campaign,
    source: Source,
    name: str,
    format: str | None = None,
    positional_ids: bool = False,
    encoding: str | None = None,
) -> ImportSummary:
    """Add the file's topics to the campaign, updating the text of topics it already has.

    Raises ParseError (nothing changed) if any line is bad."""
    data = read_bytes(source, name=name, max_ratio=settings.POOLJUDGE_MAX_GZIP_RATIO)
    lines = decode_lines(data, source=name, encoding=encoding)
    skipped: list[int] = []
    records = parse_topics(
        lines, format=format, source=name, positional_ids=positional_ids, skipped=skipped
    )
    existing = {topic.topic_id: topic for topic in campaign.topics.all()}
    next_position = max((topic.position for topic in existing.values()), default=0) + 1
    created: list[Topic] = []
    updated: list[Topic] = []
    for record in records:
        topic = existing.get(record.topic_id)
        if topic is None:
            created.append(
                Topic(
                    campaign=campaign,
                    topic_id=record.topic_id,
                    title=record.title,
                    description=record.description,
                    narrative=record.narrative,
                    position=next_position,
                    original_id=record.original_id,
                )
            )
            next_position += 1
        elif (topic.title, topic.description, topic.narrative, topic.original_id) != (
            record.title,
            record.description,
            record.narrative,
            record.original_id,
        ):
            topic.title, topic.description = record.title, record.description
            topic.narrative, topic.original_id = record.narrative, record.original_id
            updated.append(topic)
    Topic.objects.bulk_create(created)
    Topic.objects.bulk_update(updated, ["title", "description", "narrative", "original_id"])
    refresh_planner_statistics(Topic)
    return ImportSummary(
        "topics",
        {
            "new topics": len(created),
            "updated": len(updated),
            "unchanged": len(records) - len(created) - len(updated),
        },
        notes=skipped_note(skipped),
    )


@transaction.atomic
def import_documents(
    *,
    campaign: Campaign,
    source: Source,
    name: str,
    format: str | None = None,
    keep: Container[str] | None = None,
    encoding: str | None = None,
    progress: ProgressFn = no_progress,
) -> ImportSummary:
    """Stream the file's documents into the campaign, replacing the text of documents it
    already has where it differs (the summary counts the ones that did not as unchanged). With
    ``keep``, only documents whose id is in it are stored (``--only-pooled``).

    Raises ParseError (nothing changed) if any record is bad."""
    lines = iter_lines(
        source, name=name, encoding=encoding, max_ratio=settings.POOLJUDGE_MAX_GZIP_RATIO
    )
    counts = {"new documents": 0, "updated": 0, "unchanged": 0, "skipped (not pooled)": 0}
    batch: list[DocumentRecord] = []
    skipped: list[int] = []
    seen = 0

    def flush() -> None:
        # Bodies are compared by digest, so a re-import reads hashes, not whole documents.
        stored = {
            doc_id: (title, digest)
            for doc_id, title, digest in Document.objects.filter(
                campaign=campaign, doc_id__in=[record.doc_id for record in batch]
            )
            .annotate(digest=MD5("body"))
            .values_list("doc_id", "title", "digest")
            .order_by()
        }
        changed = []
        for record in batch:
            known = stored.get(record.doc_id)
            if known == (record.title, hashlib.md5(record.body.encode()).hexdigest()):  # noqa: S324
                counts["unchanged"] += 1
                continue
            counts["updated" if known else "new documents"] += 1
            html, is_html = render_body(record.body)
            changed.append(
                Document(
                    campaign=campaign,
                    doc_id=record.doc_id,
                    title=record.title,
                    body=record.body,
                    body_html=html,
                    is_html=is_html,
                )
            )
        Document.objects.bulk_create(
            changed,
            update_conflicts=True,
            unique_fields=["campaign", "doc_id"],
            update_fields=["title", "body", "body_html", "is_html"],
        )
        batch.clear()

    for record in iter_documents(lines, format=format, source=name, skipped=skipped):
        seen += 1
        if keep is not None and record.doc_id not in keep:
            counts["skipped (not pooled)"] += 1
            continue
        batch.append(record)
        if len(batch) >= DOCUMENT_BATCH:
            flush()
            progress(seen, None, f"{seen:,} documents read")
    if batch:
        flush()
    if keep is None:
        del counts["skipped (not pooled)"]
    refresh_planner_statistics(Document)
    return ImportSummary("documents", counts, notes=skipped_note(skipped))


def run_import_job(job, progress, importer: Callable[..., ImportSummary]) -> dict[str, Any]:
    """The body of every browser import: read the job's uploads, call ``importer``, and turn
    refused input into a failed job listing each problem with its file and line."""
    from campaigns.jobs import JobFailed
    from campaigns.models import Upload
    from campaigns.uploads import copy_upload, discard_bytes

    uploads = list(Upload.objects.filter(pk__in=job.params.get("uploads", [])).order_by("pk"))
    if not uploads or any(not upload.chunks.exists() for upload in uploads):
        raise JobFailed("The uploaded file is no longer stored; upload it again.")
    try:
        # Each upload becomes a temporary file, so that importers read every source the same
        # way the command line does, and memory holds at most one file (not the whole set).
        with tempfile.TemporaryDirectory(prefix="pooljudge-import-") as scratch:
            sources = [
                (upload.name, copy_upload(upload, Path(scratch) / f"upload-{upload.pk}"))
                for upload in uploads
            ]
            summary = importer(
                campaign=job.campaign,
                sources=sources,
                options=job.params.get("options", {}),
                progress=lambda done, total, message: progress.update(
                    done, total=total, message=message
                ),
                user=job.created_by,
            )
    except ParseError as exc:
        count = exc.count
        raise JobFailed(
            f"Nothing was imported: {count:,} problem{'s' if count != 1 else ''} found.",
            result={"problems": [str(problem) for problem in exc.problems], "more": exc.more},
        ) from None
    discard_bytes([upload.pk for upload in uploads])
    return summary.as_dict()


def topics_importer(*, campaign, sources, options, progress, user) -> ImportSummary:
    if len(sources) != 1:
        raise refuse("topics", ["Import one topic file at a time."])
    ((name, data),) = sources
    return import_topics(
        campaign=campaign,
        source=data,
        name=name,
        format=options.get("format") or None,
        positional_ids=bool(options.get("positional_ids")),
        encoding=options.get("encoding") or None,
    )
