"""Stopping estimates: how many relevant documents a topic's unjudged pooled documents still hold.

Pure and deterministic, like ``pooling.adjudication``: nothing here touches Django. Every method
reads an :class:`~pooling.adjudication.Adjudicator` (the runs' ranked lists of the topic's pooled
documents and the labels so far) and gives each unjudged document a chance of being relevant;
their sum is the estimate of what is left, and found / (found + left) the estimated recall.

Methods (measured against each other on TREC-COVID round 1 by ``bench/stopping.py``)
    ``fusion``  (default) a logistic model of relevance learned on the topic's own judgments, with
                one weight per run: logit P(relevant | d) = c + sum over the runs holding d of
                w_run * K / (K + rank), K = 60 (the reciprocal-rank-fusion discount, Cormack,
                Clarke & Büttcher, SIGIR 2009). The weights have a Gaussian prior (L2, strength
                ``FUSION_PRIOR``), the intercept a weak one; fitted by cyclic coordinate-wise Newton
                steps (Genkin, Lewis & Madigan, Technometrics 2007), warm-started from the previous
                fit, so the estimate after one more judgment costs a few sweeps over the judged
                documents. Adaptive orders choose documents from the labels seen so far, which is
                an ignorable design for a likelihood fit (Rubin 1976): a model that knows which run
                ranks a document where is not misled by the order that chose what to judge, where a
                model of the fused rank alone (``rrf``) is.
    ``rrf``     a logistic model of relevance on the document's fused rank alone (log of its
                reciprocal-rank-fusion score, standardised): two parameters, the same fit.
    ``decay``   the first estimate (each unjudged document's chance read off the runs holding it,
                their posterior mean discounted by 0.83 per unjudged document past the run's
                cursor), kept to reproduce the figure it was replaced for.

No method can see relevant documents outside the pool: recall here is recall of the pool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol


class Adjudicator(Protocol):
    """What an estimate reads of a topic's adjudication (``pooling.adjudication.Adjudicator``,
    which imports this module: named here by its shape, not imported back)."""

    relevant_from: int
    lists: list[list[int]]  # per run: its pooled documents in rank order
    holders: list[list[tuple[int, int]]]  # per document: (run, position) of every run holding it
    labels: dict[int, int]  # document -> its label so far

    @property
    def size(self) -> int: ...

    @property
    def judged_count(self) -> int: ...

    @property
    def relevant_count(self) -> int: ...


METHODS = ("fusion", "rrf", "decay")
DEFAULT_METHOD = "fusion"
DEFAULT_TARGET = 0.8

RRF_K = 60
FUSION_PRIOR = 1.0  # L2 strength on each run's weight (a N(0, 1) prior)
INTERCEPT_PRIOR = 0.1  # N(0, 10): only keeps the intercept finite while one class is seen
SWEEPS = 6  # coordinate-wise Newton sweeps per estimate at most, warm-started
TOLERANCE = 1e-3  # a sweep that moves no coordinate this far ends the fit
MAX_STEP = 2.0  # a Newton step on one coordinate moves it at most this far (trust region)
DECAY = 0.83


class StoppingError(ValueError):
    """An unknown method (a sentence for the organiser)."""


@dataclass(frozen=True)
class Estimate:
    judged: int
    relevant: int
    remaining: float
    recall: float
    unjudged: int

    def suggests_stop(self, target: float = DEFAULT_TARGET) -> bool:
        return self.unjudged == 0 or self.recall >= target


def estimate(adjudicator: Adjudicator, method: str = DEFAULT_METHOD) -> Estimate:
    """The estimate of relevant documents left among the unjudged ones, by ``method``."""
    if method not in METHODS:
        raise StoppingError(
            f"Unknown stopping method {method!r}: choose one of {', '.join(METHODS)}."
        )
    found = adjudicator.relevant_count
    unjudged = adjudicator.size - adjudicator.judged_count
    if unjudged == 0:
        remaining = 0.0
    elif method == "decay":
        remaining = _decay(adjudicator)
    else:
        model = _model(adjudicator, method)
        remaining = model.remaining(adjudicator)
    recall = found / (found + remaining) if found + remaining > 0 else 1.0
    return Estimate(
        judged=adjudicator.judged_count,
        relevant=found,
        remaining=remaining,
        recall=recall,
        unjudged=unjudged,
    )


def sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


# --- Logistic models ---------------------------------------------------------------------------


class _Logistic:
    """logit P(relevant | d) = c + sum_j w_j x_j(d) over sparse features; L2 prior on w.

    ``features[d]`` lists (j, x) pairs. The fit keeps its weights between calls (warm start): the
    labels change by a judgment or two between estimates."""

    def __init__(self, features: list[list[tuple[int, float]]], n_weights: int, prior: float):
        self.features = features
        self.weights = [0.0] * n_weights
        self.intercept = 0.0
        self.prior = prior

    def fit(self, labels: dict[int, bool]) -> None:
        features, w, exp = self.features, self.weights, math.exp
        eta = {d: self.intercept + sum(w[j] * x for j, x in features[d]) for d in labels}
        by_weight: dict[int, list[tuple[int, float, bool]]] = {}
        for d, relevant in labels.items():
            for j, x in features[d]:
                by_weight.setdefault(j, []).append((d, x, relevant))
        order = sorted(by_weight)
        for _ in range(SWEEPS):
            gradient = -INTERCEPT_PRIOR * self.intercept
            curvature = INTERCEPT_PRIOR
            for d, relevant in labels.items():
                e = eta[d]
                p = 1.0 / (1.0 + exp(-e)) if e > -700.0 else 0.0
                gradient += relevant - p
                curvature += p * (1.0 - p)
            step = _clip(gradient / curvature)
            largest = abs(step)
            self.intercept += step
            for d in eta:
                eta[d] += step
            for j in order:
                entries = by_weight[j]
                gradient = -self.prior * w[j]
                curvature = self.prior
                for d, x, relevant in entries:
                    e = eta[d]
                    p = 1.0 / (1.0 + exp(-e)) if e > -700.0 else 0.0
                    gradient += (relevant - p) * x
                    curvature += p * (1.0 - p) * x * x
                step = _clip(gradient / curvature)
                if step:
                    largest = max(largest, abs(step))
                    w[j] += step
                    for d, x, _relevant in entries:
                        eta[d] += step * x
            if largest < TOLERANCE:
                break

    def chance(self, d: int) -> float:
        return sigmoid(self.intercept + sum(self.weights[j] * x for j, x in self.features[d]))

    def remaining(self, adjudicator: Adjudicator) -> float:
        relevant_from = adjudicator.relevant_from
        labels = {d: label >= relevant_from for d, label in adjudicator.labels.items()}
        self.fit(labels)
        return sum(self.chance(d) for d in range(adjudicator.size) if d not in labels)


def _clip(step: float) -> float:
    return max(-MAX_STEP, min(MAX_STEP, step))


def _model(adjudicator: Adjudicator, method: str) -> _Logistic:
    """The adjudicator's model for ``method``, built once and kept on it (warm starts)."""
    models = adjudicator.__dict__.setdefault("_stopping_models", {})
    model = models.get(method)
    if model is None:
        if method == "fusion":
            features = [
                [(r, RRF_K / (RRF_K + 1 + position)) for r, position in holders]
                for holders in adjudicator.holders
            ]
            model = _Logistic(features, len(adjudicator.lists), FUSION_PRIOR)
        else:
            scores = [
                math.log(sum(1 / (RRF_K + 1 + position) for _r, position in holders))
                for holders in adjudicator.holders
            ]
            model = _Logistic([[(0, x)] for x in _standardised(scores)], 1, FUSION_PRIOR)
        models[method] = model
    return model


def _standardised(values: list[float]) -> list[float]:
    if not values:
        return []
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) or 1.0
    return [(v - mean) / spread for v in values]


# --- The first estimate ------------------------------------------------------------------------


def _decay(adjudicator: Adjudicator) -> float:
    """Each unjudged document's chance read off the runs holding it: a run whose judged prefix has
    ``rel`` relevant in ``n`` gives (rel + 2b) / (n + 2), b the topic's rate so far, times
    DECAY per unjudged document past its cursor; a document's chance is the mean over its runs."""
    a = adjudicator
    base = (a.relevant_count + 1) / (a.judged_count + 2)
    total = [0.0] * a.size
    for r, ranked in enumerate(a.lists):
        p = (a.rel[r] + 2 * base) / (a.judged[r] + 2)
        for position in range(a.cursor[r], len(ranked)):
            d = ranked[position]
            if d in a.labels:
                continue
            total[d] += p
            p *= DECAY
            if p < 1e-6:  # the rest of the run adds nothing measurable
                break
    return sum(total[d] / len(a.holders[d]) for d in range(a.size) if d not in a.labels)
