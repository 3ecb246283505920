"""Reveal after deciding (issue 20): once an assessor's own verdict on a pair exists, a
campaign that asks for it (``Campaign.reveal_models``) shows them the label each model gave the
pair, never before.

What is blind and what is not:

- Only models' labels are read (assessors of kind ``model``): never another person's, never an
  imported source's. They are shown only for an item whose judgment is the assessor's own (the
  judging scope joins the judgment on the assignment's assessor): on the page of a judged
  document, and in the answer to the verdict that judged it (the screen shows it beside the
  next document). A page of a document the assessor has not judged never carries them.
- A revision made while the campaign reveals, on a pair a model has labelled, is stored flagged
  ``post_reveal`` (campaigns.JudgmentRevision), in the verdict's own write: every page a judged
  document can be revised from showed the label, so the flag marks the verdicts the assessor
  may have made knowing it. Agreement figures read the label before the first post-reveal
  revision (qrels.queries.blind_label); qrels read the current label (the bundle README says
  how many are post-reveal).

Cost on the judging round trip: no statement, on or off. The models' labels on the item's pair
come with the judging scope's one query (:data:`SCOPE_COLUMN`, a subquery that the campaign's
switch turns off: nothing is read when it is off), and the flag is a column of the verdict's
write (assess.judging.submit). With the reveal on, the read is a probe per model assessor of the
campaign; on tables whose statistics predate their rows (a bulk import before autovacuum) the
planner may walk the pair's topic's judgments instead (a few hundred rows on a large topic),
until ANALYZE runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from assess.models import Assignment, AssignmentItem, ModelConfig
from campaigns.models import Assessor, Campaign, Judgment, Label


@dataclass(frozen=True)
class RevealedLabel:
    """One model's label on a pair, as the judging screen shows it after the verdict."""

    assessor: str  # the model assessor's name (one per configuration, or an imported model)
    model: str  # the configuration's model name; "" for imported model labels
    configuration: str  # the configuration's fingerprint, 12 characters; "" when imported
    value: int
    name: str = ""  # the label's name on the current scale (the value when it left the scale)


@dataclass(frozen=True)
class Reveal:
    """What a verdict's answer reveals: the models' labels on the pair, and whether the verdict
    just stored was flagged post-reveal."""

    labels: list[RevealedLabel]
    post_reveal: bool


def _scope_column() -> str:
    judgments = Judgment._meta.db_table
    assessors = Assessor._meta.db_table
    configs = ModelConfig._meta.db_table
    model = Assessor.Kind.MODEL.value
    # ``c`` and ``ai`` are the scope's campaign and assignment item (assess.judging._SCOPE_SQL).
    # CASE, not a condition inside the subquery: a campaign that does not reveal never runs it.
    # From the campaign's model assessors (a few) to each one's verdict on the pair by the
    # unique (assessor, topic, document) key: a probe per model, never a walk of the topic's
    # judgments, whatever the planner's statistics say (tests/assess/test_reveal.py).
    if connection.vendor == "postgresql":
        return f"""CASE WHEN c.reveal_models THEN (
        SELECT json_agg(json_build_array(s.name, mc.model, mc.fingerprint, m.label))
        FROM {assessors} s
        CROSS JOIN LATERAL (SELECT j2.label FROM {judgments} j2 WHERE j2.assessor_id = s.id
                            AND j2.topic_id = ai.topic_id AND j2.doc_id = ai.doc_id) m
        LEFT JOIN {configs} mc ON mc.assessor_id = s.id
        WHERE s.campaign_id = c.id AND s.kind = '{model}') END"""  # noqa: S608 - model names
    return f"""CASE WHEN c.reveal_models = 1 THEN (
        SELECT json_group_array(json_array(s.name, mc.model, mc.fingerprint, m.label))
        FROM {assessors} s
        JOIN {judgments} m ON m.assessor_id = s.id AND m.topic_id = ai.topic_id
                          AND m.doc_id = ai.doc_id
        LEFT JOIN {configs} mc ON mc.assessor_id = s.id
        WHERE s.campaign_id = c.id AND s.kind = '{model}') END"""  # noqa: S608 - model names


# One column of the judging scope's query: the models' labels on the item's pair as a JSON
# array of [assessor, model, fingerprint, label], when the campaign reveals; NULL otherwise.
SCOPE_COLUMN = _scope_column()


def from_scope(value: Any) -> list[RevealedLabel] | None:
    """The scope column read back: None when the campaign does not reveal, else the labels
    (unnamed: the view names them on the scale it shows)."""
    if value is None:
        return None
    rows = json.loads(value) if isinstance(value, str) else value
    return sorted(
        (
            RevealedLabel(
                assessor=assessor,
                model=model or "",
                configuration=(fingerprint or "")[:12],
                value=label,
            )
            for assessor, model, fingerprint, label in rows
        ),
        key=lambda r: r.assessor,
    )


def _named(found: list[RevealedLabel], labels: Sequence[Label]) -> list[RevealedLabel]:
    names = {label.value: label.name for label in labels}
    return [
        RevealedLabel(
            r.assessor, r.model, r.configuration, r.value, names.get(r.value, str(r.value))
        )
        for r in found
    ]


def model_labels(*, campaign: Campaign, item: AssignmentItem) -> list[RevealedLabel]:
    """Every model's label on ``item``'s pair (from the scope when it read them, else one
    query; the campaign reveals). Callers show them only once the pair is judged."""
    found = getattr(item, "revealable", None)
    if found is not None:
        return found
    rows = (
        Judgment.objects.filter(
            campaign=campaign,
            topic_id=item.topic_id,
            doc_id=item.doc_id,
            assessor__kind=Assessor.Kind.MODEL,
        )
        .order_by()
        .values_list(
            "assessor__name",
            "assessor__model_config__model",
            "assessor__model_config__fingerprint",
            "label",
        )
    )
    return from_scope([list(row) for row in rows]) or []


def _own_judgment(assignment: Assignment, item: AssignmentItem) -> Judgment | None:
    judgment = item.judgment
    if judgment is None or judgment.assessor_id != assignment.assessor_id:
        return None
    return judgment


def panel_context(
    *, assignment: Assignment, item: AssignmentItem, labels: Sequence[Label]
) -> dict[str, object]:
    """The judging panel's reveal: ``{"reveal": [...]}`` for a document the assessor has judged
    in a revealing campaign, else nothing (and no query)."""
    if not assignment.campaign.reveal_models or _own_judgment(assignment, item) is None:
        return {}
    return {"reveal": _named(model_labels(campaign=assignment.campaign, item=item), labels)}


def post_reveal(assignment: Assignment, item: AssignmentItem) -> bool:
    """Whether a verdict on ``item`` now would be made after a reveal: the campaign reveals, the
    assessor's own verdict on the pair exists (so the screen showed the models' labels), and a
    model labelled the pair. The write flags it only when it is a revision."""
    if not assignment.campaign.reveal_models or _own_judgment(assignment, item) is None:
        return False
    return bool(model_labels(campaign=assignment.campaign, item=item))


def after_verdict(
    *, assignment: Assignment, item: AssignmentItem, flagged: bool, labels: Sequence[Label]
) -> Reveal | None:
    """The reveal for the answer to a verdict just stored on ``item`` (``flagged``: stored as a
    post-reveal revision): None when the campaign does not reveal. No query: the labels came
    with the scope."""
    if not assignment.campaign.reveal_models:
        return None
    found = _named(model_labels(campaign=assignment.campaign, item=item), labels)
    return Reveal(labels=found, post_reveal=flagged)
