"""What the reports read from the database, besides the qrels themselves (qrels.policies,
qrels.sources.load_qrels): the stored runs, a campaign's size and fingerprint, the order of
its topics, and, for agreement, the assessors who judged and their labels paired in SQL.

Reading is built for speed, because a campaign of 150 runs x 1,000 documents x 200 topics is 30M
(document, score) pairs: stored runs come from :class:`~pooling.models.RunTopic` rows through
``values_list`` (no model instances) and each topic's packed float64 scores are decoded with one
``numpy.frombuffer``. Judgments for agreement come the same way, one ``values_list`` over the
campaign's current verdicts, or tallied by the database (:func:`agreement_counts`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Exists, Max, OuterRef, Q, Subquery, Sum

from campaigns.models import Assessor, Campaign, Judgment, Label, Topic
from pooling.models import Run, RunTopic
from pooljudge.common import ProgressFn, natural_key, no_progress, planner_settings

Runs = dict[str, dict[str, dict[str, float]]]


# --- Stored runs ---------------------------------------------------------------------------------


def stored_runs(*, runs: Iterable[Run], progress: ProgressFn = no_progress) -> Runs:
    """run tag -> topic id -> document id -> score, for ``runs`` (in their order).

    One query for the RunTopic rows as tuples; the scores are the packed float64 of the import
    (``numpy.frombuffer``, no copy until ``tolist``), so the values are bit for bit those a
    parser of the run file gives. Two runs with one tag (a superseded one and its successor)
    cannot both be passed: the caller picks."""
    run_list = list(runs)
    tags = {run.pk: run.tag for run in run_list}
    if len(set(tags.values())) != len(tags):
        raise ValueError("two of the runs share a tag")
    result: Runs = {run.tag: {} for run in run_list}
    if not run_list:
        return result
    campaign_ids = {run.campaign_id for run in run_list}
    topic_ids = dict(
        Topic.objects.filter(campaign_id__in=campaign_ids).values_list("pk", "topic_id")
    )
    rows = (
        RunTopic.objects.filter(run_id__in=list(tags))
        .order_by()
        .values_list("run_id", "topic_id", "docids", "scores")
    )
    total = len(tags)
    seen: set[int] = set()
    import numpy as np  # here, not at the top: a web process loads this module for its pages

    frombuffer, float64 = np.frombuffer, np.float64
    for run_id, topic_pk, docids, scores in rows.iterator(chunk_size=500):
        if not docids:
            continue
        result[tags[run_id]][topic_ids[topic_pk]] = dict(
            zip(docids.split("\n"), frombuffer(scores, float64).tolist(), strict=True)
        )
        if run_id not in seen:
            seen.add(run_id)
            progress(len(seen), total, "reading runs")
    return result


# Ranked documents of the runs one batch of stored_run_batches holds (a batch has one run at
# least): the 143 TREC-COVID round-1 runs (3.5M documents) come in about 14 batches, and scoring
# them holds about a tenth of them at a time (bench/memory.py).
BATCH_DOCUMENTS = 250_000


def stored_run_batches(
    *, runs: Sequence[Run], progress: ProgressFn = no_progress, documents: int | None = None
) -> Iterator[Runs]:
    """:func:`stored_runs` for ``runs`` a few at a time (in their order), each batch holding
    about ``documents`` (default BATCH_DOCUMENTS) ranked documents, so that scoring every run
    needs the memory of a batch, not of them all."""
    documents = BATCH_DOCUMENTS if documents is None else documents
    lengths = dict(
        RunTopic.objects.filter(run__in=[run.pk for run in runs])
        .values("run")
        .annotate(n=Sum("length"))
        .values_list("run", "n")
        .order_by()
    )
    batch: list[Run] = []
    size = done = 0
    for run in runs:
        length = lengths.get(run.pk) or 0
        if batch and size + length > documents:
            yield stored_runs(runs=batch)
            done += len(batch)
            progress(done, len(runs), "scoring runs")
            batch, size = [], 0
        batch.append(run)
        size += length
    if batch:
        yield stored_runs(runs=batch)
        progress(done + len(batch), len(runs), "scoring runs")


def ranked_documents(campaign: Campaign) -> int:
    """How many (topic, document) lines the campaign's current runs hold: the size of a report."""
    return (
        RunTopic.objects.filter(run__campaign=campaign, run__superseded_at__isnull=True).aggregate(
            n=Sum("length")
        )["n"]
        or 0
    )


def fingerprint(campaign: Campaign) -> str:
    """Changes whenever anything a report reads changes: a judgment made or revised, a run
    imported or replaced, a pool built, the relevance threshold. Cached job results carry it."""
    judged = Judgment.objects.filter(campaign=campaign).aggregate(
        n=Count("pk"), last=Max("judged_at"), top=Max("pk"), versions=Sum("version")
    )
    runs = campaign.runs.aggregate(
        n=Count("pk"), top=Max("pk"), gone=Count("pk", filter=Q(superseded_at__isnull=False))
    )
    pools = campaign.pools.aggregate(n=Count("pk"), built=Max("built_at"))
    parts = [
        judged["n"],
        judged["top"],
        judged["versions"],
        judged["last"].isoformat() if judged["last"] else "",
        runs["n"],
        runs["top"],
        runs["gone"],
        pools["n"],
        pools["built"].isoformat() if pools["built"] else "",
        campaign.relevance_threshold,
    ]
    return "|".join("" if part is None else str(part) for part in parts)


def current_runs(campaign: Campaign) -> list[Run]:
    return list(campaign.runs.current().order_by("tag"))


def topic_order(campaign: Campaign, topics: Collection[str]) -> list[str]:
    """``topics`` in the campaign's topic-file order; ids the campaign lacks come last, in
    natural order."""
    position = dict(campaign.topics.values_list("topic_id", "position"))
    return sorted(topics, key=lambda t: (t not in position, position.get(t, 0), natural_key(t)))


# --- Assessors and their labels, for agreement ------------------------------------------------


@dataclass
class AssessorInfo:
    pk: int
    name: str
    kind: str


def judging_assessors(campaign: Campaign, *, include_imported: bool = True) -> list[AssessorInfo]:
    """The campaign's assessors with at least one label (an imported source of negative labels
    only included: agreement shows its pairs): people first, then imported sources, then
    models, each by name. Adjudicated labels are the campaign's answer, not an assessor's
    verdict, so they are never compared. (One index probe per assessor, not a count of
    judgments.)"""
    verdicts = Judgment.objects.filter(assessor=OuterRef("pk"))
    assessors = (
        # Adjudicated labels are no assessor's verdicts: agreement never pairs them (an
        # adjudication must leave every agreement figure as it was). Models' labels are paired,
        # and reported apart (qrels.reports.COMPARISON_TITLES).
        Assessor.objects.filter(campaign=campaign)
        .filter(Exists(verdicts))
        # Filled labels sit on pairs nobody else judged but the model they calibrate: pairing
        # them would only measure the calibration.
        .exclude(kind__in=(Assessor.Kind.ADJUDICATED, Assessor.Kind.FILLED))
        .values_list("pk", "name", "kind")
        .order_by()
    )
    if not include_imported:
        assessors = assessors.filter(kind=Assessor.Kind.PERSON)
    order = {Assessor.Kind.PERSON: 0, Assessor.Kind.IMPORTED: 1, Assessor.Kind.MODEL: 2}
    people_first = sorted(assessors, key=lambda r: (order.get(r[2], 3), r[1]))
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
    the named assessors (default: all but the adjudicated labels), read as tuples in one
    query."""
    assessors = Assessor.objects.filter(campaign=campaign).exclude(
        kind__in=(Assessor.Kind.ADJUDICATED, Assessor.Kind.FILLED)
    )
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


# --- The pairs behind an agreement count ----------------------------------------------------


@dataclass(frozen=True)
class PairFilter:
    """Which of the pairs two assessors both judged (labels >= 0, as the confusion matrix
    counts them) to list: ``a_label``/``b_label`` pick a confusion cell (a row, a column or
    one cell), ``topic`` a topic id, ``distance`` the pairs whose labels are at least that far
    apart. With ``binary`` every label is first made 0 or 1 (1 from ``threshold``), as the
    binary confusion matrix counts it. ``show`` "same" keeps the pairs given the same label
    (a topic's "same label" count); "negative" lists instead the pairs both labelled with a
    negative label on one side or both, which no agreement figure counts (the "+N" beside
    them)."""

    binary: bool = False
    show: str = ""
    threshold: int = 1
    a_label: int | None = None
    b_label: int | None = None
    topic: str | None = None
    distance: int | None = None


@dataclass(frozen=True)
class Verdict:
    label: int
    name: str  # the label's name in the rubric version shown, else in the current one
    note: str
    unsure: bool
    unreadable: bool
    seconds_on_screen: float | None
    active_seconds: float | None
    judged_at: Any
    source: str  # the assessor's kind (person, imported, model), as the sidecar's column says


@dataclass(frozen=True)
class JudgedPair:
    topic_pk: int
    topic: str
    title: str
    doc_id: str
    a: Verdict
    b: Verdict

    @property
    def distance(self) -> int:
        return abs(self.a.label - self.b.label)


@dataclass(frozen=True)
class PairPage:
    total: int  # pairs that pass the filter, on every page
    pairs: list[JudgedPair]


def pairs_both_judged(
    *,
    campaign: Campaign,
    a: int,
    b: int,
    where: PairFilter,
    limit: int,
    offset: int = 0,
    label_names: Mapping[int, str] | None = None,
) -> PairPage:
    """The (topic, document) pairs assessors ``a`` and ``b`` (ids) both labelled that pass
    ``where``, in topic order then document id, ``limit`` from ``offset``, with both verdicts.

    Two queries whatever the number of pairs: the database pairs, filters, counts and pages
    the judgments (one self-join with a window count), then the page's judgments are read with
    their topic and label names. ``label_names`` (value -> name) names the labels of verdicts
    given without a rubric version (imported qrels)."""
    table = connection.ops.quote_name(Judgment._meta.db_table)
    topics = connection.ops.quote_name(Topic._meta.db_table)
    params: list[Any] = []

    def value(alias: str) -> str:
        if not where.binary:
            return f"{alias}.label"
        params.append(where.threshold)
        return f"(CASE WHEN {alias}.label >= %s THEN 1 ELSE 0 END)"

    conditions = ["j1.campaign_id = %s", "j1.assessor_id = %s", "j2.assessor_id = %s"]
    params.extend([campaign.pk, a, b])
    if where.show == "negative":
        conditions.append("(j1.label < 0 OR j2.label < 0)")
    else:
        conditions += ["j1.label >= 0", "j2.label >= 0"]
    if where.show == "same":
        left, right = value("j1"), value("j2")
        conditions.append(f"{left} = {right}")
    if where.a_label is not None:
        conditions.append(f"{value('j1')} = %s")
        params.append(where.a_label)
    if where.b_label is not None:
        conditions.append(f"{value('j2')} = %s")
        params.append(where.b_label)
    if where.topic is not None:
        conditions.append("t.topic_id = %s")
        params.append(where.topic)
    if where.distance:
        left, right = value("j1"), value("j2")
        conditions.append(f"ABS({left} - {right}) >= %s")
        params.append(where.distance)
    # The table names are quoted by Django; every value travels as a query parameter.
    sql = (
        "SELECT j1.id, j2.id, COUNT(*) OVER () "  # noqa: S608
        f"FROM {table} j1 JOIN {table} j2 ON j2.campaign_id = j1.campaign_id "
        "AND j2.topic_id = j1.topic_id AND j2.doc_id = j1.doc_id "
        f"JOIN {topics} t ON t.id = j1.topic_id "
        f"WHERE {' AND '.join(conditions)} "
        "ORDER BY t.position, t.topic_id, j1.doc_id LIMIT %s OFFSET %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, limit, offset])
        rows = cursor.fetchall()
    if not rows:
        return PairPage(total=0, pairs=[])
    name = Label.objects.filter(rubric=OuterRef("rubric_version"), value=OuterRef("label"))
    verdicts = {
        row["pk"]: row
        for row in Judgment.objects.filter(pk__in=[pk for pair in rows for pk in pair[:2]])
        .order_by()
        .annotate(label_name=Subquery(name.values("name")[:1]))
        .values(
            "pk",
            "topic_id",
            "topic__topic_id",
            "topic__title",
            "doc_id",
            "label",
            "label_name",
            "note",
            "unsure",
            "unreadable",
            "seconds_on_screen",
            "active_seconds",
            "judged_at",
            "assessor__kind",
        )
    }
    fallback = label_names or {}

    def verdict(row: dict[str, Any]) -> Verdict:
        return Verdict(
            label=row["label"],
            name=row["label_name"] or fallback.get(row["label"], ""),
            note=row["note"],
            unsure=row["unsure"],
            unreadable=row["unreadable"],
            seconds_on_screen=row["seconds_on_screen"],
            active_seconds=row["active_seconds"],
            judged_at=row["judged_at"],
            source=row["assessor__kind"],
        )

    pairs = []
    for pk_a, pk_b, _ in rows:
        first, second = verdicts[pk_a], verdicts[pk_b]
        pairs.append(
            JudgedPair(
                topic_pk=first["topic_id"],
                topic=first["topic__topic_id"],
                title=first["topic__title"],
                doc_id=first["doc_id"],
                a=verdict(first),
                b=verdict(second),
            )
        )
    return PairPage(total=rows[0][2], pairs=pairs)
