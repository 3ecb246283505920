"""Planted repeats: a share of an assessor's documents served again later in their order,
unannounced, to measure how consistent the assessor is (issue 19).

NIST assessors label the same document differently when it comes back (Scholer, Turpin &
Sanderson, SIGIR 2011), and drift over a session; a campaign can only see that about its own
assessors if it plants repeats. So an organiser sets a repeat rate on an assignment (primary or
overlap; a shared queue draws documents one at a time and has none): that share of the documents
given is added again at a later position. A repeat is blind: its page is the document's page as
first served (only its opaque token differs), and it is served only once the first verdict
exists. Its verdict is a :class:`~assess.models.RepeatVerdict`: never a revision of the first,
never in qrels, never in agreement between assessors; it gives the assessor's self-agreement.
"""

from __future__ import annotations

import math
import random
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from assess.models import Assignment, AssignmentItem, RepeatVerdict
from campaigns.judgments import REUSED_MESSAGE
from campaigns.models import Campaign, Judgment

# A repeat comes back at least this many documents after the first serve when the order allows
# (right after it, the assessor would remember the document, not judge it again).
MIN_GAP = 10
MAX_RATE = 0.5


class RepeatError(Exception):
    """The repeat's verdict cannot be recorded (nothing was stored); the message says why."""


def check_rate(rate: float) -> float:
    if not 0 <= rate <= MAX_RATE:
        raise ValueError(f"The repeat rate is a share from 0 to {MAX_RATE:g} (e.g. 0.05 for 5%).")
    return rate


def plant(
    order: Sequence[tuple[int, str]], *, rate: float, rng: random.Random, judged: set
) -> list[tuple[int, str, bool]]:
    """``order`` with repeats inserted: (topic pk, doc id, is_repeat) in serving order.

    ``round(rate * n)`` of the ``n`` documents not judged yet are chosen (seeded), each repeated
    at a random later position, at least MIN_GAP documents on when the order is long enough."""
    candidates = [i for i, pair in enumerate(order) if pair not in judged]
    k = min(len(candidates), math.floor(rate * len(candidates) + 0.5))
    chosen = sorted(rng.sample(candidates, k))
    # after[j]: the repeats served right after the j-th document of the original order.
    after: dict[int, list[int]] = defaultdict(list)
    last = len(order) - 1
    for i in chosen:
        low = min(i + MIN_GAP, last)
        after[rng.randint(low, last)].append(i)
    planted: list[tuple[int, str, bool]] = []
    for j, (topic_pk, doc_id) in enumerate(order):
        planted.append((topic_pk, doc_id, False))
        planted.extend((order[i][0], order[i][1], True) for i in after.get(j, ()))
    return planted


def link_repeats(assignment: Assignment, repeats: Iterable[AssignmentItem]) -> None:
    """Point each new repeat item at its first serve (the item of the same pair, not a repeat)."""
    repeats = list(repeats)
    if not repeats:
        return
    firsts = {
        (t, d): pk
        for t, d, pk in AssignmentItem.objects.filter(
            assignment=assignment,
            repeat_of__isnull=True,
            topic_id__in={r.topic_id for r in repeats},
        )
        .order_by()
        .values_list("topic_id", "doc_id", "pk")
    }
    for item in repeats:
        item.repeat_of_id = firsts[(item.topic_id, item.doc_id)]


def stored(submission_id: uuid.UUID, item: AssignmentItem) -> RepeatVerdict | None:
    """The verdict this form already recorded on repeat ``item``, if any."""
    return RepeatVerdict.objects.filter(submission_id=submission_id, item=item).order_by().first()


def record(
    *,
    item: AssignmentItem,
    label: int,
    submission_id: uuid.UUID,
    served_at,
    seconds_on_screen: float | None,
    active_seconds: float | None,
    note: str = "",
    unreadable: bool = False,
    unsure: bool = False,
    shown_token: str | None = None,
) -> int:
    """Store the verdict on repeat ``item``, close the item, and return the label stored (a
    replayed form gets the one already stored). Raises RepeatError, with nothing stored, when
    the form was used for another document or the item is no longer open to this assessor.

    On PostgreSQL one statement (as a first verdict's write, assess.judging._SUBMIT_SQL);
    elsewhere the same steps through the ORM in a transaction."""
    fields = {
        "label": label,
        "note": note,
        "unreadable": unreadable,
        "unsure": unsure,
        "served_at": served_at,
        "seconds_on_screen": seconds_on_screen,
        "active_seconds": active_seconds,
        "submission_id": submission_id,
    }
    try:
        if connection.vendor == "postgresql":
            return _record_in_one_statement(item, shown_token, **fields)
        return _record_with_orm(item, shown_token, **fields)
    except IntegrityError:
        # The same form twice at once: the other request stored it.
        again = RepeatVerdict.objects.filter(submission_id=submission_id).order_by().first()
        if again is None or again.item_id != item.pk:
            raise RepeatError(REUSED) from None
        return again.label


REUSED = REUSED_MESSAGE  # as an ordinary verdict says it: a repeat must not stand out
NOT_OPEN = "This document was taken away from you or is judged already."


def _record_with_orm(item: AssignmentItem, shown_token: str | None, **fields) -> int:
    assignment = item.assignment
    earlier = RepeatVerdict.objects.filter(submission_id=fields["submission_id"]).order_by()
    if (found := earlier.first()) is not None:
        if found.item_id != item.pk:
            raise RepeatError(REUSED)
        return found.label
    first = (
        Judgment.objects.filter(
            assessor_id=assignment.assessor_id, topic_id=item.topic_id, doc_id=item.doc_id
        )
        .order_by()
        .only("pk", "label")
        .first()
    )
    if first is None:
        raise RepeatError(NOT_OPEN)
    now = timezone.now()
    with transaction.atomic():
        closed = AssignmentItem.objects.filter(
            pk=item.pk, judgment__isnull=True, withdrawn=False
        ).update(judgment_id=first.pk)
        if not closed:
            raise RepeatError(NOT_OPEN)
        RepeatVerdict.objects.create(
            item=item,
            assessor_id=assignment.assessor_id,
            judgment_id=first.pk,
            first_label=first.label,
            judged_at=now,
            **fields,
        )
        if shown_token:
            AssignmentItem.objects.filter(
                assignment_id=assignment.pk, token=shown_token, first_served_at__isnull=True
            ).update(first_served_at=now)
    item.judgment_id = first.pk
    return fields["label"]


# The whole write in one statement (autocommit: atomic by itself). ``first`` is the assessor's
# own verdict on the pair; ``closed`` closes the item if it is still open and theirs and the form
# is new; ``seen`` records when the document the page moved on to was first on screen (PostgreSQL
# runs a data-modifying WITH clause whether or not it is read); ``ins`` stores the verdict. The
# final SELECT reads the table as it was before the statement (one snapshot): a verdict found
# there for this form was stored by an earlier request.
_RECORD_SQL = """
WITH first AS (
    SELECT j.id, j.label FROM campaigns_judgment j
    WHERE j.assessor_id = %(assessor)s AND j.topic_id = %(topic)s AND j.doc_id = %(doc)s
), closed AS (
    UPDATE assess_assignmentitem ai SET judgment_id = (SELECT id FROM first)
    WHERE ai.id = %(item)s AND ai.judgment_id IS NULL AND NOT ai.withdrawn
      AND EXISTS (SELECT 1 FROM first)
      AND NOT EXISTS (SELECT 1 FROM assess_repeatverdict r WHERE r.submission_id = %(sid)s)
    RETURNING ai.id
), seen AS (
    UPDATE assess_assignmentitem s SET first_served_at = %(now)s
    WHERE s.assignment_id = %(assignment)s AND s.token = %(shown)s
      AND s.first_served_at IS NULL AND EXISTS (SELECT 1 FROM closed)
    RETURNING 1
), ins AS (
    INSERT INTO assess_repeatverdict (
        item_id, assessor_id, judgment_id, first_label, label, note, unreadable, unsure,
        served_at, judged_at, seconds_on_screen, active_seconds, submission_id)
    SELECT closed.id, %(assessor)s, first.id, first.label, %(label)s, %(note)s, %(unreadable)s,
        %(unsure)s, %(served_at)s, %(now)s, %(seconds_on_screen)s, %(active_seconds)s, %(sid)s
    FROM closed, first
    RETURNING label
)
SELECT (SELECT label FROM ins),
    (SELECT r.item_id FROM assess_repeatverdict r WHERE r.submission_id = %(sid)s),
    (SELECT r.label FROM assess_repeatverdict r WHERE r.submission_id = %(sid)s)
"""


def _record_in_one_statement(item: AssignmentItem, shown_token: str | None, **fields) -> int:
    assignment = item.assignment
    sid = fields.pop("submission_id")
    params = {
        **fields,
        "sid": sid,
        "assessor": assignment.assessor_id,
        "topic": item.topic_id,
        "doc": item.doc_id,
        "item": item.pk,
        "assignment": assignment.pk,
        "shown": shown_token or "",
        "now": timezone.now(),
    }
    with connection.cursor() as cursor:
        cursor.execute(_RECORD_SQL, params)
        stored_label, earlier_item, earlier_label = cursor.fetchone()
    if stored_label is not None:
        return stored_label
    if earlier_item is not None:
        if earlier_item != item.pk:
            raise RepeatError(REUSED)
        return earlier_label
    raise RepeatError(NOT_OPEN)


# --- Self-agreement --------------------------------------------------------------------------


def cohen_kappa(pairs: Sequence[tuple[int, int]]) -> float | None:
    """Cohen's kappa of (first, repeat) label pairs; None when it is undefined (no pairs, or
    chance agreement is 1: a single label throughout)."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(a == b for a, b in pairs) / n
    firsts, repeats = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(firsts[x] * repeats[x] for x in firsts) / (n * n)
    if expected >= 1:
        return None
    return (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class SelfAgreement:
    assessor: str
    repeats: int
    same: int
    kappa: float | None
    # Exact agreement on the earlier and the later half of the assessor's repeats (by the time
    # the repeat was judged): a fall means drift over the session.
    early: float | None
    late: float | None

    @property
    def agreement(self) -> float | None:
        return self.same / self.repeats if self.repeats else None


def _share(pairs: Sequence[tuple[int, int]]) -> float | None:
    return sum(a == b for a, b in pairs) / len(pairs) if pairs else None


def self_agreement(campaign: Campaign) -> list[SelfAgreement]:
    """Per assessor with repeats judged: how often the repeat's label equals the first."""
    rows = (
        RepeatVerdict.objects.filter(judgment__campaign=campaign)
        .order_by("assessor__name", "judged_at", "pk")
        .values_list("assessor__name", "first_label", "label")
    )
    by_assessor: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for name, first, label in rows:
        by_assessor[name].append((first, label))
    result = []
    for name, pairs in by_assessor.items():
        half = len(pairs) // 2
        result.append(
            SelfAgreement(
                assessor=name,
                repeats=len(pairs),
                same=sum(a == b for a, b in pairs),
                kappa=cohen_kappa(pairs),
                early=_share(pairs[:half]) if half else None,
                late=_share(pairs[half:]) if half else None,
            )
        )
    return result
