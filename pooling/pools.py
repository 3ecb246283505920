"""Pool workflows: define a pool, build it as a job, read its runs, plan depths.

The strategies themselves are pure functions in ``pooling/strategies.py``; this module connects
them to the stored runs and judgments. A pool is created in state ``building`` with everything
needed to rebuild it (strategy, parameters, contributing runs, topics, seed, software version); the
``build_pool`` job fills in its entries and statistics in one transaction and marks it ``built``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Exists, Max, OuterRef, Q
from django.utils import timezone

import pooljudge
from campaigns import jobs
from campaigns.models import Assessor, Campaign, Judgment, Topic
from pooling import adaptive, strategies
from pooling.adjudication import AdjudicationError
from pooling.models import BUILD_JOB_KIND, Pool, PoolEntry, Run, RunTopic
from pooljudge.common import ProgressFn, median, no_progress, refresh_planner_statistics

ORDERS = ("trec_eval", "file_rank")
# The Celery task that builds a pool (pooling.tasks), by name: the task module imports this one,
# and naming it here rather than importing it keeps the import graph one-way.
BUILD_TASK = "pooling.tasks.build_pool_task"
DEFAULT_SECONDS_PER_JUDGMENT = 30.0
PLANNER_DEPTHS = (1, 5, 10, 20, 50, 100)


class PoolDefinitionError(ValueError):
    """The requested pool cannot be built as asked (a sentence for the organiser)."""


# --- Reading runs ---------------------------------------------------------------------------------


def ranked_lists(
    runs: Iterable[Run],
    *,
    topics: Iterable[Topic] | None = None,
    order: str = "trec_eval",
    depth: int | None = None,
) -> strategies.Runs:
    """run key (the run's id as a string) -> topic id -> document ids best first.

    ``order`` "trec_eval" is the stored order (score descending, ties by document id descending);
    "file_rank" re-sorts by the file's rank column (ties keep trec_eval order). Lists are cut at
    ``depth`` when given, which is all pooling needs."""
    if order not in ORDERS:
        raise PoolDefinitionError(f"Unknown ranking order {order!r}.")
    run_list = list(runs)
    topic_list = list(topics) if topics is not None else None
    fields = ["run_id", "topic__topic_id", "docids"] + (["ranks"] if order == "file_rank" else [])
    result: dict[str, dict[str, list[str]]] = {str(run.pk): {} for run in run_list}
    cut = depth is not None and order == "trec_eval"
    for row in _run_topic_rows(run_list, topic_list, fields):
        if not row[2]:
            docids = []
        elif cut:
            # Split off only what is kept: deep runs are long, and pools read a few percent.
            docids = row[2].split("\n", depth)[:depth]
        else:
            docids = row[2].split("\n")
        if order == "file_rank":
            ranks = RunTopic(ranks=row[3]).rank_list()
            positions = sorted(range(len(docids)), key=lambda i: (ranks[i], i))
            docids = [docids[i] for i in positions]
        result[str(row[0])][row[1]] = docids[:depth] if depth is not None else docids
    return result


READ_BATCH_ROWS = 1000


def _run_topic_rows(
    runs: list[Run], topics: list[Topic] | None, fields: list[str]
) -> Iterator[tuple]:
    """The runs' RunTopic rows as tuples of ``fields``, a batch of runs per query.

    Each query fetches about READ_BATCH_ROWS rows in one go: memory stays bounded by a batch
    (a few megabytes of ranked lists), and there is one round trip per batch rather than the
    many small FETCHes of a server-side cursor, which measured twice as slow.
    """
    batch: list[Run] = []
    rows = 0
    for run in [*runs, None]:
        if run is not None:
            batch.append(run)
            rows += max(1, run.topic_count)
            if rows < READ_BATCH_ROWS:
                continue
        if batch:
            query = RunTopic.objects.filter(run__in=batch)
            if topics is not None:
                query = query.filter(topic__in=topics)
            yield from list(query.values_list(*fields))
        batch, rows = [], 0


def _verdicts(campaign: Campaign):
    # A model's label is not a verdict here (issue 20): a residual pool must still send people
    # the pairs only a model labelled, and a model's leniency must not steer what they judge.
    # Nor is a hybrid budget's filled label (a model's, calibrated).
    return Judgment.objects.filter(campaign=campaign).exclude(
        assessor__kind__in=(Assessor.Kind.MODEL, Assessor.Kind.FILLED)
    )


def judged_pairs(campaign: Campaign) -> set[tuple[str, str]]:
    """(topic id, document id) pairs with a verdict (negative labels are not verdicts, nor are a
    model's labels)."""
    return set(_verdicts(campaign).filter(label__gte=0).values_list("topic__topic_id", "doc_id"))


def relevant_pairs(campaign: Campaign) -> set[tuple[str, str]]:
    """Pairs any judgment (imported qrels included, a model's labels not) calls relevant at the
    campaign's threshold."""
    return set(
        _verdicts(campaign)
        .filter(label__gte=campaign.relevance_threshold)
        .values_list("topic__topic_id", "doc_id")
    )


# --- Defining a pool ------------------------------------------------------------------------------


def _int(params: dict, key: str, *, minimum: int = 1, required: bool = True) -> int | None:
    value = params.get(key)
    if value in (None, ""):
        if required:
            raise PoolDefinitionError(f"The {key.replace('_', ' ')} is required.")
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise PoolDefinitionError(f"The {key.replace('_', ' ')} must be a whole number.") from None
    if number < minimum:
        raise PoolDefinitionError(f"The {key.replace('_', ' ')} must be at least {minimum}.")
    return number


def _number(params: dict, key: str, *, default: float, what: str) -> float:
    """A finite number from ``params[key]``; ``default`` when absent (0 is a value, not absent)."""
    value = params.get(key)
    if value in (None, ""):
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PoolDefinitionError(f"{what} must be a number.") from None
    if not math.isfinite(number):
        raise PoolDefinitionError(f"{what} must be a finite number.")
    return number


def normalise_params(strategy: str, params: dict[str, Any], runs: Sequence[Run]) -> dict[str, Any]:
    """Validated, canonical parameters for ``strategy`` (what the pool records)."""
    order = params.get("order") or "trec_eval"
    if order not in ORDERS:
        raise PoolDefinitionError("The order must be trec_eval or file_rank.")
    clean: dict[str, Any] = {"order": order, "residual": bool(params.get("residual"))}
    if strategy == Pool.Strategy.DEPTH:
        clean["depth"] = _int(params, "depth")
        per_run = params.get("depth_per_run") or {}
        known = {str(run.pk): run.tag for run in runs}
        by_tag = {run.tag: str(run.pk) for run in runs}
        if per_run:
            clean["depth_per_run"] = {}
            for key, value in per_run.items():
                run_key = by_tag.get(key, key if key in known else None)
                if run_key is None:
                    raise PoolDefinitionError(f"No contributing run {key!r} for a per-run depth.")
                clean["depth_per_run"][run_key] = _int({"depth": value}, "depth", minimum=0)
    elif strategy == Pool.Strategy.SAMPLE:
        raw = params.get("strata") or []
        try:
            strata = [
                strategies.Stratum(int(s["first_rank"]), int(s["last_rank"]), float(s["rate"]))
                for s in raw
            ]
            strategies._check_strata(strata)
        except (KeyError, TypeError, ValueError) as exc:
            raise PoolDefinitionError(f"Strata: {exc}") from None
        if not strata:
            raise PoolDefinitionError("A sampled pool needs at least one stratum.")
        clean["strata"] = [dataclasses.asdict(s) for s in strata]
    elif strategy in (Pool.Strategy.RRF, Pool.Strategy.RBP):
        clean["budget"] = _int(params, "budget")
        clean["depth"] = _int(params, "depth", required=False)
        if strategy == Pool.Strategy.RRF:
            k = _number(params, "k", default=60.0, what="The RRF constant k")
            if k < 0:
                raise PoolDefinitionError("The RRF constant k must be 0 or more.")
            clean["k"] = k
        else:
            p = _number(params, "p", default=0.8, what="RBP's p")
            if not 0 < p < 1:
                raise PoolDefinitionError("RBP's p must be between 0 and 1.")
            aggregate = params.get("aggregate") or "sum"
            if aggregate not in ("sum", "max"):
                raise PoolDefinitionError("RBP's aggregate must be sum or max.")
            clean["p"], clean["aggregate"] = p, aggregate
    else:
        raise PoolDefinitionError(f"Unknown strategy {strategy!r}.")
    try:
        judging_order = adaptive.normalise(params.get("adjudication"))
    except AdjudicationError as exc:
        raise PoolDefinitionError(str(exc)) from None
    if judging_order is not None:
        clean["adjudication"] = judging_order
    return clean


@transaction.atomic
def create_pool(
    *,
    campaign: Campaign,
    strategy: str,
    params: dict[str, Any],
    runs: Sequence[Run] | None = None,
    topics: Sequence[Topic] | None = None,
    seed: int | None = None,
    note: str = "",
    user=None,
) -> Pool:
    """Record a new pool version and queue the job that builds it. Raises PoolDefinitionError."""
    runs = list(runs) if runs is not None else list(campaign.runs.current())
    if not runs:
        raise PoolDefinitionError("The campaign has no runs to pool; import runs first.")
    if any(run.campaign_id != campaign.pk for run in runs):
        raise PoolDefinitionError("A run belongs to another campaign.")
    clean = normalise_params(strategy, params, runs)
    if strategy == Pool.Strategy.SAMPLE and seed is None:
        seed = int(time.time_ns() % 2**31)
    topic_list = list(topics) if topics is not None else None
    if topic_list is None:
        topic_list = list(
            Topic.objects.filter(
                campaign=campaign, pk__in=RunTopic.objects.filter(run__in=runs).values("topic_id")
            )
        )
    if not topic_list:
        raise PoolDefinitionError("The runs rank no documents for any topic.")
    # Lock the campaign row so two organisers get consecutive version numbers.
    Campaign.objects.select_for_update(of=("self",)).filter(pk=campaign.pk).order_by().first()
    last = campaign.pools.aggregate(last=Max("version"))["last"] or 0
    pool = Pool.objects.create(
        campaign=campaign,
        version=last + 1,
        strategy=strategy,
        params=clean,
        seed=seed,
        software_version=pooljudge.__version__,
        note=note,
        created_by=user if user is not None and user.is_authenticated else None,
    )
    pool.runs.set(runs)
    pool.topics.set(topic_list)
    pool.job = jobs.enqueue(
        kind=BUILD_JOB_KIND,
        task=BUILD_TASK,
        campaign=campaign,
        params={"pool": pool.pk, "version": pool.version},
        user=user,
    )
    pool.save(update_fields=["job"])
    return pool


# --- Building a pool ------------------------------------------------------------------------------


def _compute(pool: Pool, runs: strategies.Runs, topic_ids: list[str]) -> strategies.Pool:
    spec = pool.spec
    if spec.strategy == Pool.Strategy.DEPTH:
        return strategies.depth_pool(runs, depth=spec.run_depths(runs), topics=topic_ids)
    if spec.strategy == Pool.Strategy.SAMPLE:
        return strategies.sample_pool(
            runs, strata=list(spec.strata), seed=spec.seed, topics=topic_ids
        )
    if spec.strategy == Pool.Strategy.RRF:
        return strategies.rrf_pool(
            runs, budget=spec.budget, k=spec.k, depth=spec.base_depth, topics=topic_ids
        )
    return strategies.rbp_pool(
        runs,
        budget=spec.budget,
        p=spec.p,
        aggregate=spec.aggregate,
        depth=spec.base_depth,
        topics=topic_ids,
    )


def stats_depth(pool: Pool, runs: strategies.Runs) -> int | dict[str, int]:
    """How deep each run counts as "contributing" for the pool's statistics."""
    spec = pool.spec
    if spec.strategy == Pool.Strategy.DEPTH and spec.depth_per_run:
        return spec.run_depths(runs)
    depth = spec.read_depth
    if depth is None:
        depth = max((len(docs) for topics in runs.values() for docs in topics.values()), default=0)
    return depth


ENTRY_COLUMNS = (
    "pool_id",
    "topic_id",
    "doc_id",
    "provenance",
    "stratum",
    "inclusion_probability",
    "sampled",
    "fused_score",
)
# Progress is reported (and a cancellation noticed) this many times per build at most: the
# strategies run on chunks of topics rather than topic by topic, because each call builds its own
# provenance objects and a call per topic multiplies that work by the number of topics.
PROGRESS_STEPS = 20
_COPY_BATCH = 20_000  # entries per write to the COPY stream


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector around the CPU-heavy part of a build.

    The strategies allocate a few objects per pooled pair and per contribution (millions for a
    TREC-sized pool) and free nothing until the build ends, so every automatic collection scans an
    ever larger heap for cycles that are not there: measured, that was half of depth_pool's time.
    Reference counting still frees everything acyclic. The collector is process-wide, so in the
    embedded mode (jobs run in the web process) other threads go without it for the same seconds.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _copy_lines(pool_pk: int, built: strategies.Pool, topic_pks: dict[str, int]) -> Iterator[str]:
    """The entries as lines of PostgreSQL's COPY text format (tab-separated, \\N for NULL).

    Provenance is written as JSON text by hand: every Contribution object is shared by all the
    entries it belongs to, so its ``[run,rank]`` text is made once (keyed by the object's id, which
    stays unique while ``built`` holds the objects). Ids contain no whitespace or control
    characters (the importers refuse them), so a backslash is the only character to escape.
    """
    fragments: dict[int, str] = {}
    for topic_id, entries in built.items():
        prefix = f"{pool_pk}\t{topic_pks[topic_id]}\t"
        for entry in entries:
            parts = []
            for c in entry.contributions:
                text = fragments.get(id(c))
                if text is None:
                    text = fragments[id(c)] = f"[{int(c.run)},{int(c.rank)}]"
                parts.append(text)
            doc = entry.doc_id
            if "\\" in doc:
                doc = doc.replace("\\", "\\\\")
            yield (
                f"{prefix}{doc}\t[{','.join(parts)}]\t"
                f"{_copy_value(entry.stratum)}\t{_copy_value(entry.inclusion_probability)}\t"
                f"{'t' if entry.sampled else 'f'}\t{_copy_value(entry.score)}\n"
            )


def _copy_value(value: float | int | None) -> str:
    return "\\N" if value is None else repr(value)


class _EntryWriter:
    """Stores a pool's entries chunk of topics by chunk, in the caller's transaction.

    On PostgreSQL each chunk goes in a COPY fed by a writer thread (psycopg's QueuedLibpqWriter):
    ``write`` returns at once, and the server inserts and indexes that chunk while Python pools
    the next one, so the two costs overlap instead of adding up. ``close`` waits for the open COPY
    to end. While a COPY is open the connection can run no other statement, so the caller must
    ``close`` before anything that may query (progress reports read the cancel flag). Elsewhere,
    ``write`` is a bulk INSERT and ``close`` does nothing. ``count`` is the entries written.
    """

    def __init__(self, pool: Pool, topic_pks: dict[str, int]) -> None:
        self.pool = pool
        self.topic_pks = topic_pks
        self.count = 0
        self._copying: contextlib.ExitStack | None = None

    def __enter__(self) -> _EntryWriter:
        return self

    def __exit__(self, *exc_info) -> bool | None:
        copying, self._copying = self._copying, None
        return copying.__exit__(*exc_info) if copying is not None else None

    def write(self, part: strategies.Pool) -> None:
        if connection.vendor != "postgresql":
            rows = [
                PoolEntry(
                    pool_id=self.pool.pk,
                    topic_id=self.topic_pks[topic_id],
                    doc_id=entry.doc_id,
                    provenance=[[int(c.run), c.rank] for c in entry.contributions],
                    stratum=entry.stratum,
                    inclusion_probability=entry.inclusion_probability,
                    sampled=entry.sampled,
                    fused_score=entry.score,
                )
                for topic_id, entries in part.items()
                for entry in entries
            ]
            PoolEntry.objects.bulk_create(rows, batch_size=2000)
            self.count += len(rows)
            return
        from psycopg.copy import QueuedLibpqWriter

        self.close()
        with contextlib.ExitStack() as stack:
            cursor = stack.enter_context(connection.cursor()).cursor
            statement = f"COPY {PoolEntry._meta.db_table} ({', '.join(ENTRY_COLUMNS)}) FROM STDIN"
            copy = stack.enter_context(cursor.copy(statement, writer=QueuedLibpqWriter(cursor)))
            batch: list[str] = []
            for line in _copy_lines(self.pool.pk, part, self.topic_pks):
                batch.append(line)
                if len(batch) == _COPY_BATCH:
                    copy.write("".join(batch))
                    self.count += len(batch)
                    batch.clear()
            if batch:
                copy.write("".join(batch))
                self.count += len(batch)
            self._copying = stack.pop_all()  # left open: the server works while we go on

    def close(self) -> None:
        copying, self._copying = self._copying, None
        if copying is not None:
            copying.close()


def build_pool(*, pool: Pool, progress: ProgressFn = no_progress) -> dict[str, Any]:
    """Fill ``pool`` with its entries and statistics and mark it built (in the caller's
    transaction). Building a pool that is already built changes nothing.

    The pool row is locked first (SELECT … FOR UPDATE), so two attempts at the same build, say a
    redelivered message that took over from a worker thought dead, run one after the other, and
    the second finds the pool built (or the first one's work rolled back) and never duplicates it.
    """
    pool = Pool.objects.select_for_update().get(pk=pool.pk)
    if pool.built_at is not None:
        return {
            "pool": pool.pk,
            "version": pool.version,
            "size": pool.size,
            "message": "Already built.",
        }
    runs_qs = list(pool.runs.all())
    topics = list(pool.topics.all())
    topic_ids = [t.topic_id for t in topics]
    topic_pks = {t.topic_id: t.pk for t in topics}
    progress(0, len(topics), "reading runs")
    spec = pool.spec
    runs = ranked_lists(runs_qs, topics=topics, order=spec.order, depth=spec.read_depth)
    judged = judged_pairs(pool.campaign)
    relevant = relevant_pairs(pool.campaign)
    progress(0, len(topics), "pooling")
    built: strategies.Pool = {}
    done = 0
    with _collector_paused(), _EntryWriter(pool, topic_pks) as entries:
        for chunk in _chunks(topic_ids, max(1, math.ceil(len(topic_ids) / PROGRESS_STEPS))):
            part = _compute(pool, runs, chunk)  # while the server stores the previous chunk
            if pool.is_residual:
                part = strategies.residual(part, judged)
            done += len(chunk)
            entries.close()  # before reporting: a progress report may query
            progress(done, len(topics), f"pooled up to topic {chunk[-1]}")
            entries.write(part)
            built.update(part)
        statistics = strategies.pool_statistics(
            runs, built, depth=stats_depth(pool, runs), judged=judged, relevant=relevant
        )
        entries.close()
    progress(done, len(topics), "saving the pool")
    pool.stats = dataclasses.asdict(statistics)
    pool.size = entries.count
    pool.built_at = timezone.now()  # built: the job that ran this succeeds in this transaction
    pool.save(update_fields=["stats", "size", "built_at"])
    refresh_planner_statistics(PoolEntry)
    return {
        "pool": pool.pk,
        "version": pool.version,
        "size": pool.size,
        "topics": len(topic_ids),
        "message": (
            f"Pool v{pool.version} built: {pool.size:,} documents over {len(topic_ids)} topics."
        ),
    }


# --- Planning -------------------------------------------------------------------------------------


def seconds_per_judgment(campaign: Campaign) -> tuple[float, bool]:
    """The campaign's median active seconds per judgment once there are enough judgments
    (True), else the stated default (False)."""
    values = list(
        # People's time only: a model's or an adjudication's is no measure of judging.
        Judgment.objects.filter(
            campaign=campaign,
            source=Judgment.Source.JUDGED,
            assessor__kind=Assessor.Kind.PERSON,
            active_seconds__isnull=False,
        ).values_list("active_seconds", flat=True)[:20000]
    )
    if len(values) < 20:
        return DEFAULT_SECONDS_PER_JUDGMENT, False
    return median(values), True


def plan(
    *,
    campaign: Campaign,
    depths: Sequence[int] = PLANNER_DEPTHS,
    runs: Sequence[Run] | None = None,
    seconds: float | None = None,
    order: str = "trec_eval",
) -> dict[str, Any]:
    """The depth planner, from the stored runs, without building any pool."""
    runs = list(runs) if runs is not None else list(campaign.runs.current())
    depths = sorted({int(d) for d in depths if int(d) > 0})
    measured, from_campaign = seconds_per_judgment(campaign)
    seconds = seconds if seconds is not None else measured
    lists = ranked_lists(runs, order=order, depth=max(depths) if depths else None)
    rows = strategies.plan_depths(
        lists,
        depths,
        seconds_per_judgment=seconds,
        judged=judged_pairs(campaign),
        relevant=relevant_pairs(campaign),
    )
    return {
        "rows": rows,
        "seconds_per_judgment": seconds,
        "seconds_measured": from_campaign and seconds == measured,
        "runs": len(runs),
        "topics": len({t for topics in lists.values() for t in topics}),
    }


# --- Judging progress -----------------------------------------------------------------------------


def judging_progress(*, pool: Pool) -> dict[str, Any]:
    """How far judging of ``pool`` has come, read live from the campaign's judgments.

    Returns ``per_topic``: topic id -> {"entries", "to_judge", "judged", "relevant"} (to_judge
    counts sampled entries: the pairs an assessor is asked about) and ``per_run``: run key ->
    {"judged", "relevant"}, counted over the pool's pairs the run contributed (its provenance).
    A pair is judged when any assessor gave it a label of 0 or more, relevant when any label
    reaches the campaign's threshold; imported qrels count like any other judgment, a model's
    labels not at all (they are not people's progress).
    """
    campaign = pool.campaign
    judged = Judgment.objects.filter(
        campaign_id=campaign.pk,
        topic_id=OuterRef("topic_id"),
        doc_id=OuterRef("doc_id"),
        label__gte=0,
    ).exclude(assessor__kind__in=(Assessor.Kind.MODEL, Assessor.Kind.FILLED))
    relevant = judged.filter(label__gte=campaign.relevance_threshold)
    rows = (
        PoolEntry.objects.filter(pool=pool)
        .values("topic__topic_id")
        .annotate(
            entries=Count("pk"),
            to_judge=Count("pk", filter=Q(sampled=True)),
            judged=Count("pk", filter=Q(Exists(judged))),
            relevant=Count("pk", filter=Q(Exists(relevant))),
        )
        .order_by()
    )
    per_topic = {row.pop("topic__topic_id"): row for row in rows}
    per_run: dict[str, dict[str, int]] = {}
    judged_entries = (
        PoolEntry.objects.filter(pool=pool)
        .filter(Exists(judged))
        .annotate(is_relevant=Exists(relevant))
        .values_list("provenance", "is_relevant")
    )
    for provenance, is_relevant in judged_entries.iterator(chunk_size=5000):
        for run_id, _rank in provenance:
            counts = per_run.setdefault(str(run_id), {"judged": 0, "relevant": 0})
            counts["judged"] += 1
            counts["relevant"] += bool(is_relevant)
    return {"per_topic": per_topic, "per_run": per_run}
