"""A document as organisers look it up (the Documents page): every verdict anyone gave it, under
every topic, with each verdict's whole history.

Organisers and adjudicators only: this shows every assessor's labels side by side, which
blinding forbids an assessor to see (campaigns.access.ADJUDICATING).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, OuterRef, Prefetch, Subquery

from campaigns.models import Assessor, Campaign, Judgment, JudgmentRevision, Label, Topic
from pooling.models import PoolEntry

# The kinds in the order a document's verdicts are listed under a topic: people, then imported
# sources, then models, then the adjudicated label that settles them.
KIND_ORDER = {
    Assessor.Kind.PERSON: 0,
    Assessor.Kind.IMPORTED: 1,
    Assessor.Kind.MODEL: 2,
    Assessor.Kind.ADJUDICATED: 3,
}


@dataclass(frozen=True)
class Revision:
    """One earlier verdict of a judgment (the current one is the judgment itself)."""

    version: int
    label: int
    note: str
    unsure: bool
    unreadable: bool
    judged_at: datetime
    by: str  # who gave it, for an adjudicated label; "" for an assessor's own verdict


@dataclass(frozen=True)
class DocumentVerdict:
    """One assessor's current verdict on the document under one topic, and what came before."""

    assessor: str
    kind: str
    label: int
    name: str  # the label's name in the rubric the verdict was given under
    note: str
    unsure: bool
    unreadable: bool
    seconds_on_screen: float | None
    active_seconds: float | None
    position: int | None
    judged_at: datetime
    first_judged_at: datetime
    version: int
    source: str
    by: str  # for an adjudicated label: who settled it last
    earlier: list[Revision]


@dataclass
class TopicVerdicts:
    topic: Topic
    verdicts: list[DocumentVerdict] = field(default_factory=list)

    @property
    def adjudicated(self) -> DocumentVerdict | None:
        return next((v for v in self.verdicts if v.kind == Assessor.Kind.ADJUDICATED), None)

    @property
    def labels_given(self) -> list[int]:
        """The distinct labels of the verdicts that agreement compares (people's, imported)."""
        return sorted(
            {
                v.label
                for v in self.verdicts
                if v.kind in (Assessor.Kind.PERSON, Assessor.Kind.IMPORTED)
            }
        )


def document_verdicts(*, campaign: Campaign, doc_id: str) -> list[TopicVerdicts]:
    """Every verdict on ``doc_id`` in ``campaign``, grouped by topic (topic-file order), each
    topic's verdicts people first, then imported sources, models and the adjudicated label, by
    name; every verdict with its earlier revisions, newest first. Two queries, whatever the
    number of verdicts and revisions."""
    name = Label.objects.filter(rubric=OuterRef("rubric_version"), value=OuterRef("label"))
    earlier = JudgmentRevision.objects.select_related("by").order_by("-version")
    judgments = (
        Judgment.objects.filter(campaign=campaign, doc_id=doc_id)
        .select_related("assessor", "topic")
        .annotate(label_name=Subquery(name.values("name")[:1]))
        .prefetch_related(Prefetch("revisions", queryset=earlier, to_attr="history"))
        .order_by()
    )
    by_topic: dict[int, TopicVerdicts] = {}
    for j in judgments:
        history = j.history  # newest first; the first is the current verdict itself
        by_topic.setdefault(j.topic_id, TopicVerdicts(topic=j.topic)).verdicts.append(
            DocumentVerdict(
                assessor=j.assessor.name,
                kind=j.assessor.kind,
                label=j.label,
                name=j.label_name or "",
                note=j.note,
                unsure=j.unsure,
                unreadable=j.unreadable,
                seconds_on_screen=j.seconds_on_screen,
                active_seconds=j.active_seconds,
                position=j.position,
                judged_at=j.judged_at,
                first_judged_at=j.first_judged_at,
                version=j.version,
                source=j.source,
                by=_username(history[0].by) if history and history[0].version == j.version else "",
                earlier=[
                    Revision(
                        version=r.version,
                        label=r.label,
                        note=r.note,
                        unsure=r.unsure,
                        unreadable=r.unreadable,
                        judged_at=r.judged_at,
                        by=_username(r.by),
                    )
                    for r in history
                    if r.version != j.version
                ],
            )
        )
    groups = sorted(by_topic.values(), key=lambda g: (g.topic.position, g.topic.topic_id))
    for group in groups:
        group.verdicts.sort(key=lambda v: (KIND_ORDER.get(v.kind, 9), v.assessor))
    return groups


def _username(user) -> str:
    return user.get_username() if user is not None else ""


def pooled_topics(*, campaign: Campaign, doc_id: str) -> list[Topic]:
    """The topics whose pools (any version) hold the document, in topic-file order: one query."""
    topic_ids = PoolEntry.objects.filter(pool__campaign=campaign, doc_id=doc_id).values("topic_id")
    return list(Topic.objects.filter(pk__in=topic_ids).order_by("position", "topic_id"))


def judgment_counts(*, campaign: Campaign, doc_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """doc id -> (verdicts, topics) of the given documents (a page of search results): every
    kind of verdict counted; one query."""
    if not doc_ids:
        return {}
    rows = (
        Judgment.objects.filter(campaign=campaign, doc_id__in=list(doc_ids))
        .values("doc_id")
        .annotate(n=Count("pk"), topics=Count("topic", distinct=True))
        .values_list("doc_id", "n", "topics")
        .order_by()
    )
    return {doc_id: (n, topics) for doc_id, n, topics in rows}
