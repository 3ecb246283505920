"""Serving documents to an assessor and taking their verdicts.

An assessor moves through their assignment's items in presentation order. In queue mode the next
item is claimed from the shared queue with ``SELECT … FOR UPDATE SKIP LOCKED``: concurrent
assessors never receive the same queue entry, and a claim left unjudged for CLAIM_MINUTES may be
taken by someone else (the first assessor's copy is then withdrawn, never served again).
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Exists, OuterRef, Q, Sum
from django.db.models.functions import Coalesce
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone

from assess import hybrid
from assess.models import Assignment, AssignmentItem, QueueItem, QueueProgress
from assess.models import TopicProgress as ProgressCounter
from campaigns.judgments import InvalidLabel, StaleJudgment, Timing, _stored, record_judgment
from campaigns.models import (
    Assessor,
    Campaign,
    Document,
    Judgment,
    Label,
    Membership,
    RubricVersion,
    Topic,
)
from pooling import adaptive
from pooling.models import Pool

CLAIM_MINUTES = getattr(settings, "POOLJUDGE_CLAIM_MINUTES", 30)


def open_items(assignment: Assignment):
    """Items to serve: not judged, not taken away, and for a planted repeat (assess/repeats.py)
    only once its first serve is judged."""
    return assignment.items.filter(judgment__isnull=True, withdrawn=False).exclude(
        repeat_of__isnull=False, repeat_of__judgment__isnull=True
    )


def _claim_is_ours(item: AssignmentItem) -> bool:
    """A queue item still belongs to its assessor unless someone else took the claim."""
    if item.queue_item_id is None:
        return True
    return QueueItem.objects.filter(
        pk=item.queue_item_id, claimed_by=item.assignment.assessor_id
    ).exists()


def claim_next(assignment: Assignment, *, locked: bool = False) -> AssignmentItem | None:
    """Claim the next document of the assignment's shared queues for its assessor.

    On PostgreSQL one statement claims it (see _claiming_panel); ``locked`` (and other
    databases) claim through the ORM in a transaction, an adaptive pool choosing under its
    topic's row lock (pooling.adaptive.choose)."""
    if connection.vendor == "postgresql" and not locked:
        return _claiming_panel(assignment, after=None).item
    assessor = assignment.assessor
    expired = timezone.now() - timedelta(minutes=CLAIM_MINUTES)
    mine = AssignmentItem.objects.filter(
        assignment__assessor=assessor,
        assignment__pool=assignment.pool,
        topic_id=OuterRef("topic_id"),
        doc_id=OuterRef("doc_id"),
    )
    # Pairs the assessor already judged (through another pool's assignment, say) are never
    # claimed by them again: the page would open a judged document as new and refuse its verdict.
    judged = Judgment.objects.filter(
        assessor=assessor, topic_id=OuterRef("topic_id"), doc_id=OuterRef("doc_id")
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
                .exclude(Exists(judged))
            )
            if is_adaptive:  # pooling.adaptive chooses the documents; overlap copies stay here
                candidates = candidates.filter(replica__gt=0)
            ordering = ("replica", "order", "pk")
            if assignment.hybrid:  # a hybrid budget's routing ranks the strata (assess/hybrid.py)
                order = hybrid.claim_order(assignment, expired=expired)
                candidates = hybrid.order_candidates(candidates, order)
                ordering = ("hybrid_rank", *ordering)
            candidate = candidates.order_by(*ordering).first()
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
        # The queue's counters (QueueProgress), as the judging answer reads them.
        sums = (
            QueueProgress.objects.filter(pool_id=assignment.pool_id, topic__in=topics)
            .values_list("topic_id")
            .annotate(judged=Sum("done"), total=Sum("total"))
            .order_by()
        )
        judged = {pk: done for pk, done, total in sums if total}
        totals = {pk: total for pk, done, total in sums if total}
    else:
        # The counters the triggers keep (TopicProgress), as the judging answer reads them.
        rows = ProgressCounter.objects.filter(assignment=assignment, total__gt=0).order_by()
        if topic is not None:
            rows = rows.filter(topic=topic)
        counts = {
            pk: (done, total) for pk, done, total in rows.values_list("topic_id", "judged", "total")
        }
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
    shown_token: str | None = None,
) -> tuple[Judgment, bool]:
    """Record the verdict for ``item`` (see campaigns.judgments.record_judgment) and mark the
    item, and its queue entry, judged. Raises ItemTakenAway (nothing stored) when the item was
    withdrawn from its assessor since it was loaded.

    On PostgreSQL this is one SQL statement (see _SUBMIT_SQL); elsewhere the same steps run in a
    transaction through the ORM. Both keep the same guarantees, tested on both."""
    if check_label and not rubric_version.labels.filter(value=label).exists():
        raise InvalidLabel(f"{label} is not a label of rubric version {rubric_version.number}.")
    fields = {
        "label": label,
        "rubric_version": rubric_version,
        "submission_id": submission_id,
        "expected_version": expected_version,
        "timing": timing,
        "note": note,
        "unreadable": unreadable,
        "unsure": unsure,
        "shown_token": shown_token or None,
    }
    if (
        connection.vendor == "postgresql"
        and submission_id is not None
        and expected_version is not None
    ):
        return _submit_in_one_statement(item, **fields)
    return _submit_with_orm(item, **fields)


def _submit_with_orm(item: AssignmentItem, **fields) -> tuple[Judgment, bool]:
    timing, shown_token = fields["timing"], fields.pop("shown_token")
    if shown_token is not None:
        # The document the page moved on to is on screen from now (see _SUBMIT_SQL's "seen").
        AssignmentItem.objects.filter(
            assignment_id=item.assignment_id, token=shown_token, first_served_at__isnull=True
        ).update(first_served_at=timezone.now())
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
            check_label=False,
            assessor=item.assignment.assessor,
            topic=item.topic,
            doc_id=item.doc_id,
            position=item.position,
            **fields,
        )
        if item.judgment_id != judgment.pk:
            AssignmentItem.objects.filter(pk=item.pk).update(
                judgment=judgment, first_served_at=Coalesce("first_served_at", timing.served_at)
            )
            item.judgment = judgment
        if item.queue_item_id is not None:
            QueueItem.objects.filter(pk=item.queue_item_id).update(done=True)
    return judgment, recorded


# The whole write of a verdict in one statement (autocommit: atomic by itself, no BEGIN/COMMIT
# round trips). ``item`` locks the assignment item's row and re-checks, under the lock, that it
# is still this assessor's (not withdrawn) and that this submission id is new. ``up`` inserts the
# judgment, or on the pair's unique constraint bumps its version if the form's version is still
# current (optimistic check: a stale tab updates nothing). Only rows this verdict writes are
# locked: the item, the judgment, the queue entry. The caller reads what happened from the one
# row returned: ours (0: taken away), dup (the judgment this submission id already recorded),
# and the judgment's columns when it was written (none: stale).
_JUDGMENT_COLUMNS = (
    "id", "campaign_id", "topic_id", "doc_id", "assessor_id", "label", "rubric_version_id",
    "source", "iteration", "position", "served_at", "judged_at", "first_judged_at",
    "seconds_on_screen", "active_seconds", "note", "unreadable", "unsure", "version",
)  # fmt: skip
# Column names come from the constant above, values are all bound parameters.
_SUBMIT_SQL = f"""
WITH item AS (
    SELECT ai.id, ai.queue_item_id FROM assess_assignmentitem ai
    WHERE ai.id = %(item)s AND NOT ai.withdrawn
      AND NOT EXISTS (SELECT 1 FROM campaigns_judgmentrevision r WHERE r.submission_id = %(sid)s)
    FOR UPDATE
), up AS (
    INSERT INTO campaigns_judgment AS j (
        campaign_id, topic_id, doc_id, assessor_id, label, rubric_version_id, source, iteration,
        position, served_at, judged_at, first_judged_at, seconds_on_screen, active_seconds, note,
        unreadable, unsure, version)
    SELECT %(campaign)s::bigint, %(topic)s::bigint, %(doc)s::text, %(assessor)s::bigint,
        %(label)s::integer, %(rubric)s::bigint, 'judged', '', %(position)s::integer,
        %(served_at)s::timestamptz, %(now)s::timestamptz, %(now)s::timestamptz,
        %(on_screen)s::double precision, %(active)s::double precision, %(note)s::text,
        %(unreadable)s::boolean, %(unsure)s::boolean, 1
    FROM item
    WHERE %(expected)s::integer = 0 OR EXISTS (
        SELECT 1 FROM campaigns_judgment c
        WHERE c.assessor_id = %(assessor)s AND c.topic_id = %(topic)s AND c.doc_id = %(doc)s)
    ON CONFLICT (assessor_id, topic_id, doc_id) DO UPDATE SET
        version = j.version + 1, label = EXCLUDED.label,
        rubric_version_id = EXCLUDED.rubric_version_id, source = EXCLUDED.source,
        position = EXCLUDED.position, served_at = EXCLUDED.served_at,
        judged_at = EXCLUDED.judged_at, seconds_on_screen = EXCLUDED.seconds_on_screen,
        active_seconds = EXCLUDED.active_seconds, note = EXCLUDED.note,
        unreadable = EXCLUDED.unreadable, unsure = EXCLUDED.unsure
    WHERE j.version = %(expected)s::integer
    RETURNING {", ".join("j." + c for c in _JUDGMENT_COLUMNS)}
), rev AS (
    INSERT INTO campaigns_judgmentrevision (
        judgment_id, version, label, rubric_version_id, iteration, served_at, judged_at,
        seconds_on_screen, active_seconds, note, unreadable, unsure, submission_id)
    SELECT up.id, up.version, up.label, up.rubric_version_id, '', up.served_at, up.judged_at,
        up.seconds_on_screen, up.active_seconds, up.note, up.unreadable, up.unsure, %(sid)s
    FROM up
    RETURNING 1
), linked AS (
    UPDATE assess_assignmentitem ai
    SET judgment_id = up.id,
        first_served_at = COALESCE(ai.first_served_at, %(served_at)s::timestamptz)
    FROM up WHERE ai.id = %(item)s AND ai.judgment_id IS DISTINCT FROM up.id
    RETURNING 1
), queue AS (
    UPDATE assess_queueitem q SET done = true
    WHERE q.id = (SELECT item.queue_item_id FROM item) AND NOT q.done
      AND EXISTS (SELECT 1 FROM up)
    RETURNING 1
), seen AS (
    -- The document the page moved on to (prefetched) is on screen from now.
    UPDATE assess_assignmentitem s SET first_served_at = %(now)s::timestamptz
    WHERE s.assignment_id = %(assignment)s AND s.token = %(shown)s AND s.first_served_at IS NULL
    RETURNING 1
)
SELECT (SELECT count(*) FROM item) AS ours,
    (SELECT r.judgment_id FROM campaigns_judgmentrevision r WHERE r.submission_id = %(sid)s) AS dup,
    {", ".join("up." + c for c in _JUDGMENT_COLUMNS)},
    (SELECT count(*) FROM rev) + (SELECT count(*) FROM linked) + (SELECT count(*) FROM queue)
    + (SELECT count(*) FROM seen)
FROM (SELECT 1) AS one LEFT JOIN up ON true
"""  # noqa: S608
# A verdict on a hybrid budget's queue entry also reads the routing's state (assess/hybrid.py),
# so the answer's claim of the next document costs no read of its own.
_SUBMIT_TAIL = "FROM (SELECT 1) AS one LEFT JOIN up ON true"
_SUBMIT_SQL_HYBRID = _SUBMIT_SQL.replace(_SUBMIT_TAIL, f", {hybrid.SUBMIT_STATE}\n{_SUBMIT_TAIL}")
assert _SUBMIT_SQL_HYBRID != _SUBMIT_SQL


def _submit_in_one_statement(item: AssignmentItem, **fields) -> tuple[Judgment, bool]:
    assignment, timing = item.assignment, fields["timing"]
    rubric = fields["rubric_version"]
    params = {
        "item": item.pk,
        "sid": fields["submission_id"],
        "campaign": assignment.campaign_id,
        "topic": item.topic_id,
        "doc": item.doc_id,
        "assessor": assignment.assessor_id,
        "label": fields["label"],
        "rubric": rubric.pk if rubric is not None else None,
        "position": item.position,
        "served_at": timing.served_at,
        "now": timezone.now(),
        "on_screen": timing.seconds_on_screen,
        "active": timing.active_seconds,
        "note": fields["note"],
        "unreadable": fields["unreadable"],
        "unsure": fields["unsure"],
        "expected": fields["expected_version"],
        "assignment": item.assignment_id,
        "shown": fields["shown_token"],
    }
    sql = _SUBMIT_SQL
    routed = assignment.hybrid and item.queue_item_id is not None
    if routed:
        expired = params["now"] - timedelta(minutes=CLAIM_MINUTES)
        params.update(
            hybrid.submit_params(assignment, queue_item=item.queue_item_id, expired=expired)
        )
        sql = _SUBMIT_SQL_HYBRID
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    ours, dup, written = row[0], row[1], row[2 : 2 + len(_JUDGMENT_COLUMNS)]
    if routed and written[0] is not None:
        # Kept for this request's answer (_claiming_panel): the order after this verdict.
        assignment.hybrid_order = hybrid.answer_order(row[-2], row[-1], label=fields["label"])
    if dup is not None and written[0] is None:
        # Sent before: the stored verdict, if it was sent for this very document.
        done = _replayed(fields["submission_id"], assignment, item)
        if done is not None:
            return done, False
    if not ours:
        raise ItemTakenAway()
    if written[0] is None:
        # The form's version is no longer the judgment's: a stale tab (or a duplicate that
        # committed while this statement waited for the item's lock).
        current = (
            Judgment.objects.filter(
                assessor_id=assignment.assessor_id, topic_id=item.topic_id, doc_id=item.doc_id
            )
            .order_by()
            .first()
        )
        done = _replayed(fields["submission_id"], assignment, item)
        if done is not None:
            return done, False
        raise StaleJudgment(current)
    judgment = Judgment.from_db(connection.alias, list(_JUDGMENT_COLUMNS), list(written))
    item.judgment = judgment
    return judgment, True


@dataclass
class Panel:
    """Everything the judging panel reads besides the scope: the document on screen, the next
    open one to prefetch (with its document and topic), the previous one (for the [ key) and the
    progress of the topics involved. One statement (see panel_reads)."""

    item: AssignmentItem | None = None
    document: Document | None = None
    upcoming: AssignmentItem | None = None
    upcoming_document: Document | None = None
    previous: AssignmentItem | None = None
    progress: TopicProgress | None = None
    # Judged / total by topic pk: the item's topic, the upcoming one's, and ``also_topic``.
    counts: dict[int, TopicProgress] = field(default_factory=dict)
    # What an adaptive pool's order reads when nothing is open (see _ADAPTIVE_STATE): the
    # assignment's topics, new revisions and pending claims by topic pk.
    topics: list[Topic] = field(default_factory=list)
    revisions: dict[int, list[tuple[int, str, int, str | None]]] = field(default_factory=dict)
    pending: dict[int, set[str]] = field(default_factory=dict)


# The open-item test. Items whose queue claim someone else took are withdrawn in the claimer's
# transaction (claim_next), so "not withdrawn" is the whole test; the claim check stays as a
# guard for copies withdrawn before that rule. Both checks are scalar subqueries on purpose: an
# EXISTS here may be planned as a hashed subplan that reads every queue entry the assessor ever
# claimed, or every judged item of every assignment, on each read (stale statistics made it
# so); a scalar subquery is one primary-key probe for each item the index scan reaches.
_OPEN_WHERE = """
    o.assignment_id = %(assignment)s AND o.judgment_id IS NULL AND NOT o.withdrawn
    AND (o.queue_item_id IS NULL OR (
        SELECT q.claimed_by_id FROM assess_queueitem q WHERE q.id = o.queue_item_id
    ) = %(assessor)s)
    AND (o.repeat_of_id IS NULL OR (
        SELECT f.judgment_id FROM assess_assignmentitem f WHERE f.id = o.repeat_of_id
    ) IS NOT NULL)
"""
_ITEM_COLUMNS = "o.id, o.token, o.position, o.doc_id, o.topic_id, o.queue_item_id"


def _first_open(after: str, exclude: str) -> str:
    """SQL for the first open item after position ``after`` (wrapping round to the earliest),
    other than item ``exclude``. Two index-ordered LIMIT 1 reads on the partial index
    assignment_item_next_idx, never a sort of the assignment's open items."""
    # Fixed SQL fragments only: every value is a bound parameter.
    one = (
        f"SELECT * FROM (SELECT {_ITEM_COLUMNS} FROM assess_assignmentitem o "  # noqa: S608
        f"WHERE {_OPEN_WHERE} AND o.id <> {exclude} AND o.position {{}} {after} "
        "ORDER BY o.position LIMIT 1) AS {}"
    )
    return (
        f"SELECT * FROM ({one.format('>', 'later')} UNION ALL {one.format('<=', 'earlier')}) "  # noqa: S608
        f"AS either ORDER BY (position <= {after}), position LIMIT 1"
    )


# The item itself (the judging page); the open item with that token (the document the page
# moved on to: nothing when it is no longer open); the first open one after a position.
_CUR_AT = f"SELECT {_ITEM_COLUMNS} FROM assess_assignmentitem o WHERE o.id = %(item)s"  # noqa: S608
_CUR_SHOWN = (
    f"SELECT {_ITEM_COLUMNS} FROM assess_assignmentitem o "  # noqa: S608
    f"WHERE o.token = %(shown)s AND {_OPEN_WHERE}"
)
_CUR_AFTER = _first_open("%(after)s", "0")
_NEXT = _first_open("(SELECT position FROM cur)", "(SELECT id FROM cur)")
_TOPICS = (
    "(SELECT topic_id FROM cur UNION SELECT topic_id FROM nxt "
    "UNION SELECT CAST(%(also)s AS bigint))"
)
# Kept by triggers on the items (assess.models.TopicProgress): two numbers read, not the topic's
# items counted, whatever its size.
_PROGRESS_ITEMS = f"""
    SELECT p.topic_id, p.judged, p.total FROM assess_topicprogress p
    WHERE p.assignment_id = %(assignment)s AND p.total > 0 AND p.topic_id IN {_TOPICS}
"""  # noqa: S608
# A shared queue's counters (assess.models.QueueProgress): a topic's slots summed, a row per
# assessor who judged from it, not the queue counted.
_PROGRESS_QUEUE = f"""
    SELECT p.topic_id, SUM(p.done) AS judged, SUM(p.total) AS total
    FROM assess_queueprogress p WHERE p.pool_id = %(pool)s AND p.topic_id IN {_TOPICS}
    GROUP BY p.topic_id HAVING SUM(p.total) > 0
"""  # noqa: S608
_PANEL_SQL = """
WITH {claim}cur AS ({cur}),
nxt AS ({next}),
prv AS (
    SELECT i.id, i.token, i.position, i.doc_id, i.topic_id FROM assess_assignmentitem i
    WHERE i.assignment_id = %(assignment)s AND NOT i.withdrawn
      AND i.position < (SELECT position FROM cur) AND i.repeat_of_id IS NULL
    ORDER BY i.position DESC LIMIT 1
),
prog AS ({progress})
SELECT 'c', cur.id, cur.token, cur.position, cur.doc_id, cur.topic_id, cur.queue_item_id,
    d.title, d.body_html, t.topic_id, t.title, t.description, t.narrative
FROM cur
LEFT JOIN campaigns_document d ON d.campaign_id = %(campaign)s AND d.doc_id = cur.doc_id
LEFT JOIN campaigns_topic t ON t.id = cur.topic_id
UNION ALL
SELECT 'n', nxt.id, nxt.token, nxt.position, nxt.doc_id, nxt.topic_id, nxt.queue_item_id,
    d.title, d.body_html, t.topic_id, t.title, t.description, t.narrative
FROM nxt
LEFT JOIN campaigns_document d ON d.campaign_id = %(campaign)s AND d.doc_id = nxt.doc_id
LEFT JOIN campaigns_topic t ON t.id = nxt.topic_id
UNION ALL
SELECT 'p', prv.id, prv.token, prv.position, prv.doc_id, prv.topic_id, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL
FROM prv
UNION ALL
SELECT 'g', prog.judged, NULL, prog.total, NULL, prog.topic_id, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL
FROM prog{state}
"""

# Claiming the next document of a shared queue inside the panel's read, when the assessor has
# nothing open (``opened`` is empty): the whole claim of claim_next in the one statement, in
# autocommit (no BEGIN/COMMIT round trips). ``cand`` locks only the queue entry it takes (SKIP
# LOCKED: concurrent claimers take different entries, never wait for each other); ``claimed``
# takes it; ``dropped`` withdraws the copy of an earlier holder whose claim expired; ``created``
# appends the item to the assessor's order; ``chosen`` records, for an adaptive pool, which run's
# turn chose the document (merged into the topic's row: concurrent claims lose nothing). The
# answer's ``cur`` is the open item, or the one just created. {which} picks the candidates.
_CLAIM = """opened AS ({opened}),
cand AS (
    SELECT q.id, q.topic_id, q.doc_id, q.claimed_by_id AS previous
    FROM assess_queueitem q
    WHERE NOT EXISTS (SELECT 1 FROM opened) AND q.pool_id = %(pool)s AND NOT q.done
      AND (q.claimed_by_id IS NULL OR q.claimed_at < %(expired)s) AND {which}
    ORDER BY {rank}q.replica, q."order", q.id
    LIMIT 1
    FOR UPDATE OF q SKIP LOCKED
),
claimed AS (
    UPDATE assess_queueitem q SET claimed_by_id = %(assessor)s, claimed_at = %(now)s
    FROM cand WHERE q.id = cand.id
    RETURNING q.id, q.topic_id, q.doc_id, cand.previous
),
dropped AS (
    UPDATE assess_assignmentitem w SET withdrawn = true
    WHERE w.queue_item_id = (SELECT claimed.id FROM claimed WHERE claimed.previous IS NOT NULL)
      AND w.judgment_id IS NULL
    RETURNING 1
),
created AS (
    INSERT INTO assess_assignmentitem (
        assignment_id, topic_id, doc_id, position, token, withdrawn, queue_item_id)
    SELECT %(assignment)s, claimed.topic_id, claimed.doc_id,
        COALESCE((SELECT MAX(x.position) FROM assess_assignmentitem x
                  WHERE x.assignment_id = %(assignment)s), 0) + 1,
        %(token)s, false, claimed.id
    FROM claimed
    RETURNING id, token, position, doc_id, topic_id, queue_item_id
),
chosen AS (
    INSERT INTO pooling_adaptivetopic AS a (pool_id, topic_id, chosen_by, updated_at)
    SELECT %(pool)s, claimed.topic_id, jsonb_build_object(claimed.doc_id, %(run)s::text), %(now)s
    FROM claimed WHERE %(run)s::text IS NOT NULL
    ON CONFLICT (pool_id, topic_id) DO UPDATE
    SET chosen_by = a.chosen_by || EXCLUDED.chosen_by, updated_at = EXCLUDED.updated_at
    RETURNING 1
),
"""
_CLAIM_CUR = "SELECT * FROM opened UNION ALL SELECT * FROM created"
_ASSIGNMENT_TOPICS = (
    "SELECT at.topic_id FROM assess_assignment_topics at WHERE at.assignment_id = %(assignment)s"
)
# A static queue: the assignment's topics, in queue order, skipping documents the assessor
# already holds in this pool or has judged already (through another pool, say: served again as
# new, its verdict would be refused as stale). Adaptive pools serve their extra overlap copies,
# replica > 0, this way, once the adaptive order has nothing left.
# The shape is what keeps a claim's cost flat: the topics are one array read once, and the two
# "not yet" checks are scalar subqueries, so the planner cannot turn them into anti-joins that
# hash the whole queue, the assessor's items and their judgments; the open entries are walked
# in claim order on queue_item_claim_idx and the first that passes is taken.
_STATIC_CANDIDATES = f"""q.topic_id = ANY (ARRAY({_ASSIGNMENT_TOPICS}))
      AND NOT (SELECT EXISTS (
        SELECT 1 FROM assess_assignmentitem m JOIN assess_assignment ma ON ma.id = m.assignment_id
        WHERE ma.assessor_id = %(assessor)s AND ma.pool_id = %(pool)s
          AND m.topic_id = q.topic_id AND m.doc_id = q.doc_id AND m.repeat_of_id IS NULL))
      AND NOT (SELECT EXISTS (
        SELECT 1 FROM campaigns_judgment jj
        WHERE jj.assessor_id = %(assessor)s AND jj.topic_id = q.topic_id
          AND jj.doc_id = q.doc_id))"""  # noqa: S608 - fixed SQL
# A hybrid budget's order (assess.hybrid.claim_order): entries it does not route first, then the
# routed entries of the strata allowed now, by rank; a stratum not listed is not served.
_HYBRID_STRATA = (
    "unnest(%(hybrid_topics)s::bigint[], %(hybrid_strata)s::integer[], "
    "%(hybrid_ranks)s::integer[]) AS h(topic, stratum, rank)"
)
_HYBRID_ALLOWED = f"""(q.stratum IS NULL OR EXISTS (
        SELECT 1 FROM {_HYBRID_STRATA} WHERE h.topic = q.topic_id AND h.stratum = q.stratum))"""  # noqa: S608
_HYBRID_RANK = f"""COALESCE((SELECT h.rank FROM {_HYBRID_STRATA}
        WHERE h.topic = q.topic_id AND h.stratum = q.stratum), -1), """  # noqa: S608
# The document the adaptive order chose (pooling.adaptive.choose_from).
_CHOSEN_CANDIDATE = "q.topic_id = %(topic)s AND q.doc_id = %(doc)s AND q.replica = 0"
# What an adaptive pool's order reads when the assessor has nothing open (rows 't', 'r', 'q':
# the assignment's topics; per topic, the people's revisions this process has not folded yet,
# with the run whose turn chose the document; the documents claimed and not yet judged).
_ADAPTIVE_STATE = """
UNION ALL
SELECT 't', t.id, NULL, NULL, NULL, t.id, NULL, NULL, NULL, t.topic_id, NULL, NULL, NULL
FROM assess_assignment_topics at JOIN campaigns_topic t ON t.id = at.topic_id
WHERE at.assignment_id = %(assignment)s AND NOT EXISTS (SELECT 1 FROM cur)
UNION ALL
SELECT 'r', r.id, NULL, r.label, j.doc_id, j.topic_id, NULL,
    a.chosen_by ->> j.doc_id, NULL, NULL, NULL, NULL, NULL
FROM assess_assignment_topics at
LEFT JOIN (SELECT * FROM unnest(%(folded)s::bigint[], %(marks)s::bigint[])) AS f(topic, mark)
    ON f.topic = at.topic_id
JOIN campaigns_judgment j ON j.campaign_id = %(campaign)s AND j.topic_id = at.topic_id
JOIN campaigns_judgmentrevision r ON r.judgment_id = j.id
    AND (r.id > COALESCE(f.mark, 0) OR r.judged_at > %(recent)s)
JOIN campaigns_assessor s ON s.id = j.assessor_id AND s.kind = %(person)s
LEFT JOIN pooling_adaptivetopic a ON a.pool_id = %(pool)s AND a.topic_id = at.topic_id
WHERE at.assignment_id = %(assignment)s AND NOT EXISTS (SELECT 1 FROM cur)
UNION ALL
SELECT 'q', NULL, NULL, NULL, q.doc_id, q.topic_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM assess_queueitem q
WHERE q.pool_id = %(pool)s AND NOT q.done AND q.claimed_at >= %(expired)s
  AND q.topic_id IN (SELECT at.topic_id FROM assess_assignment_topics at
                     WHERE at.assignment_id = %(assignment)s)
  AND NOT EXISTS (SELECT 1 FROM cur)
"""
# Attempts at claiming an adaptive choice before falling back to choosing under the topic's row
# lock (each failed attempt means another assessor claimed a document meanwhile).
ADAPTIVE_ATTEMPTS = 3


def panel_reads(
    assignment: Assignment,
    *,
    item: AssignmentItem | None = None,
    after: int | None = None,
    shown: str | None = None,
    also_topic: Topic | None = None,
    claim: bool = False,
) -> Panel:
    """The panel's reads in one statement: for ``item`` (the judging page), for the open item
    with token ``shown`` (the document the page moved on to), or for the first open item after
    position ``after`` (the answer to a verdict); with the progress of ``also_topic`` too.
    ``item`` keeps the topic and judgment already loaded with it; an item found by ``shown`` or
    ``after`` is open (no judgment).

    With ``claim`` (and ``after``), an active queue assignment with nothing open claims the next
    document of its shared queue in the same statement on PostgreSQL (an adaptive pool: one more
    statement, which reads what the order needs; see _claiming_panel); elsewhere through
    claim_next, then one more read."""
    queue = assignment.mode == Assignment.Mode.QUEUE
    if claim and queue and assignment.active and item is None and shown is None:
        if connection.vendor == "postgresql":
            return _claiming_panel(assignment, after=after or 0, also_topic=also_topic)
        panel = panel_reads(assignment, after=after, also_topic=also_topic)
        if panel.item is None:
            claimed = next_item(assignment, after=after)
            if claimed is not None:
                panel = panel_reads(assignment, item=claimed, also_topic=also_topic)
        return panel
    if item is not None:
        cur = _CUR_AT
    elif shown is not None:
        cur = _CUR_SHOWN
    else:
        cur = _CUR_AFTER
    return _read_panel(assignment, cur=cur, item=item, after=after, shown=shown, also=also_topic)


def _panel_params(assignment: Assignment, **values) -> dict:
    return {
        "assignment": assignment.pk,
        "assessor": assignment.assessor_id,
        "campaign": assignment.campaign_id,
        "pool": assignment.pool_id,
        "item": None,
        "after": 0,
        "shown": None,
        "also": None,
        **values,
    }


def _read_panel(
    assignment: Assignment,
    *,
    cur: str,
    claim: str = "",
    state: str = "",
    item: AssignmentItem | None = None,
    after: int | None = None,
    shown: str | None = None,
    also: Topic | None = None,
    extra: dict | None = None,
) -> Panel:
    params = _panel_params(
        assignment,
        item=item.pk if item is not None else None,
        after=after if after is not None else 0,
        shown=shown,
        also=also.pk if also is not None else None,
        **(extra or {}),
    )
    queue = assignment.mode == Assignment.Mode.QUEUE
    sql = _PANEL_SQL.format(
        claim=claim,
        cur=cur,
        next=_NEXT,
        progress=_PROGRESS_QUEUE if queue else _PROGRESS_ITEMS,
        state=state,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return _panel_from_rows(assignment, rows, item=item, also_topic=also)


def _claiming_panel(
    assignment: Assignment, *, after: int | None, also_topic: Topic | None = None
) -> Panel:
    """PostgreSQL: the panel of the first open item after ``after``, or (nothing open) of the
    queue document claimed for the assessor in the same statement; ``after`` None claims
    whatever is open (claim_next). A static queue is one statement. An adaptive pool's order
    needs its state first: the read that finds nothing open also returns what the order has not
    folded yet, the order chooses in this process (pooling.adaptive.choose_from, nothing
    locked), and the claim statement takes the chosen document only if nobody took it
    meanwhile; if someone did, read and choose again; after ADAPTIVE_ATTEMPTS, choose under the
    topic's row lock (claim_next's ORM path)."""
    now = timezone.now()
    base = {
        "expired": now - timedelta(minutes=CLAIM_MINUTES),
        "now": now,
        "token": AssignmentItem._meta.get_field("token").get_default(),
        "run": None,
        "topic": None,
        "doc": None,
    }
    opened = _CUR_AFTER if after is not None else f"{_CUR_AT} AND false"
    pool = assignment.pool
    if adaptive.options(pool) is None:
        if assignment.hybrid:
            # A hybrid budget (assess/hybrid.py): the claim of the best stratum's next entry,
            # ranked from the state the verdict's statement read (else one read more).
            order = assignment.__dict__.pop("hybrid_order", None) or hybrid.claim_order(
                assignment, expired=base["expired"]
            )
            which = f"{_STATIC_CANDIDATES} AND {_HYBRID_ALLOWED}"
            claim = _CLAIM.format(opened=opened, which=which, rank=_HYBRID_RANK)
            return _read_panel(
                assignment,
                cur=_CLAIM_CUR,
                claim=claim,
                after=after,
                also=also_topic,
                extra={**base, **order},
            )
        claim = _CLAIM.format(opened=opened, which=_STATIC_CANDIDATES, rank="")
        return _read_panel(
            assignment, cur=_CLAIM_CUR, claim=claim, after=after, also=also_topic, extra=base
        )
    for _ in range(ADAPTIVE_ATTEMPTS):
        marks = adaptive.folded_marks(pool)
        state = {
            "folded": list(marks),
            "marks": list(marks.values()),
            "person": Assessor.Kind.PERSON.value,
            "recent": adaptive.recent_since(),
        }
        if after is not None:
            panel = _read_panel(
                assignment,
                cur=_CUR_AFTER,
                state=_ADAPTIVE_STATE,
                after=after,
                also=also_topic,
                extra={**base, **state},
            )
            if panel.item is not None:
                return panel
        else:
            panel = _read_panel(
                assignment,
                cur=f"{_CUR_AT} AND false",
                state=_ADAPTIVE_STATE,
                extra={**base, **state},
            )
        chosen = adaptive.choose_from(
            pool=pool,
            topics=panel.topics,
            marks=marks,
            revisions=panel.revisions,
            pending=panel.pending,
        )
        if chosen is None:
            # The adaptive order has nothing left: the extra overlap copies, in queue order.
            which = f"q.replica > 0 AND {_STATIC_CANDIDATES}"
            values = base
        else:
            topic, choice = chosen
            which = _CHOSEN_CANDIDATE
            values = {**base, "topic": topic.pk, "doc": choice.doc_id, "run": choice.run}
        panel = _read_panel(
            assignment,
            cur=_CLAIM_CUR,
            claim=_CLAIM.format(opened=opened, which=which, rank=""),
            after=after,
            also=also_topic,
            extra=values,
        )
        if panel.item is not None or chosen is None:
            return panel
    claimed = claim_next(assignment, locked=True)
    if claimed is None:
        return Panel()
    return panel_reads(assignment, item=claimed, also_topic=also_topic)


def _panel_from_rows(
    assignment: Assignment, rows, *, item: AssignmentItem | None, also_topic: Topic | None
) -> Panel:
    panel = Panel()
    topics = {also_topic.pk: also_topic} if also_topic is not None else {}
    if item is not None:
        topics[item.topic_id] = item.topic
    counts: list[tuple[int, int, int]] = []
    for kind, pk, token, position, doc_id, topic_pk, queue_pk, title, body, *topic_cols in rows:
        if kind == "g":
            counts.append((topic_pk, int(pk or 0), int(position or 0)))
            continue
        if kind == "p":
            panel.previous = AssignmentItem(
                pk=pk, assignment=assignment, topic_id=topic_pk, doc_id=doc_id,
                position=position, token=token,
            )  # fmt: skip
            continue
        if kind == "t":
            panel.topics.append(
                Topic(pk=topic_pk, campaign_id=assignment.campaign_id, topic_id=topic_cols[0])
            )
            continue
        if kind == "r":  # a revision (pk, label, doc, run that chose the document)
            panel.revisions.setdefault(topic_pk, []).append((pk, doc_id, position, title))
            continue
        if kind == "q":
            panel.pending.setdefault(topic_pk, set()).add(doc_id)
            continue
        if topic_pk not in topics:
            topics[topic_pk] = Topic(
                pk=topic_pk,
                campaign_id=assignment.campaign_id,
                topic_id=topic_cols[0],
                title=topic_cols[1],
                description=topic_cols[2],
                narrative=topic_cols[3],
            )
        document = None
        if title is not None or body is not None:
            document = Document(doc_id=doc_id, title=title, body_html=body)
        if kind == "c" and item is not None:
            panel.item, panel.document = item, document
            continue
        found = AssignmentItem(
            pk=pk,
            assignment=assignment,
            topic=topics[topic_pk],
            doc_id=doc_id,
            position=position,
            token=token,
            queue_item_id=queue_pk,
        )
        found.judgment = None
        if kind == "c":
            panel.item, panel.document = found, document
        else:
            panel.upcoming, panel.upcoming_document = found, document
    for topic_pk, judged, total in counts:
        if topic_pk in topics:
            panel.counts[topic_pk] = TopicProgress(topics[topic_pk], judged, total)
    if panel.item is not None:
        panel.progress = panel.counts.get(panel.item.topic_id)
    # The order the adaptive claim serves topics in (pooling.adaptive.claim_candidate's).
    panel.topics.sort(key=lambda t: (t.topic_id, t.pk))
    return panel


def mark_served(item: AssignmentItem) -> None:
    """Record when the item was first on screen (only the first time: one write, not one per
    view). The judging page's GET never calls it: a verdict's write records it for the judged
    item (assess.judging.submit, from the signed time the page was served)."""
    if item.first_served_at is None:
        now = timezone.now()
        AssignmentItem.objects.filter(pk=item.pk, first_served_at__isnull=True).update(
            first_served_at=now
        )
        item.first_served_at = now


# Rubric versions never change once saved (Campaign.save_rubric makes a new one), so a worker
# loads each version's labels once instead of on every judgment. Saving or deleting a version or
# a label clears the cache all the same (tests, the admin), never serving a stale scale.
_RUBRICS: dict[int, tuple[RubricVersion, list[Label]]] = {}
_RUBRICS_LOCK = threading.Lock()


def rubric_and_labels(rubric_pk: int | None) -> tuple[RubricVersion | None, list[Label]]:
    """A rubric version and its labels in scale order, from the worker's cache."""
    if rubric_pk is None:
        return None, []
    cached = _RUBRICS.get(rubric_pk)
    if cached is None:
        rubric = RubricVersion.objects.get(pk=rubric_pk)
        cached = (rubric, list(rubric.labels.order_by("value")))
        with _RUBRICS_LOCK:
            _RUBRICS[rubric_pk] = cached
    return cached


@receiver([post_save, post_delete], sender=RubricVersion)
@receiver([post_save, post_delete], sender=Label)
def _forget_rubrics(**kwargs) -> None:
    with _RUBRICS_LOCK:
        _RUBRICS.clear()


def _columns(model: type[models.Model], alias: str) -> tuple[list[str], str]:
    fields = [f.attname for f in model._meta.concrete_fields]
    sql = ", ".join(f'{alias}."{f.column}"' for f in model._meta.concrete_fields)
    return fields, sql


_SCOPE_MODELS = (
    (AssignmentItem, "ai"),
    (Assignment, "a"),
    (Campaign, "c"),
    (Assessor, "s"),
    (Topic, "t"),
    (Judgment, "j"),
)
_SCOPE_COLUMNS = [_columns(model, alias) for model, alias in _SCOPE_MODELS]
# What the judging loop reads of the assignment's pool (whether and how a queue is judged in
# adaptive order, pooling.adaptive): a built pool never changes.
_POOL_COLUMNS = ("id", "campaign_id", "version", "strategy", "params", "seed", "created_at")
# The judging views' one scope query: the item of the user's assignment, with everything the
# answer needs about it, while the user is an assessor of the campaign. Written out once (the
# ORM's compilation of the same query was the largest share of a judgment's CPU).
_SCOPE_SQL = f"""
SELECT {", ".join(sql for _, sql in _SCOPE_COLUMNS)},
    (SELECT r.id FROM {RubricVersion._meta.db_table} r WHERE r.campaign_id = c.id
     ORDER BY r.number DESC LIMIT 1),
    {", ".join(f'p."{c}"' for c in _POOL_COLUMNS)}
FROM {AssignmentItem._meta.db_table} ai
JOIN {Assignment._meta.db_table} a ON a.id = ai.assignment_id
JOIN {Pool._meta.db_table} p ON p.id = a.pool_id
JOIN {Campaign._meta.db_table} c ON c.id = a.campaign_id
JOIN {Assessor._meta.db_table} s ON s.id = a.assessor_id
JOIN {Topic._meta.db_table} t ON t.id = ai.topic_id
LEFT JOIN {Judgment._meta.db_table} j ON j.id = ai.judgment_id
WHERE ai.token = %(item)s AND a.token = %(assignment)s AND c.slug = %(slug)s
  AND s.user_id = %(user)s
  AND EXISTS (SELECT 1 FROM {Membership._meta.db_table} m
              WHERE m.campaign_id = c.id AND m.user_id = %(user)s AND m.role = %(role)s)
"""  # noqa: S608 - table and column names from the models; every value is a parameter


def load_scope(*, user_id: int, slug: str, token: str, item_token: str) -> AssignmentItem | None:
    """The item ``item_token`` of user ``user_id``'s assignment ``token`` in campaign ``slug``,
    while they are one of its assessors (else None), with its assignment, campaign, assessor,
    topic and judgment attached, and the campaign's current rubric version id as
    ``assignment.rubric_pk``: one query."""
    from campaigns.access import ASSESSOR

    params = {"item": item_token, "assignment": token, "slug": slug, "user": user_id}
    with connection.cursor() as cursor:
        cursor.execute(_SCOPE_SQL, {**params, "role": ASSESSOR})
        row = cursor.fetchone()
    if row is None:
        return None
    loaded = []
    start = 0
    for (model, _), (fields, _) in zip(_SCOPE_MODELS, _SCOPE_COLUMNS, strict=True):
        values = row[start : start + len(fields)]
        start += len(fields)
        loaded.append(
            model.from_db(connection.alias, fields, values) if values[0] is not None else None
        )
    item, assignment, campaign, assessor, topic, judgment = loaded
    if judgment is not None and judgment.assessor_id != assignment.assessor_id:
        # Checked here, not in the join: given "j.assessor_id = a.assessor_id" too, the planner
        # (on statistics taken before judgments existed) read every judgment of the assessor
        # through their index to find this one, at each request.
        judgment = None
    assignment.campaign = campaign
    assignment.assessor = assessor
    assignment.rubric_pk = row[start]
    values = list(row[start + 1 :])
    params = values[_POOL_COLUMNS.index("params")]
    if isinstance(params, str):  # Django reads jsonb as text and decodes it in the field
        values[_POOL_COLUMNS.index("params")] = json.loads(params)
    assignment.pool = Pool.from_db(connection.alias, list(_POOL_COLUMNS), values)
    assignment.pool.campaign = campaign
    item.assignment = assignment
    item.topic = topic
    item.judgment = judgment
    return item


def _replayed(submission_id, assignment: Assignment, item: AssignmentItem) -> Judgment | None:
    """The verdict already stored for ``submission_id`` on this very document, linked to the item
    (a replay is answered with it), or None."""
    done = _stored(
        submission_id, assessor=assignment.assessor, topic=item.topic, doc_id=item.doc_id
    )
    if done is not None:
        item.judgment = done
    return done
