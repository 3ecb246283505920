"""Importing qrels as the judgments of a named, imported assessor (a source, not a login), so
earlier judgments can seed a campaign, be compared with new ones, and be exported again."""

from __future__ import annotations

import hashlib
import os
from typing import BinaryIO

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from campaigns.imports import ImportSummary, refuse
from campaigns.models import Assessor, Campaign, Judgment, JudgmentRevision
from campaigns.textfiles import decode_lines, read_bytes
from qrels.formats import parse_qrels


@transaction.atomic
def import_qrels(
    *,
    campaign: Campaign,
    source: str | os.PathLike | BinaryIO,
    name: str,
    assessor: str,
    on_conflict: str = "refuse",
    encoding: str | None = None,
) -> ImportSummary:
    """Record the file's judgments as those of the imported assessor ``assessor``.

    Pairs this assessor already judged with the same label are left alone; a different label
    becomes a new revision (the earlier verdict stays in the history). Raises ParseError (nothing
    changed) for a bad line, an unknown topic, a label outside the rubric (negative labels, which
    mean "pooled, not judged", are always kept), or an assessor name that belongs to a person."""
    data = read_bytes(source, name=name, max_ratio=settings.POOLJUDGE_MAX_GZIP_RATIO)
    parsed = parse_qrels(
        decode_lines(data, source=name, encoding=encoding), source=name, on_conflict=on_conflict
    )
    topic_pks = dict(campaign.topics.values_list("topic_id", "pk"))
    rubric = campaign.current_rubric()
    allowed = {label.value for label in rubric.labels.all()} if rubric else set()
    unknown_topics = sorted({j.topic_id for j in parsed.judgments} - topic_pks.keys())
    bad_labels = sorted(
        {j.label for j in parsed.judgments if j.label >= 0 and j.label not in allowed}
    )
    problems = []
    if unknown_topics:
        problems.append(
            f"{len(unknown_topics)} topic(s) are not in the campaign: "
            + ", ".join(unknown_topics[:20])
            + (" …" if len(unknown_topics) > 20 else "")
            + ". Import the topics first."
        )
    if bad_labels:
        problems.append(
            f"label(s) {', '.join(map(str, bad_labels))} are not on the campaign's scale "
            f"({', '.join(map(str, sorted(allowed)))}); negative labels are always accepted."
        )
    existing = Assessor.objects.filter(campaign=campaign, name=assessor).first()
    if existing is not None and existing.kind != Assessor.Kind.IMPORTED:
        problems.append(f"{assessor!r} is a person in this campaign; choose another source name.")
    if problems:
        raise refuse(name, problems)

    now = timezone.now()
    source_assessor = existing or Assessor.objects.create(
        campaign=campaign, name=assessor, kind=Assessor.Kind.IMPORTED
    )
    current = {
        (topic_id, doc_id): (pk, label, version)
        for pk, topic_id, doc_id, label, version in Judgment.objects.filter(
            assessor=source_assessor
        ).values_list("pk", "topic__topic_id", "doc_id", "label", "version")
    }
    new: list[Judgment] = []
    revised: list[tuple[int, int, int]] = []
    unchanged = 0
    for j in parsed.judgments:
        known = current.get((j.topic_id, j.doc_id))
        if known is None:
            new.append(
                Judgment(
                    campaign=campaign,
                    topic_id=topic_pks[j.topic_id],
                    doc_id=j.doc_id,
                    assessor=source_assessor,
                    label=j.label,
                    source=Judgment.Source.IMPORTED,
                    judged_at=now,
                    first_judged_at=now,
                )
            )
        elif known[1] == j.label:
            unchanged += 1
        else:
            revised.append((known[0], j.label, known[2] + 1))
    Judgment.objects.bulk_create(new, batch_size=2000)
    for pk, label, version in revised:
        Judgment.objects.filter(pk=pk).update(label=label, version=version, judged_at=now)
    JudgmentRevision.objects.bulk_create(
        [JudgmentRevision(judgment=j, version=1, label=j.label, judged_at=now) for j in new]
        + [
            JudgmentRevision(judgment_id=pk, version=v, label=label, judged_at=now)
            for pk, label, v in revised
        ],
        batch_size=2000,
    )
    digest = hashlib.sha256(data).hexdigest()
    history = source_assessor.details.setdefault("imports", [])
    history.append(
        {
            "file": name,
            "sha256": digest,
            "policy": parsed.policy,
            "at": now.isoformat(),
            "judgments": len(parsed.judgments),
            "warnings": len(parsed.warnings),
        }
    )
    source_assessor.save(update_fields=["details"])
    return ImportSummary(
        "qrels",
        {"new judgments": len(new), "revised": len(revised), "unchanged": unchanged},
        warnings=parsed.warnings,
    )


def qrels_importer(*, campaign, sources, options, progress, user) -> ImportSummary:
    if len(sources) != 1:
        raise refuse("qrels", ["Import one qrels file at a time."])
    ((name, data),) = sources
    assessor = (options.get("assessor") or "").strip()
    if not assessor:
        raise refuse(name, ["Name the source of these judgments (e.g. NIST-round1)."])
    return import_qrels(
        campaign=campaign,
        source=data,
        name=name,
        assessor=assessor,
        on_conflict=options.get("on_conflict") or "refuse",
        encoding=options.get("encoding") or None,
    )
