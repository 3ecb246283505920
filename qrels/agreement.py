"""Agreement between assessors who judged the same (topic, document) pairs.

Pure functions over plain mappings (no Django): ``Judgments`` maps an assessor to their labels,
``(topic_id, doc_id) -> label``. A label below 0 (imported qrels: trec_eval reads it as "in the
pool, not judged") is no grade on the scale, so no statistic counts a pair where either side is
negative; but such pairs are not hidden either: ``negative`` counts them, ``negative_cells``
says which labels met, and ``identical`` is the share of every pair both labelled (negatives
included) given the very same label. Two copies of Cranfield that differ only in 225 ``-1``
then read "kappa 1.000 over 1,612 pairs; 225 more where one side is negative; identical labels
on 87.8% of 1,837", not a silent 1.000. A pair an assessor did not label is simply absent,
never "nonrelevant".

Everything for two assessors is computed from their confusion matrix (rows = the first
assessor's label, columns = the second's, in the scale's label order), with integer arithmetic
up to one final division, so a statistic that is undefined (0/0, e.g. kappa when both assessors
used one and the same label) comes out as None, never NaN:

* ``observed``: share of common pairs with the same label;
* ``cohen_kappa``: chance agreement from each assessor's own label rates (Cohen 1960); equals
  scikit-learn's ``cohen_kappa_score`` (tested);
* ``pooled_kappa``: seed 000's kappa, chance agreement from one label rate shared by both
  assessors, ``P(E) = sum_j ((row_j + col_j) / 2n)^2`` (Scott's pi); with two labels this is the
  textbook's ``p^2 + (1-p)^2``;
* ``weighted_kappa_linear`` / ``_quadratic``: Cohen's weighted kappa with weights ``|i-j|`` or
  ``(i-j)^2`` on the positions ``i, j`` of the labels in the scale (scikit-learn's convention),
  reported only for scales of more than two labels;
* ``relevant_overlap``: ``|A and B| / |A or B|`` where A and B are the common pairs each assessor
  marked relevant (label >= threshold), Voorhees' overlap.

:func:`pairwise_from_counts` takes those confusion matrices already tallied (a database's GROUP
BY over the judgments) and gives the same results as :func:`pairwise_agreement` on the judgments.

Bootstrap confidence intervals resample the common pairs with replacement. Every statistic here is
a function of the confusion matrix alone, and resampling n pairs with replacement gives a
confusion matrix distributed Multinomial(n, observed cell shares); so the bootstrap draws those
matrices directly (numpy, vectorised over replicates and topics), which is the same bootstrap as
resampling pairs, without touching the pairs. Percentile intervals; replicates in which a
statistic is undefined are left out of that statistic's interval.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import krippendorff
import numpy as np

from pooljudge.common import natural_key

Judgments = Mapping[str, Mapping[tuple[str, str], int]]

# Below this many common pairs the agreement page warns that the figures are unstable: with
# fewer than 30 items a kappa's 95% interval is typically +-0.2 or wider, more than the whole
# "fair" band (0.67 to 0.8) of seed 000. The bootstrap intervals in `ci` show the actual width.
SMALL_N = 30
CI_LEVEL = 0.95


@dataclass
class PairAgreement:
    a: str
    b: str
    n: int  # common judged pairs
    observed: float | None
    cohen_kappa: float | None
    pooled_kappa: float | None
    weighted_kappa_linear: float | None  # None unless the scale has more than two labels
    weighted_kappa_quadratic: float | None
    confusion: list[list[int]]  # rows = a's label, columns = b's label, in `labels` order
    labels: list[int]
    relevant_overlap: float | None
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    per_topic: dict[str, PairAgreement] = field(default_factory=dict)
    small_n: bool = False
    # Pairs both labelled where either label is below 0: in no statistic above, and counted here.
    negative: int = 0
    negative_cells: list[tuple[int, int, int]] = field(default_factory=list)  # (a, b, count)
    identical: float | None = None  # share of all n + negative pairs with the very same label


@dataclass
class GroupAgreement:
    assessors: list[str]
    n_items: int  # pairs judged by at least two of the assessors
    fleiss_kappa: float | None
    alpha_nominal: float | None
    alpha_ordinal: float | None
    # Fleiss' kappa needs the same number of ratings per item: it is computed over the items
    # with the most common number of ratings (ties: the larger number), this many of them.
    fleiss_items: int = 0
    fleiss_raters: int | None = None
    labels: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class TauResult:
    tau: float | None  # (concordant - discordant) / pairs; None for fewer than two systems
    swapped: int  # discordant pairs
    pairs: int  # n (n - 1) / 2
    n: int


# --- the statistics, from confusion matrices ----------------------------------------------------


def confusion_matrix(
    labels_a: Sequence[int], labels_b: Sequence[int], labels: Sequence[int]
) -> list[list[int]]:
    """Counts of (a's label, b's label), rows and columns in ``labels`` order.

    Raises ValueError if the two sequences differ in length or hold a label not in ``labels``.
    """
    if len(labels_a) != len(labels_b):
        raise ValueError("the two label sequences differ in length")
    position = {label: i for i, label in enumerate(labels)}
    try:
        ia = np.fromiter((position[x] for x in labels_a), np.int64, len(labels_a))
        ib = np.fromiter((position[x] for x in labels_b), np.int64, len(labels_b))
    except KeyError as error:
        raise ValueError(f"label {error.args[0]!r} is not in the scale {list(labels)}") from None
    return _confusion(ia, ib, len(labels)).tolist()


def _confusion(ia: np.ndarray, ib: np.ndarray, k: int) -> np.ndarray:
    return np.bincount(ia * k + ib, minlength=k * k).reshape(k, k)


def _as_counts(confusion: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    counts = np.asarray(confusion, dtype=np.int64)
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1]:
        raise ValueError("a confusion matrix is square")
    if (counts < 0).any():
        raise ValueError("a confusion matrix holds counts, not negative numbers")
    return counts


def pooled_kappa(confusion: Sequence[Sequence[int]] | np.ndarray) -> float | None:
    """Seed 000's kappa: chance agreement from one label rate pooled over both assessors.

    ``P(E) = sum_j p_j^2`` with ``p_j = (row_j + column_j) / 2n``. None when undefined (no pairs,
    or both assessors used the same single label).
    """
    return _none_if_nan(_stats(_as_counts(confusion), graded=False)["pooled_kappa"])


def cohen_kappa(confusion: Sequence[Sequence[int]] | np.ndarray) -> float | None:
    """Cohen's kappa (each assessor's own label rates); None when undefined."""
    return _none_if_nan(_stats(_as_counts(confusion), graded=False)["cohen_kappa"])


def weighted_kappa(
    confusion: Sequence[Sequence[int]] | np.ndarray, weights: str = "linear"
) -> float | None:
    """Cohen's weighted kappa, weights ``|i-j|`` ("linear") or ``(i-j)^2`` ("quadratic")."""
    if weights not in ("linear", "quadratic"):
        raise ValueError('weights is "linear" or "quadratic"')
    return _none_if_nan(_stats(_as_counts(confusion), graded=True)[f"weighted_kappa_{weights}"])


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator elementwise, NaN where the denominator is 0."""
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    safe = np.where(denominator == 0, 1.0, denominator)
    return np.where(denominator == 0, np.nan, numerator / safe)


def _stats(
    counts: np.ndarray, *, graded: bool, relevant: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Every pairwise statistic for a stack of confusion matrices (..., k, k), NaN if undefined.

    Sums are taken in int64 (exact for any realistic n); only the last step divides, so "is the
    chance agreement exactly 1" is an exact integer test.
    """
    counts = counts.astype(np.int64, copy=False)
    k = counts.shape[-1]
    n = counts.sum(axis=(-2, -1))
    rows = counts.sum(axis=-1)
    cols = counts.sum(axis=-2)
    agree = np.trace(counts, axis1=-2, axis2=-1)
    chance = (rows * cols).sum(axis=-1)  # n^2 P(E), Cohen
    pooled = ((rows + cols) ** 2).sum(axis=-1)  # 4 n^2 P(E), pooled
    out = {
        "observed": _ratio(agree, n),
        "cohen_kappa": _ratio(n * agree - chance, n * n - chance),
        "pooled_kappa": _ratio(4 * n * agree - pooled, 4 * n * n - pooled),
    }
    if graded:
        positions = np.arange(k)
        distance = np.abs(positions[:, None] - positions[None, :])
        expected = rows[..., :, None] * cols[..., None, :]  # n E
        for name, weight in (("linear", distance), ("quadratic", distance**2)):
            disagreement = (counts * weight).sum(axis=(-2, -1))
            chance_disagreement = (expected * weight).sum(axis=(-2, -1))
            out[f"weighted_kappa_{name}"] = 1.0 - _ratio(n * disagreement, chance_disagreement)
    if relevant is not None:
        both = counts[..., relevant, :][..., relevant].sum(axis=(-2, -1))
        either = rows[..., relevant].sum(axis=-1) + cols[..., relevant].sum(axis=-1) - both
        out["relevant_overlap"] = _ratio(both, either)
    return out


def _none_if_nan(value: float | np.floating) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


# --- two assessors -------------------------------------------------------------------------------


def _scale(
    labels: Sequence[int], threshold: int, binary: bool
) -> tuple[list[int], np.ndarray, dict[int, int]]:
    """(output labels, relevant mask, label -> position in the output labels)."""
    scale = [int(label) for label in labels if label >= 0]
    if len(set(scale)) != len(scale):
        raise ValueError(f"the scale {list(labels)} lists a label twice")
    if not scale:
        raise ValueError("the scale has no label >= 0")
    if binary:
        position = {label: int(label >= threshold) for label in scale}
        return [0, 1], np.array([False, True]), position
    relevant = np.array([label >= threshold for label in scale])
    return scale, relevant, {label: i for i, label in enumerate(scale)}


def _encode(
    judgments: Judgments, labels: Sequence[int], threshold: int, binary: bool
) -> tuple[list[int], np.ndarray, dict[str, dict[tuple[str, str], int]]]:
    """(output labels, relevant mask, assessor -> pair -> position of the label in the scale)."""
    out_labels, relevant, position = _scale(labels, threshold, binary)
    scale = [int(label) for label in labels if label >= 0]
    encoded = {}
    for assessor, verdicts in judgments.items():
        try:
            encoded[assessor] = {
                pair: position[label] for pair, label in verdicts.items() if label >= 0
            }
        except KeyError as error:
            raise ValueError(
                f"assessor {assessor!r} used label {error.args[0]!r}, not in the scale {scale}"
            ) from None
    return out_labels, relevant, encoded


def _intervals(samples: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per statistic, percentile (low, high) over the first (replicate) axis."""
    tail = (1 - CI_LEVEL) / 2 * 100
    with warnings.catch_warnings():
        # A statistic undefined in every replicate ("All-NaN slice") simply has no interval.
        warnings.simplefilter("ignore", RuntimeWarning)
        return {
            name: tuple(np.nanpercentile(values, [tail, 100 - tail], axis=0))
            for name, values in samples.items()
        }


def _ci_dict(
    intervals: dict[str, tuple[np.ndarray, np.ndarray]], index: tuple, result: PairAgreement
) -> dict[str, tuple[float, float]]:
    """The intervals at `index`, for the statistics `result` has a value for."""
    ci = {}
    for name, (low, high) in intervals.items():
        if getattr(result, name) is None:
            continue
        lo, hi = float(low[index]), float(high[index])
        if not (math.isnan(lo) or math.isnan(hi)):
            ci[name] = (lo, hi)
    return ci


def _pair_result(
    a: str,
    b: str,
    counts: np.ndarray,
    stats: dict[str, np.ndarray],
    index: tuple,
    labels: list[int],
    graded: bool,
) -> PairAgreement:
    value = {name: _none_if_nan(array[index]) for name, array in stats.items()}
    n = int(counts.sum())
    return PairAgreement(
        a=a,
        b=b,
        n=n,
        observed=value["observed"],
        cohen_kappa=value["cohen_kappa"],
        pooled_kappa=value["pooled_kappa"],
        weighted_kappa_linear=value.get("weighted_kappa_linear") if graded else None,
        weighted_kappa_quadratic=value.get("weighted_kappa_quadratic") if graded else None,
        confusion=counts.tolist(),
        labels=list(labels),
        relevant_overlap=value["relevant_overlap"],
        small_n=n < SMALL_N,
    )


def _bootstrap(
    rng: np.random.Generator, counts: np.ndarray, replicates: int, *, graded: bool, relevant
) -> dict[str, np.ndarray]:
    """Statistics of `replicates` bootstrap confusion matrices for each matrix in `counts` (T,k,k).

    Returns arrays of shape (replicates, T).
    """
    topics, k, _ = counts.shape
    n = counts.sum(axis=(1, 2))
    shares = counts.reshape(topics, k * k) / n[:, None]
    draws = rng.multinomial(n, shares, size=(replicates, topics)).reshape(replicates, topics, k, k)
    return _stats(draws, graded=graded, relevant=relevant)


def pairwise_agreement(
    judgments: Judgments,
    *,
    labels: Sequence[int],
    threshold: int,
    binary: bool = False,
    bootstrap: int = 1000,
    seed: int = 0,
    assessors: Sequence[str] | None = None,
) -> list[PairAgreement]:
    """Agreement for every pair of assessors who share at least one judged pair.

    ``labels`` is the scale in its order (the order of the confusion matrix and of the weights);
    labels below 0 in it or in the judgments are ignored. With ``binary`` every label is first
    mapped to 1 if >= ``threshold`` else 0, and everything is computed on that. Pairs come in
    the order of ``assessors`` (default: names sorted), ``per_topic`` in natural topic order.
    ``bootstrap`` replicates (0 for none) give 95% percentile intervals in ``ci``, overall and per
    topic, reproducible for a given ``seed``. Raises ValueError for a label not in the scale.
    """
    out_labels, relevant, encoded = _encode(judgments, labels, threshold, binary)
    k = len(out_labels)
    order = list(assessors) if assessors is not None else sorted(encoded)
    unknown = [name for name in order if name not in encoded]
    if unknown:
        raise ValueError(f"no judgments from {', '.join(map(repr, unknown))}")

    # Negative labels are rare (imported qrels only): an assessor's few are found once, and a
    # pair of assessors looks only at those, not at every pair both judged.
    negatives = {
        name: {pair for pair, label in verdicts.items() if label < 0}
        for name, verdicts in judgments.items()
    }
    results = []
    for a, b in combinations(order, 2):
        ja, jb = encoded[a], encoded[b]
        common = ja.keys() & jb.keys()
        negative = _negative_cells(judgments[a], judgments[b], negatives[a], negatives[b])
        if not common:
            if negative:
                results.append(_only_negative(a, b, out_labels, negative))
            continue
        ia = np.fromiter((ja[pair] for pair in common), np.int64, len(common))
        ib = np.fromiter((jb[pair] for pair in common), np.int64, len(common))
        topic_ids: dict[str, int] = {}
        ti = np.fromiter(
            (topic_ids.setdefault(pair[0], len(topic_ids)) for pair in common),
            np.int64,
            len(common),
        )
        topics = sorted(topic_ids, key=natural_key)
        # Renumber topics into natural order so that row t of the stack is topics[t].
        rank = np.empty(len(topics), dtype=np.int64)
        rank[[topic_ids[t] for t in topics]] = np.arange(len(topics))
        ti = rank[ti]
        by_topic = np.bincount((ti * k + ia) * k + ib, minlength=len(topics) * k * k).reshape(
            len(topics), k, k
        )
        result = _pair_agreement(a, b, by_topic, topics, out_labels, relevant, bootstrap, seed)
        _add_negative(result, negative)
        results.append(result)
    return results


NegativeCells = dict[str, Counter]  # topic -> Counter((label a, label b)) of negative pairs


def _negative_cells(
    ja: Mapping[tuple[str, str], int],
    jb: Mapping[tuple[str, str], int],
    negative_a: set[tuple[str, str]],
    negative_b: set[tuple[str, str]],
) -> NegativeCells:
    """Per topic, the (a's label, b's label) of the pairs both labelled where one is negative
    (``negative_a``, ``negative_b``: the pairs each labelled below 0)."""
    cells: NegativeCells = {}
    for pair in (negative_a & jb.keys()) | (negative_b & ja.keys()):
        cells.setdefault(pair[0], Counter())[(ja[pair], jb[pair])] += 1
    return cells


def _add_negative(result: PairAgreement, cells: NegativeCells) -> None:
    """Record the negative pairs of ``cells`` on ``result`` and its topics: their count, their
    label combinations, and ``identical``, the share of every pair both labelled given the same
    label (the compared pairs as the statistics see them, binary or graded)."""

    def record(target: PairAgreement, counter: Counter) -> None:
        target.negative = sum(counter.values())
        target.negative_cells = sorted((a, b, n) for (a, b), n in counter.items())
        same = sum(target.confusion[i][i] for i in range(len(target.labels)))
        same += sum(n for (a, b), n in counter.items() if a == b)
        total = target.n + target.negative
        target.identical = same / total if total else None

    overall: Counter = Counter()
    for counter in cells.values():
        overall.update(counter)
    for topic, topical in result.per_topic.items():
        record(topical, cells.get(topic, Counter()))
    record(result, overall)


def _only_negative(a: str, b: str, labels: list[int], cells: NegativeCells) -> PairAgreement:
    """Two assessors whose every common pair has a negative label: nothing to compute, all to
    show."""
    k = len(labels)
    result = PairAgreement(
        a=a,
        b=b,
        n=0,
        observed=None,
        cohen_kappa=None,
        pooled_kappa=None,
        weighted_kappa_linear=None,
        weighted_kappa_quadratic=None,
        confusion=[[0] * k for _ in range(k)],
        labels=list(labels),
        relevant_overlap=None,
        small_n=True,
    )
    _add_negative(result, cells)
    return result


def _pair_agreement(
    a: str,
    b: str,
    by_topic: np.ndarray,
    topics: list[str],
    out_labels: list[int],
    relevant: np.ndarray,
    bootstrap: int,
    seed: int,
) -> PairAgreement:
    """Two assessors' agreement from their confusion matrix per topic (T, k, k), topics in
    natural order; the overall matrix is the sum."""
    graded = len(out_labels) > 2
    total = by_topic.sum(axis=0)
    stats = _stats(total, graded=graded, relevant=relevant)
    topic_stats = _stats(by_topic, graded=graded, relevant=relevant)
    result = _pair_result(a, b, total, stats, (), out_labels, graded)
    per_topic = {
        topic: _pair_result(a, b, by_topic[t], topic_stats, (t,), out_labels, graded)
        for t, topic in enumerate(topics)
    }
    if bootstrap > 0:
        rng = np.random.default_rng(seed)
        overall = _bootstrap(rng, total[None], bootstrap, graded=graded, relevant=relevant)
        result.ci = _ci_dict(_intervals(overall), (0,), result)
        topical = _bootstrap(rng, by_topic, bootstrap, graded=graded, relevant=relevant)
        intervals = _intervals(topical)
        for t, topic in enumerate(topics):
            per_topic[topic].ci = _ci_dict(intervals, (t,), per_topic[topic])
    result.per_topic = per_topic
    return result


PairCounts = Mapping[tuple[str, str], Mapping[str, Mapping[tuple[int, int], int]]]


def pairwise_from_counts(
    counts: PairCounts,
    *,
    labels: Sequence[int],
    threshold: int,
    binary: bool = False,
    bootstrap: int = 1000,
    seed: int = 0,
    assessors: Sequence[str] | None = None,
) -> list[PairAgreement]:
    """:func:`pairwise_agreement` from counts already tallied (say by a database's GROUP BY):
    ``counts[(a, b)][topic][(label of a, label of b)]`` is how many pairs of that topic both
    judged with those labels. Every statistic is a function of the confusion matrices, so the
    results, intervals included, are exactly those of :func:`pairwise_agreement` on the
    judgments behind the counts (same ``seed``).

    Labels below 0 are ignored; ``binary`` maps labels as there. A key may name the two
    assessors in either order. Pairs come in the order of ``assessors`` (default: names sorted),
    and assessor pairs without a positive count are absent. Raises ValueError for a label not in
    the scale or a negative count.
    """
    out_labels, relevant, position = _scale(labels, threshold, binary)
    k = len(out_labels)
    scale = [int(label) for label in labels if label >= 0]
    tallies: dict[tuple[str, str], Mapping[str, Mapping[tuple[int, int], int]]] = {}
    for (a, b), topics in counts.items():
        if (a, b) in tallies or (b, a) in tallies:
            raise ValueError(f"the pair {a!r}, {b!r} is counted twice")
        tallies[(a, b)] = topics
    names = sorted({name for pair in tallies for name in pair})
    order = list(assessors) if assessors is not None else names
    results = []
    for a, b in combinations(order, 2):
        swap = (a, b) not in tallies
        topics = tallies.get((b, a) if swap else (a, b))
        if not topics:
            continue
        ordered = sorted(topics, key=natural_key)
        by_topic = np.zeros((len(ordered), k, k), dtype=np.int64)
        negative: NegativeCells = {}
        for t, topic in enumerate(ordered):
            for (label_a, label_b), count in topics[topic].items():
                if swap:
                    label_a, label_b = label_b, label_a
                if count < 0:
                    raise ValueError("a count is negative")
                if label_a < 0 or label_b < 0:
                    if count:
                        negative.setdefault(topic, Counter())[(label_a, label_b)] += count
                    continue
                try:
                    by_topic[t, position[label_a], position[label_b]] += count
                except KeyError as error:
                    raise ValueError(
                        f"label {error.args[0]!r} is not in the scale {scale}"
                    ) from None
        keep = by_topic.sum(axis=(1, 2)) > 0
        if not keep.any():
            if negative:
                results.append(_only_negative(a, b, out_labels, negative))
            continue
        by_topic = by_topic[keep]
        ordered = [topic for topic, kept in zip(ordered, keep.tolist(), strict=True) if kept]
        result = _pair_agreement(a, b, by_topic, ordered, out_labels, relevant, bootstrap, seed)
        _add_negative(result, negative)
        results.append(result)
    return results


# --- three or more assessors ---------------------------------------------------------------------


def group_agreement(
    judgments: Judgments,
    *,
    labels: Sequence[int],
    threshold: int,
    binary: bool = False,
) -> GroupAgreement | None:
    """Fleiss' kappa and Krippendorff's alpha over the pairs at least two assessors judged.

    None when fewer than three assessors judged any such pair. Krippendorff's alpha (the
    krippendorff package) takes every item with two or more ratings, missing ratings allowed;
    ordinal alpha orders the labels as the scale lists them. Fleiss' kappa
    (:func:`fleiss_kappa`) assumes the same number of ratings per item, so it is computed over the
    largest such group: the
    items with the most common number of ratings (ties: the larger number), counted in
    ``fleiss_items`` and ``fleiss_raters``.
    """
    out_labels, _, encoded = _encode(judgments, labels, threshold, binary)
    ratings = Counter(pair for verdicts in encoded.values() for pair in verdicts)
    items = sorted(pair for pair, count in ratings.items() if count >= 2)
    assessors = sorted(
        name for name, verdicts in encoded.items() if any(pair in verdicts for pair in items)
    )
    if len(assessors) < 3:
        return None

    k = len(out_labels)
    # Reliability data: one row per assessor, one column per item, NaN where not judged.
    data = np.full((len(assessors), len(items)), np.nan)
    for row, name in enumerate(assessors):
        verdicts = encoded[name]
        for column, pair in enumerate(items):
            if pair in verdicts:
                data[row, column] = verdicts[pair]

    alphas = {}
    for level in ("nominal", "ordinal"):
        if len(np.unique(data[~np.isnan(data)])) < 2:
            alphas[level] = None  # one value only: alpha is 0/0
            continue
        with np.errstate(all="ignore"):
            alphas[level] = _none_if_nan(
                krippendorff.alpha(
                    reliability_data=data, level_of_measurement=level, value_domain=range(k)
                )
            )

    per_item = (~np.isnan(data)).sum(axis=0)
    frequency = Counter(per_item.tolist())
    raters = max(frequency, key=lambda count: (frequency[count], count))
    chosen = data[:, per_item == raters]
    # Items x ratings, each column one rating (which assessor gave it does not matter to Fleiss).
    rated = np.sort(chosen.T, axis=1)[:, :raters].astype(np.int64)
    table = np.stack([np.bincount(row, minlength=k) for row in rated]) if len(rated) else []
    fleiss = fleiss_kappa(table)
    return GroupAgreement(
        assessors=assessors,
        n_items=len(items),
        fleiss_kappa=fleiss,
        alpha_nominal=alphas["nominal"],
        alpha_ordinal=alphas["ordinal"],
        fleiss_items=int(chosen.shape[1]),
        fleiss_raters=int(raters),
        labels=out_labels,
    )


def fleiss_kappa(table: Sequence[Sequence[int]] | np.ndarray) -> float | None:
    """Fleiss' kappa (Fleiss 1971) of an items x categories table of rating counts.

    Every item must have the same number of ratings ``r >= 2``. With ``N`` items, ``n_ij`` the
    ratings of item i in category j and ``c_j`` the column totals::

        P_bar = sum_ij n_ij (n_ij - 1) / (N r (r - 1))      P_e = sum_j c_j^2 / (N r)^2
        kappa = (P_bar - P_e) / (1 - P_e)

    Computed in integers up to one final division (statsmodels' ``fleiss_kappa`` with
    ``method="fleiss"`` gives the same number; the tests compare). None when it is 0/0 (every
    rating in one category) or there is nothing to rate.
    """
    rows = [[int(count) for count in row] for row in table]
    if not rows:
        return None
    r = sum(rows[0])
    if r < 2 or any(sum(row) != r for row in rows):
        raise ValueError("Fleiss' kappa needs the same number (two or more) of ratings per item")
    n = len(rows)
    pair_agree = sum(count * (count - 1) for row in rows for count in row)
    totals = [sum(column) for column in zip(*rows, strict=True)]
    # kappa = (P_bar - P_e) / (1 - P_e) with both over the common denominator (N r)^2 (r - 1).
    scale = (n * r) ** 2 * (r - 1)
    p_bar = pair_agree * n * r  # P_bar * scale
    p_e = sum(total * total for total in totals) * (r - 1)  # P_e * scale
    if p_e == scale:
        return None
    return (p_bar - p_e) / (scale - p_e)


# --- orderings of systems ------------------------------------------------------------------------


def kendall_tau(order_a: Sequence[str], order_b: Sequence[str]) -> TauResult:
    """Kendall's tau between two orderings (best first) of the same systems, and the swaps.

    ``swapped`` is the number of discordant pairs; ``tau = (pairs - 2 swapped) / pairs``, so one
    swap among 12 systems gives 64/66. Raises ValueError if the orderings repeat a system or do
    not hold the same systems.
    """
    if len(set(order_a)) != len(order_a) or len(set(order_b)) != len(order_b):
        raise ValueError("an ordering lists a system twice")
    if set(order_a) != set(order_b):
        differ = sorted(set(order_a) ^ set(order_b))
        raise ValueError(f"the orderings hold different systems: {', '.join(differ)}")
    n = len(order_a)
    pairs = n * (n - 1) // 2
    if n < 2:
        return TauResult(tau=None, swapped=0, pairs=pairs, n=n)
    position_b = {system: i for i, system in enumerate(order_b)}
    # No ties in either ordering: the discordant pairs are the inversions of b's positions read
    # in a's order, and tau = (concordant - discordant) / pairs, exactly.
    swapped = _inversions([position_b[s] for s in order_a])
    return TauResult(tau=(pairs - 2 * swapped) / pairs, swapped=swapped, pairs=pairs, n=n)


def _inversions(values: list[int]) -> int:
    """Pairs i < j with values[i] > values[j], by merge sort (n log n: a thousand runs is fine)."""
    if len(values) < 2:
        return 0
    middle = len(values) // 2
    left, right = values[:middle], values[middle:]
    count = _inversions(left) + _inversions(right)
    left.sort()
    right.sort()
    i = 0
    for value in right:
        # Every element of `left` greater than `value` forms an inversion with it.
        while i < len(left) and left[i] <= value:
            i += 1
        count += len(left) - i
    return count


def order_by_score(scores: Mapping[str, float]) -> list[str]:
    """Systems best first: score descending, equal scores in name order."""
    return sorted(scores, key=lambda system: (-scores[system], system))


def kendall_tau_scores(scores_a: Mapping[str, float], scores_b: Mapping[str, float]) -> TauResult:
    """Kendall's tau between the orderings two score maps give (see :func:`order_by_score`)."""
    return kendall_tau(order_by_score(scores_a), order_by_score(scores_b))
