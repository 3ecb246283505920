"""Revising any time: an assessor's own judged documents of a topic, each a way back to the
judging screen on that document, and the links to those lists from the assignment page and the
done panel.

Only the assessor's own verdicts are read here (through their assignment's items), and nothing
about a document's origin: the lists name documents by title and by their place in the
assessor's order, never by run, rank, score or another assessor's label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Exists, OuterRef, Q
from django.urls import reverse

from assess import gold
from assess.models import Assignment, AssignmentItem, Skip
from campaigns.models import Document, Label, RubricVersion, Topic

PAGE_SIZE = 100


@dataclass(frozen=True)
class JudgedRow:
    """One of the assessor's judged documents, as the revise list shows it."""

    item: AssignmentItem
    title: str
    label_value: int
    label_name: str
    judged_at: datetime
    revised: bool
    unsure: bool
    unreadable: bool
    has_note: bool
    url: str


@dataclass(frozen=True)
class TopicLink:
    """A topic of an assignment, with what the assessor did in it and where its list is."""

    topic: Topic
    judged: int
    total: int
    skipped: int  # skipped and not judged yet
    url: str


def judged_url(assignment: Assignment, topic: Topic) -> str:
    return reverse("assess:judged", args=[assignment.campaign.slug, assignment.token, topic.pk])


def judge_url(assignment: Assignment, item: AssignmentItem) -> str:
    return reverse("assess:judge", args=[assignment.campaign.slug, assignment.token, item.token])


def label_names(
    campaign_id: int, versions: set[int | None], *, current: RubricVersion | None
) -> dict[tuple[int | None, int], str]:
    """(rubric version pk, label value) -> label name, for the versions a page's judgments were
    made with and the current one (one query). A judgment is named by the version its assessor
    was shown; values missing there are named by the current version."""
    wanted = {v for v in versions if v is not None} | ({current.pk} if current else set())
    names: dict[tuple[int | None, int], str] = {}
    rows = Label.objects.filter(rubric_id__in=wanted, rubric__campaign_id=campaign_id).order_by()
    for rubric_id, value, name in rows.values_list("rubric_id", "value", "name"):
        names[(rubric_id, value)] = name
        if current is not None and rubric_id == current.pk:
            names[(None, value)] = name
    return names


def judged_rows(
    assignment: Assignment, topic: Topic, items: Sequence[AssignmentItem]
) -> list[JudgedRow]:
    """The rows for ``items`` (judged items of the assignment with their judgment loaded)."""
    items = list(items)
    gold_only = [item for item in items if item.gold_only]
    if gold_only:
        verdicts = gold.shown_verdicts(gold_only)
        for item in gold_only:
            item.judgment = verdicts.get(item.pk)
        items = [item for item in items if item.judgment is not None]
    titles = dict(
        Document.objects.filter(
            campaign_id=assignment.campaign_id, doc_id__in={item.doc_id for item in items}
        )
        .order_by()
        .values_list("doc_id", "title")
    )
    current = assignment.campaign.current_rubric()
    names = label_names(
        assignment.campaign_id,
        {item.judgment.rubric_version_id for item in items},
        current=current,
    )
    rows = []
    for item in items:
        judgment = item.judgment
        name = names.get((judgment.rubric_version_id, judgment.label)) or names.get(
            (None, judgment.label), ""
        )
        rows.append(
            JudgedRow(
                item=item,
                title=titles.get(item.doc_id, ""),
                label_value=judgment.label,
                label_name=name,
                judged_at=judgment.judged_at,
                revised=judgment.version > 1,
                unsure=judgment.unsure,
                unreadable=judgment.unreadable,
                has_note=bool(judgment.note),
                url=judge_url(assignment, item),
            )
        )
    return rows


def judged_items(assignment: Assignment, topic: Topic):
    """The assignment's judged items of ``topic`` in the assessor's order, judgments loaded.

    Items taken away after they were judged stay: the verdict is still the assessor's own to
    revise."""
    return (
        # Their own verdicts only (blindness, issue 20): never another assessor's or a model's;
        # a planted repeat is the same document again: listed once, as first served.
        # A gold-only item is listed with the assessor's own verdict on it (judged_rows), as
        # any judged document: never with the known label its item is linked to.
        assignment.items.filter(topic=topic, judgment__isnull=False, repeat_of__isnull=True)
        .filter(Q(judgment__assessor_id=assignment.assessor_id) | Q(gold_only=True))
        .select_related("judgment")
        .order_by("position")
    )


def topic_links(assignment: Assignment, *, progress: Sequence | None = None) -> list[TopicLink]:
    """Per topic of the assignment: judged and total (``progress``, a list of
    assess.judging.TopicProgress, when the caller already has it), skipped and not judged yet,
    and the URL of the revise list. Two queries (one when ``progress`` is given)."""
    if progress is None:
        from assess.judging import progress as topic_progress

        progress = topic_progress(assignment)
    skipped = dict(
        assignment.items.filter(judgment__isnull=True, withdrawn=False)
        .filter(Exists(Skip.objects.filter(item=OuterRef("pk"))))
        .order_by()
        .values_list("topic_id")
        .annotate(n=Count("pk"))
    )
    return [
        TopicLink(
            topic=entry.topic,
            judged=entry.judged,
            total=entry.total,
            skipped=skipped.get(entry.topic.pk, 0),
            url=judged_url(assignment, entry.topic),
        )
        for entry in progress
    ]
