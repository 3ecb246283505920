"""Hybrid budget: people judge a share of each topic's pairs, a calibrated model fills the rest.

A simulation over two qrels on the same pairs (people's, a model's; optionally the model's
probability that a pair is relevant), no Django. Per topic, people judge at most ``budget`` % of
the pairs (``floor(budget * n / 100)``), chosen by one of three routings:

* ``uncertain`` (the default): people go where the model is least sure *for this topic*. The
  model's pairs are cut into strata: its label, or, with probabilities, the tenth of [0, 1] the
  probability falls in. Each stratum's rate of relevance among the pairs people judged so far is
  estimated with a Beta(PRIOR, PRIOR) prior (centred on 1/2, so a stratum nobody judged yet is
  maximally uncertain and gets probed), and the next pair comes from the stratum where filling
  one more pair with the model would most likely be wrong, ``min(p, 1 - p)``; ties go to the
  stratum nearest the relevance threshold (labels 1 and 2 on a 0-3 or 0-4 scale with threshold
  2; probabilities nearest 1/2), then to the seeded order. Judging one pair from that stratum
  removes the largest expected error and sharpens the estimate that decides the rest.
* ``boundary``: a fixed order, nearest the threshold first (the model's label, or its probability),
  ties in the seeded order; no learning from what people say.
* ``random``: the seeded order.

Calibration (the fill): an unjudged pair gets the binary verdict (relevant or not) that the
people gave most often, *in this topic*, to the pairs of its stratum they judged. A stratum people
did not judge in this topic (or judged half and half) takes the majority over every topic's
judged pairs of that stratum; a stratum nobody judged anywhere keeps the model's own verdict
(label >= threshold, probability >= 1/2). A per-topic majority is the simplest calibration that
corrects what matters here: the model's leniency varies by topic (on TREC RAG 2025 the share of
UMBRELA's label-2 pairs people called relevant ranges from 0.36 to 0.98 across topics), and a
majority vote needs no parameters and cannot do worse than the model on the pairs it learned from.

The merged qrels (people's verdicts where judged, calibrated model verdicts elsewhere) are scored
against the people's full qrels with binary Cohen's kappa (label >= threshold), the statistic of
``qrels.agreement``. Negative labels (pooled, not judged) are not verdicts: a pair with one on
either side is left out, and so is a pair only one file has (both counted in the result).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from assess.routing import (
    PRIOR,
    ROUTINGS,
    Stratum,
    budget_count,
    fill_verdict,
    model_verdict,
    ranking,
    seeded_order,
    stratum,
)
from campaigns.textfiles import ProblemCollector, check_id, shown, split_fields
from qrels.agreement import cohen_kappa

__all__ = ["PRIOR", "ROUTINGS", "HybridResult", "curve", "model_alone_kappa", "simulate"]

Pair = tuple[str, str]
DEFAULT_BUDGETS = (10, 20, 30, 40, 50, 60)


@dataclass
class HybridResult:
    budget: float
    routing: str
    kappa: float | None
    pairs: int  # pairs in the simulation (both files, non-negative labels)
    judged: int  # by people
    filled: int  # by the calibrated model
    flipped: int  # filled pairs whose calibrated verdict differs from the model's own
    left_out: int  # pairs only one file has, or with a negative label
    merged: dict[Pair, int] = field(repr=False, default_factory=dict)  # binary 0/1
    judged_pairs: set[Pair] = field(repr=False, default_factory=set)
    # Per topic, the pairs people judge in the order the routing gives them out.
    order: dict[str, list[Pair]] = field(repr=False, default_factory=dict)


def binary_kappa(reference: Mapping[Pair, int], other: Mapping[Pair, int]) -> float | None:
    """Cohen's kappa of two binary (0/1) labellings on the pairs of ``reference``."""
    counts = [[0, 0], [0, 0]]
    for pair, verdict in reference.items():
        counts[verdict][other[pair]] += 1
    return cohen_kappa(counts)


def simulate(
    *,
    people: Mapping[Pair, int],
    model: Mapping[Pair, int],
    budget: float,
    routing: str = "uncertain",
    threshold: int = 2,
    probabilities: Mapping[Pair, float] | None = None,
    seed: int = 0,
    prior: float = PRIOR,
) -> HybridResult:
    """One hybrid run: who judges what, the calibrated fill, and kappa against ``people``.

    The routing and the fill are ``assess.routing``'s, the ones a live campaign uses."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing is one of {', '.join(ROUTINGS)}, not {routing!r}")
    if not 0 <= budget <= 100:
        raise ValueError(f"budget is a percentage in [0, 100], not {budget}")
    with_probabilities = probabilities is not None
    pairs = sorted(
        p
        for p in people.keys() & model.keys()
        if people[p] >= 0 and model[p] >= 0 and (probabilities is None or p in probabilities)
    )
    left_out = len(people.keys() | model.keys()) - len(pairs)
    truth = {p: int(people[p] >= threshold) for p in pairs}
    by_topic: dict[str, list[str]] = defaultdict(list)
    for topic, doc in pairs:
        by_topic[topic].append(doc)

    def stratum_of(pair: Pair) -> int:
        if probabilities is not None:
            return stratum(probabilities[pair], probabilities=True)
        return stratum(model[pair], probabilities=False)

    merged: dict[Pair, int] = {}
    judged_pairs: set[Pair] = set()
    given: dict[str, list[Pair]] = {}
    # Per topic: stratum -> its state (pairs left, people's verdicts), and the unjudged pairs.
    topic_strata: dict[str, dict[int, Stratum]] = {}
    topic_rest: dict[str, dict[int, list[Pair]]] = {}
    for topic in sorted(by_topic):
        order = [(topic, doc) for doc in seeded_order(topic, by_topic[topic], seed=seed)]
        allowed = budget_count(budget, len(order))
        members: dict[int, list[Pair]] = defaultdict(list)
        for pair in order:
            members[stratum_of(pair)].append(pair)
        strata = {s: Stratum(left=len(m)) for s, m in members.items()}
        taken = dict.fromkeys(members, 0)
        chosen: list[Pair] = []
        if routing == "uncertain":
            # Learns from each verdict: the ranking is asked again after every pair.
            for _ in range(allowed):
                ranks = ranking(
                    strata,
                    routing=routing,
                    threshold=threshold,
                    probabilities=with_probabilities,
                    prior=prior,
                )
                s = min(ranks, key=ranks.__getitem__)
                chosen.append(members[s][taken[s]])
                taken[s] += 1
                strata[s].left -= 1
                if truth[chosen[-1]]:
                    strata[s].relevant += 1
                else:
                    strata[s].not_relevant += 1
        else:
            # A fixed order: equal ranks keep the seeded order (a stable sort).
            ranks = ranking(
                strata, routing=routing, threshold=threshold, probabilities=with_probabilities
            )
            for pair in sorted(order, key=lambda p: ranks[stratum_of(p)])[:allowed]:
                chosen.append(pair)
                s = stratum_of(pair)
                taken[s] += 1
                strata[s].left -= 1
                if truth[pair]:
                    strata[s].relevant += 1
                else:
                    strata[s].not_relevant += 1
        given[topic] = chosen
        judged_pairs.update(chosen)
        topic_strata[topic] = strata
        topic_rest[topic] = {s: [p for p in m if p not in judged_pairs] for s, m in members.items()}

    pooled: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for strata in topic_strata.values():
        for s, state in strata.items():
            pooled[s][0] += state.relevant
            pooled[s][1] += state.not_relevant
    for pair in judged_pairs:
        merged[pair] = truth[pair]
    flipped = 0
    for topic, rest in topic_rest.items():
        for s, members_left in rest.items():
            state = topic_strata[topic][s]
            verdict = fill_verdict(
                s,
                topic=(state.relevant, state.not_relevant),
                everywhere=tuple(pooled[s]),
                threshold=threshold,
                probabilities=with_probabilities,
            )
            own = model_verdict(s, threshold=threshold, probabilities=with_probabilities)
            if verdict != own:
                flipped += len(members_left)
            for pair in members_left:
                merged[pair] = verdict
    return HybridResult(
        budget=budget,
        routing=routing,
        kappa=binary_kappa(truth, merged) if truth else None,
        pairs=len(pairs),
        judged=len(judged_pairs),
        filled=len(pairs) - len(judged_pairs),
        flipped=flipped,
        left_out=left_out,
        merged=merged,
        judged_pairs=judged_pairs,
        order=given,
    )


def model_alone_kappa(
    *, people: Mapping[Pair, int], model: Mapping[Pair, int], threshold: int = 2
) -> float | None:
    """Binary kappa of the model's own verdicts (label >= threshold) against the people's."""
    pairs = [p for p in people.keys() & model.keys() if people[p] >= 0 and model[p] >= 0]
    return binary_kappa(
        {p: int(people[p] >= threshold) for p in pairs},
        {p: int(model[p] >= threshold) for p in pairs},
    )


@dataclass
class CurvePoint:
    budget: float
    routing: str
    kappas: list[float | None]  # one per seed

    @property
    def mean(self) -> float | None:
        values = [k for k in self.kappas if k is not None]
        return sum(values) / len(values) if values else None


def curve(
    *,
    people: Mapping[Pair, int],
    model: Mapping[Pair, int],
    budgets: Iterable[float] = DEFAULT_BUDGETS,
    routings: Iterable[str] = ROUTINGS,
    seeds: Iterable[int] = (0,),
    threshold: int = 2,
    probabilities: Mapping[Pair, float] | None = None,
) -> list[CurvePoint]:
    """Kappa per budget and routing, one value per seed."""
    seeds = list(seeds)
    return [
        CurvePoint(
            budget,
            routing,
            [
                simulate(
                    people=people,
                    model=model,
                    budget=budget,
                    routing=routing,
                    threshold=threshold,
                    probabilities=probabilities,
                    seed=seed,
                ).kappa
                for seed in seeds
            ],
        )
        for budget in budgets
        for routing in routings
    ]


def parse_probabilities(
    lines: Iterable[str], *, source: str = "<probabilities>"
) -> dict[Pair, float]:
    """``topic docid probability`` lines (the model's probability that the pair is relevant,
    label >= threshold, in [0, 1]); ParseError listing every bad line."""
    problems = ProblemCollector(source)
    result: dict[Pair, float] = {}
    seen: dict[Pair, int] = {}
    for number, line in enumerate(lines, 1):
        parts = split_fields(line)
        if not parts or parts[0][0] == "#":
            continue
        if len(parts) != 3:
            problems.add(number, f"has {len(parts)} columns; expected 3: topic docid probability")
            continue
        topic, doc, text = parts
        bad = False
        for what, value in (("topic id", topic), ("document id", doc)):
            reason = check_id(value)
            if reason:
                problems.add(number, f"{what} {shown(value)} {reason}")
                bad = True
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0 <= value <= 1:  # also refuses nan
            problems.add(number, f"probability {shown(text)} is not a number in [0, 1]")
            bad = True
        if bad:
            continue
        if (topic, doc) in seen:
            problems.add(
                number,
                f"topic {shown(topic)} document {shown(doc)} repeats line {seen[(topic, doc)]}",
            )
            continue
        seen[(topic, doc)] = number
        result[(topic, doc)] = value
    if not result and not problems:
        problems.add(None, "has no probabilities (topic docid probability)")
    problems.raise_if_any()
    return result
