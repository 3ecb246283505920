"""What the agreement report reads from the judgments, and the report itself.

The database pairs the judgments and counts them (:func:`agreement_counts`: one self-join and
GROUP BY), so only confusion matrices travel, whatever the number of judgments; the statistics
are qrels.agreement's pure functions over those counts; the result is a
:class:`qrels.reports.AgreementReport`, which writes its own CSV and JSON.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection, transaction
from django.db.models import Exists, OuterRef

from campaigns.models import Assessor, Campaign, Judgment, Label
from pooljudge.common import planner_settings
from qrels.reports import AgreementReport

# Bootstrap replicates behind the 95% intervals of the per-pair page and the downloads.
BOOTSTRAP = 1000


@dataclass
class AssessorInfo:
    pk: int
    name: str
    kind: str


def judging_assessors(campaign: Campaign, *, include_imported: bool = True) -> list[AssessorInfo]:
    """The campaign's assessors with at least one label (an imported source of negative labels
    only included: agreement shows its pairs): people first, then imported sources, each by
    name. (One index probe per assessor, not a count of judgments.)"""
    verdicts = Judgment.objects.filter(assessor=OuterRef("pk"))
    assessors = (
        Assessor.objects.filter(campaign=campaign)
        .filter(Exists(verdicts))
        .values_list("pk", "name", "kind")
        .order_by()
    )
    if not include_imported:
        assessors = assessors.filter(kind=Assessor.Kind.PERSON)
    people_first = sorted(assessors, key=lambda r: (r[2] != Assessor.Kind.PERSON, r[1]))
    return [AssessorInfo(*row) for row in people_first]


def agreement_counts(
    *, campaign: Campaign, assessors: Mapping[int, str]
) -> dict[tuple[str, str], dict[str, dict[tuple[int, int], int]]]:
    """(name a, name b) -> topic id -> (a's label, b's label) -> number of pairs both labelled,
    for every two of ``assessors`` (id -> name) with a common pair, negative labels included
    (agreement counts those pairs apart). The database pairs the judgments and counts them (one
    self-join and GROUP BY), so only the confusion matrices travel, whatever the number of
    judgments."""
    if len(assessors) < 2:
        return {}
    table = connection.ops.quote_name(Judgment._meta.db_table)
    ids = sorted(assessors)
    marks = ", ".join(["%s"] * len(ids))
    # The table name is quoted by Django; every value travels as a query parameter.
    sql = (
        "SELECT j1.assessor_id, j2.assessor_id, j1.topic_id, j1.label, j2.label, COUNT(*) "  # noqa: S608
        f"FROM {table} j1 JOIN {table} j2 ON j2.campaign_id = j1.campaign_id "
        "AND j2.topic_id = j1.topic_id AND j2.doc_id = j1.doc_id "
        "AND j2.assessor_id > j1.assessor_id "
        "WHERE j1.campaign_id = %s "
        f"AND j1.assessor_id IN ({marks}) AND j2.assessor_id IN ({marks}) "
        "GROUP BY j1.assessor_id, j2.assessor_id, j1.topic_id, j1.label, j2.label"
    )
    topic_ids = dict(campaign.topics.values_list("pk", "topic_id"))
    counts: dict[tuple[str, str], dict[str, dict[tuple[int, int], int]]] = {}
    # No nested loop: on a table without planner statistics (just imported, autovacuum not
    # round yet) PostgreSQL guesses one row per assessor and probes the pair index once per
    # judgment, four times slower than the hash join it picks with statistics (issue 17).
    with (
        transaction.atomic(),
        planner_settings(enable_nestloop="off"),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql, [campaign.pk, *ids, *ids])
        rows = cursor.fetchall()
    for a, b, topic_pk, label_a, label_b, n in rows:
        pair = counts.setdefault((assessors[a], assessors[b]), {})
        pair.setdefault(topic_ids[topic_pk], {})[(label_a, label_b)] = n
    return counts


def assessor_verdicts(
    *, campaign: Campaign, names: Collection[str] | None = None
) -> dict[str, dict[tuple[str, str], int]]:
    """assessor name -> (topic id, document id) -> label, every current verdict (label >= 0) of
    the named assessors (default: all), read as tuples in one query."""
    assessors = Assessor.objects.filter(campaign=campaign)
    if names is not None:
        assessors = assessors.filter(name__in=list(names))
    by_pk = dict(assessors.values_list("pk", "name"))
    topic_ids = dict(campaign.topics.values_list("pk", "topic_id"))
    verdicts: dict[str, dict[tuple[str, str], int]] = {name: {} for name in by_pk.values()}
    rows = (
        Judgment.objects.filter(campaign=campaign, label__gte=0, assessor_id__in=list(by_pk))
        .order_by()
        .values_list("assessor_id", "topic_id", "doc_id", "label")
    )
    targets = {pk: verdicts[name] for pk, name in by_pk.items()}
    for assessor_id, topic_pk, doc_id, label in rows.iterator(chunk_size=20_000):
        targets[assessor_id][(topic_ids[topic_pk], doc_id)] = label
    return {name: given for name, given in verdicts.items() if given}


def scale_labels(campaign: Campaign, seen: Iterable[int] = ()) -> list[int]:
    """The labels >= 0 of every rubric version of the campaign, and any other label seen."""
    values = set(
        Label.objects.filter(rubric__campaign=campaign, value__gte=0).values_list(
            "value", flat=True
        )
    )
    return sorted(values | {label for label in seen if label >= 0})


def agreement_data(
    *,
    campaign: Campaign,
    assessors: Sequence[str] | None = None,
    binary: bool = False,
    bootstrap: int = 0,
) -> AgreementReport:
    """Pairwise agreement between ``assessors`` (names; default every assessor with a verdict,
    people first) and, when three or more overlap, the group statistics. Pairs without a common
    judged pair are absent. Raises ValueError naming an assessor without verdicts."""
    # numpy and krippendorff: loaded by the first report, not by every web process
    from qrels import agreement

    known = {a.name: a for a in judging_assessors(campaign)}
    chosen = list(known) if assessors is None else list(dict.fromkeys(assessors))
    missing = [name for name in chosen if name not in known]
    if missing:
        raise ValueError(
            f"No judgments by {', '.join(map(repr, missing))} in this campaign; assessors with "
            f"judgments: {', '.join(known) or 'none'}."
        )
    counts = agreement_counts(
        campaign=campaign, assessors={known[name].pk: name for name in chosen}
    )
    seen = {
        label
        for topics in counts.values()
        for labels in topics.values()
        for pair in labels
        for label in pair
    }
    scale = scale_labels(campaign, seen)
    threshold = campaign.relevance_threshold
    pairs = agreement.pairwise_from_counts(
        counts,
        labels=scale,
        threshold=threshold,
        binary=binary,
        bootstrap=bootstrap,
        assessors=chosen,
    )
    group = None
    if len(chosen) >= 3 and len({name for pair in counts for name in pair}) >= 3:
        verdicts = assessor_verdicts(campaign=campaign, names=chosen)
        group = agreement.group_agreement(
            verdicts, labels=scale, threshold=threshold, binary=binary
        )
    return AgreementReport(
        assessors=tuple(chosen),
        labels=(0, 1) if binary else tuple(scale),
        scale=tuple(scale),
        threshold=threshold,
        binary=binary,
        pairs=tuple(pairs),
        group=group,
        kinds={name: known[name].kind for name in chosen},
        small_n=agreement.SMALL_N,
        computed_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    )
