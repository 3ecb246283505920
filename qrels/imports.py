"""Importing qrels as the judgments of a named, imported assessor (a source, not a login), so
earlier judgments can seed a campaign, be compared with new ones, and be exported again; or, with
``kind="model"``, as the labels of a model assessor (an LLM judge's qrels, such as UMBRELA's),
which are kept apart from people's verdicts: out of the default qrels, out of the headline
agreement, and never shown to an assessor."""

from __future__ import annotations

import hashlib
import os
from typing import BinaryIO

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from campaigns.imports import ImportSummary, refuse
from campaigns.models import Assessor, Campaign, Judgment, JudgmentRevision
from campaigns.scales import scale_advice
from campaigns.textfiles import ProblemCollector, decode_lines, read_bytes, shown
from pooljudge.common import refresh_planner_statistics
from qrels.formats import parse_qrels

# The kinds of assessor a qrels file can be imported as: earlier qrels (people's verdicts from
# elsewhere) or a model's labels. People judge in Pooljudge; adjudicated labels are made there.
IMPORT_KINDS = (Assessor.Kind.IMPORTED.value, Assessor.Kind.MODEL.value)


@transaction.atomic
def import_qrels(
    *,
    campaign: Campaign,
    source: str | os.PathLike | BinaryIO,
    name: str,
    assessor: str,
    on_conflict: str = "refuse",
    encoding: str | None = None,
    kind: str = Assessor.Kind.IMPORTED,
) -> ImportSummary:
    """Record the file's judgments as those of the imported assessor ``assessor``.

    Labels are kept as written, negative ones included, with the line's iteration column (the
    round a TREC collection judged the pair in). Pairs this assessor already has with the same
    label and iteration are left alone; anything else becomes a new revision (the earlier
    verdict stays in the history). Raises ParseError (nothing changed) naming the line of a bad
    line, a topic the campaign lacks or a label outside its scale (negative labels are always
    accepted: they are not verdicts on the scale), or an assessor name that belongs to a
    person or to a source of another kind (``kind``: ``imported``, the default, or ``model``;
    an assessor's kind never changes, so model labels can never turn into people's).
    """
    if kind not in IMPORT_KINDS:
        raise ValueError(f"kind is one of {', '.join(IMPORT_KINDS)}, not {kind!r}.")
    data = read_bytes(source, name=name, max_ratio=settings.POOLJUDGE_MAX_GZIP_RATIO)
    parsed = parse_qrels(
        decode_lines(data, source=name, encoding=encoding), source=name, on_conflict=on_conflict
    )
    topic_pks = dict(campaign.topics.values_list("topic_id", "pk"))
    rubric = campaign.current_rubric()
    allowed = {label.value for label in rubric.labels.all()} if rubric else set()
    problems = ProblemCollector(name)
    scale = ", ".join(map(str, sorted(allowed))) or "none"
    where = scale_advice(campaign)
    for j in parsed.judgments:
        if j.topic_id not in topic_pks:
            problems.add(
                j.line, f"topic {shown(j.topic_id)} is not in the campaign; import the topics first"
            )
        if j.label >= 0 and j.label not in allowed:
            problems.add(
                j.line,
                f"label {j.label} is not on the campaign's scale ({scale}; negative labels are "
                f"always accepted): {where}",
            )
    existing = Assessor.objects.filter(campaign=campaign, name=assessor).first()
    if existing is not None and existing.kind == Assessor.Kind.PERSON:
        problems.add(
            None, f"{assessor!r} is a person in this campaign; choose another source name."
        )
    elif existing is not None and existing.kind != kind:
        problems.add(
            None,
            f"{assessor!r} is an assessor of kind {existing.kind} in this campaign, not {kind}; "
            "an assessor's kind never changes (its labels would change sides in every report "
            "and export): choose another source name.",
        )
    problems.raise_if_any()

    now = timezone.now()
    source_assessor = existing or Assessor.objects.create(
        campaign=campaign, name=assessor, kind=kind
    )
    current = {
        (topic_id, doc_id): (pk, label, iteration, version)
        for pk, topic_id, doc_id, label, iteration, version in Judgment.objects.filter(
            assessor=source_assessor
        ).values_list("pk", "topic__topic_id", "doc_id", "label", "iteration", "version")
    }
    new: list[Judgment] = []
    revised: list[tuple[int, int, str, int]] = []
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
                    iteration=j.iteration,
                    source=Judgment.Source.IMPORTED,
                    judged_at=now,
                    first_judged_at=now,
                )
            )
        elif known[1:3] == (j.label, j.iteration):
            unchanged += 1
        else:
            # A new label, or the same label from another round: a new verdict in the history.
            revised.append((known[0], j.label, j.iteration, known[3] + 1))
    Judgment.objects.bulk_create(new, batch_size=2000)
    for pk, label, iteration, version in revised:
        Judgment.objects.filter(pk=pk).update(
            label=label, iteration=iteration, version=version, judged_at=now
        )
    JudgmentRevision.objects.bulk_create(
        [
            JudgmentRevision(
                judgment=j, version=1, label=j.label, iteration=j.iteration, judged_at=now
            )
            for j in new
        ]
        + [
            JudgmentRevision(
                judgment_id=pk, version=v, label=label, iteration=iteration, judged_at=now
            )
            for pk, label, iteration, v in revised
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
    refresh_planner_statistics(Judgment, JudgmentRevision)
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
        kind=options.get("kind") or Assessor.Kind.IMPORTED,
    )
