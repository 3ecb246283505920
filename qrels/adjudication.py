"""Settling a disagreement: an adjudicated label on a (topic, document) pair.

An adjudicated label is a third kind of verdict, kept apart from the assessors' own: it is a
:class:`~campaigns.models.Judgment` of the campaign's one assessor of kind ``adjudicated`` (no
login behind it), recorded like any verdict (campaigns.judgments: append-only revisions, a
one-time submission id, a version check against stale forms), with the reason in its note and
the person who settled the pair on each revision (``JudgmentRevision.by``). Agreement never
reads it (people's own labels only); the qrels policy ``adjudicated`` prefers it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import OuterRef, Subquery

from campaigns.judgments import record_judgment
from campaigns.models import (
    VERDICT_KINDS,
    Assessor,
    Campaign,
    Judgment,
    JudgmentRevision,
    Label,
    Topic,
)

ADJUDICATED_NAME = "adjudicated"


class AdjudicationError(ValueError):
    """The adjudication cannot be recorded (no reason, a pair nobody judged, a label off the
    rubric); nothing was stored."""


def adjudicated_assessor(campaign: Campaign, *, create: bool = False) -> Assessor | None:
    """The campaign's adjudicated-labels assessor; created on first use when ``create``."""
    found = (
        Assessor.objects.filter(campaign=campaign, kind=Assessor.Kind.ADJUDICATED)
        .order_by("pk")
        .first()
    )
    if found is not None or not create:
        return found
    with transaction.atomic():
        # Two first adjudications at once must not make two such assessors: the campaign row
        # serialises them (only here, once per campaign).
        Campaign.objects.select_for_update().filter(pk=campaign.pk).order_by().first()
        found = (
            Assessor.objects.filter(campaign=campaign, kind=Assessor.Kind.ADJUDICATED)
            .order_by("pk")
            .first()
        )
        if found is not None:
            return found
        taken = set(Assessor.objects.filter(campaign=campaign).values_list("name", flat=True))
        name, n = ADJUDICATED_NAME, 1
        while name in taken:  # a person may be called "adjudicated"
            n += 1
            name = f"{ADJUDICATED_NAME}-{n}"
        return Assessor.objects.create(
            campaign=campaign,
            name=name,
            kind=Assessor.Kind.ADJUDICATED,
            details={"about": "Labels settled by organisers and adjudicators, with a reason."},
        )


@dataclass(frozen=True)
class PairVerdict:
    """One assessor's current verdict on the pair, as the adjudication page shows it."""

    assessor: str
    kind: str
    label: int
    name: str
    note: str
    unsure: bool
    unreadable: bool
    seconds_on_screen: float | None
    active_seconds: float | None
    judged_at: datetime
    version: int


def pair_verdicts(*, campaign: Campaign, topic: Topic, doc_id: str) -> list[PairVerdict]:
    """Every assessor's current label on the pair (people's, imported sources', models', each
    marked by kind), by assessor name; the adjudicated label is not among them. One query."""
    name = Label.objects.filter(rubric=OuterRef("rubric_version"), value=OuterRef("label"))
    rows = (
        Judgment.objects.filter(campaign=campaign, topic=topic, doc_id=doc_id)
        .exclude(assessor__kind=Assessor.Kind.ADJUDICATED)
        .annotate(label_name=Subquery(name.values("name")[:1]))
        .select_related("assessor")
        .order_by("assessor__name")
    )
    return [
        PairVerdict(
            assessor=j.assessor.name,
            kind=j.assessor.kind,
            label=j.label,
            name=j.label_name or "",
            note=j.note,
            unsure=j.unsure,
            unreadable=j.unreadable,
            seconds_on_screen=j.seconds_on_screen,
            active_seconds=j.active_seconds,
            judged_at=j.judged_at,
            version=j.version,
        )
        for j in rows
    ]


def current_adjudication(*, campaign: Campaign, topic: Topic, doc_id: str) -> Judgment | None:
    assessor = adjudicated_assessor(campaign)
    if assessor is None:
        return None
    return Judgment.objects.filter(assessor=assessor, topic=topic, doc_id=doc_id).order_by().first()


def adjudication_history(judgment: Judgment | None) -> list[JudgmentRevision]:
    """Every adjudicated label the pair had, newest first, each with who gave it."""
    if judgment is None:
        return []
    return list(judgment.revisions.select_related("by").order_by("-version"))


def adjudicate(
    *,
    campaign: Campaign,
    topic: Topic,
    doc_id: str,
    label: int,
    reason: str,
    by,
    expected_version: int | None,
    submission_id: uuid.UUID | None = None,
) -> tuple[Judgment, bool]:
    """Record ``label`` as the pair's adjudicated label, ``reason`` as its note, ``by`` (a user)
    on the revision. Returns (judgment, recorded) as campaigns.judgments.record_judgment does,
    and raises as it does (StaleJudgment when the adjudication changed since
    ``expected_version``, 0 for none yet; InvalidLabel for a label off the current rubric), or
    AdjudicationError (nothing stored) for an empty reason or a pair nobody judged."""
    reason = reason.strip()
    if not reason:
        raise AdjudicationError("Give a reason: it is kept with the adjudicated label.")
    if topic.campaign_id != campaign.pk:
        raise AdjudicationError("This topic is not in this campaign.")
    judged = (
        Judgment.objects.filter(campaign=campaign, topic=topic, doc_id=doc_id)
        .filter(assessor__kind__in=VERDICT_KINDS)
        .exists()
    )
    if not judged:
        raise AdjudicationError(
            f"Nobody judged document {doc_id} for topic {topic.topic_id}: there is nothing to "
            "adjudicate."
        )
    return record_judgment(
        assessor=adjudicated_assessor(campaign, create=True),
        topic=topic,
        doc_id=doc_id,
        label=label,
        rubric_version=campaign.current_rubric(),
        submission_id=submission_id,
        expected_version=expected_version,
        note=reason,
        by=by,
    )


def adjudicated_labels(
    *, campaign: Campaign, pairs: list[tuple[int, str]]
) -> dict[tuple[int, str], Judgment]:
    """(topic pk, document id) -> the current adjudicated label, for the given pairs (a page of
    the pairs list): one query."""
    if not pairs:
        return {}
    found = Judgment.objects.filter(
        campaign=campaign,
        assessor__kind=Assessor.Kind.ADJUDICATED,
        topic_id__in={topic for topic, _ in pairs},
        doc_id__in={doc for _, doc in pairs},
    ).order_by()
    wanted = set(pairs)
    return {(j.topic_id, j.doc_id): j for j in found if (j.topic_id, j.doc_id) in wanted}


# --- Every adjudication of a campaign ----------------------------------------------------------


@dataclass(frozen=True)
class AdjudicationEntry:
    """One act of adjudication (a revision of a pair's adjudicated label), with the labels the
    assessors gave the pair as they stand now."""

    topic: str
    topic_pk: int
    doc_id: str
    label: int
    reason: str
    by: str
    at: datetime
    version: int
    current: bool  # the pair's adjudicated label now (a later adjudication replaced it if not)
    verdicts: list[tuple[str, str, int]]  # (assessor, kind, label): people, imported, models


ADJUDICATION_COLUMNS = [
    "topic",
    "doc_id",
    "adjudicated_label",
    "reason",
    "by",
    "at",
    "version",
    "current",
    "assessor_labels",
]


def adjudication_log(
    *, campaign: Campaign, limit: int | None = None, offset: int = 0
) -> tuple[int, list[AdjudicationEntry]]:
    """(how many, the entries): every adjudication of ``campaign``, newest first, each with who
    gave it, when, the reason, whether it is still the pair's label, and every assessor's
    current label on the pair (by kind, then name). Three queries, whatever the number."""
    revisions = JudgmentRevision.objects.filter(
        judgment__campaign=campaign, judgment__assessor__kind=Assessor.Kind.ADJUDICATED
    )
    total = revisions.count()
    chosen = revisions.select_related("by", "judgment__topic").order_by("-judged_at", "-pk")
    rows = list(chosen[offset : offset + limit] if limit is not None else chosen[offset:])
    pairs = {(r.judgment.topic_id, r.judgment.doc_id) for r in rows}
    verdicts: dict[tuple[int, str], list[tuple[str, str, int]]] = {}
    if pairs:
        found = (
            Judgment.objects.filter(
                campaign=campaign,
                topic_id__in={t for t, _ in pairs},
                doc_id__in={d for _, d in pairs},
            )
            .exclude(assessor__kind=Assessor.Kind.ADJUDICATED)
            .values_list("topic_id", "doc_id", "assessor__name", "assessor__kind", "label")
            .order_by()
        )
        for topic_pk, doc_id, name, kind, label in found:
            if (topic_pk, doc_id) in pairs:
                verdicts.setdefault((topic_pk, doc_id), []).append((name, kind, label))
    order = {Assessor.Kind.PERSON: 0, Assessor.Kind.IMPORTED: 1, Assessor.Kind.MODEL: 2}
    entries = [
        AdjudicationEntry(
            topic=r.judgment.topic.topic_id,
            topic_pk=r.judgment.topic_id,
            doc_id=r.judgment.doc_id,
            label=r.label,
            reason=r.note,
            by=r.by.get_username() if r.by is not None else "",
            at=r.judged_at,
            version=r.version,
            current=r.version == r.judgment.version,
            verdicts=sorted(
                verdicts.get((r.judgment.topic_id, r.judgment.doc_id), []),
                key=lambda v: (order.get(v[1], 3), v[0]),
            ),
        )
        for r in rows
    ]
    return total, entries


def adjudication_csv_rows(entries: list[AdjudicationEntry]) -> list[list[object]]:
    """The rows of the adjudications CSV (ADJUDICATION_COLUMNS): the assessors' labels as
    ``name=label`` separated by ``; ``, a model's name followed by ``(model)``."""
    return [
        [
            e.topic,
            e.doc_id,
            e.label,
            e.reason,
            e.by,
            e.at.isoformat(),
            e.version,
            "yes" if e.current else "no",
            "; ".join(
                f"{name}{' (model)' if kind == Assessor.Kind.MODEL else ''}={label}"
                for name, kind, label in e.verdicts
            ),
        ]
        for e in entries
    ]
