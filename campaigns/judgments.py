"""Recording verdicts: never lost, never silently overwritten, never recorded twice.

Every verdict is a new :class:`JudgmentRevision` (append-only); the :class:`Judgment` row holds the
current one. A form carries a one-time ``submission_id`` (a double click, an htmx retry or a
back-button resubmission finds its verdict already stored and records nothing more) and the
judgment ``version`` it was rendered with (a revision made from a stale tab is refused, not
applied over a newer verdict).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from campaigns.models import Assessor, Judgment, JudgmentRevision, RubricVersion, Topic


class StaleJudgment(Exception):
    """The pair was judged (or revised) elsewhere since this form was shown."""

    def __init__(self, current: Judgment | None):
        super().__init__("The judgment changed since this page was shown.")
        self.current = current


class InvalidLabel(ValueError):
    pass


# Word for word the same wherever a form's id is refused (a planted repeat's page included: a
# different word would tell a repeat from a first serve).
REUSED_MESSAGE = "This form was already used for another document."


class SubmissionReused(ValueError):
    """The form's one-time submission id was already used for another (assessor, document):
    replaying it must not make a second document look judged."""

    def __init__(self) -> None:
        super().__init__(REUSED_MESSAGE)


def _stored(submission_id: uuid.UUID, *, assessor: Assessor, topic: Topic, doc_id: str):
    """The judgment this submission already recorded, or None. A submission id is bound to the
    (assessor, topic, document) it was first used for: found on any other, it is refused."""
    done = (
        JudgmentRevision.objects.filter(submission_id=submission_id)
        .select_related("judgment")
        .order_by()
        .first()
    )
    if done is None:
        return None
    judgment = done.judgment
    if (judgment.assessor_id, judgment.topic_id, judgment.doc_id) != (
        assessor.pk,
        topic.pk,
        doc_id,
    ):
        raise SubmissionReused()
    return judgment


@dataclass(frozen=True)
class Timing:
    served_at: datetime | None = None
    seconds_on_screen: float | None = None
    active_seconds: float | None = None


def record_judgment(
    *,
    assessor: Assessor,
    topic: Topic,
    doc_id: str,
    label: int,
    rubric_version: RubricVersion | None,
    submission_id: uuid.UUID | None = None,
    expected_version: int | None = None,
    timing: Timing = Timing(),
    position: int | None = None,
    note: str = "",
    unreadable: bool = False,
    unsure: bool = False,
    check_label: bool = True,
    by=None,
    post_reveal: bool = False,
) -> tuple[Judgment, bool]:
    """Store ``label`` as ``assessor``'s verdict on (topic, doc_id).

    Returns (judgment, recorded): recorded is False when this submission was already stored
    (for this pair; used on another pair it raises SubmissionReused).
    ``expected_version`` is the judgment's version when the form was shown (0: not judged yet);
    None skips the check. Raises StaleJudgment when it no longer matches, InvalidLabel when the
    label is not on the rubric shown (unless the caller checked it: ``check_label`` False).
    ``by``: the user who gave the verdict when ``assessor`` is not their own identity (an
    adjudicated label), kept on the revision. ``post_reveal``: the assessor was shown a model's
    label on the pair (assess/reveal.py); a revision (not a first verdict) is flagged so."""
    if (
        check_label
        and rubric_version is not None
        and not rubric_version.labels.filter(value=label).exists()
    ):
        raise InvalidLabel(f"{label} is not a label of rubric version {rubric_version.number}.")
    if submission_id is not None:
        done = _stored(submission_id, assessor=assessor, topic=topic, doc_id=doc_id)
        if done is not None:
            return done, False
    now = timezone.now()
    try:
        with transaction.atomic():
            judgment = (
                # of=("self",) and no ordering: the lock takes this judgment's row only, never
                # the campaign, topic or assessor rows a default-ordering join would drag in
                # (they would serialise every assessor of the campaign behind one revision).
                Judgment.objects.select_for_update(of=("self",))
                .filter(assessor=assessor, topic=topic, doc_id=doc_id)
                .order_by()
                .first()
            )
            if judgment is None:
                if expected_version not in (None, 0):
                    raise StaleJudgment(None)
                judgment = Judgment(
                    campaign_id=assessor.campaign_id,
                    topic=topic,
                    doc_id=doc_id,
                    assessor=assessor,
                    first_judged_at=now,
                    version=1,
                )
            else:
                if expected_version is not None and expected_version != judgment.version:
                    raise StaleJudgment(judgment)
                judgment.version += 1
            judgment.label = label
            judgment.rubric_version = rubric_version
            judgment.judged_at = now
            judgment.served_at = timing.served_at
            judgment.seconds_on_screen = timing.seconds_on_screen
            judgment.active_seconds = timing.active_seconds
            judgment.note = note
            judgment.unreadable = unreadable
            judgment.unsure = unsure
            if position is not None:
                judgment.position = position
            judgment.source = Judgment.Source.JUDGED
            judgment.save()
            JudgmentRevision.objects.create(
                judgment=judgment,
                version=judgment.version,
                label=label,
                rubric_version=rubric_version,
                served_at=timing.served_at,
                judged_at=now,
                seconds_on_screen=timing.seconds_on_screen,
                active_seconds=timing.active_seconds,
                note=note,
                unreadable=unreadable,
                unsure=unsure,
                submission_id=submission_id,
                by=by,
                post_reveal=post_reveal and judgment.version > 1,
            )
    except (IntegrityError, StaleJudgment) as exc:
        # A concurrent request won the race: the same submission (then it is stored, once), or
        # a verdict from another tab (then this one is stale). The same submission can also have
        # committed between the check above and the row lock: it is found here, not refused.
        if submission_id is not None:
            done = _stored(submission_id, assessor=assessor, topic=topic, doc_id=doc_id)
            if done is not None:
                return done, False
        if isinstance(exc, StaleJudgment):
            raise
        raise StaleJudgment(
            Judgment.objects.filter(assessor=assessor, topic=topic, doc_id=doc_id)
            .order_by()
            .first()
        ) from None
    return judgment, True
