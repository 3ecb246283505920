"""Inferred measures for stratified sampled pools: xinfAP, infNDCG and inferred P@k.

A stratified sampled pool (``pooling.strategies.sample_pool``) judges a random sample of each
stratum of the pool, at a rate that differs between strata (the top densely, the tail sparsely).
trec_eval's ``infAP`` assumes one uniform sample of the whole pool and is biased on such pools;
the estimators here are those of Yilmaz, Kanoulas & Aslam, "A Simple and Efficient Sampling
Method for Estimating AP and NDCG" (SIGIR 2008), with the conventions of NIST's
``sample_eval.pl``, which TREC used for its sampled tracks and which the tests use as an oracle:

* The qrels name, per topic, every pooled document (the *universe*), its stratum and its label;
  label -1 is "in the stratum but not in the sample". A stratum's inclusion rate is recomputed
  from the counts (sampled / pooled), so a sampled document whose judgment is missing counts as
  not sampled, which is right when judgments go missing at random within a stratum.
* A document not in the qrels is outside the pool and counts as nonrelevant.
* Relevant for xinfAP and iP@k means label > 0; NDCG's gain is the label (after the optional
  gain map, which like sample_eval's ``-G`` replaces the label everywhere, so mapping a label to
  0 makes it nonrelevant for xinfAP too).
* A run is read in score order (compared as doubles), ties by document id descending (as
  trec_eval breaks them), down to ``max_depth`` (1,000) documents.
* The precision estimate among the documents above a rank uses sample_eval's smoothing
  ``(relevant + 0.00001) / (sampled + 0.00003)`` per stratum, so a stratum whose retrieved
  documents include no sampled one counts a third of them relevant, as it does there.
* The ideal DCG puts round(estimated number of documents of each grade) documents in grade order
  (highest first), cut at ``max_depth`` ranks (sample_eval adds one more term per grade past the
  cut, which only matters for topics with over 1,000 estimated relevant documents; kept).
  Grades are ordered numerically (sample_eval sorts them as strings, which differs only for
  labels of 10 and above).
* A run's mean is over the topics it retrieved documents for that the qrels have
  (sample_eval's convention, not trec_eval ``-c``).

Intervals: :func:`topic_bootstrap` is a percentile bootstrap of a run's mean over its topics,
seeded, so that every run with the same topics draws the same resamples (paired).

Nothing here imports Django: the evaluation page, the ``evaluate`` command, the export and the
benchmark all feed it plain mappings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import NamedTuple

from campaigns.textfiles import ProblemCollector, check_id, is_skippable, numbered, split_fields

MAX_DEPTH = 1000  # sample_eval's $maxResultSize
CUTOFFS = (10, 50, 1000)  # the iP@k sample_eval prints
MEASURES = ("xinfAP", "infNDCG", "iP@10", "iP@50", "iP@1000")
# What the evaluation page and command score a stratified sampled pool with by default.
DEFAULT_MEASURES = ("xinfAP", "infNDCG", "iP@10", "Judged@10")
_INFERRED = re.compile(r"xinfAP|infNDCG|iP@([1-9][0-9]*)")
NOT_SAMPLED = -1
# sample_eval's smoothing of the precision among the documents above a rank, per stratum.
_EPS_REL = 0.00001
_EPS_SAMPLED = 0.00003

Run = Mapping[str, Mapping[str, float]]  # topic -> document -> score
# (document, score) items in score order, ties by document id, both descending when reversed.
_SCORE_THEN_DOC = itemgetter(1, 0)


class SampledPair(NamedTuple):
    """One pooled (topic, document) pair of a sampled pool."""

    stratum: str
    label: int  # >= 0 judged; -1 pooled but not in the sample (or not judged yet)


SampleQrels = Mapping[str, Mapping[str, SampledPair]]  # topic -> document -> pair


def is_inferred(measure: str) -> bool:
    """Whether ``measure`` is one of this module's (xinfAP, infNDCG, iP@k)."""
    return _INFERRED.fullmatch(measure) is not None


def inferred_cutoffs(measures: Iterable[str]) -> list[int]:
    """The k of the iP@k among ``measures``, sorted (at least one: iP@10 when none is named)."""
    found = {int(m.group(1)) for m in map(_INFERRED.fullmatch, measures) if m and m.group(1)}
    return sorted(found) or [10]


# --- The qrels format ----------------------------------------------------------------------------


def parse_sample_qrels(lines: Iterable[str], *, source: str) -> dict[str, dict[str, SampledPair]]:
    """Reads sample_eval's five-column qrels, ``topic iteration docid stratum label``.

    Blank lines and ``#`` comments are skipped (sample_eval would read them as fields; files
    written by :func:`format_sample_qrels` have none). Raises ParseError naming the file and line
    of every problem: a line without five columns, an id :func:`check_id` refuses, a label that
    is not a whole number >= -1, the same (topic, document) twice (sample_eval would count it
    twice in its stratum).
    """
    problems = ProblemCollector(source)
    qrels: dict[str, dict[str, SampledPair]] = {}
    for number, line in numbered(lines):
        if is_skippable(line):
            continue
        fields = split_fields(line)
        if len(fields) != 5:
            problems.add(
                number,
                f"expected 5 columns (topic iteration docid stratum label), found {len(fields)}",
            )
            continue
        topic, _iteration, doc, stratum, label_text = fields
        bad = False
        for what, value in (("topic id", topic), ("document id", doc), ("stratum", stratum)):
            reason = check_id(value)
            if reason is not None:
                problems.add(number, f"{what} {value[:60]!r} {reason}")
                bad = True
        if not re.fullmatch(r"[+-]?\d+", label_text) or int(label_text) < NOT_SAMPLED:
            problems.add(
                number,
                f"label {label_text[:60]!r} is not a whole number >= -1 (-1 = pooled, not sampled)",
            )
            bad = True
        if bad:
            continue
        docs = qrels.setdefault(topic, {})
        if doc in docs:
            problems.add(number, f"document {doc!r} of topic {topic!r} is listed twice")
            continue
        docs[doc] = SampledPair(stratum, int(label_text))
    problems.raise_if_any()
    return qrels


def format_sample_qrels(qrels: SampleQrels) -> Iterator[str]:
    """Lines of sample_eval's qrels (``topic 0 docid stratum label``, with a newline), topics
    and documents in sorted order, so that the same qrels always give the same bytes."""
    for topic in sorted(qrels):
        docs = qrels[topic]
        for doc in sorted(docs):
            pair = docs[doc]
            yield f"{topic} 0 {doc} {pair.stratum} {pair.label}\n"


# --- The estimators ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StratumFacts:
    """One stratum of one topic, as the estimators see it."""

    pooled: int
    sampled: int  # pairs with a label >= 0
    relevant: int  # sampled pairs with a (mapped) label > 0

    @property
    def estimated_relevant(self) -> float:
        return self.relevant * self.pooled / self.sampled if self.sampled else 0.0


@dataclass
class _Topic:
    strata: list[str]  # in sorted order
    facts: list[StratumFacts]
    pairs: dict[str, tuple[int, float]]  # doc -> (stratum index, mapped label or -1)
    estimated_relevant: float
    ideal_dcg: float


@dataclass
class RunEstimates:
    run: str
    per_topic: dict[str, dict[str, float]]  # topic -> measure -> value (plus the counts below)
    mean: dict[str, float]  # over the topics in per_topic


@dataclass
class SampledEvaluator:
    """Per-topic facts of a sampled pool's qrels, computed once and reused for every run.

    ``gains`` maps a label to the value used in its place (sample_eval's ``-G``); labels it does
    not name keep their own value. ``cutoffs`` are the k of iP@k. Raises ValueError for a gain
    below 0 or a cutoff below 1.
    """

    qrels: SampleQrels
    gains: Mapping[int, float] | None = None
    cutoffs: Sequence[int] = CUTOFFS
    max_depth: int = MAX_DEPTH
    topics: dict[str, _Topic] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        gains = dict(self.gains or {})
        if any(value < 0 or not math.isfinite(value) for value in gains.values()):
            raise ValueError("gains must be finite and >= 0 (labels below 0 are not sampled)")
        if not self.cutoffs or min(self.cutoffs) < 1:
            raise ValueError("iP cutoffs must be >= 1")
        if self.max_depth < 1:
            raise ValueError("max_depth must be >= 1")
        self.cutoffs = sorted(set(self.cutoffs))
        self.topics = {
            topic: self._topic(docs, gains) for topic, docs in self.qrels.items() if docs
        }

    def _topic(self, docs: Mapping[str, SampledPair], gains: Mapping[int, float]) -> _Topic:
        strata = sorted({pair.stratum for pair in docs.values()})
        index = {name: i for i, name in enumerate(strata)}
        pooled = [0] * len(strata)
        sampled = [0] * len(strata)
        relevant = [0] * len(strata)
        grades: list[dict[float, int]] = [{} for _ in strata]
        pairs: dict[str, tuple[int, float]] = {}
        for doc, pair in docs.items():
            s = index[pair.stratum]
            value: float = pair.label
            if pair.label >= 0:
                value = gains.get(pair.label, pair.label)
                sampled[s] += 1
                if value > 0:
                    relevant[s] += 1
                    grades[s][value] = grades[s].get(value, 0) + 1
            pooled[s] += 1
            pairs[doc] = (s, value)
        facts = [StratumFacts(*counts) for counts in zip(pooled, sampled, relevant, strict=True)]
        per_grade: dict[float, float] = {}
        for s, counts in enumerate(grades):
            for grade, count in counts.items():
                per_grade[grade] = per_grade.get(grade, 0.0) + count * pooled[s] / sampled[s]
        return _Topic(
            strata=strata,
            facts=facts,
            pairs=pairs,
            estimated_relevant=sum(f.estimated_relevant for f in facts),
            ideal_dcg=self._ideal_dcg(per_grade),
        )

    def _ideal_dcg(self, per_grade: Mapping[float, float]) -> float:
        ideal = 0.0
        start = 0
        for grade in sorted(per_grade, reverse=True):
            count = math.floor(per_grade[grade] + 0.5)  # Perl's int(x + 0.5)
            if count >= 1:
                last = min(start + count, max(start + 1, self.max_depth))
                ideal += sum(grade / math.log2(r + 1) for r in range(start + 1, last + 1))
            start += count
        return ideal

    @property
    def measures(self) -> list[str]:
        return ["xinfAP", "infNDCG", *(f"iP@{k}" for k in self.cutoffs)]

    def estimated_relevant(self, topic: str) -> float:
        """The estimated number of relevant documents of a topic (sample_eval's inum_rel)."""
        found = self.topics.get(topic)
        return found.estimated_relevant if found is not None else 0.0

    def evaluate(self, name: str, run: Run) -> RunEstimates:
        """Per-topic estimates for the qrels topics the run retrieved documents for, and their
        means. Per topic, besides the measures: ``inum_rel_ret`` (estimated relevant documents
        retrieved), ``inum_rel`` and ``num_ret`` (documents the run listed)."""
        per_topic: dict[str, dict[str, float]] = {}
        for topic, ranking in run.items():
            facts = self.topics.get(topic)
            if facts is None or not ranking:
                continue
            per_topic[topic] = self._estimate(facts, ranking)
        count = len(per_topic)
        mean = {
            m: (sum(values[m] for values in per_topic.values()) / count if count else 0.0)
            for m in self.measures
        }
        return RunEstimates(run=name, per_topic=per_topic, mean=mean)

    def _estimate(self, topic: _Topic, ranking: Mapping[str, float]) -> dict[str, float]:
        n = len(topic.strata)
        above = [0] * n  # pooled documents above the current rank, per stratum
        sampled_above = [0] * n
        relevant_above = [0] * n
        precision_sum = [0.0] * n  # sum of the estimated precisions at relevant documents
        gain = [0.0] * n  # discounted gain of the relevant documents, per stratum
        relevant_at: dict[int, float] = {}

        def relevant_retrieved() -> float:
            return sum(
                above[s] * (relevant_above[s] + _EPS_REL) / (sampled_above[s] + _EPS_SAMPLED)
                for s in range(n)
                if above[s]
            )

        ordered = sorted(ranking.items(), key=_SCORE_THEN_DOC, reverse=True)[: self.max_depth]
        pairs = topic.pairs
        # Only pooled documents change the estimates; the others just take up ranks.
        pooled = [(rank, pairs[doc]) for rank, (doc, _) in enumerate(ordered, 1) if doc in pairs]
        cutoffs = self.cutoffs  # ascending
        pending = 0
        for rank, (s, value) in pooled:
            while pending < len(cutoffs) and cutoffs[pending] < rank:
                relevant_at[cutoffs[pending]] = relevant_retrieved()
                pending += 1
            if value > 0:
                # The expected precision at this relevant document: itself, plus the estimated
                # relevant documents above it (outside the pool they count as nonrelevant).
                precision_sum[s] += (1.0 + relevant_retrieved()) / rank
                relevant_above[s] += 1
                gain[s] += value / math.log2(rank + 1)
            above[s] += 1
            if value >= 0:
                sampled_above[s] += 1
        retrieved = relevant_retrieved()

        estimated = topic.estimated_relevant
        ap = 0.0
        if estimated:
            for s, facts in enumerate(topic.facts):
                if facts.relevant:
                    share = facts.estimated_relevant / estimated
                    ap += share * precision_sum[s] / facts.relevant
        dcg = sum(above[s] * gain[s] / sampled_above[s] for s in range(n) if sampled_above[s])
        values = {
            "xinfAP": ap,
            "infNDCG": dcg / topic.ideal_dcg if topic.ideal_dcg else 0.0,
        }
        for k in self.cutoffs:
            values[f"iP@{k}"] = relevant_at.get(k, retrieved) / k
        values["inum_rel_ret"] = retrieved
        values["inum_rel"] = estimated
        values["num_ret"] = float(len(ranking))
        return values


def evaluate_sampled(
    qrels: SampleQrels,
    runs: Mapping[str, Run],
    *,
    gains: Mapping[int, float] | None = None,
    cutoffs: Sequence[int] = CUTOFFS,
) -> list[RunEstimates]:
    """xinfAP, infNDCG and iP@k of every run (in the mapping's order) on a sampled pool's qrels."""
    evaluator = SampledEvaluator(qrels, gains=gains, cutoffs=cutoffs)
    return [evaluator.evaluate(name, run) for name, run in runs.items()]


# --- Intervals -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    level: float
    resamples: int


def topic_bootstrap(
    per_topic: Mapping[str, float], *, resamples: int = 1000, level: float = 0.95, seed: int = 0
) -> Interval | None:
    """A percentile bootstrap interval of the mean over topics: ``resamples`` draws of as many
    topics with replacement, the middle ``level`` of their means. The topics are taken in sorted
    order and the draws depend only on ``seed`` and the number of topics, so two runs over the
    same topics are resampled alike. None for no topics; raises ValueError for a level outside
    (0, 1) or fewer than 1 resample."""
    if not 0 < level < 1:
        raise ValueError("the interval's level must be between 0 and 1")
    if resamples < 1:
        raise ValueError("resamples must be >= 1")
    if not per_topic:
        return None
    import numpy as np  # only when an interval is asked for

    values = np.array([per_topic[t] for t in sorted(per_topic)], dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(values), size=(resamples, len(values)))
    means = values[draws].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Interval(low=float(low), high=float(high), level=level, resamples=resamples)


# --- From a pool ---------------------------------------------------------------------------------


def pool_sample_qrels(
    entries: Iterable[tuple[str, str, int, bool]], labels: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, SampledPair]]:
    """sample_eval's qrels of a sampled pool: ``entries`` are the pool's (topic, document,
    0-based stratum, sampled) pairs, ``labels`` the campaign's verdicts (topic -> document ->
    label). Strata are named by their 1-based number in the pool's definition. A sampled pair
    gets its label, or -1 while it has none; a pair outside the sample gets -1 even when some
    other route judged it, because the estimators need the judged set to be the random sample.
    """
    qrels: dict[str, dict[str, SampledPair]] = {}
    for topic, doc, stratum, sampled in entries:
        label = labels.get(topic, {}).get(doc, NOT_SAMPLED) if sampled else NOT_SAMPLED
        qrels.setdefault(topic, {})[doc] = SampledPair(str(stratum + 1), max(label, NOT_SAMPLED))
    return qrels
