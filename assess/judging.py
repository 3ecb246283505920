"""Serving documents to an assessor and taking their verdicts.

An assessor moves through their assignment's items in presentation order. In queue mode the next
item is claimed from the shared queue with ``SELECT … FOR UPDATE SKIP LOCKED``: concurrent
assessors never receive the same queue entry, and a claim left unjudged for CLAIM_MINUTES may be
taken by someone else (the first assessor's copy is then withdrawn, never served again).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from assess.models import Assignment, AssignmentItem, QueueItem
from campaigns.judgments import Timing, record_judgment
from campaigns.models import Judgment, RubricVersion, Topic
from pooling import adaptive

CLAIM_MINUTES = getattr(settings, "POOLJUDGE_CLAIM_MINUTES", 30)


def open_items(assignment: Assignment):
    return assignment.items.filter(judgment__isnull=True, withdrawn=False)


def _claim_is_ours(item: AssignmentItem) -> bool:
    """A queue item still belongs to its assessor unless someone else took the claim."""
    if item.queue_item_id is None:
        return True
    return QueueItem.objects.filter(
        pk=item.queue_item_id, claimed_by=item.assignment.assessor_id
    ).exists()


def claim_next(assignment: Assignment) -> AssignmentItem | None:
    """Claim the next document of the assignment's shared queues for its assessor."""
    assessor = assignment.assessor
    expired = timezone.now() - timedelta(minutes=CLAIM_MINUTES)
    mine = AssignmentItem.objects.filter(
        assignment__assessor=assessor,
        assignment__pool=assignment.pool,
        topic_id=OuterRef("topic_id"),
        doc_id=OuterRef("doc_id"),
    )
    with transaction.atomic():
        is_adaptive = adaptive.options(assignment.pool) is not None
        candidate = adaptive.claim_candidate(assignment, expired=expired) if is_adaptive else None
        if candidate is None:
            candidates = (
                QueueItem.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(pool=assignment.pool, topic__in=assignment.topics.all(), done=False)
                .filter(Q(claimed_by__isnull=True) | Q(claimed_at__lt=expired))
                .exclude(Exists(mine))
            )
            if is_adaptive:  # pooling.adaptive chooses the documents; overlap copies stay here
                candidates = candidates.filter(replica__gt=0)
            candidate = candidates.order_by("replica", "order", "pk").first()
        if candidate is None:
            return None
        previous = candidate.claimed_by_id
        candidate.claimed_by = assessor
        candidate.claimed_at = timezone.now()
        candidate.save(update_fields=["claimed_by", "claimed_at"])
        if previous is not None:
            # An abandoned claim: the earlier holder's copy is withdrawn.
            AssignmentItem.objects.filter(queue_item=candidate, judgment__isnull=True).update(
                withdrawn=True
            )
        last = assignment.items.order_by("-position").values_list("position", flat=True).first()
        return AssignmentItem.objects.create(
            assignment=assignment,
            topic_id=candidate.topic_id,
            doc_id=candidate.doc_id,
            position=(last or 0) + 1,
            queue_item=candidate,
        )


# Items looked at per query when finding the next document: the first is almost always the
# answer (only a queue copy whose claim someone else took is skipped), and loading a long
# list of items with their assignment and topic measured as a third of a judgment's CPU.
NEXT_BATCH = 8


def next_item(assignment: Assignment, *, after: int | None = None) -> AssignmentItem | None:
    """The first unjudged item of the assignment (after position ``after``, wrapping round),
    claiming a new one from the queue when the assessor has none left."""
    candidates = open_items(assignment).select_related("assignment", "topic").order_by("position")
    parts = (
        [candidates]
        if after is None
        else [candidates.filter(position__gt=after), candidates.filter(position__lte=after)]
    )
    for part in parts:
        while True:
            batch = list(part[:NEXT_BATCH])
            for item in batch:
                if _claim_is_ours(item):
                    return item
                # Someone else holds this copy's claim: never serve it to this assessor again
                # (withdrawn items leave open_items, so the next query moves on).
                AssignmentItem.objects.filter(pk=item.pk, judgment__isnull=True).update(
                    withdrawn=True
                )
            if len(batch) < NEXT_BATCH:
                break
    if assignment.mode == Assignment.Mode.QUEUE and assignment.active:
        return claim_next(assignment)
    return None


def neighbour(item: AssignmentItem, step: int) -> AssignmentItem | None:
    """The item before (step -1) or after (+1) in the assessor's order, skipping withdrawn ones."""
    items = item.assignment.items.filter(withdrawn=False)
    if step < 0:
        return items.filter(position__lt=item.position).order_by("-position").first()
    return items.filter(position__gt=item.position).order_by("position").first()


@dataclass(frozen=True)
class TopicProgress:
    topic: Topic
    judged: int
    total: int

    @property
    def percent(self) -> int:
        return int(100 * self.judged / self.total) if self.total else 100


def progress(assignment: Assignment, *, topic: Topic | None = None) -> list[TopicProgress]:
    """Judged / total per topic of the assignment (queue topics: the whole queue's size), or
    for ``topic`` alone."""
    topics = [topic] if topic is not None else list(assignment.topics.all())
    if assignment.mode == Assignment.Mode.QUEUE:
        totals = dict(
            QueueItem.objects.filter(pool=assignment.pool, topic__in=topics)
            .values_list("topic_id")
            .annotate(n=Count("pk"))
        )
        judged = dict(
            QueueItem.objects.filter(pool=assignment.pool, topic__in=topics, done=True)
            .values_list("topic_id")
            .annotate(n=Count("pk"))
        )
    else:
        counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        rows = (
            assignment.items.filter(withdrawn=False)
            .values_list("topic_id")
            .annotate(total=Count("pk"), done=Count("judgment"))
        )
        if topic is not None:
            rows = rows.filter(topic=topic)
        for topic_pk, total, done in rows:
            counts[topic_pk] = [done, total]
        judged = {pk: c[0] for pk, c in counts.items()}
        totals = {pk: c[1] for pk, c in counts.items()}
    return [TopicProgress(t, judged.get(t.pk, 0), totals.get(t.pk, 0)) for t in topics]


class ItemTakenAway(Exception):
    """The item is no longer this assessor's to judge: its topic was moved to someone else, its
    assignment ended, or another assessor took its queue claim, since the page was shown."""

    def __init__(self) -> None:
        super().__init__(
            "This document was moved to another assessor (or your assignment ended) since the "
            "page was shown: your verdict on it was not saved."
        )


def submit(
    *,
    item: AssignmentItem,
    label: int,
    rubric_version: RubricVersion,
    submission_id: uuid.UUID | None,
    expected_version: int | None,
    timing: Timing,
    note: str = "",
    unreadable: bool = False,
    unsure: bool = False,
    check_label: bool = True,
) -> tuple[Judgment, bool]:
    """Record the verdict for ``item`` (see campaigns.judgments.record_judgment) and mark the
    item, and its queue entry, judged. Raises ItemTakenAway (nothing stored) when the item was
    withdrawn from its assessor since it was loaded."""
    with transaction.atomic():
        # Re-checked inside the write, with the item's row locked: a reassignment or a lost
        # queue claim that commits first is seen here (withdrawn); one that starts later waits
        # for this transaction's lock on the row.
        still_ours = (
            AssignmentItem.objects.select_for_update(of=("self",))
            .filter(pk=item.pk, withdrawn=False, assignment__assessor=item.assignment.assessor_id)
            .order_by()
            .values_list("pk", flat=True)
        )
        if not still_ours:
            raise ItemTakenAway()
        judgment, recorded = record_judgment(
            check_label=check_label,
            assessor=item.assignment.assessor,
            topic=item.topic,
            doc_id=item.doc_id,
            label=label,
            rubric_version=rubric_version,
            submission_id=submission_id,
            expected_version=expected_version,
            timing=timing,
            position=item.position,
            note=note,
            unreadable=unreadable,
            unsure=unsure,
        )
        if item.judgment_id != judgment.pk:
            AssignmentItem.objects.filter(pk=item.pk).update(judgment=judgment)
            item.judgment = judgment
        if item.queue_item_id is not None:
            QueueItem.objects.filter(pk=item.queue_item_id).update(done=True)
    return judgment, recorded


def mark_served(item: AssignmentItem) -> None:
    """Record when the item was first on screen (only the first time: one write, not one per
    view)."""
    if item.first_served_at is None:
        now = timezone.now()
        AssignmentItem.objects.filter(pk=item.pk, first_served_at__isnull=True).update(
            first_served_at=now
        )
        item.first_served_at = now
