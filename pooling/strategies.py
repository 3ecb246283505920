"""Pool strategies: pure, deterministic functions from ranked lists to per-topic pools.

The pool decides which documents anyone ever judges, so every function here is deterministic: the
same input gives the same pool, whatever the order of the mappings, the Python version's hash
seed or the machine. Nothing here touches Django or the database.

Conventions shared by every function:

- A ranked list is a sequence of document ids already in the order to use, best first. The caller
  puts each run's topic in trec_eval order (score descending, ties by document id descending) or,
  when the organiser asks for it, in the file's rank order. The rank column of a run file plays no
  part here.
- **Rank** means the 1-based position in that sequence: the first document has rank 1. "Top k of a
  run" means its first k documents.
- Ids are strings and are compared as strings, by code point ("003" and "3" are two documents;
  "10" sorts before "9"). They are never parsed as numbers.
- A run lists each document at most once per topic (the importer rejects a run that does not, as
  trec_eval does); the pool builders raise ValueError when they meet a repeat.
- Every builder returns ``{topic_id: [PoolEntry, ...]}`` with the topics in the order of the
  ``topics`` argument (code-point order of every topic any run ranked when it is None; a requested
  topic no run ranked gets an empty list) and each topic's entries sorted by doc_id.
- Contributions list the runs in code-point order of their keys.
- Where a strategy keeps the best N of a score (rrf_pool, rbp_pool), ties are broken by document id
  descending, trec_eval's convention: of two documents with equal score at the budget boundary,
  the one with the greater id is in the pool.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import operator
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, pairwise, repeat, zip_longest
from typing import Literal

Runs = Mapping[str, Mapping[str, Sequence[str]]]
"""run_key -> topic_id -> ranked document ids, best first."""

Pairs = Collection[tuple[str, str]]
"""(topic_id, doc_id) pairs: judged pairs, or relevant pairs from earlier qrels."""


@dataclass(frozen=True, slots=True)
class Contribution:
    """Provenance: run ``run`` retrieved the document at ``rank`` (1-based, in the order used)."""

    run: str
    rank: int


@dataclass(slots=True)
class PoolEntry:
    """One (topic, document) pair of a pool, with where it came from.

    ``contributions`` holds every run that has the document within the depth the strategy
    considered for that run (for rrf_pool and rbp_pool: every run that ranked it within ``depth``,
    or at all without one), sorted by run key. ``stratum``, ``inclusion_probability`` and
    ``sampled`` are set by sample_pool only; ``score`` by rrf_pool and rbp_pool only.
    """

    topic_id: str
    doc_id: str
    contributions: list[Contribution]
    stratum: int | None = None
    inclusion_probability: float | None = None
    sampled: bool = True
    score: float | None = None

    @property
    def best_rank(self) -> int:
        """The smallest rank any contributing run gave the document."""
        return min(c.rank for c in self.contributions)


Pool = dict[str, list[PoolEntry]]


@dataclass(frozen=True, slots=True)
class Stratum:
    """Ranks ``first_rank`` to ``last_rank`` (inclusive, 1-based), sampled at ``rate``.

    Raises ValueError unless 1 <= first_rank <= last_rank and 0 < rate <= 1.
    """

    first_rank: int
    last_rank: int
    rate: float

    def __post_init__(self) -> None:
        first = _count(self.first_rank, "A stratum's first rank")
        last = _count(self.last_rank, "A stratum's last rank")
        if first < 1:
            raise ValueError(f"A stratum starts at rank 1 or later, not at rank {first}.")
        if last < first:
            raise ValueError(f"The stratum {first}-{last} ends before it starts.")
        if not 0 < self.rate <= 1:
            raise ValueError(
                f"The sampling rate of stratum {first}-{last} must be above 0 and at most 1, "
                f"not {self.rate!r}."
            )


# --- Depth pools ---------------------------------------------------------------------------------


def depth_pool(
    runs: Runs, *, depth: int | Mapping[str, int], topics: Iterable[str] | None = None
) -> Pool:
    """The classic TREC pool: per topic, the union of every run's top k.

    ``depth`` is one k for all runs, or a mapping run key -> k (a run may have k = 0 and then
    contributes nothing). Raises ValueError if a depth is negative or not an integer, if the
    mapping lacks a run, or if a run repeats a document within its top k.
    """
    depth_of = _depth_per_run(runs, depth)
    contributions = _ContributionCache()
    pool: Pool = {}
    for topic in _topics(runs, topics):
        found = _gather(runs, topic, depth_of, contributions)
        pool[topic] = [PoolEntry(topic, doc, found[doc]) for doc in sorted(found)]
    return pool


def unique_contributions(pool: Mapping[str, list[PoolEntry]]) -> dict[str, dict[str, list[str]]]:
    """run key -> topic -> the pooled doc ids that this run alone contributed, sorted.

    Read from the entries' contributions, so for a depth pool it is what leave-one-out removes
    from the pool before scoring the run. Runs and topics without a unique document are absent.
    """
    unique: dict[str, dict[str, list[str]]] = {}
    for topic, entries in pool.items():
        for entry in entries:
            if len(entry.contributions) == 1:
                run = entry.contributions[0].run
                unique.setdefault(run, {}).setdefault(topic, []).append(entry.doc_id)
    return {run: unique[run] for run in sorted(unique)}


# --- Stratified sampling (inferred measures) ------------------------------------------------------


def sample_pool(
    runs: Runs, *, strata: Sequence[Stratum], seed: int, topics: Iterable[str] | None = None
) -> Pool:
    """A stratified random sample of the pool, for inferred measures (infAP, xinfAP).

    Strata: a document's stratum is the one containing its best (smallest) rank over all runs;
    runs are read down to the last stratum's last rank, and a document whose best rank lies outside
    the strata (before the first, when the first does not start at rank 1, or after the last) is not
    pooled at all. Strata must be contiguous and increasing, each starting right after the previous
    one ends; anything else raises ValueError.

    Sampling design: within each (topic, stratum) holding n documents, a simple random sample
    without replacement of fixed size ``k = ceil(rate * n)`` (at least one document, never more than
    n; ``rate * n`` is rounded to 9 decimals first so that 0.1 * 30 is 3, not 4). Every document of
    the stratum then has the same inclusion probability k / n, which is what the estimator needs and
    what ``inclusion_probability`` records: the realised k / n, not the nominal rate (they agree
    when rate * n is a whole number; k / n is never below the rate). xinfAP-style estimators weigh
    each sampled document by 1 / its inclusion probability, and 1 of 3 documents sampled at a
    nominal 10% was included with probability 1/3, not 0.1. A fully judged stratum
    (rate 1.0) has probability 1.0 and every document sampled. Rounding up keeps every pooled
    document's inclusion probability positive, which Horvitz-Thompson-style estimators require.

    Randomness: the k documents are those with the smallest SHA-256 of ``"{seed}:{topic}:{doc}"``
    (ties, which do not happen, by doc id). This is a uniformly random k-subset, reproducible on any
    machine and Python version, independent of hash randomisation and of dict or run order. The
    same seed gives the same sample; another seed gives, almost surely, another sample.

    Every pooled document is returned: sampled ones with ``sampled=True``, the others with
    ``sampled=False`` (exported as -1, "pooled but not judged", the infAP convention). ``stratum``
    is the 0-based index into ``strata``.
    """
    strata = check_strata(strata)
    seed = _integer(seed, "The seed")
    firsts = [s.first_rank for s in strata]
    depth_of = dict.fromkeys(runs, strata[-1].last_rank)
    contributions = _ContributionCache()
    pool: Pool = {}
    for topic in _topics(runs, topics):
        found = _gather(runs, topic, depth_of, contributions)
        members: list[list[str]] = [[] for _ in strata]
        for doc, contributed in found.items():
            best = min(c.rank for c in contributed)
            if best >= firsts[0]:
                members[bisect_right(firsts, best) - 1].append(doc)
        entries = []
        for index, (stratum, docs) in enumerate(zip(strata, members, strict=True)):
            if not docs:
                continue
            size = _sample_size(stratum.rate, len(docs))
            ordered = sorted(docs, key=lambda doc: (_sample_key(seed, topic, doc), doc))
            chosen = set(ordered[:size])
            probability = size / len(docs)
            entries.extend(
                PoolEntry(
                    topic,
                    doc,
                    found[doc],
                    stratum=index,
                    inclusion_probability=probability,
                    sampled=doc in chosen,
                )
                for doc in docs
            )
        entries.sort(key=operator.attrgetter("doc_id"))
        pool[topic] = entries
    return pool


def check_strata(strata: Sequence[Stratum]) -> list[Stratum]:
    """The strata as a list, if sample_pool accepts them; raises ValueError with a sentence if not.

    For validating an organiser's form before any pool is built.
    """
    strata = list(strata)
    if not strata:
        raise ValueError("A sampled pool needs at least one stratum.")
    for stratum in strata:
        if not isinstance(stratum, Stratum):
            raise ValueError(f"Strata must be Stratum objects, not {stratum!r}.")
    for before, after in pairwise(strata):
        span = f"{before.first_rank}-{before.last_rank} and {after.first_rank}-{after.last_rank}"
        if after.first_rank <= before.last_rank:
            raise ValueError(f"Strata must be increasing and must not overlap: {span} do.")
        if after.first_rank != before.last_rank + 1:
            raise ValueError(f"Strata must be contiguous: there is a gap between {span}.")
    return strata


_check_strata = check_strata  # the earlier private name, still used by callers


def _sample_size(rate: float, n: int) -> int:
    return min(n, max(1, math.ceil(round(rate * n, 9))))


def _sample_key(seed: int, topic: str, doc: str) -> bytes:
    return hashlib.sha256(f"{seed}:{topic}:{doc}".encode()).digest()


# --- Fixed-budget fusion pools --------------------------------------------------------------------


def rrf_pool(
    runs: Runs,
    *,
    budget: int,
    k: float = 60,
    depth: int | None = None,
    topics: Iterable[str] | None = None,
) -> Pool:
    """The ``budget`` documents per topic with the highest reciprocal rank fusion score.

    score(d) = sum over the runs that rank d (within ``depth``, when given) of 1 / (k + rank).
    Ties are broken by doc id descending. Each term is summed exactly rounded (math.fsum), so two
    documents with the same ranks in different runs tie exactly, whatever the run order. The score
    is recorded on each entry. Raises ValueError for a negative budget, depth or k.
    """
    if not (isinstance(k, int | float) and 0 <= k < math.inf):
        raise ValueError(f"The RRF constant k must be a finite number of 0 or more, not {k!r}.")
    return _fused_pool(
        runs,
        budget=budget,
        depth=depth,
        topics=topics,
        weight=lambda r: 1 / (k + r),
        combine=math.fsum,
    )


def rbp_pool(
    runs: Runs,
    *,
    budget: int,
    p: float = 0.8,
    aggregate: Literal["sum", "max"] = "sum",
    depth: int | None = None,
    topics: Iterable[str] | None = None,
) -> Pool:
    """The ``budget`` documents per topic with the highest rank-biased-precision weight.

    A run gives the document at ``rank`` the weight (1 - p) * p ** (rank - 1), its contribution to
    the run's RBP; ``aggregate`` sums the weights over runs or takes the largest. Only ranks within
    ``depth`` count, when given. Ties (including weights that underflow to 0 deep in long runs) are
    broken by doc id descending. The score is recorded on each entry. Raises ValueError unless
    0 < p < 1 and aggregate is "sum" or "max".
    """
    if not (isinstance(p, int | float) and 0 < p < 1):
        raise ValueError(f"The RBP persistence p must be between 0 and 1 (exclusive), not {p!r}.")
    if aggregate not in ("sum", "max"):
        raise ValueError(f'aggregate must be "sum" or "max", not {aggregate!r}.')
    return _fused_pool(
        runs,
        budget=budget,
        depth=depth,
        topics=topics,
        weight=lambda r: (1 - p) * p ** (r - 1),
        combine=math.fsum if aggregate == "sum" else max,
    )


def _fused_pool(
    runs: Runs,
    *,
    budget: int,
    depth: int | None,
    topics: Iterable[str] | None,
    weight: Callable[[int], float],
    combine: Callable[[Iterable[float]], float],
) -> Pool:
    budget = _count(budget, "The budget")
    depth_of = dict.fromkeys(runs, None if depth is None else _count(depth, "depth"))
    weights: list[float] = [0.0]  # weights[rank], computed once per rank

    def weight_at(rank: int) -> float:
        while len(weights) <= rank:
            weights.append(weight(len(weights)))
        return weights[rank]

    contributions = _ContributionCache()
    pool: Pool = {}
    for topic in _topics(runs, topics):
        found = _gather(runs, topic, depth_of, contributions)
        scores = {doc: combine(weight_at(c.rank) for c in found[doc]) for doc in found}
        # Score descending, then doc id descending: the trec_eval tie rule.
        kept = heapq.nlargest(budget, scores, key=lambda doc: (scores[doc], doc))
        pool[topic] = [PoolEntry(topic, doc, found[doc], score=scores[doc]) for doc in sorted(kept)]
    return pool


# --- Later rounds ---------------------------------------------------------------------------------


def residual(pool: Mapping[str, list[PoolEntry]], judged: Pairs) -> Pool:
    """The pool without any (topic, doc) pair already judged in the campaign.

    Works on the output of any strategy; every topic of ``pool`` stays a key, possibly with an
    empty list. The kept entries are the same objects, unchanged: for a sampled pool this means the
    inclusion probabilities still describe the original sample, not the residual.
    """
    judged = _pair_set(judged)
    return {
        topic: [e for e in entries if (e.topic_id, e.doc_id) not in judged]
        for topic, entries in pool.items()
    }


# --- Statistics -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicStatistics:
    """One topic of a pool. ``proposals`` is the sum over runs of min(k, length of its list)."""

    topic_id: str
    pooled: int
    proposals: int
    distinct_share: float  # pooled / proposals; 0.0 without proposals
    already_judged: int  # pooled pairs found in `judged`
    relevant_pooled: int | None  # pooled pairs found in `relevant`; None without qrels
    relevant_known: int | None  # pairs of this topic in `relevant`; None without qrels


@dataclass(frozen=True, slots=True)
class RunStatistics:
    """One run over the pool's topics, at its depth k."""

    run: str
    depth: int
    proposals: int  # documents in its top k, all topics
    unique: int  # pooled documents no other run has within its own top k, all topics
    unique_per_topic: dict[str, int]  # the same per topic (every topic of the pool)
    judged_in_top_k: int  # pairs of its top k found in `judged`
    relevant_in_top_k: int | None  # pairs of its top k found in `relevant`; None without qrels


@dataclass(frozen=True, slots=True)
class PoolTotals:
    topics: int
    runs: int
    pooled: int
    proposals: int
    distinct_share: float  # pooled / proposals: the share of runs x k that is distinct
    already_judged: int
    new: int  # pooled - already_judged: what judging the pool would cost now
    relevant_pooled: int | None
    relevant_known: int | None  # relevant pairs of the pool's topics
    relevant_found: float | None  # relevant_pooled / relevant_known; None without any


@dataclass(frozen=True, slots=True)
class PoolStatistics:
    """Returned by pool_statistics; ``dataclasses.asdict`` turns it into JSON-ready data."""

    per_topic: dict[str, TopicStatistics]
    per_run: dict[str, RunStatistics]
    totals: PoolTotals


def pool_statistics(
    runs: Runs,
    pool: Mapping[str, list[PoolEntry]],
    *,
    depth: int | Mapping[str, int],
    judged: Pairs = (),
    relevant: Pairs = (),
) -> PoolStatistics:
    """Sizes, overlap, unique contributions and coverage of ``pool``, over the pool's topics.

    ``depth`` (one k or run key -> k, as for depth_pool) says how deep each run is read: its
    proposals, its top k for judged and relevant counts, and which runs have a pooled document
    "within their top k" for unique contributions. A pooled document is unique to a run when no
    other run has it within its own top k. The counts are computed from ``runs``, not from the
    entries' provenance, so they mean the same for a pool of any strategy (and for a residual pool,
    in which case "pooled" means what remains). ``relevant`` is the set of pairs earlier qrels call
    relevant (the caller picks the label threshold); with none, the relevant fields are None.
    Topics appear in the pool's order, runs in code-point order of their keys.
    """
    depth_of = _depth_per_run(runs, depth)
    judged = _pair_set(judged)
    relevant = _pair_set(relevant)
    have_qrels = bool(relevant)
    relevant_per_topic: dict[str, int] = {}
    for topic, _doc in relevant:
        relevant_per_topic[topic] = relevant_per_topic.get(topic, 0) + 1

    run_keys = sorted(runs)
    run_proposals = dict.fromkeys(run_keys, 0)
    run_judged = dict.fromkeys(run_keys, 0)
    run_relevant = dict.fromkeys(run_keys, 0)
    unique: dict[str, dict[str, int]] = {run: {} for run in run_keys}
    per_topic: dict[str, TopicStatistics] = {}
    for topic, entries in pool.items():
        pooled = {e.doc_id for e in entries}
        owner: dict[str, str | None] = {}  # pooled doc -> the one run with it in its top k, or None
        proposals = 0
        for run in run_keys:
            top = (runs[run].get(topic) or ())[: depth_of[run]]
            proposals += len(top)
            run_proposals[run] += len(top)
            for doc in top:
                pair = (topic, doc)
                if pair in judged:
                    run_judged[run] += 1
                if pair in relevant:
                    run_relevant[run] += 1
                if doc in pooled and owner.setdefault(doc, run) != run:
                    owner[doc] = None
        for run in run_keys:
            unique[run][topic] = 0
        for who in owner.values():
            if who is not None:
                unique[who][topic] += 1
        per_topic[topic] = TopicStatistics(
            topic_id=topic,
            pooled=len(pooled),
            proposals=proposals,
            distinct_share=_share(len(pooled), proposals),
            already_judged=sum((topic, doc) in judged for doc in pooled),
            relevant_pooled=sum((topic, doc) in relevant for doc in pooled) if have_qrels else None,
            relevant_known=relevant_per_topic.get(topic, 0) if have_qrels else None,
        )

    per_run = {
        run: RunStatistics(
            run=run,
            depth=depth_of[run],
            proposals=run_proposals[run],
            unique=sum(unique[run].values()),
            unique_per_topic=unique[run],
            judged_in_top_k=run_judged[run],
            relevant_in_top_k=run_relevant[run] if have_qrels else None,
        )
        for run in run_keys
    }
    pooled_total = sum(t.pooled for t in per_topic.values())
    proposals_total = sum(t.proposals for t in per_topic.values())
    judged_total = sum(t.already_judged for t in per_topic.values())
    relevant_pooled = relevant_known = None
    if have_qrels:
        relevant_pooled = sum(t.relevant_pooled or 0 for t in per_topic.values())
        relevant_known = sum(t.relevant_known or 0 for t in per_topic.values())
    totals = PoolTotals(
        topics=len(per_topic),
        runs=len(run_keys),
        pooled=pooled_total,
        proposals=proposals_total,
        distinct_share=_share(pooled_total, proposals_total),
        already_judged=judged_total,
        new=pooled_total - judged_total,
        relevant_pooled=relevant_pooled,
        relevant_known=relevant_known,
        relevant_found=(relevant_pooled / relevant_known) if relevant_known else None,
    )
    return PoolStatistics(per_topic=per_topic, per_run=per_run, totals=totals)


# --- Depth planner --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlannerRow:
    """What a depth pool at ``depth`` would hold and cost, over the planned topics."""

    depth: int
    docs_per_topic_mean: float
    docs_per_topic_min: int
    docs_per_topic_max: int
    total_docs: int
    share_of_runs_x_k: float  # total distinct / total (runs x k) proposals; 0.0 without any
    new_docs: int  # total minus already-judged pairs: what it would cost now
    assessor_hours: float  # new_docs * seconds_per_judgment / 3600
    relevant_found: float | None  # share of the topics' known relevant pairs inside the pool


def plan_depths(
    runs: Runs,
    depths: Sequence[int],
    *,
    seconds_per_judgment: float = 30.0,
    judged: Pairs = (),
    relevant: Pairs = (),
    topics: Iterable[str] | None = None,
) -> list[PlannerRow]:
    """One row per depth (in the given order) describing ``depth_pool(runs, depth=d)``.

    The numbers equal building each depth pool and counting, without building any: per topic,
    each document's best rank over all runs is computed once, and the pool at depth k is the set of
    documents whose best rank is at most k, so a sorted list of best ranks and a binary search
    answer every depth (likewise for judged and relevant pairs). Proposals ("runs x k") are the sum
    over runs and topics of min(k, length of the list). ``relevant_found`` is the share of the
    relevant pairs of the planned topics that the pool contains; None when ``relevant`` has no pair
    for those topics. Topics as for depth_pool: a requested topic no run ranked counts as a topic
    with an empty pool. Raises ValueError for a negative depth or seconds_per_judgment.
    """
    depths = [_count(d, "Each depth") for d in depths]
    if not (isinstance(seconds_per_judgment, int | float) and 0 <= seconds_per_judgment < math.inf):
        raise ValueError(
            f"seconds_per_judgment must be a finite number of 0 or more, not "
            f"{seconds_per_judgment!r}."
        )
    topic_list = _topics(runs, topics)
    deepest = max(depths, default=0)
    judged_by_topic = _docs_by_topic(judged, topic_list)
    relevant_by_topic = _docs_by_topic(relevant, topic_list)
    relevant_known = sum(len(docs) for docs in relevant_by_topic.values())

    best_ranks_per_topic: list[list[int]] = []
    judged_best: list[int] = []
    relevant_best: list[int] = []
    lengths: list[int] = []
    run_lists = list(runs.values())
    for topic in topic_list:
        tops = []
        for by_topic in run_lists:
            ranked = by_topic.get(topic)
            if ranked:
                tops.append(ranked[:deepest])
                lengths.append(len(tops[-1]))
        best = _best_ranks(tops)
        best_ranks_per_topic.append(sorted(best.values()))
        judged_best.extend(best[d] for d in judged_by_topic.get(topic, ()) if d in best)
        relevant_best.extend(best[d] for d in relevant_by_topic.get(topic, ()) if d in best)
    judged_best.sort()
    relevant_best.sort()
    lengths.sort()
    length_sums = [0, *accumulate(lengths)]

    rows = []
    for k in depths:
        sizes = [bisect_right(ranks, k) for ranks in best_ranks_per_topic]
        total = sum(sizes)
        shorter = bisect_right(lengths, k)  # lists shorter than k propose all they have
        proposals = length_sums[shorter] + k * (len(lengths) - shorter)
        new = total - bisect_right(judged_best, k)
        rows.append(
            PlannerRow(
                depth=k,
                docs_per_topic_mean=total / len(sizes) if sizes else 0.0,
                docs_per_topic_min=min(sizes, default=0),
                docs_per_topic_max=max(sizes, default=0),
                total_docs=total,
                share_of_runs_x_k=_share(total, proposals),
                new_docs=new,
                assessor_hours=new * seconds_per_judgment / 3600,
                relevant_found=(
                    bisect_right(relevant_best, k) / relevant_known if relevant_known else None
                ),
            )
        )
    return rows


def _best_ranks(tops: list[Sequence[str]]) -> dict[str, int]:
    """doc -> its smallest rank over the given ranked lists, in C-speed builtins.

    The pairs (doc, rank) are fed to dict() deepest rank first, so the last value written for a
    document, the one that stays, is its best rank. zip_longest pads short lists with None.
    """
    columns = list(zip_longest(*tops))  # columns[r - 1]: every list's document at rank r
    best = dict(
        zip(
            chain.from_iterable(reversed(columns)),
            chain.from_iterable(repeat(rank, len(tops)) for rank in range(len(columns), 0, -1)),
            strict=True,
        )
    )
    best.pop(None, None)
    return best


# --- Helpers --------------------------------------------------------------------------------------


class _ContributionCache:
    """Contribution(run, rank) objects, made once per run and rank and shared (they are frozen)."""

    def __init__(self) -> None:
        self._made: dict[str, list[Contribution]] = {}

    def first(self, run: str, n: int) -> list[Contribution]:
        """A list whose first n items are Contribution(run, 1) ... Contribution(run, n)."""
        made = self._made.setdefault(run, [])
        if len(made) < n:
            made.extend(Contribution(run, rank) for rank in range(len(made) + 1, n + 1))
        return made


def _gather(
    runs: Runs,
    topic: str,
    depth_of: Mapping[str, int | None],
    cache: _ContributionCache,
) -> dict[str, list[Contribution]]:
    """doc -> contributions of every run that ranks it within its depth (None: all), by run key."""
    found: dict[str, list[Contribution]] = {}
    for run in sorted(runs):
        ranked = runs[run].get(topic)
        if not ranked:
            continue
        depth = depth_of[run]
        top = ranked if depth is None else ranked[:depth]
        # The cached list may be longer than this run's list: zip stops at the shorter.
        for doc, contribution in zip(top, cache.first(run, len(top)), strict=False):
            seen = found.get(doc)
            if seen is None:
                found[doc] = [contribution]
            elif seen[-1].run == run:
                raise ValueError(
                    f"Run {run!r} ranks document {doc!r} twice for topic {topic!r}; "
                    "a run lists each document at most once per topic."
                )
            else:
                seen.append(contribution)
    return found


def _topics(runs: Runs, topics: Iterable[str] | None) -> list[str]:
    if topics is None:
        return sorted({topic for by_topic in runs.values() for topic in by_topic})
    if isinstance(topics, str):
        raise TypeError("topics must be an iterable of topic ids, not one string.")
    return list(dict.fromkeys(topics))


def _depth_per_run(runs: Runs, depth: int | Mapping[str, int]) -> dict[str, int]:
    if isinstance(depth, Mapping):
        missing = sorted(set(runs) - set(depth))
        if missing:
            shown = ", ".join(map(repr, missing[:5])) + (" ..." if len(missing) > 5 else "")
            raise ValueError(f"The depth mapping has no depth for run(s) {shown}.")
        return {run: _count(depth[run], f"The depth of run {run!r}") for run in runs}
    k = _count(depth, "depth")
    return dict.fromkeys(runs, k)


def _integer(value: object, what: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, not {value!r}.")
    try:
        return operator.index(value)  # accepts int and NumPy integers, refuses floats and strings
    except TypeError:
        raise ValueError(f"{what} must be an integer, not {value!r}.") from None


def _count(value: object, what: str) -> int:
    n = _integer(value, what)
    if n < 0:
        raise ValueError(f"{what} must be 0 or more, not {n}.")
    return n


def _pair_set(pairs: Pairs) -> set[tuple[str, str]] | frozenset[tuple[str, str]]:
    if isinstance(pairs, set | frozenset):
        return pairs
    return {(topic, doc) for topic, doc in pairs}


def _docs_by_topic(pairs: Pairs, topics: list[str]) -> dict[str, set[str]]:
    wanted = set(topics)
    by_topic: dict[str, set[str]] = {}
    for topic, doc in pairs:
        if topic in wanted:
            by_topic.setdefault(topic, set()).add(doc)
    return by_topic


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0
