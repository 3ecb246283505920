"""Gold items: pairs whose label is known (an imported source's qrels chosen by the organiser),
mixed silently into an assessor's order to measure their accuracy (issue 19).

An organiser names a source (an imported assessor: ``import_qrels … --assessor NAME``) and a
gold rate or count when giving out work (primary or overlap; a shared queue draws documents one
at a time and has none). That many of the source's pairs on the assignment's topics, labelled on
the scale and with a document to show, are chosen (seeded) among those the assessor has not
judged yet:

- a chosen pair that is already in the assessor's order is their work anyway: its item is marked
  gold (``AssignmentItem.gold``) and its verdict is an ordinary judgment, in qrels as any other;
- any other chosen pair is added to the order at a random place within its topic's documents,
  ``gold_only``: its verdicts are :class:`~assess.models.GoldVerdict` rows, kept apart like a
  planted repeat's, never a judgment, never in qrels, agreement or label counts.

Nothing an assessor can reach says which items are gold or what their known label is: a gold
item's page is any document's page, its verdict is answered as any verdict (saved, revised),
it is counted in the topic's progress, listed among the assessor's judged documents with their
own label, and can be revised. Accuracy compares the assessor's current verdict with the
source's current label (a corrected re-import is taken into account).
"""

from __future__ import annotations

import math
import random
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Max
from django.utils import timezone

from assess.models import Assignment, AssignmentItem, GoldVerdict
from campaigns.judgments import StaleJudgment, SubmissionReused, Timing
from campaigns.models import Assessor, Campaign, Document, Judgment

MAX_RATE = 0.5


def check_rate(rate: float) -> float:
    if not 0 <= rate <= MAX_RATE:
        raise ValueError(f"The gold rate is a share from 0 to {MAX_RATE:g} (e.g. 0.05 for 5%).")
    return rate


def parse_amount(text: str) -> tuple[float, int | None]:
    """'' or '0' -> (0, None); '5%', '0.05' -> (0.05, None), a rate; '12' -> (0, 12), a number
    of pairs. Raises ValueError with a sentence."""
    text = text.strip().replace(",", ".")
    if not text or text in {"0", "0%"}:
        return 0.0, None
    if text.isdigit():
        return 0.0, int(text)
    percent = text.endswith("%")
    number = text.removesuffix("%").strip()
    try:
        value = float(number) / (100 if percent else 1)
    except ValueError:
        raise ValueError(
            "Enter a share such as 0.05 or 5%, or a whole number of gold documents such as 10."
        ) from None
    if not math.isfinite(value):
        raise ValueError("Enter a share such as 0.05 or 5%.")
    return check_rate(value), None


def gold_sources(campaign: Campaign):
    """The sources gold can come from: the campaign's imported assessors (earlier qrels)."""
    return Assessor.objects.filter(campaign=campaign, kind=Assessor.Kind.IMPORTED).order_by("name")


def source_named(campaign: Campaign, name: str) -> Assessor:
    """The imported source ``name`` of the campaign; ValueError naming the choices otherwise."""
    found = gold_sources(campaign).filter(name=name).first()
    if found is None:
        names = ", ".join(gold_sources(campaign).values_list("name", flat=True)) or "none yet"
        raise ValueError(
            f"{name!r} is not an imported qrels source of this campaign (sources: {names}; "
            "import one with import_qrels --assessor NAME)."
        )
    return found


def candidates(assignment: Assignment, topic_pks: Iterable[int]) -> dict[tuple[int, str], int]:
    """(topic pk, doc id) -> the source's judgment pk, for the source's pairs on ``topic_pks``
    labelled on the scale (a negative label is no known label), with a document to show, that
    the assessor has not judged and does not hold open in another active assignment."""
    topic_pks = set(topic_pks)
    rows = (
        Judgment.objects.filter(
            assessor_id=assignment.gold_source_id, topic_id__in=topic_pks, label__gte=0
        )
        .order_by("topic_id", "doc_id")
        .values_list("topic_id", "doc_id", "pk")
    )
    found = {(t, d): pk for t, d, pk in rows}
    if not found:
        return {}
    shown = set(
        Document.objects.filter(
            campaign_id=assignment.campaign_id, doc_id__in={d for _, d in found}
        ).values_list("doc_id", flat=True)
    )
    judged = set(
        Judgment.objects.filter(
            assessor_id=assignment.assessor_id, topic_id__in=topic_pks
        ).values_list("topic_id", "doc_id")
    )
    elsewhere = set(
        AssignmentItem.objects.filter(
            assignment__assessor_id=assignment.assessor_id,
            assignment__active=True,
            topic_id__in=topic_pks,
            withdrawn=False,
        )
        .exclude(assignment_id=assignment.pk)
        .values_list("topic_id", "doc_id")
    )
    return {
        pair: pk
        for pair, pk in found.items()
        if pair[1] in shown and pair not in judged and pair not in elsewhere
    }


def how_many(assignment: Assignment, *, given: int) -> int:
    """Gold pairs to choose when ``given`` documents are added to the assignment: its count,
    less the gold it already holds, or its rate of ``given``."""
    if assignment.gold_count is not None:
        held = AssignmentItem.objects.filter(assignment=assignment, gold__isnull=False).count()
        return max(0, assignment.gold_count - held)
    return math.floor(assignment.gold_rate * given + 0.5)


def mix(
    planted: Sequence[tuple[int, str, bool]],
    *,
    gold: dict[tuple[int, str], int],
    k: int,
    rng: random.Random,
) -> list[tuple[int, str, bool, int | None, bool]]:
    """``planted`` (topic pk, doc id, is_repeat, in serving order) with ``k`` of the ``gold``
    pairs chosen: (topic pk, doc id, is_repeat, gold judgment pk, gold_only). A chosen pair in
    the order is marked where it is; any other is inserted at a random place among its topic's
    documents (a document of another topic in the middle of a topic would stand out)."""
    firsts = {(t, d) for t, d, again in planted if not again}
    topics = {t for t, _, _ in planted}
    pool = sorted(pair for pair in gold if pair[0] in topics)
    chosen = rng.sample(pool, min(k, len(pool)))
    marked = set(chosen) & firsts
    rows: list[tuple[int, str, bool, int | None, bool]] = [
        (t, d, again, gold[(t, d)] if not again and (t, d) in marked else None, False)
        for t, d, again in planted
    ]
    for pair in chosen:
        if pair in firsts:
            continue
        places = [i for i, row in enumerate(rows) if row[0] == pair[0]]
        at = rng.randint(places[0], places[-1] + 1)
        rows.insert(at, (pair[0], pair[1], False, gold[pair], True))
    return rows


# --- Verdicts on gold-only items ---------------------------------------------------------------


def _taken_away() -> Exception:
    # Imported here: assess.judging reaches assess.assignments, which imports this module.
    from assess.judging import ItemTakenAway

    return ItemTakenAway()


def shown_verdict(item: AssignmentItem) -> Judgment | None:
    """The assessor's current verdict on gold-only ``item``, in the shape of a judgment (never
    saved) for the judging page and the judged list, which show it as they show any verdict."""
    latest = GoldVerdict.objects.filter(item=item).order_by("-version").first()
    return _as_judgment(item, latest) if latest is not None else None


def shown_verdicts(items: Sequence[AssignmentItem]) -> dict[int, Judgment]:
    """Item pk -> its current verdict as a judgment, for gold-only ``items`` (one query)."""
    latest: dict[int, GoldVerdict] = {}
    for verdict in GoldVerdict.objects.filter(item__in=items).order_by("item_id", "version"):
        latest[verdict.item_id] = verdict
    by_pk = {item.pk: item for item in items}
    return {pk: _as_judgment(by_pk[pk], v) for pk, v in latest.items()}


def _as_judgment(item: AssignmentItem, verdict: GoldVerdict) -> Judgment:
    return Judgment(
        campaign_id=item.assignment.campaign_id,
        topic_id=item.topic_id,
        doc_id=item.doc_id,
        assessor_id=verdict.assessor_id,
        label=verdict.label,
        rubric_version_id=verdict.rubric_version_id,
        position=item.position,
        served_at=verdict.served_at,
        judged_at=verdict.judged_at,
        seconds_on_screen=verdict.seconds_on_screen,
        active_seconds=verdict.active_seconds,
        note=verdict.note,
        unreadable=verdict.unreadable,
        unsure=verdict.unsure,
        version=verdict.version,
    )


def record(
    *,
    item: AssignmentItem,
    label: int,
    rubric_pk: int | None,
    submission_id: uuid.UUID,
    expected_version: int,
    timing: Timing,
    note: str = "",
    unreadable: bool = False,
    unsure: bool = False,
    shown_token: str | None = None,
) -> Judgment:
    """Store a verdict on gold-only ``item`` (version ``expected_version`` + 1), close the item,
    and return the verdict stored in the shape of a judgment (a replayed form gets the one
    already stored). Raises what a verdict on any document raises, with nothing stored:
    StaleJudgment when the form's version is no longer the item's, SubmissionReused when the
    form was used for another document, ItemTakenAway when the item is no longer theirs; so
    the page answers exactly as it would for any document.

    On PostgreSQL one statement (as a first verdict's write, assess.judging._SUBMIT_SQL);
    elsewhere the same steps through the ORM in a transaction."""
    fields = {
        "label": label,
        "rubric_version_id": rubric_pk,
        "note": note,
        "unreadable": unreadable,
        "unsure": unsure,
        "served_at": timing.served_at,
        "seconds_on_screen": timing.seconds_on_screen,
        "active_seconds": timing.active_seconds,
        "submission_id": submission_id,
    }
    try:
        if connection.vendor == "postgresql":
            stored = _record_in_one_statement(item, expected_version, shown_token, **fields)
        else:
            stored = _record_with_orm(item, expected_version, shown_token, **fields)
    except IntegrityError:
        # The same form twice at once, or two tabs revising at once: the other one stored it.
        stored = GoldVerdict.objects.filter(submission_id=submission_id).order_by().first()
        if stored is None:
            raise StaleJudgment(shown_verdict(item)) from None
        if stored.item_id != item.pk:
            raise SubmissionReused() from None
    return _as_judgment(item, stored)


def _record_with_orm(
    item: AssignmentItem, expected: int, shown_token: str | None, **fields
) -> GoldVerdict:
    earlier = GoldVerdict.objects.filter(submission_id=fields["submission_id"]).order_by().first()
    if earlier is not None:
        if earlier.item_id != item.pk:
            raise SubmissionReused()
        return earlier
    now = timezone.now()
    with transaction.atomic():
        ours = (
            AssignmentItem.objects.select_for_update(of=("self",))
            .filter(pk=item.pk, withdrawn=False, gold_only=True)
            .values_list("gold_id", flat=True)
            .first()
        )
        if ours is None:
            raise _taken_away()
        version = GoldVerdict.objects.filter(item=item).aggregate(v=Max("version"))["v"] or 0
        if version != expected:
            raise StaleJudgment(shown_verdict(item))
        verdict = GoldVerdict.objects.create(
            item=item,
            assessor_id=item.assignment.assessor_id,
            version=version + 1,
            judged_at=now,
            **fields,
        )
        AssignmentItem.objects.filter(pk=item.pk, judgment__isnull=True).update(judgment_id=ours)
        AssignmentItem.objects.filter(pk=item.pk, first_served_at__isnull=True).update(
            first_served_at=fields["served_at"]
        )
        if shown_token:
            AssignmentItem.objects.filter(
                assignment_id=item.assignment_id, token=shown_token, first_served_at__isnull=True
            ).update(first_served_at=now)
    item.judgment_id = ours
    return verdict


# The whole write in one statement (autocommit: atomic by itself). ``ours`` locks the item while
# it is still the assessor's and this form is new; ``last`` is the item's latest version (the
# snapshot before the lock: two revisions at once collide on the unique version and the loser
# is answered as stale); ``ins`` stores the verdict when the form's version is current;
# ``closed`` links the item to its gold judgment so it counts as done; ``seen`` records when the
# document the page moved on to was first on screen. The final SELECT says what happened.
_RECORD_SQL = """
WITH ours AS (
    SELECT ai.id, ai.gold_id FROM assess_assignmentitem ai
    WHERE ai.id = %(item)s AND NOT ai.withdrawn AND ai.gold_only
      AND NOT EXISTS (SELECT 1 FROM assess_goldverdict g WHERE g.submission_id = %(sid)s)
    FOR UPDATE
), last AS (
    SELECT COALESCE(MAX(g.version), 0) AS version FROM assess_goldverdict g
    WHERE g.item_id = %(item)s
), ins AS (
    INSERT INTO assess_goldverdict (
        item_id, assessor_id, version, label, rubric_version_id, note, unreadable, unsure,
        served_at, judged_at, seconds_on_screen, active_seconds, submission_id)
    SELECT ours.id, %(assessor)s, last.version + 1, %(label)s, %(rubric_version_id)s, %(note)s,
        %(unreadable)s, %(unsure)s, %(served_at)s, %(now)s, %(seconds_on_screen)s,
        %(active_seconds)s, %(sid)s
    FROM ours, last WHERE last.version = %(expected)s
    RETURNING label, version
), closed AS (
    UPDATE assess_assignmentitem ai
    SET judgment_id = COALESCE(ai.judgment_id, ai.gold_id),
        first_served_at = COALESCE(ai.first_served_at, %(served_at)s)
    FROM ins WHERE ai.id = %(item)s
    RETURNING 1
), seen AS (
    UPDATE assess_assignmentitem s SET first_served_at = %(now)s
    WHERE s.assignment_id = %(assignment)s AND s.token = %(shown)s
      AND s.first_served_at IS NULL AND EXISTS (SELECT 1 FROM ins)
    RETURNING 1
)
SELECT (SELECT count(*) FROM ours), (SELECT label FROM ins), (SELECT version FROM ins),
    (SELECT g.item_id FROM assess_goldverdict g WHERE g.submission_id = %(sid)s),
    (SELECT count(*) FROM closed) + (SELECT count(*) FROM seen)
"""


def _record_in_one_statement(
    item: AssignmentItem, expected: int, shown_token: str | None, **fields
) -> GoldVerdict:
    sid = fields.pop("submission_id")
    now = timezone.now()
    params = {
        **fields,
        "sid": sid,
        "expected": expected,
        "assessor": item.assignment.assessor_id,
        "item": item.pk,
        "assignment": item.assignment_id,
        "shown": shown_token or "",
        "now": now,
    }
    with connection.cursor() as cursor:
        cursor.execute(_RECORD_SQL, params)
        ours, label, version, earlier_item, _ = cursor.fetchone()
    if label is not None:
        item.judgment_id = item.judgment_id or item.gold_id
        return GoldVerdict(
            item=item,
            assessor_id=item.assignment.assessor_id,
            version=version,
            judged_at=now,
            submission_id=sid,
            **fields,
        )
    if earlier_item is not None:
        if earlier_item != item.pk:
            raise SubmissionReused()
        return GoldVerdict.objects.get(submission_id=sid)
    if not ours:
        raise _taken_away()
    raise StaleJudgment(shown_verdict(item))


# --- Accuracy ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoldAccuracy:
    assessor: str
    judged: int  # gold items with a verdict
    correct: int  # verdict equal to the known label
    # Binary: both sides read with the campaign's relevance threshold (relevant or not).
    binary_correct: int
    added: int  # of ``judged``, pairs added only as gold (the rest were their work anyway)

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.judged if self.judged else None

    @property
    def binary_accuracy(self) -> float | None:
        return self.binary_correct / self.judged if self.judged else None


def accuracy(campaign: Campaign) -> list[GoldAccuracy]:
    """Per assessor with gold items judged: their current verdict against the source's current
    label (negative labels, no verdict on the scale, left out), exact and binary."""
    threshold = campaign.relevance_threshold
    items = (
        AssignmentItem.objects.filter(
            assignment__campaign=campaign, gold__isnull=False, gold__label__gte=0
        )
        .order_by()
        .values_list("pk", "assignment__assessor__name", "gold__label", "gold_only")
    )
    gold_only = {pk: (name, known) for pk, name, known, only in items if only}
    in_pool = {pk: (name, known) for pk, name, known, only in items if not only}
    verdicts: list[tuple[str, int, int, bool]] = []
    latest: dict[int, int] = {}
    for item_pk, label in (
        GoldVerdict.objects.filter(item_id__in=list(gold_only))
        .order_by("item_id", "version")
        .values_list("item_id", "label")
    ):
        latest[item_pk] = label
    for pk, label in latest.items():
        name, known = gold_only[pk]
        verdicts.append((name, known, label, True))
    # The assessor's own judgment of a gold pair that is their work (revisions included).
    own = (
        AssignmentItem.objects.filter(
            pk__in=list(in_pool), judgment__assessor_id=F("assignment__assessor_id")
        )
        .order_by()
        .values_list("pk", "judgment__label")
    )
    for pk, label in own:
        name, known = in_pool[pk]
        verdicts.append((name, known, label, False))
    by_assessor: dict[str, list[tuple[int, int, bool]]] = defaultdict(list)
    for name, known, label, only in verdicts:
        by_assessor[name].append((known, label, only))
    return [
        GoldAccuracy(
            assessor=name,
            judged=len(rows),
            correct=sum(known == label for known, label, _ in rows),
            binary_correct=sum(
                (known >= threshold) == (label >= threshold) for known, label, _ in rows
            ),
            added=sum(only for _, _, only in rows),
        )
        for name, rows in sorted(by_assessor.items())
    ]
