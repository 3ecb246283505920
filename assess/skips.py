"""Judging later: an assessor skips a document, it waits at the end of their order for its topic,
and the topic is not done until it is judged.

A skip rewrites positions, not a separate queue: the skipped item takes the last position of its
topic in the assessor's order and the items after it move up by one, so everything that serves
"the next unjudged document" in position order (assess/judging.py) brings skipped documents back
after the others of their topic, in the order they were skipped, with no change of its own.
Judgments keep the position they were made at; only the order of what is still to come changes.

In a shared queue the assessor's order is the order of their claims: a skip moves the item to
the very end, claiming one more document from the queue first when it was their last open one,
so that a skip moves on. The skipped claim stays theirs (and, like any claim, may be taken by
another assessor once it is older than the claim time).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Case, Count, Exists, F, Max, OuterRef, Q, Subquery, Value, When
from django.utils import timezone

from assess.judging import claim_next, next_item, open_items
from assess.models import Assignment, AssignmentItem, Skip
from campaigns.models import Document, Topic


class SkipRefused(Exception):
    """The document cannot be skipped (a sentence for the assessor)."""


@dataclass(frozen=True)
class SkipOutcome:
    skip: Skip
    # False when this request replays a skip already stored (same submission id): nothing moved.
    recorded: bool

    @property
    def moved(self) -> bool:
        """False when the item was already the last open document of its topic."""
        return self.skip.from_position != self.skip.to_position


@dataclass(frozen=True)
class SkippedItem:
    """An item its assessor skipped and has not judged yet."""

    item: AssignmentItem
    title: str
    times: int
    last_skipped_at: datetime


def skip(
    *, item: AssignmentItem, submission_id: uuid.UUID | None = None, now: datetime | None = None
) -> SkipOutcome:
    """Move ``item`` to the end of its assessor's order for its topic and record the skip.

    ``item`` must be open (unjudged, not withdrawn) in an active assignment; otherwise
    SkipRefused. A ``submission_id`` already used for a skip of this item returns that skip
    (recorded False) and moves nothing; used for another item it is refused. Serialised per
    assignment (its row is locked while positions are rewritten); nothing else is locked."""
    try:
        with transaction.atomic():
            stored = _skip_locked(item.assignment, item, submission_id, now or timezone.now())
    except (IntegrityError, SkipRefused):
        # A replay: its submission id is stored (the insert, the last statement, failed, and
        # the move rolled back with it), or the document was judged since the first request.
        earlier = _earlier_skip(item, submission_id) if submission_id is not None else None
        if earlier is None:
            raise
        return SkipOutcome(earlier, recorded=False)
    return SkipOutcome(stored, recorded=True)


def _earlier_skip(item: AssignmentItem, submission_id: uuid.UUID) -> Skip | None:
    earlier = Skip.objects.filter(submission_id=submission_id).order_by().first()
    if earlier is not None and earlier.item_id != item.pk:
        raise SkipRefused("This form was already used for another document; reload the page.")
    return earlier


def _skip_locked(
    assignment: Assignment, item: AssignmentItem, submission_id: uuid.UUID | None, now: datetime
) -> Skip:
    # One skip at a time per assignment: the rotation reads positions, then rewrites them.
    locked = (
        Assignment.objects.select_for_update(of=("self",))
        .filter(pk=assignment.pk, active=True)
        .order_by()
        .values_list("pk", flat=True)
    )
    if not list(locked):
        raise SkipRefused("This assignment has ended; nothing in it can be skipped.")
    state = _positions(assignment, item)
    if state["withdrawn"]:
        raise SkipRefused("This document is no longer yours to judge.")
    if state["judged"]:
        raise SkipRefused("This document is judged already; revise it instead of skipping it.")
    position = state["at"]
    queue = assignment.mode == Assignment.Mode.QUEUE
    if queue:
        if not open_items(assignment).exclude(pk=item.pk).exists() and claim_next(assignment):
            state = _positions(assignment, item)
        end = state["last"]
    else:
        end = state["last_of_topic"]
    if end > position:
        _rotate(assignment, position, end, item, offset=state["last"])
    item.position = end
    return Skip.objects.create(
        item=item,
        assessor_id=assignment.assessor_id,
        from_position=position,
        to_position=end,
        skipped_at=now,
        submission_id=submission_id,
    )


def _positions(assignment: Assignment, item: AssignmentItem) -> dict[str, int]:
    """The item's position and state, and the last positions of the order and of its topic, in
    one query (read under the assignment's lock)."""
    mine = Q(pk=item.pk)
    return assignment.items.order_by().aggregate(
        at=Max("position", filter=mine),
        judged=Count("pk", filter=mine & Q(judgment__isnull=False)),
        withdrawn=Count("pk", filter=mine & Q(withdrawn=True)),
        last=Max("position"),
        last_of_topic=Max("position", filter=Q(topic_id=item.topic_id)),
    )


def _rotate(
    assignment: Assignment, start: int, end: int, item: AssignmentItem, *, offset: int
) -> None:
    """Move ``item`` from ``start`` to ``end`` and every item in (start, end] up by one place, in
    two statements that never hold two items at one position (the unique constraint is checked
    row by row): the block goes above every position already in use (``offset`` is the
    highest), rearranged, then comes down into place."""
    block = assignment.items.filter(position__gte=start, position__lte=end)
    block.update(
        position=Case(
            When(pk=item.pk, then=Value(end + offset)),
            default=F("position") - 1 + offset,
        )
    )
    lifted = assignment.items.filter(position__gte=start + offset, position__lte=end + offset)
    lifted.update(position=F("position") - offset)


def next_after(*, item: AssignmentItem) -> AssignmentItem | None:
    """The next unjudged document after ``item`` in its assessor's order, wrapping round to the
    start (what `]` opens); a new queue claim when nothing else is open in a shared queue; None
    when no other document is left to judge."""
    assignment = item.assignment
    following = next_item(assignment, after=item.position)
    if following is not None and following.pk != item.pk:
        return following
    if assignment.mode == Assignment.Mode.QUEUE and assignment.active:
        return claim_next(assignment)
    return None


def next_after_skip(*, assignment: Assignment, skip: Skip) -> AssignmentItem | None:
    """The document to show after ``skip``: the open document that now holds the skipped one's
    old position or follows it (the one that was next before the skip), wrapping round; the
    skipped document itself when nothing else is open; None when nothing is open at all."""
    return next_item(assignment, after=skip.from_position - 1)


def skipped_open(assignment: Assignment, *, topic: Topic | None = None) -> list[SkippedItem]:
    """The assignment's documents that were skipped and are still to judge (in order), with
    their titles and how often and when last they were skipped. Two queries."""
    skips = Skip.objects.filter(item=OuterRef("pk")).order_by().values("item")
    items = (
        open_items(assignment)
        .filter(Exists(Skip.objects.filter(item=OuterRef("pk"))))
        .annotate(
            times=Subquery(skips.annotate(n=Count("pk")).values("n")[:1]),
            last_skipped_at=Subquery(skips.annotate(at=Max("skipped_at")).values("at")[:1]),
        )
        .select_related("topic")
        .order_by("position")
    )
    if topic is not None:
        items = items.filter(topic=topic)
    items = list(items)
    titles = dict(
        Document.objects.filter(
            campaign_id=assignment.campaign_id, doc_id__in={item.doc_id for item in items}
        )
        .order_by()
        .values_list("doc_id", "title")
    )
    return [
        SkippedItem(item, titles.get(item.doc_id, ""), item.times, item.last_skipped_at)
        for item in items
    ]


def topic_is_done(assignment: Assignment, *, topic: Topic) -> bool:
    """True when nothing of ``topic`` is left to judge in the assignment: skipped documents
    count as left (a topic is never done while a skipped document waits)."""
    return not open_items(assignment).filter(topic=topic).exists()
