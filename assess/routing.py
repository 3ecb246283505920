"""Hybrid budget: which pair people judge next, and what the model's calibrated label is for the
pairs they do not judge. Plain Python, no Django.

One definition for the two places that route: the simulation over two qrels files
(``qrels/hybrid.py``, ``manage.py hybrid``) and a live campaign's shared queue
(``assess/hybrid.py``, served by ``assess/judging.py``). It lives in ``assess`` because the live
order is served there and ``qrels`` may import ``assess``, never the other way round.

The model's pairs of a topic are cut into strata: the model's label, or, with probabilities, the
tenth of [0, 1] its probability of relevance falls in. Within a stratum pairs come in the seeded
order (:func:`seeded_order`). :func:`ranking` orders the strata that still have pairs to give;
the next pair people judge is the first of the first stratum. ``qrels/hybrid.py``'s docstring
says why each routing is what it is, and what it measured.

Blinding: a routing order carries information about the model. Under ``uncertain`` or
``boundary`` the pairs people see first are the ones the model is least sure of, so an assessor
who knew the routing could guess that early documents are borderline for the model; no page
shows a pair's stratum, rank, the model's label or its probability, and the order is all an
assessor can observe (as with any order: the seeded shuffle of a static queue reveals nothing).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

ROUTINGS = ("uncertain", "boundary", "random")
# Strength of the Beta prior on each stratum's relevance rate: a stratum stays "maybe" until
# people have judged a few of its pairs. On TREC RAG 2025 (bench/hybrid.py, 5 seeds at 30 %)
# 0.5 gave kappa 0.635, 1: 0.666, 2: 0.677, 3: 0.686, 5: 0.685, 8: 0.684.
PRIOR = 3.0
PROBABILITY_BINS = 10


def stratum(value: float, *, probabilities: bool) -> int:
    """The stratum of a pair: the model's label, or the tenth its probability falls in."""
    if probabilities:
        return min(PROBABILITY_BINS - 1, int(value * PROBABILITY_BINS))
    return int(value)


def distance(s: int, *, threshold: int, probabilities: bool) -> float:
    """How far a stratum is from the relevance threshold (0 = on the boundary)."""
    if probabilities:
        return abs((s + 0.5) / PROBABILITY_BINS - 0.5)
    # Labels threshold-1 and threshold are the two sides of the boundary: both at 0.5.
    return abs(s - (threshold - 0.5))


def model_verdict(s: int, *, threshold: int, probabilities: bool) -> int:
    """The model's own binary verdict on a pair of stratum ``s``."""
    if probabilities:
        return int((s + 0.5) / PROBABILITY_BINS >= 0.5)
    return int(s >= threshold)


def majority(relevant: int, not_relevant: int) -> int | None:
    if relevant == not_relevant:
        return None
    return int(relevant > not_relevant)


def budget_count(percent: float | str, pairs: int) -> int:
    """How many of a topic's ``pairs`` a budget of ``percent`` % lets people judge (rounded
    down, exactly: 30 % of 10 is 3, never 2 from a float's error)."""
    return math.floor(Fraction(str(percent)) / 100 * pairs)


def seeded_order(topic: str, docs: Sequence[str], *, seed: int) -> list[str]:
    """A topic's documents in the routing's seeded order: sorted, then shuffled by a generator
    of the topic's own (a topic's order does not depend on which topics came before)."""
    order = sorted(docs)
    random.Random(f"{seed}:{topic}").shuffle(order)
    return order


@dataclass
class Stratum:
    """What routing knows of one stratum of one topic: pairs not yet given to people, and the
    people's binary verdicts on the pairs of it they judged."""

    left: int
    relevant: int = 0
    not_relevant: int = 0


def ranking(
    strata: Mapping[int, Stratum],
    *,
    routing: str,
    threshold: int,
    probabilities: bool,
    prior: float = PRIOR,
) -> dict[int, int]:
    """Stratum -> rank (0 first) of the strata with pairs left; the next pair comes from rank 0,
    equal ranks share out in the seeded order.

    ``uncertain``: the stratum where filling one more pair with the model would most likely be
    wrong, ``min(p, 1 - p)`` with p the Beta(prior, prior) estimate of its relevance rate; ties
    to the stratum nearest the threshold, then the lower stratum. ``boundary``: nearest the
    threshold first, equal distances equal. ``random``: all equal (the seeded order)."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing is one of {', '.join(ROUTINGS)}, not {routing!r}")
    open_strata = [s for s, state in strata.items() if state.left > 0]

    def far(s: int) -> float:
        return distance(s, threshold=threshold, probabilities=probabilities)

    if routing == "uncertain":

        def key(s: int) -> tuple[float, float, int]:
            state = strata[s]
            p = (state.relevant + prior) / (state.relevant + state.not_relevant + 2 * prior)
            return (min(p, 1 - p), -far(s), -s)

        return {s: rank for rank, s in enumerate(sorted(open_strata, key=key, reverse=True))}
    if routing == "boundary":
        distances = sorted({far(s) for s in open_strata})
        return {s: distances.index(far(s)) for s in open_strata}
    return dict.fromkeys(open_strata, 0)


def fill_verdict(
    s: int,
    *,
    topic: tuple[int, int] | None,
    everywhere: tuple[int, int] | None,
    threshold: int,
    probabilities: bool,
) -> int:
    """The calibrated binary verdict for an unjudged pair of stratum ``s``: the majority of the
    people's verdicts on the topic's judged pairs of that stratum (``topic``: relevant, not
    relevant), else over every topic's (``everywhere``), else the model's own verdict."""
    for counts in (topic, everywhere):
        verdict = majority(*counts) if counts else None
        if verdict is not None:
            return verdict
    return model_verdict(s, threshold=threshold, probabilities=probabilities)
