"""The reports computed by scoring the stored runs: evaluation, ranking stability and pool bias
(each a qrels.reports dataclass), and :func:`compute_report`, the one entry point the pages, the
report job and the commands share.

The runs are read a batch at a time (qrels.queries.stored_run_batches) and every run is scored
by one reused pytrec_eval evaluator (:func:`qrels.evaluation.evaluate_runs`).

A report is computed against one :class:`qrels.sources.QrelsSource` (the campaign's qrels under a
policy, one assessor's verdicts, or an uploaded file), read by :func:`qrels.sources.load_qrels`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from campaigns.models import Campaign
from pooling.models import Pool, PoolEntry
from pooljudge.common import ProgressFn, natural_key, no_progress
from qrels import evaluation, sampled
from qrels.queries import current_runs, stored_run_batches, stored_runs, topic_order
from qrels.reports import (
    EvaluationReport,
    EvaluationRow,
    InferredNotes,
    JudgedAtTen,
    PoolBiasReport,
    PoolBiasRow,
    PoolFacts,
    QrelsFacts,
    QrelsPair,
    RunReport,
    StabilityReport,
    StabilityRow,
    UnjudgedMeans,
    computed_now,
)
from qrels.sources import (  # noqa: F401 (QrelsSource, parse_upload: also read as runscores.*)
    Qrels,
    QrelsSource,
    load_qrels,
    parse_upload,
    pool_version,
)

# Reports over at most this many ranked documents (the sum of the current runs' list lengths)
# are computed while the page loads (a tenth of a second per 100,000 on one core); bigger ones
# run as a background job whose result the page shows once it is done.
DIRECT_LIMIT = 300_000


def qrels_facts(
    campaign: Campaign, source: QrelsSource, summary: Mapping[str, int], **more: Any
) -> QrelsFacts:
    """What a report states about its qrels: where they come from and what they hold
    (``summary``: :func:`qrels_summary`)."""
    return QrelsFacts(
        source=source.as_params(), description=source.describe(campaign), **summary, **more
    )


def qrels_summary(qrels: Qrels, threshold: int) -> dict[str, int]:
    """Counts that say what a qrels holds: topics, entries, verdicts (label >= 0), relevant
    (>= threshold) and pooled-but-unjudged entries (label < 0)."""
    entries = verdicts = relevant = 0
    for labels in qrels.values():
        for label in labels.values():
            entries += 1
            if label >= 0:
                verdicts += 1
                relevant += label >= threshold
    return {
        "topics": sum(1 for labels in qrels.values() if labels),
        "entries": entries,
        "verdicts": verdicts,
        "relevant": relevant,
        "unjudged": entries - verdicts,
    }


# --- Pools ---------------------------------------------------------------------------------------


def pool_depth(pool: Pool) -> int | None:
    """The depth to which every run contributed to ``pool``: the depth of a depth pool (the
    default one where runs have their own), the last sampled rank of a stratified sample, and the
    cap of a fusion pool if it has one; None when the pool has no depth."""
    return pool.spec.depth


def pool_facts(pool: Pool, qrels: Qrels) -> PoolFacts:
    """What seed 002's reporting practice asks to state about a pool: strategy, depth, how many
    runs built it, and how many of its pairs have a verdict in ``qrels``."""
    topic_ids = dict(pool.campaign.topics.values_list("pk", "topic_id"))
    judged = size = 0
    for topic_pk, doc_id in PoolEntry.objects.filter(pool=pool).values_list("topic_id", "doc_id"):
        size += 1
        judged += qrels.get(topic_ids[topic_pk], {}).get(doc_id, -1) >= 0
    return PoolFacts(
        version=pool.version,
        description=pool.describe(),
        strategy=pool.strategy,
        depth=pool_depth(pool),
        per_run_depths=bool(pool.spec.depth_per_run),
        runs=tuple(sorted(pool.runs.values_list("tag", flat=True))),
        size=size,
        judged=judged,
        judged_share=judged / size if size else None,
    )


def _pools_for(campaign: Campaign, source: QrelsSource) -> list[Pool]:
    built = campaign.pools.built().select_related("campaign")
    if source.pool is not None:
        return list(built.filter(version=source.pool))
    return list(built.order_by("version"))


# --- Evaluation ----------------------------------------------------------------------------------


def _check_measures(measures: Sequence[str]) -> list[str]:
    measures = list(measures)
    if not measures:
        raise ValueError("Name at least one measure.")
    # ValueError for an unknown measure
    evaluation.trec_eval_measure_names([m for m in measures if not sampled.is_inferred(m)])
    if len(set(measures)) != len(measures):
        raise ValueError("A measure is listed twice.")
    return measures


def evaluation_report(
    *,
    campaign: Campaign,
    source: QrelsSource,
    uploaded: Qrels | None = None,
    measures: Sequence[str] | None = None,
    progress: ProgressFn = no_progress,
) -> EvaluationReport:
    """Every current run scored against the qrels of ``source`` at the campaign's threshold:
    means over all qrels topics (trec_eval -c), per-topic values, unjudged share of the top 10,
    and the facts a report must state (qrels used, pools, their depth and judged share).

    On the pairs of a stratified sampled pool, the inferred measures of qrels.sampled (xinfAP,
    infNDCG, iP@k, with 95 % topic-bootstrap intervals in ``runs[i]["intervals"]``) are the
    default ``measures``; elsewhere trec_eval's (evaluation.MEASURES).

    ``runs[i]["per_topic"][topic]`` lists the values in ``measures`` order. Raises ValueError for
    an unknown measure, an inferred measure without a sampled pool, or an empty qrels (and what
    :func:`load_qrels` raises)."""
    started = time.perf_counter()
    sample_pool = pool_version(campaign, source.pool) if source.kind != "upload" else None
    if sample_pool is not None and sample_pool.strategy != Pool.Strategy.SAMPLE:
        sample_pool = None
    if measures is None:
        measures = sampled.DEFAULT_MEASURES if sample_pool else evaluation.MEASURES
    measures = _check_measures(measures)
    inferred = [m for m in measures if sampled.is_inferred(m)]
    if inferred and sample_pool is None:
        raise ValueError(
            f"{', '.join(inferred)} estimate from a stratified sample: score the pairs of a "
            "sampled pool (a pool built with --strategy sample)."
        )
    progress(0, None, "reading qrels")
    qrels = load_qrels(campaign=campaign, source=source, uploaded=uploaded)
    threshold = campaign.relevance_threshold
    summary = qrels_summary(qrels, threshold)
    if not summary["verdicts"]:
        raise ValueError(f"The qrels ({source.describe(campaign)}) hold no judgment yet.")
    pools = _pools_for(campaign, source)
    contributors = {tag for pool in pools for tag in pool.runs.values_list("tag", flat=True)}
    # Batch by batch: memory holds a batch of runs, not every run (a job also reports progress
    # and notices a cancellation between batches).
    trec_measures = [m for m in measures if m not in inferred]
    estimator = None
    if inferred and sample_pool is not None:
        # At a threshold above 1, labels below it count as nonrelevant (for infNDCG too).
        estimator = sampled.SampledEvaluator(
            _sample_qrels(sample_pool, qrels),
            gains=dict.fromkeys(range(1, threshold), 0),
            cutoffs=sampled.inferred_cutoffs(inferred),
        )
    scores: list[evaluation.RunScores] = []
    estimates: dict[str, sampled.RunEstimates] = {}
    for batch in stored_run_batches(runs=current_runs(campaign), progress=progress):
        scores += evaluation.evaluate_runs(
            qrels, batch, measures=trec_measures, relevance_threshold=threshold
        )
        if estimator is not None:
            estimates |= {name: estimator.evaluate(name, run) for name, run in batch.items()}
    topics = topic_order(campaign, [t for t, labels in qrels.items() if labels])
    campaign_topics = set(campaign.topics.values_list("topic_id", flat=True))
    rows = []
    for s in scores:
        # The intervals first: _add_inferred puts the inferred measures into the scores.
        intervals = (
            _add_inferred(s, estimates[s.run], inferred, topics) if s.run in estimates else None
        )
        rows.append(
            EvaluationRow(
                run=s.run,
                contributor=s.run in contributors,
                mean=s.mean,
                unjudged_at_10=s.unjudged_at_10,
                topics_answered=len(s.per_topic),
                per_topic={
                    topic: [values[m] for m in measures] for topic, values in s.per_topic.items()
                },
                intervals=intervals,
            )
        )
    judged_at_10 = [1 - row.unjudged_at_10 for row in rows if row.topics_answered]
    return EvaluationReport(
        campaign=campaign.slug,
        qrels=qrels_facts(
            campaign,
            source,
            summary,
            topics_not_in_campaign=tuple(sorted(set(topics) - campaign_topics, key=natural_key)),
        ),
        threshold=threshold,
        measures=tuple(measures),
        topics=tuple(topics),
        pools=tuple(pool_facts(pool, qrels) for pool in pools),
        judged_at_10=JudgedAtTen(
            mean=sum(judged_at_10) / len(judged_at_10) if judged_at_10 else None,
            lowest=min(judged_at_10) if judged_at_10 else None,
        ),
        runs=tuple(rows),
        inferred=_inferred_notes(sample_pool, measures),
        computed_at=computed_now(),
        seconds=round(time.perf_counter() - started, 3),
    )


def _sample_qrels(pool: Pool, qrels: Qrels) -> dict[str, dict[str, sampled.SampledPair]]:
    """sample_eval's qrels of a sampled pool: its strata, and the labels of ``qrels`` on the
    sampled pairs (qrels.sampled.pool_sample_qrels)."""
    entries = (
        PoolEntry.objects.filter(pool=pool)
        .order_by()
        .values_list("topic__topic_id", "doc_id", "stratum", "sampled")
    )
    return sampled.pool_sample_qrels(entries.iterator(), qrels)


def _add_inferred(
    scores: evaluation.RunScores,
    estimates: sampled.RunEstimates,
    measures: Sequence[str],
    topics: Sequence[str],
) -> dict[str, list[float] | None]:
    """Puts the inferred measures into ``scores`` (per topic, and means over all ``topics``, a
    topic the run missed counting 0, like the other columns) and returns their 95 % intervals."""
    intervals: dict[str, list[float] | None] = {}
    for topic, values in estimates.per_topic.items():
        scores.per_topic.setdefault(topic, {}).update({m: values[m] for m in measures})
    for measure in measures:
        per_topic = {t: estimates.per_topic.get(t, {}).get(measure, 0.0) for t in topics}
        for values in scores.per_topic.values():
            values.setdefault(measure, 0.0)
        scores.mean[measure] = sum(per_topic.values()) / len(topics) if topics else 0.0
        interval = sampled.topic_bootstrap(per_topic)
        intervals[measure] = [interval.low, interval.high] if interval else None
    return intervals


def _inferred_notes(pool: Pool | None, measures: Sequence[str]) -> InferredNotes | None:
    """Why the inferred measures are there, and a warning for infAP on strata sampled at
    different rates; None when the pairs are not a sampled pool's."""
    if pool is None:
        return None
    rates = sorted({s.rate for s in pool.spec.strata})
    warning = ""
    if "infAP" in measures and len(rates) > 1:
        warning = (
            f"infAP assumes one uniform random sample of the pool, but pool v{pool.version} "
            f"samples its strata at different rates ({', '.join(f'{r:.0%}' for r in rates)}): "
            "it infers the unjudged documents of the sparse strata from the densely judged ones, "
            "which biases it. Use xinfAP."
        )
    return InferredNotes(
        pool=pool.version,
        why=(
            f"Pool v{pool.version} is a stratified sample: xinfAP, infNDCG and iP@k estimate AP, "
            "nDCG and P@k from it, weighting each stratum by its sampling rate (Yilmaz, "
            "Kanoulas & Aslam, SIGIR 2008, as NIST's sample_eval computes them); the ranges are "
            "95 % bootstrap intervals over topics."
            if any(map(sampled.is_inferred, measures))
            else ""
        ),
        warning=warning,
    )


# --- Ranking stability ---------------------------------------------------------------------------


def stability_report(
    *,
    campaign: Campaign,
    first: QrelsSource,
    second: QrelsSource,
    measure: str = "AP",
    common_topics: bool = True,
    uploaded: Mapping[str, Qrels] | None = None,
    progress: ProgressFn = no_progress,
) -> StabilityReport:
    """The ordering of the current runs by ``measure`` under two qrels, Kendall's tau between
    the orderings, and the pairs of runs that swap (seed 000). ``uploaded`` holds the parsed
    files of upload sources under the keys "first" and "second". With ``common_topics`` both
    qrels are cut to the topics both have, so that two assessors who judged different topics
    are compared on the same ones."""
    from qrels import agreement  # numpy: loaded by the first report, not by every web process

    started = time.perf_counter()
    _check_measures([measure])
    uploaded = uploaded or {}
    threshold = campaign.relevance_threshold
    progress(0, None, "reading qrels")
    sides = {}
    for key, source in (("first", first), ("second", second)):
        qrels = load_qrels(campaign=campaign, source=source, uploaded=uploaded.get(key))
        sides[key] = {t: labels for t, labels in qrels.items() if labels}
    both = set(sides["first"]) & set(sides["second"])
    if common_topics:
        sides = {key: {t: q for t, q in qrels.items() if t in both} for key, qrels in sides.items()}
    summaries = {key: qrels_summary(qrels, threshold) for key, qrels in sides.items()}
    for key, source in (("first", first), ("second", second)):
        if not summaries[key]["verdicts"]:
            raise ValueError(
                f"The qrels ({source.describe(campaign)}) hold no judgment"
                + (" on a topic both qrels have." if common_topics else ".")
            )
    run_list = current_runs(campaign)
    if len(run_list) < 2:
        raise ValueError("Ranking stability needs at least two runs.")
    means: dict[str, dict[str, float]] = {"first": {}, "second": {}}
    for batch in stored_run_batches(runs=run_list, progress=progress):
        for key in ("first", "second"):
            scored = evaluation.evaluate_runs(
                sides[key], batch, measures=[measure], relevance_threshold=threshold
            )
            means[key].update((s.run, s.mean[measure]) for s in scored)
    order = {key: agreement.order_by_score(means[key]) for key in means}
    tau = agreement.kendall_tau(order["first"], order["second"])
    rank = {key: {run: i for i, run in enumerate(order[key], start=1)} for key in order}
    swapped = tuple(
        (a, b)
        for i, a in enumerate(order["first"])
        for b in order["first"][i + 1 :]
        if rank["second"][a] > rank["second"][b]
    )
    rows = tuple(
        StabilityRow(
            run=run,
            first=means["first"][run],
            second=means["second"][run],
            rank_first=rank["first"][run],
            rank_second=rank["second"][run],
        )
        for run in order["first"]
    )
    return StabilityReport(
        campaign=campaign.slug,
        measure=measure,
        threshold=threshold,
        common_topics=common_topics,
        qrels=QrelsPair(
            first=qrels_facts(campaign, first, summaries["first"]),
            second=qrels_facts(campaign, second, summaries["second"]),
        ),
        topics=tuple(topic_order(campaign, set(sides["first"]) | set(sides["second"]))),
        tau=tau.tau,
        swapped=tau.swapped,
        pairs=tau.pairs,
        swapped_pairs=swapped,
        runs=rows,
        computed_at=computed_now(),
        seconds=round(time.perf_counter() - started, 3),
    )


# --- Pool bias -----------------------------------------------------------------------------------


def pool_bias_report(
    *,
    campaign: Campaign,
    pool: Pool,
    measure: str = "AP",
    policy: str | None = None,
    include_imported: bool = True,
    progress: ProgressFn = no_progress,
) -> PoolBiasReport:
    """Seed 000's leave-one-out test for every run that built ``pool``, and seed 003's warning
    sign for every run: the unjudged share of its top 10 and of its top pool-depth, with the
    runs that did not contribute marked.

    The qrels are the campaign's judgments on the pool's pairs (``policy``), its unjudged pairs
    as -1. The runs are the pool's own (a run replaced since keeps the version that built the
    pool) and the current runs of every other tag. Without a pool depth (a fusion pool without
    a cap) there is no leave-one-out, only the unjudged shares at 10."""
    from qrels import agreement  # numpy: loaded by the first report, not by every web process

    started = time.perf_counter()
    _check_measures([measure])
    if pool.campaign_id != campaign.pk or pool.status != Pool.Status.BUILT:
        raise ValueError(f"Pool v{pool.version} is not a built pool of this campaign.")
    progress(0, None, "reading qrels")
    source = QrelsSource(policy=policy, include_imported=include_imported, pool=pool.version)
    qrels = load_qrels(campaign=campaign, source=source)
    threshold = campaign.relevance_threshold
    summary = qrels_summary(qrels, threshold)
    if not summary["verdicts"]:
        raise ValueError(f"No pair of pool v{pool.version} is judged yet.")
    built_by = list(pool.runs.all())
    tags = {run.tag for run in built_by}
    others = [run for run in current_runs(campaign) if run.tag not in tags]
    runs = stored_runs(runs=sorted([*built_by, *others], key=lambda r: r.tag), progress=progress)
    depth = pool_depth(pool)
    progress(0, None, "leave-one-out")
    loo = (
        {
            row.run: row
            for row in evaluation.leave_one_out(
                qrels,
                runs,
                pool_depth=depth,
                contributors=sorted(tags),
                measure=measure,
                relevance_threshold=threshold,
            )
        }
        if depth
        else {}
    )
    depths = sorted({10, depth}) if depth else [10]
    unjudged = {
        row.run: row
        for row in evaluation.unjudged_fractions(qrels, runs, depths=depths, contributors=tags)
    }
    full = {
        s.run: s.mean[measure]
        for s in evaluation.evaluate_runs(
            qrels, runs, measures=[measure], relevance_threshold=threshold
        )
    }
    order = agreement.order_by_score(full)
    rows = []
    for rank, run in enumerate(order, start=1):
        left_out: dict[str, Any] = {}
        if run in loo:
            r = loo[run]
            left_out = {
                "score_loo": r.score_loo,
                "drop": r.drop,
                "relative_drop": (r.drop / r.score_full) if r.score_full else None,
                "rank_loo": r.rank_loo,
                "rank_change": r.rank_loo - r.rank_full,
                "removed": r.removed,
                "removed_relevant": r.removed_relevant,
            }
        rows.append(
            PoolBiasRow(
                run=run,
                contributor=run in tags,
                score=full[run],
                rank=rank,
                unjudged_at_10=unjudged[run].unjudged[10],
                unjudged_at_depth=unjudged[run].unjudged[depth] if depth else None,
                topics_answered=unjudged[run].topics,
                **left_out,
            )
        )
    contributed = [row for row in rows if row.contributor]
    outsiders = [row for row in rows if not row.contributor]
    return PoolBiasReport(
        campaign=campaign.slug,
        measure=measure,
        threshold=threshold,
        pool=pool_facts(pool, qrels),
        qrels=qrels_facts(campaign, source, summary),
        depth=depth,
        leave_one_out=bool(loo),
        largest_drop=max((row.drop for row in contributed if row.left_out), default=None),
        moved=sum(1 for row in contributed if row.rank_change),
        mean_unjudged_at_10=UnjudgedMeans(
            contributors=_mean(row.unjudged_at_10 for row in contributed),
            others=_mean(row.unjudged_at_10 for row in outsiders),
        ),
        runs=tuple(rows),
        computed_at=computed_now(),
        seconds=round(time.perf_counter() - started, 3),
    )


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


# --- One entry point for the pages, the report job and the commands -----------------------------


def run_report(**kwargs: Any) -> dict[str, Any]:
    """:func:`compute_report`, as the JSON-safe dict a report job stores on its row (read back
    with qrels.reports.run_report_from_dict)."""
    return compute_report(**kwargs).to_dict()


def compute_report(
    *,
    campaign: Campaign,
    report: str,
    options: Mapping[str, Any],
    uploaded: Mapping[str, Qrels] | None = None,
    progress: ProgressFn = no_progress,
) -> RunReport:
    """Compute ``report`` from JSON-safe ``options`` (what a page's form chose, and what a job
    stores); ``uploaded`` maps the option key of an upload source ("source", "first" or
    "second") to its parsed qrels. Raises ValueError for options that do not make a report."""
    uploaded = uploaded or {}
    if report == "evaluation":
        return evaluation_report(
            campaign=campaign,
            source=QrelsSource.from_params(options.get("source", {})),
            uploaded=uploaded.get("source"),
            measures=options.get("measures") or None,
            progress=progress,
        )
    if report == "stability":
        return stability_report(
            campaign=campaign,
            first=QrelsSource.from_params(options.get("first", {})),
            second=QrelsSource.from_params(options.get("second", {})),
            measure=options.get("measure") or "AP",
            common_topics=bool(options.get("common_topics", True)),
            uploaded=uploaded,
            progress=progress,
        )
    if report == "pool_bias":
        pool = pool_version(campaign, options.get("pool"))
        if pool is None:
            raise ValueError("Choose a built pool.")
        return pool_bias_report(
            campaign=campaign,
            pool=pool,
            measure=options.get("measure") or "AP",
            policy=options.get("policy"),
            include_imported=bool(options.get("include_imported", True)),
            progress=progress,
        )
    raise ValueError(f"Unknown report {report!r}.")
