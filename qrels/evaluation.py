"""Scoring runs against qrels the way trec_eval does, at a campaign's relevance threshold.

Every retrieval measure is computed by trec_eval's own code through pytrec_eval: one
``RelevanceEvaluator`` per (qrels, threshold), reused for every run, one ``evaluate`` call per run
with all measures. ir_measures is used only to parse measure names (``"nDCG@10"``); running the
measures through it adds a conversion pass per run that a campaign with a hundred runs notices.

The one measure trec_eval lacks, ``Judged@k``, is counting and is done here: the share of the
run's top k (trec_eval order, see :func:`trec_eval_order`) that has a verdict, i.e. a qrels entry
with a label >= 0. Labels below 0 mean pooled but not judged (DESIGN.md) and do not count, which
is where this differs from ir_measures' ``Judged@k`` (it counts any qrels entry). Like
ir_measures, the denominator is the number of documents in that top k (fewer than k when the run
returned fewer).

Conventions, all trec_eval's:

* relevant for binary measures (AP, P@k, Rprec, bpref, infAP) means label >= the threshold
  (trec_eval ``-l``); nDCG uses the labels as gains whatever the threshold, and labels below 0
  are no gain;
* labels below 0 stay in the qrels: bpref ignores them, AP and P@k count them as nonrelevant, and
  infAP treats them as "pooled but not sampled" (a document absent from the qrels is "not in the
  pool" and counts as nonrelevant; a -1 document is left out of the estimate);
* per-topic values exist for the qrels topics the run returned documents for; means are over all
  qrels topics, a topic the run missed counting 0 (trec_eval ``-c``);
* run order is score descending (compared as a 32-bit float, as trec_eval keeps scores), ties
  by document id descending; the rank column is ignored.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from pooljudge.common import trec_eval_order

MEASURES = ("AP", "nDCG@10", "P@10", "Rprec", "bpref", "infAP", "Judged@10")

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]

# ir_measures spells it "Bpref"; trec_eval and this module's MEASURES spell it "bpref".
_ALIASES = {"bpref": "Bpref", "map": "AP", "MAP": "AP", "ndcg": "nDCG"}

# ir_measures measure name -> (trec_eval family, whether it takes a cutoff).
_TREC_FAMILIES = {
    "AP": ("map", False),
    "nDCG": ("ndcg", False),
    "P": ("P", True),
    "R": ("recall", True),
    "Rprec": ("Rprec", False),
    "Bpref": ("bpref", False),
    "infAP": ("infAP", False),
    "RR": ("recip_rank", False),
}
_CUTOFF_FAMILIES = {"AP": "map_cut", "nDCG": "ndcg_cut"}


@dataclass(frozen=True)
class _Measure:
    name: str  # as the caller spelled it: the key in the results
    family: str  # trec_eval family ("P", "ndcg_cut", ...) or "judged"
    cutoff: int | None

    @property
    def trec_key(self) -> str:
        return self.family if self.cutoff is None else f"{self.family}_{self.cutoff}"


def _parse_measure(name: str) -> _Measure:
    import ir_measures  # here, not at the top: a web process imports MEASURES for its forms

    spelled = name
    match = re.fullmatch(r"([A-Za-z_]+)(@\d+)?", name)
    if match and match.group(1) in _ALIASES:
        spelled = _ALIASES[match.group(1)] + (match.group(2) or "")
    try:
        parsed = ir_measures.parse_measure(spelled)
    except (NameError, ValueError, SyntaxError, TypeError, AttributeError) as error:
        raise ValueError(f"unknown measure {name!r}") from error
    params = dict(parsed.params)
    cutoff = params.pop("cutoff", None)
    if params:
        # A different rel= needs a second trec_eval invocation; the campaign has one threshold.
        raise ValueError(f"measure {name!r}: only a cutoff (@k) is supported, not {params}")
    if parsed.NAME == "Judged":
        if cutoff is None:
            raise ValueError(f"measure {name!r} needs a cutoff, e.g. Judged@10")
        return _Measure(name, "judged", cutoff)
    if parsed.NAME not in _TREC_FAMILIES:
        raise ValueError(f"measure {name!r} is not computed by trec_eval")
    family, needs_cutoff = _TREC_FAMILIES[parsed.NAME]
    if cutoff is not None and not needs_cutoff:
        if parsed.NAME not in _CUTOFF_FAMILIES:
            raise ValueError(f"measure {name!r} takes no cutoff")
        family = _CUTOFF_FAMILIES[parsed.NAME]
    if needs_cutoff and cutoff is None:
        raise ValueError(f"measure {name!r} needs a cutoff, e.g. {parsed.NAME}@10")
    return _Measure(name, family, cutoff)


def trec_eval_measure_names(measures: Sequence[str]) -> dict[str, str]:
    """Maps each measure name to the key pytrec_eval reports it under (``"P@10"`` -> ``"P_10"``).

    ``Judged@k`` maps to itself: it is not a trec_eval measure.
    """
    return {
        m.name: (m.name if m.family == "judged" else m.trec_key)
        for m in map(_parse_measure, measures)
    }


@dataclass
class RunScores:
    run: str
    per_topic: dict[str, dict[str, float]]  # topic -> measure -> value, topics the run answered
    mean: dict[str, float]  # over all qrels topics; a topic the run missed counts 0
    unjudged_at_10: float  # mean of 1 - Judged@10 over the topics in per_topic


@dataclass
class LeaveOneOut:
    run: str
    score_full: float
    score_loo: float
    drop: float  # score_full - score_loo
    rank_full: int  # 1 = best, among all runs
    rank_loo: int
    removed: int  # qrels entries only this run had contributed (any label)
    removed_relevant: int  # of those, label >= the relevance threshold


@dataclass
class UnjudgedRow:
    run: str
    contributor: bool
    unjudged: dict[int, float]  # depth -> mean over topics of the unjudged share of the top depth
    topics: int  # qrels topics the run returned documents for (the mean is over these)
    per_topic: dict[int, dict[str, float]] = field(default_factory=dict)  # depth -> topic -> share


def _qrels_for_trec_eval(qrels: Qrels) -> dict[str, dict[str, int]]:
    # trec_eval knows a topic only from its lines: an empty topic is no topic.
    return {topic: dict(labels) for topic, labels in qrels.items() if labels}


def _run_for_trec_eval(run: Run) -> dict[str, dict[str, float]]:
    # pytrec_eval wants plain dicts; copying a 1000-document run per topic costs time, so only
    # convert what is not one already.
    if isinstance(run, dict) and all(type(docs) is dict for docs in run.values()):
        return run  # type: ignore[return-value]
    return {topic: dict(docs) for topic, docs in run.items()}


class _Scorer:
    """One pytrec_eval evaluator for a qrels and threshold, reused for every run."""

    def __init__(
        self,
        qrels: Qrels,
        measures: Sequence[str],
        relevance_threshold: int,
        topics: Sequence[str] | None = None,
    ) -> None:
        if relevance_threshold < 1:
            raise ValueError("the relevance threshold must be >= 1 (labels below 0 are unjudged)")
        self.measures = [_parse_measure(m) for m in measures]
        if len({m.name for m in self.measures}) != len(self.measures):
            raise ValueError("a measure is listed twice")
        self.qrels = _qrels_for_trec_eval(qrels)
        # The topics a mean is over: the qrels' own, unless the caller fixes them.
        self.topics = list(self.qrels) if topics is None else list(topics)
        self.relevance_threshold = relevance_threshold
        cutoffs: dict[str, set[int]] = {}
        for m in self.measures:
            if m.family != "judged":
                cutoffs.setdefault(m.family, set())
                if m.cutoff is not None:
                    cutoffs[m.family].add(m.cutoff)
        requests = {
            family if not cuts else f"{family}.{','.join(map(str, sorted(cuts)))}"
            for family, cuts in cutoffs.items()
        }
        import pytrec_eval  # here, not at the top (see _parse_measure)

        self.evaluator = (
            pytrec_eval.RelevanceEvaluator(
                self.qrels, requests, relevance_level=relevance_threshold
            )
            if requests and self.qrels
            else None
        )
        self.judged_cutoffs = sorted({m.cutoff for m in self.measures if m.family == "judged"})

    def score(self, name: str, run: Run) -> RunScores:
        run = _run_for_trec_eval(run)
        results = self.evaluator.evaluate(run) if self.evaluator is not None else {}
        depth = max([10, *self.judged_cutoffs])
        per_topic: dict[str, dict[str, float]] = {}
        unjudged: list[float] = []
        for topic in self.topics:
            docs = run.get(topic)
            if not docs:
                continue
            trec = results.get(topic, {})
            judged = _judged_shares(trec_eval_order(docs, depth), self.qrels.get(topic, {}))
            values = {}
            for m in self.measures:
                values[m.name] = (
                    judged[min(m.cutoff, len(judged)) - 1]
                    if m.family == "judged"
                    else trec.get(m.trec_key, 0.0)
                )
            per_topic[topic] = values
            unjudged.append(1.0 - judged[min(10, len(judged)) - 1])
        n_topics = len(self.topics)
        mean = {
            m.name: (sum(v[m.name] for v in per_topic.values()) / n_topics if n_topics else 0.0)
            for m in self.measures
        }
        # A run that answered none of the topics has nothing judged in any top 10.
        unjudged_at_10 = sum(unjudged) / len(unjudged) if unjudged else 1.0
        return RunScores(run=name, per_topic=per_topic, mean=mean, unjudged_at_10=unjudged_at_10)


def _judged_shares(top: Sequence[str], labels: Mapping[str, int]) -> list[float]:
    """Share of top[:i+1] with a verdict (label >= 0), for every i."""
    shares = []
    judged = 0
    for i, doc in enumerate(top, start=1):
        if labels.get(doc, -1) >= 0:
            judged += 1
        shares.append(judged / i)
    return shares


def evaluate_runs(
    qrels: Qrels,
    runs: Mapping[str, Run],
    *,
    measures: Sequence[str] = MEASURES,
    relevance_threshold: int = 1,
) -> list[RunScores]:
    """Scores every run (in the mapping's order) with trec_eval's code, via pytrec_eval.

    ``measures`` are ir_measures names with an optional cutoff (``AP``, ``nDCG@10``, ``P@10``,
    ``R@100``, ``Rprec``, ``bpref``/``Bpref``, ``infAP``, ``RR``, ``Judged@10``); the results
    are keyed by the names as given. Raises ValueError for a measure trec_eval does not compute,
    for measure parameters other than a cutoff, or for a threshold below 1.
    """
    scorer = _Scorer(qrels, measures, relevance_threshold)
    return [scorer.score(name, run) for name, run in runs.items()]


def rank_runs(scores: Sequence[RunScores], measure: str) -> list[str]:
    """Run names, best mean first; equal means in name order."""
    return [s.run for s in sorted(scores, key=lambda s: (-s.mean[measure], s.run))]


def _pool_contributions(
    qrels: Qrels, runs: Mapping[str, Run], contributors: Sequence[str], pool_depth: int
) -> dict[str, dict[str, set[str]]]:
    """contributor -> topic -> the documents only it put in its top pool_depth."""
    unique: dict[str, dict[str, set[str]]] = {name: {} for name in contributors}
    for topic in qrels:
        tops = {
            name: set(trec_eval_order(runs[name].get(topic, {}), pool_depth))
            for name in contributors
        }
        counts = Counter(doc for top in tops.values() for doc in top)
        for name, top in tops.items():
            only = {doc for doc in top if counts[doc] == 1}
            if only:
                unique[name][topic] = only
    return unique


def leave_one_out(
    qrels: Qrels,
    runs: Mapping[str, Run],
    *,
    pool_depth: int,
    contributors: Collection[str],
    measure: str = "AP",
    relevance_threshold: int = 1,
) -> list[LeaveOneOut]:
    """Seed 000's leave-one-out test, one row per contributing run (in name order).

    For each contributor, the qrels entries of the documents that only it put in its top
    ``pool_depth`` (trec_eval order; other contributors' tops decide "only") are removed, and it
    is rescored on what remains. Ranks are among all ``runs``, every other run keeping its
    full-qrels score. The mean stays over the full qrels' topics, so a topic emptied by the
    removal counts 0 rather than vanishing. Raises ValueError for a contributor not in ``runs``.
    """
    if pool_depth < 1:
        raise ValueError("pool_depth must be >= 1")
    missing = sorted(set(contributors) - set(runs))
    if missing:
        raise ValueError(f"contributors without a run: {', '.join(missing)}")
    contributors = sorted(contributors)
    full_scorer = _Scorer(qrels, [measure], relevance_threshold)
    full = {name: full_scorer.score(name, run).mean[measure] for name, run in runs.items()}
    unique = _pool_contributions(full_scorer.qrels, runs, contributors, pool_depth)

    rows = []
    for name in contributors:
        removed = removed_relevant = 0
        reduced: dict[str, dict[str, int]] = {}
        for topic, labels in full_scorer.qrels.items():
            only = unique[name].get(topic)
            if not only:
                reduced[topic] = labels
                continue
            kept = {}
            for doc, label in labels.items():
                if doc in only:
                    removed += 1
                    removed_relevant += label >= relevance_threshold
                else:
                    kept[doc] = label
            reduced[topic] = kept
        # The mean stays over the full topic set, even if a topic lost all its judgments.
        loo_scorer = _Scorer(reduced, [measure], relevance_threshold, topics=full_scorer.topics)
        score_loo = loo_scorer.score(name, runs[name]).mean[measure] if removed else full[name]
        rows.append(
            LeaveOneOut(
                run=name,
                score_full=full[name],
                score_loo=score_loo,
                drop=full[name] - score_loo,
                rank_full=_rank_of(name, full),
                rank_loo=_rank_of(name, {**full, name: score_loo}),
                removed=removed,
                removed_relevant=removed_relevant,
            )
        )
    return rows


def _rank_of(name: str, scores: Mapping[str, float]) -> int:
    order = sorted(scores, key=lambda run: (-scores[run], run))
    return order.index(name) + 1


def unjudged_fractions(
    qrels: Qrels,
    runs: Mapping[str, Run],
    *,
    depths: Sequence[int] = (10,),
    contributors: Collection[str] = (),
) -> list[UnjudgedRow]:
    """Per run (mapping order), the share of its top k with no verdict, for each depth k.

    "No verdict" is no qrels entry or a label below 0. The share for a topic is over the documents
    in the run's top k (fewer than k if it returned fewer), and the mean is over the qrels topics
    the run returned documents for; a run that returned none for any qrels topic gets 1.0.
    Seed 003's warning sign: a non-contributor with a double-digit share needs a caveat.
    """
    if not depths or min(depths) < 1:
        raise ValueError("depths must be a non-empty list of cutoffs >= 1")
    qrels_topics = _qrels_for_trec_eval(qrels)
    deepest = max(depths)
    contributor_set = set(contributors)
    rows = []
    for name, run in runs.items():
        per_topic: dict[int, dict[str, float]] = {k: {} for k in depths}
        for topic, labels in qrels_topics.items():
            docs = run.get(topic)
            if not docs:
                continue
            judged = _judged_shares(trec_eval_order(docs, deepest), labels)
            for k in depths:
                per_topic[k][topic] = 1.0 - judged[min(k, len(judged)) - 1]
        answered = len(per_topic[depths[0]])
        rows.append(
            UnjudgedRow(
                run=name,
                contributor=name in contributor_set,
                unjudged={
                    k: (sum(per_topic[k].values()) / answered if answered else 1.0) for k in depths
                },
                topics=answered,
                per_topic=per_topic,
            )
        )
    return rows
