"""Giving out work from the topic x assessor grid: a cell gives, moves or ends one assessor's
work on one topic; a selection of topics and assessors is dealt round-robin, balanced by pool
size. Every change is planned first (what moves, what stays judged) and shown to the organiser,
then applied by the functions of assess.assignments, which keep every judgment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Count

from assess.assignments import (
    AssignmentError,
    add_overlap,
    assign,
    end_assignment,
    overlap_size,
    pool_pairs,
    reassign_topic,
)
from assess.models import Assignment, AssignmentItem, QueueItem
from campaigns.models import Assessor, Campaign, Topic
from pooling.models import Pool, PoolEntry

GIVE, MOVE, END = "give", "move", "end"
ACTIONS = (GIVE, MOVE, END)


def pool_sizes(pool: Pool, topics: Sequence[Topic]) -> dict[int, int]:
    """topic pk -> documents of the topic in ``pool`` (one query)."""
    rows = (
        PoolEntry.objects.filter(pool=pool, topic__in=list(topics))
        .order_by()
        .values_list("topic_id")
        .annotate(n=Count("pk"))
    )
    return dict(rows)


def primary_holders(pool: Pool, topics: Sequence[Topic]) -> dict[int, str]:
    """topic pk -> name of the assessor holding it as active primary work in ``pool``."""
    rows = (
        Assignment.topics.through.objects.filter(
            assignment__pool=pool,
            assignment__active=True,
            assignment__mode=Assignment.Mode.PRIMARY,
            topic__in=list(topics),
        )
        .order_by("assignment_id")
        .values_list("topic_id", "assignment__assessor__name")
    )
    held: dict[int, str] = {}
    for topic_pk, name in rows:
        held.setdefault(topic_pk, name)
    return held


# --- Dealing round-robin -------------------------------------------------------------------


@dataclass
class Share:
    assessor: Assessor
    topics: list[Topic] = field(default_factory=list)
    documents: int = 0


@dataclass
class DealPlan:
    shares: list[Share]
    # Topics left out: already someone's primary work (topic, holder's name).
    skipped: list[tuple[Topic, str]]

    @property
    def dealt(self) -> int:
        return sum(len(share.topics) for share in self.shares)

    def signature(self) -> str:
        """What the preview showed, to check the plan applied is that plan."""
        return ";".join(
            f"{share.assessor.pk}:{','.join(str(t.pk) for t in share.topics)}"
            for share in self.shares
        )


def plan_deal(*, pool: Pool, topics: Sequence[Topic], assessors: Sequence[Assessor]) -> DealPlan:
    """Deal ``topics`` (those nobody holds as primary work yet) to ``assessors`` in rounds: each
    round gives every assessor one topic, the round's largest topic (by pool size) to the
    assessor with the fewest documents so far. So topic counts differ by at most one, and
    documents are as even as whole topics allow. Ties: topic order, then assessor order."""
    if not assessors:
        raise AssignmentError("Choose at least one assessor to deal the topics to.")
    if not topics:
        raise AssignmentError("Choose at least one topic to deal.")
    topics = sorted(topics, key=lambda t: (t.position, t.topic_id))
    held = primary_holders(pool, topics)
    sizes = pool_sizes(pool, topics)
    free = [t for t in topics if t.pk not in held]
    free.sort(key=lambda t: -sizes.get(t.pk, 0))  # stable: topic order among equal sizes
    shares = [Share(assessor=a) for a in assessors]
    k = len(shares)
    for start in range(0, len(free), k):
        round_topics = free[start : start + k]
        takers = sorted(range(k), key=lambda i: (shares[i].documents, i))
        for topic, i in zip(round_topics, takers, strict=False):
            shares[i].topics.append(topic)
            shares[i].documents += sizes.get(topic.pk, 0)
    for share in shares:
        share.topics.sort(key=lambda t: (t.position, t.topic_id))
    return DealPlan(shares=shares, skipped=[(t, held[t.pk]) for t in topics if t.pk in held])


@transaction.atomic
def apply_deal(*, campaign: Campaign, pool: Pool, plan: DealPlan, by=None) -> list[Assignment]:
    """Give each share's topics to its assessor as primary work (one assignment each)."""
    made: list[Assignment] = []
    for share in plan.shares:
        if share.topics:
            made += assign(
                campaign=campaign, pool=pool, user=share.assessor.user, topics=share.topics, by=by
            )
    return made


# --- Overlap for agreement ------------------------------------------------------------------


@dataclass
class OverlapShare:
    """One topic's overlap: ``partner`` also judges ``documents`` of what ``primary`` holds."""

    topic: Topic
    primary: Assignment
    partner: Assessor
    documents: int


@dataclass
class OverlapPlan:
    fraction: float
    shares: list[OverlapShare]
    # Topics left out, each with the reason (no primary assessor, already overlapped, ...).
    skipped: list[tuple[Topic, str]]

    def signature(self) -> str:
        """What the preview showed, to check the plan applied is that plan."""
        return f"{self.fraction!r}|" + ";".join(
            f"{share.topic.pk}:{share.primary.pk}:{share.partner.pk}" for share in self.shares
        )

    def by_partner(self) -> list[tuple[Assessor, list[OverlapShare], int]]:
        """The shares grouped by who judges them: (partner, shares, documents), in the order
        of the assessors chosen."""
        groups: dict[int, tuple[Assessor, list[OverlapShare]]] = {}
        for share in self.shares:
            groups.setdefault(share.partner.pk, (share.partner, []))[1].append(share)
        return [(a, shares, sum(s.documents for s in shares)) for a, shares in groups.values()]


def plan_overlap(
    *, pool: Pool, topics: Sequence[Topic], assessors: Sequence[Assessor], fraction: float | None
) -> OverlapPlan:
    """Give a ``fraction`` of each of ``topics`` (those held as primary work and not overlapped
    yet) to a second assessor among ``assessors`` for agreement: the largest topic first, to
    whoever of them (never its primary assessor) has the fewest overlap documents so far, as
    the round-robin deal balances work. The documents are the sample ``assign(overlap=...)``
    draws (seeded by the primary assignment). AssignmentError if nothing can be planned."""
    if fraction is None or not 0 < fraction <= 1:
        raise AssignmentError("Give the overlap: a share of each topic, such as 10% or 0.1.")
    if not topics:
        raise AssignmentError("Choose at least one topic to overlap.")
    if len(assessors) < 1:
        raise AssignmentError("Choose at least one assessor to judge the overlap.")
    topics = sorted(topics, key=lambda t: (t.position, t.topic_id))
    primaries: dict[int, Assignment] = {}
    for assignment in (
        Assignment.objects.filter(
            pool=pool, active=True, mode=Assignment.Mode.PRIMARY, topics__in=list(topics)
        )
        .select_related("assessor")
        .prefetch_related("topics")
        .order_by("pk")
    ):
        for topic in assignment.topics.all():
            primaries.setdefault(topic.pk, assignment)
    overlapped: dict[int, str] = {}
    for topic_pk, name in (
        Assignment.objects.filter(
            pool=pool, active=True, mode=Assignment.Mode.OVERLAP, topics__in=list(topics)
        )
        .order_by("pk")
        .values_list("topics", "assessor__name")
    ):
        overlapped.setdefault(topic_pk, name)
    pairs = pool_pairs(pool, topics)
    sizes = {t.pk: overlap_size(len(pairs.get(t.pk, [])), fraction) for t in topics}
    skipped: list[tuple[Topic, str]] = []
    wanted: list[Topic] = []
    for topic in topics:
        primary = primaries.get(topic.pk)
        if primary is None:
            skipped.append((topic, "nobody holds it as primary work: give or deal it first"))
        elif topic.pk in overlapped:
            skipped.append((topic, f"already overlapped with {overlapped[topic.pk]}"))
        elif not [a for a in assessors if a.pk != primary.assessor_id]:
            skipped.append((topic, f"no chosen assessor but its own ({primary.assessor.name})"))
        elif not sizes[topic.pk]:
            skipped.append((topic, "no document to judge in this pool"))
        else:
            wanted.append(topic)
    load = {a.pk: 0 for a in assessors}
    order = {a.pk: i for i, a in enumerate(assessors)}
    shares: list[OverlapShare] = []
    for topic in sorted(wanted, key=lambda t: -sizes[t.pk]):  # stable: topic order on ties
        primary = primaries[topic.pk]
        partner = min(
            (a for a in assessors if a.pk != primary.assessor_id),
            key=lambda a: (load[a.pk], order[a.pk]),
        )
        load[partner.pk] += sizes[topic.pk]
        shares.append(OverlapShare(topic, primary, partner, sizes[topic.pk]))
    shares.sort(
        key=lambda share: (order[share.partner.pk], share.topic.position, share.topic.topic_id)
    )
    return OverlapPlan(fraction=fraction, shares=shares, skipped=skipped)


@transaction.atomic
def apply_overlap(*, pool: Pool, plan: OverlapPlan, by=None) -> list[Assignment]:
    """Carry out a planned overlap: one overlap assignment per partner and primary assignment
    (assess.assignments.add_overlap), so each keeps its primary's seed and order settings."""
    groups: dict[tuple[int, int], list[OverlapShare]] = {}
    for share in plan.shares:
        groups.setdefault((share.primary.pk, share.partner.pk), []).append(share)
    made = []
    for shares in groups.values():
        made.append(
            add_overlap(
                primary=shares[0].primary,
                topics=[share.topic for share in shares],
                partner=shares[0].partner,
                fraction=plan.fraction,
                by=by,
            )
        )
    return made


# --- One cell ------------------------------------------------------------------------------


@dataclass
class CellWork:
    """What ``assessor`` holds of ``topic`` in the pool: open (unjudged) and judged items by
    mode, over their active assignments."""

    open: int
    judged: int
    modes: list[str]


def cell_work(*, pool: Pool, topic: Topic, assessor: Assessor) -> CellWork:
    items = AssignmentItem.objects.filter(
        # A gold-only item is a check on the assessor, not work on the pool (assess/gold.py).
        assignment__pool=pool,
        assignment__assessor=assessor,
        topic=topic,
        gold_only=False,
    )
    judged = items.filter(judgment__isnull=False).count()
    open_ = items.filter(assignment__active=True, judgment__isnull=True, withdrawn=False).count()
    modes = sorted(
        set(
            Assignment.objects.filter(
                pool=pool, assessor=assessor, active=True, topics=topic
            ).values_list("mode", flat=True)
        )
    )
    return CellWork(open=open_, judged=judged, modes=modes)


@dataclass
class CellPlan:
    action: str
    topic: Topic
    assessor: Assessor
    to: Assessor | None
    moving: int  # documents given (give), moved (move) or withdrawn (end)
    judged: int  # documents the assessor judged: they stay judged, with them
    summary: str


def plan_cell(
    *, pool: Pool, topic: Topic, assessor: Assessor, action: str, to: Assessor | None = None
) -> CellPlan:
    """What the action would do, in numbers and one sentence; AssignmentError if it cannot."""
    if action not in ACTIONS:
        raise AssignmentError(f"Unknown action {action!r}.")
    work = cell_work(pool=pool, topic=topic, assessor=assessor)
    if action == GIVE:
        holder = primary_holders(pool, [topic]).get(topic.pk)
        if holder is not None:
            raise AssignmentError(
                f"Topic {topic.topic_id} is already {holder}'s primary work: move it instead."
            )
        size = pool_sizes(pool, [topic]).get(topic.pk, 0)
        return CellPlan(
            action,
            topic,
            assessor,
            None,
            size,
            work.judged,
            f"Give topic {topic.topic_id} to {assessor.name}: {size} document"
            f"{'s' if size != 1 else ''} as primary work.",
        )
    if not work.modes:
        raise AssignmentError(f"{assessor.name} holds no work on topic {topic.topic_id}.")
    if action == MOVE:
        if to is None or to.pk == assessor.pk:
            raise AssignmentError("Choose another assessor to move the work to.")
        return CellPlan(
            action,
            topic,
            assessor,
            to,
            work.open,
            work.judged,
            f"Move topic {topic.topic_id} from {assessor.name} to {to.name}: {work.open} "
            f"unjudged document{'s' if work.open != 1 else ''} move; the {work.judged} judged "
            f"stay judged, with {assessor.name}.",
        )
    return CellPlan(
        action,
        topic,
        assessor,
        None,
        work.open,
        work.judged,
        f"End {assessor.name}'s work on topic {topic.topic_id}: {work.open} unjudged document"
        f"{'s' if work.open != 1 else ''} withdrawn; the {work.judged} judged stay judged.",
    )


@transaction.atomic
def apply_cell(*, campaign: Campaign, pool: Pool, plan: CellPlan, by=None) -> int:
    """Carry out a planned cell action; returns the documents given, moved or withdrawn."""
    if plan.action == GIVE:
        (made, *_) = assign(
            campaign=campaign, pool=pool, user=plan.assessor.user, topics=[plan.topic], by=by
        )
        return made.items.count()
    if plan.action == MOVE:
        if plan.to is None:
            raise AssignmentError("Choose another assessor to move the work to.")
        return reassign_topic(
            pool=pool,
            topic=plan.topic,
            from_user=plan.assessor.user,
            to_user=plan.to.user,
            by=by,
        )
    return end_topic(pool=pool, topic=plan.topic, assessor=plan.assessor)


@transaction.atomic
def end_topic(*, pool: Pool, topic: Topic, assessor: Assessor) -> int:
    """Stop ``assessor``'s work on ``topic`` in ``pool``: its unjudged documents are withdrawn
    (never served to them again), queue claims released; judgments stay. An assignment holding
    this topic only ends as a whole. Returns the documents withdrawn."""
    assignments = list(
        Assignment.objects.select_for_update(of=("self",))
        .filter(pool=pool, assessor=assessor, active=True, topics=topic)
        .order_by("pk")
    )
    if not assignments:
        raise AssignmentError(f"{assessor.name} holds no work on topic {topic.topic_id}.")
    withdrawn = 0
    for assignment in assignments:
        topics = set(assignment.topics.values_list("pk", flat=True))
        if topics == {topic.pk}:
            withdrawn += end_assignment(assignment=assignment)
            continue
        # Locked as reassign locks them: a verdict being written commits first or finds the
        # item withdrawn, never both.
        ids = list(
            assignment.items.select_for_update(of=("self",))
            .filter(topic=topic, judgment__isnull=True, withdrawn=False)
            .order_by()
            .values_list("pk", flat=True)
        )
        withdrawn += AssignmentItem.objects.filter(pk__in=ids).update(withdrawn=True)
        if assignment.mode == Assignment.Mode.QUEUE:
            QueueItem.objects.filter(
                pool=pool, topic=topic, claimed_by=assessor, done=False
            ).update(claimed_by=None, claimed_at=None)
        # A queue assignment draws by topic: the topic leaves it. Other modes keep a topic
        # while judged work of it is there (as a move does).
        judged_here = assignment.items.filter(topic=topic, withdrawn=False).exists()
        if assignment.mode == Assignment.Mode.QUEUE or not judged_here:
            assignment.topics.remove(topic)
    return withdrawn
