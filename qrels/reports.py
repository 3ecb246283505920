"""The reports as values: what the agreement, evaluation, ranking-stability and pool-bias pages
show and what their downloads hold.

Each report is a frozen dataclass that writes its own downloads: ``to_csv()`` (one table, cells
made safe for a spreadsheet) and ``to_json()`` (everything); ``to_dict()`` is the JSON-safe form
a report job stores on its row, and ``from_dict()`` reads it back, so a page shows a report
computed while it loads and one computed by a job the same way.

Computed by qrels.agreement_data (from the judgments) and qrels.runscores (by scoring the runs).
Nothing here reads the database or loads a numerical library: the view modules import it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pooljudge.common import neutralise

if TYPE_CHECKING:
    from qrels.agreement import GroupAgreement, PairAgreement


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A CSV download: floats to six decimals, None as an empty cell, text neutralised
    (a cell a spreadsheet would run as a formula starts with a quote)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if value is None else _cell(value) for value in row])
    return out.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return repr(round(value, 6))
    if isinstance(value, str):
        return neutralise(value)
    return value


def json_text(data: Any) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def computed_now() -> str:
    """A report's ``computed_at``: UTC to the second, ``2026-01-31T12:00:00Z``."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# --- Agreement -----------------------------------------------------------------------------------

AGREEMENT_COLUMNS = (
    "assessor_a",
    "assessor_b",
    "topic",
    "n",
    "observed",
    "cohen_kappa",
    "pooled_kappa",
    "weighted_kappa_linear",
    "weighted_kappa_quadratic",
    "relevant_overlap",
    "small_n",
    "negative",
    "identical",
    "comparison",
)

# Which sides two assessors are on (docs: README "Model assessors"). Imported qrels are people's
# verdicts made elsewhere (NIST's assessors, an earlier round), so they stand with the people;
# a model is the other side. Adjudicated labels are not in agreement at all.
COMPARISONS = ("person-person", "person-model", "model-model")
COMPARISON_TITLES = {
    "person-person": "Between people",
    "person-model": "People and models",
    "model-model": "Between models",
}
MODEL_KIND = "model"  # campaigns.models.Assessor.Kind.MODEL, without importing Django models
FILLED_KIND = "filled"  # Assessor.Kind.FILLED: a model's labels, calibrated (assess/hybrid.py)


def side_of(kind: str | None) -> str:
    """``model`` for a model assessor (or a hybrid budget's filled labels), ``person`` for
    people and imported qrels."""
    return "model" if kind in (MODEL_KIND, FILLED_KIND) else "person"


@dataclass(frozen=True)
class Headline:
    """The agreement figure a campaign is summed up by: people's only (Light's kappa, the mean
    of Cohen's kappa over the pairs of people with a defined kappa; seed 000). Models never
    enter it, whatever they agree with."""

    kappa: float | None
    observed: float | None
    pairs: int  # pairs of people with a kappa
    n: int  # the (topic, document) pairs behind them, counted once per pair of people

    def to_dict(self) -> dict[str, Any]:
        return {
            "comparison": "person-person",
            "statistic": "mean Cohen's kappa over the pairs of people (Light's kappa)",
            "kappa": self.kappa,
            "observed": self.observed,
            "assessor_pairs": self.pairs,
            "n": self.n,
        }


@dataclass(frozen=True)
class Leniency:
    """How readily a model calls a pair relevant, against the people on the very same pairs:
    over every (person's verdict, model's label) pair of its person-model comparisons, the share
    the model calls relevant and the share the people do."""

    model: str
    n: int
    model_relevant: float | None
    people_relevant: float | None

    @property
    def difference(self) -> float | None:
        if self.model_relevant is None or self.people_relevant is None:
            return None
        return self.model_relevant - self.people_relevant

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "n": self.n,
            "model_relevant": self.model_relevant,
            "people_relevant": self.people_relevant,
            "difference": self.difference,
        }


def pair_figures(pair: PairAgreement) -> dict[str, Any]:
    """The figures of two assessors (overall or on one topic), JSON-safe."""
    return {
        "n": pair.n,
        "negative": pair.negative,
        "identical": pair.identical,
        "observed": pair.observed,
        "cohen_kappa": pair.cohen_kappa,
        "pooled_kappa": pair.pooled_kappa,
        "weighted_kappa_linear": pair.weighted_kappa_linear,
        "weighted_kappa_quadratic": pair.weighted_kappa_quadratic,
        "relevant_overlap": pair.relevant_overlap,
        "small_n": pair.small_n,
    }


@dataclass(frozen=True)
class AgreementReport:
    """Pairwise agreement between assessors and, when three or more overlap, the group
    statistics: everything the agreement pages and command show, from one reading of the
    judgments (qrels.agreement_data.agreement_data)."""

    assessors: tuple[str, ...]
    labels: tuple[int, ...]  # the scale the statistics use (0/1 when binary)
    scale: tuple[int, ...]  # the campaign's scale
    threshold: int
    binary: bool
    pairs: tuple[PairAgreement, ...]
    group: GroupAgreement | None
    kinds: dict[str, str]
    small_n: int  # fewer common pairs than this: the figures are flagged as unstable
    computed_at: str

    @property
    def graded(self) -> bool:
        return len(self.labels) > 2

    def comparison(self, pair: PairAgreement) -> str:
        """``person-person``, ``person-model`` or ``model-model`` (see COMPARISONS)."""
        sides = sorted((side_of(self.kinds.get(pair.a)), side_of(self.kinds.get(pair.b))))
        return "-".join(("person", "model") if sides == ["model", "person"] else sides)

    def by_comparison(self) -> dict[str, list[PairAgreement]]:
        """The pairs of each comparison (every key of COMPARISONS, in that order)."""
        groups: dict[str, list[PairAgreement]] = {key: [] for key in COMPARISONS}
        for pair in self.pairs:
            groups[self.comparison(pair)].append(pair)
        return groups

    @property
    def headline(self) -> Headline | None:
        """People's agreement (:class:`Headline`); None without two people sharing a pair."""
        people = self.by_comparison()["person-person"]
        if not people:
            return None
        kappas = [p.cohen_kappa for p in people if p.cohen_kappa is not None]
        observed = [p.observed for p in people if p.observed is not None]
        return Headline(
            kappa=sum(kappas) / len(kappas) if kappas else None,
            observed=sum(observed) / len(observed) if observed else None,
            pairs=len(kappas),
            n=sum(p.n for p in people),
        )

    def _relevant(self, label: int) -> bool:
        return label == 1 if self.binary else label >= self.threshold

    @property
    def leniency(self) -> list[Leniency]:
        """Each model's share of relevant labels against the people's on the same pairs, over
        its person-model comparisons (models in the order of ``assessors``)."""
        tallies: dict[str, list[int]] = {}  # model -> [n, model relevant, people relevant]
        for pair in self.by_comparison()["person-model"]:
            model_is_a = side_of(self.kinds.get(pair.a)) == "model"
            model = pair.a if model_is_a else pair.b
            tally = tallies.setdefault(model, [0, 0, 0])
            for i, row in enumerate(pair.confusion):
                for j, count in enumerate(row):
                    label_a, label_b = pair.labels[i], pair.labels[j]
                    model_label, person_label = (
                        (label_a, label_b) if model_is_a else (label_b, label_a)
                    )
                    tally[0] += count
                    tally[1] += count if self._relevant(model_label) else 0
                    tally[2] += count if self._relevant(person_label) else 0
        return [
            Leniency(
                model=name,
                n=tallies[name][0],
                model_relevant=tallies[name][1] / tallies[name][0] if tallies[name][0] else None,
                people_relevant=tallies[name][2] / tallies[name][0] if tallies[name][0] else None,
            )
            for name in self.assessors
            if name in tallies
        ]

    def to_csv(self) -> str:
        """Every pair of assessors, overall ("all") and per topic, one figure a column."""
        rows = []
        for pair in self.pairs:
            comparison = self.comparison(pair)
            for topic, result in [("all", pair), *pair.per_topic.items()]:
                f = pair_figures(result)
                rows.append(
                    [pair.a, pair.b, topic]
                    + [f[column] for column in AGREEMENT_COLUMNS[3:10]]
                    + [int(f["small_n"]), f["negative"], f["identical"], comparison]
                )
        return csv_text(AGREEMENT_COLUMNS, rows)

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-safe: per pair the figures, the confusion matrix, the 95% intervals
        and the per-topic figures; the group statistics."""
        pairs = [
            {
                "a": pair.a,
                "b": pair.b,
                "comparison": self.comparison(pair),
                **pair_figures(pair),
                "labels": pair.labels,
                "confusion": pair.confusion,
                "negative_cells": [list(cell) for cell in pair.negative_cells],
                "ci95": {key: list(value) for key, value in pair.ci.items()},
                "per_topic": {
                    topic: {
                        **pair_figures(r),
                        "confusion": r.confusion,
                        "ci95": {key: list(value) for key, value in r.ci.items()},
                    }
                    for topic, r in pair.per_topic.items()
                },
            }
            for pair in self.pairs
        ]
        group = None
        if self.group is not None:
            g = self.group
            group = {
                "assessors": g.assessors,
                "items": g.n_items,
                "fleiss_kappa": g.fleiss_kappa,
                "fleiss_items": g.fleiss_items,
                "fleiss_raters": g.fleiss_raters,
                "alpha_nominal": g.alpha_nominal,
                "alpha_ordinal": g.alpha_ordinal,
            }
        return {
            "report": "agreement",
            "assessors": [
                {"name": name, "kind": self.kinds.get(name, "")} for name in self.assessors
            ],
            "scale": list(self.scale),
            "labels": list(self.labels),
            "binary": self.binary,
            "threshold": self.threshold,
            "small_n_below": self.small_n,
            "headline": self.headline.to_dict() if self.headline else None,
            "leniency": [entry.to_dict() for entry in self.leniency],
            "pairs": pairs,
            "group": group,
            "computed_at": self.computed_at,
        }

    def to_json(self) -> str:
        return json_text(self.to_dict())


# --- Reports computed from the runs --------------------------------------------------------------

# Seed 003: a double-digit share of a run's top 10 unjudged needs a caveat.
UNJUDGED_WARNING = 0.10


@dataclass(frozen=True)
class QrelsFacts:
    """The qrels a report was computed against, and what they hold."""

    source: dict[str, Any]  # sources.QrelsSource.as_params()
    description: str
    topics: int
    entries: int
    verdicts: int  # label >= 0
    relevant: int  # label >= the threshold
    unjudged: int  # pooled but unjudged (label < 0)
    # The evaluation report's only: qrels topics the campaign lacks (every run scores 0 there).
    topics_not_in_campaign: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "source": self.source,
            "description": self.description,
            "topics": self.topics,
            "entries": self.entries,
            "verdicts": self.verdicts,
            "relevant": self.relevant,
            "unjudged": self.unjudged,
        }
        if self.topics_not_in_campaign is not None:
            data["topics_not_in_campaign"] = list(self.topics_not_in_campaign)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QrelsFacts:
        missing = data.get("topics_not_in_campaign")
        return cls(
            **{key: data[key] for key in ("source", "description", "topics", "entries")},
            **{key: data[key] for key in ("verdicts", "relevant", "unjudged")},
            topics_not_in_campaign=None if missing is None else tuple(missing),
        )


@dataclass(frozen=True)
class PoolFacts:
    """What seed 002's reporting practice asks to state about a pool: strategy, depth, how many
    runs built it, and how many of its pairs have a verdict in the report's qrels."""

    version: int
    description: str
    strategy: str
    depth: int | None
    per_run_depths: bool
    runs: tuple[str, ...]
    size: int
    judged: int
    judged_share: float | None

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "runs": list(self.runs)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PoolFacts:
        return cls(**{**data, "runs": tuple(data["runs"])})


@dataclass(frozen=True)
class JudgedAtTen:
    """The share of a run's top 10 with a verdict: its mean over the runs and the lowest."""

    mean: float | None
    lowest: float | None


@dataclass(frozen=True)
class InferredNotes:
    """Why a report on a sampled pool's pairs shows inferred measures, and a warning for infAP
    on strata sampled at different rates (both empty where they do not apply)."""

    pool: int
    why: str
    warning: str


@dataclass(frozen=True)
class EvaluationRow:
    """One run: its means, its unjudged share of the top 10, its values per topic (in the
    report's ``measures`` order) and, for the inferred measures, their 95 % intervals."""

    run: str
    contributor: bool  # built one of the report's pools
    mean: dict[str, float]
    unjudged_at_10: float
    topics_answered: int
    per_topic: dict[str, list[float]]
    intervals: dict[str, list[float] | None] | None = None

    @property
    def warn(self) -> bool:
        return self.unjudged_at_10 >= UNJUDGED_WARNING

    def to_dict(self, measures: Sequence[str] | None = None) -> dict[str, Any]:
        """JSON-safe; with ``measures``, per-topic values keyed by measure name."""
        data: dict[str, Any] = {
            "run": self.run,
            "contributor": self.contributor,
            "mean": self.mean,
            "unjudged_at_10": self.unjudged_at_10,
            "topics_answered": self.topics_answered,
        }
        if self.intervals is not None:
            data["intervals"] = self.intervals
        data["per_topic"] = (
            self.per_topic
            if measures is None
            else {
                topic: dict(zip(measures, values, strict=True))
                for topic, values in self.per_topic.items()
            }
        )
        return data


@dataclass(frozen=True)
class EvaluationReport:
    """Every current run scored against one qrels (qrels.runscores.evaluation_report)."""

    campaign: str
    qrels: QrelsFacts
    threshold: int
    measures: tuple[str, ...]
    topics: tuple[str, ...]  # the qrels topics, in the campaign's order: means are over them
    pools: tuple[PoolFacts, ...]
    judged_at_10: JudgedAtTen
    runs: tuple[EvaluationRow, ...]
    inferred: InferredNotes | None  # on a sampled pool's pairs only
    computed_at: str
    seconds: float

    kind = "evaluation"

    def ranked(self, measure: str) -> list[EvaluationRow]:
        """The runs best first by their mean ``measure``; equal means in run-name order (as
        qrels.evaluation.rank_runs orders them)."""
        return sorted(self.runs, key=lambda row: (-row.mean[measure], row.run))

    def row(self, run: str) -> EvaluationRow | None:
        return next((row for row in self.runs if row.run == run), None)

    def run_topics(self, run: str) -> list[dict[str, Any]] | None:
        """One run's per-topic rows, every qrels topic in order (a topic the run did not answer
        has no values); None if the run is not in the report."""
        row = self.row(run)
        if row is None:
            return None
        return [
            {
                "topic": topic,
                "values": (
                    dict(zip(self.measures, row.per_topic[topic], strict=True))
                    if topic in row.per_topic
                    else None
                ),
            }
            for topic in self.topics
        ]

    def to_dict(self, *, per_topic_by_measure: bool = False) -> dict[str, Any]:
        """JSON-safe: what a report job stores (per-topic values as lists in ``measures``
        order), or with ``per_topic_by_measure`` what the download and the command print."""
        return {
            "report": self.kind,
            "campaign": self.campaign,
            "qrels": self.qrels.to_dict(),
            "threshold": self.threshold,
            "measures": list(self.measures),
            "topics": list(self.topics),
            "pools": [pool.to_dict() for pool in self.pools],
            "judged_at_10": dict(self.judged_at_10.__dict__),
            "runs": [
                row.to_dict(self.measures if per_topic_by_measure else None) for row in self.runs
            ],
            "inferred": None if self.inferred is None else dict(self.inferred.__dict__),
            "computed_at": self.computed_at,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvaluationReport:
        return cls(
            campaign=data["campaign"],
            qrels=QrelsFacts.from_dict(data["qrels"]),
            threshold=data["threshold"],
            measures=tuple(data["measures"]),
            topics=tuple(data["topics"]),
            pools=tuple(PoolFacts.from_dict(pool) for pool in data["pools"]),
            judged_at_10=JudgedAtTen(**data["judged_at_10"]),
            runs=tuple(EvaluationRow(**row) for row in data["runs"]),
            inferred=InferredNotes(**data["inferred"]) if data.get("inferred") else None,
            computed_at=data["computed_at"],
            seconds=data["seconds"],
        )

    def to_json(self) -> str:
        return json_text(self.to_dict(per_topic_by_measure=True))

    def to_csv(self) -> str:
        """The means, best run first by the first measure."""
        header = ["run", "contributor", "topics_returned", *self.measures, "unjudged@10"]
        rows = [
            [row.run, int(row.contributor), row.topics_answered]
            + [row.mean[m] for m in self.measures]
            + [row.unjudged_at_10]
            for row in self.ranked(self.measures[0])
        ]
        return csv_text(header, rows)

    def topics_csv(self) -> str:
        """Every run on every qrels topic (empty cells where it returned nothing)."""
        rows = [
            [row.run, topic, *(row.per_topic.get(topic) or [None] * len(self.measures))]
            for row in self.runs
            for topic in self.topics
        ]
        return csv_text(["run", "topic", *self.measures], rows)


@dataclass(frozen=True)
class StabilityRow:
    run: str
    first: float  # the mean under the first qrels
    second: float
    rank_first: int
    rank_second: int

    @property
    def delta(self) -> int:
        """Places gained under the second qrels (negative: lost)."""
        return self.rank_first - self.rank_second


@dataclass(frozen=True)
class QrelsPair:
    first: QrelsFacts
    second: QrelsFacts


@dataclass(frozen=True)
class StabilityReport:
    """The runs ordered by one measure under two qrels, Kendall's tau between the orders and
    the pairs of runs that swap (qrels.runscores.stability_report)."""

    campaign: str
    measure: str
    threshold: int
    common_topics: bool
    qrels: QrelsPair
    topics: tuple[str, ...]
    tau: float | None
    swapped: int
    pairs: int
    swapped_pairs: tuple[tuple[str, str], ...]  # (above under the first, above under the second)
    runs: tuple[StabilityRow, ...]  # in the order under the first qrels
    computed_at: str
    seconds: float

    kind = "stability"

    @property
    def moved(self) -> int:
        return sum(1 for row in self.runs if row.rank_first != row.rank_second)

    @property
    def mean_change(self) -> dict[str, float | None] | None:
        """The mean absolute change of a run's score, and relative to its score under the
        first qrels (runs scoring 0 there left out)."""
        if not self.runs:
            return None
        absolute = [abs(r.second - r.first) for r in self.runs]
        relative = [abs(r.second - r.first) / r.first for r in self.runs if r.first]
        return {
            "absolute": sum(absolute) / len(absolute),
            "relative": sum(relative) / len(relative) if relative else None,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "report": self.kind,
            "campaign": self.campaign,
            "measure": self.measure,
            "threshold": self.threshold,
            "common_topics": self.common_topics,
            "qrels": {"first": self.qrels.first.to_dict(), "second": self.qrels.second.to_dict()},
            "topics": list(self.topics),
            "tau": self.tau,
            "swapped": self.swapped,
            "pairs": self.pairs,
            "swapped_pairs": [list(pair) for pair in self.swapped_pairs],
            "runs": [row.__dict__ for row in self.runs],
            "computed_at": self.computed_at,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StabilityReport:
        return cls(
            **{key: data[key] for key in ("campaign", "measure", "threshold", "common_topics")},
            qrels=QrelsPair(
                QrelsFacts.from_dict(data["qrels"]["first"]),
                QrelsFacts.from_dict(data["qrels"]["second"]),
            ),
            topics=tuple(data["topics"]),
            **{key: data[key] for key in ("tau", "swapped", "pairs")},
            swapped_pairs=tuple((a, b) for a, b in data["swapped_pairs"]),
            runs=tuple(StabilityRow(**row) for row in data["runs"]),
            computed_at=data["computed_at"],
            seconds=data["seconds"],
        )

    def to_json(self) -> str:
        return json_text(self.to_dict())

    def to_csv(self) -> str:
        header = ["run", f"{self.measure}_first", f"{self.measure}_second"]
        header += ["rank_first", "rank_second"]
        rows = [[r.run, r.first, r.second, r.rank_first, r.rank_second] for r in self.runs]
        return csv_text(header, rows)


LEAVE_ONE_OUT_FIELDS = (
    "score_loo",
    "drop",
    "relative_drop",
    "rank_loo",
    "rank_change",
    "removed",
    "removed_relevant",
)


@dataclass(frozen=True)
class PoolBiasRow:
    """One run: its score and rank on the full pool, its unjudged shares and, for a run that
    built the pool (when the pool has a depth), the leave-one-out figures."""

    run: str
    contributor: bool
    score: float
    rank: int
    unjudged_at_10: float
    unjudged_at_depth: float | None
    topics_answered: int
    score_loo: float | None = None  # the leave-one-out figures: None for the other runs
    drop: float | None = None
    relative_drop: float | None = None
    rank_loo: int | None = None
    rank_change: int | None = None
    removed: int | None = None
    removed_relevant: int | None = None

    @property
    def left_out(self) -> bool:
        return self.rank_loo is not None

    @property
    def warn(self) -> bool:
        return self.unjudged_at_10 >= UNJUDGED_WARNING

    @property
    def warn_depth(self) -> bool:
        return (self.unjudged_at_depth or 0) >= UNJUDGED_WARNING

    @property
    def drop_percent(self) -> float:
        return 100 * (self.relative_drop or 0)

    @property
    def rise(self) -> float:
        return -(self.drop or 0)

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        if not self.left_out:  # a run without leave-one-out has no such keys (not nulls)
            for key in LEAVE_ONE_OUT_FIELDS:
                del data[key]
        return data


@dataclass(frozen=True)
class UnjudgedMeans:
    """The mean unjudged share of the top 10 of the runs that built a pool, and of the others
    (None where there are none)."""

    contributors: float | None
    others: float | None


@dataclass(frozen=True)
class PoolBiasReport:
    """Leave-one-out for each run that built a pool and every run's unjudged shares at 10 and
    at the pool depth (qrels.runscores.pool_bias_report)."""

    campaign: str
    measure: str
    threshold: int
    pool: PoolFacts
    qrels: QrelsFacts
    depth: int | None
    leave_one_out: bool
    largest_drop: float | None
    moved: int  # contributors whose rank changes when left out
    mean_unjudged_at_10: UnjudgedMeans
    runs: tuple[PoolBiasRow, ...]  # by score on the full pool
    computed_at: str
    seconds: float

    kind = "pool_bias"

    @property
    def contributors(self) -> int:
        return sum(1 for row in self.runs if row.contributor)

    @property
    def outsiders(self) -> int:
        return sum(1 for row in self.runs if not row.contributor)

    def to_dict(self) -> dict[str, Any]:
        return {
            "report": self.kind,
            "campaign": self.campaign,
            "measure": self.measure,
            "threshold": self.threshold,
            "pool": self.pool.to_dict(),
            "qrels": self.qrels.to_dict(),
            "depth": self.depth,
            "leave_one_out": self.leave_one_out,
            "largest_drop": self.largest_drop,
            "moved": self.moved,
            "mean_unjudged_at_10": dict(self.mean_unjudged_at_10.__dict__),
            "runs": [row.to_dict() for row in self.runs],
            "computed_at": self.computed_at,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PoolBiasReport:
        return cls(
            **{key: data[key] for key in ("campaign", "measure", "threshold", "depth")},
            pool=PoolFacts.from_dict(data["pool"]),
            qrels=QrelsFacts.from_dict(data["qrels"]),
            **{key: data[key] for key in ("leave_one_out", "largest_drop", "moved")},
            mean_unjudged_at_10=UnjudgedMeans(**data["mean_unjudged_at_10"]),
            runs=tuple(PoolBiasRow(**row) for row in data["runs"]),
            computed_at=data["computed_at"],
            seconds=data["seconds"],
        )

    def to_json(self) -> str:
        return json_text(self.to_dict())

    def to_csv(self) -> str:
        depth = f"unjudged@{self.depth}" if self.depth else "unjudged@depth"
        header = ["run", "contributor", self.measure, "rank"]
        header += [f"{self.measure}_leave_one_out", "drop", "rank_leave_one_out"]
        header += ["removed_entries", "removed_relevant", "unjudged@10", depth]
        rows = [
            [
                *(r.run, int(r.contributor), r.score, r.rank),
                *(r.score_loo, r.drop, r.rank_loo, r.removed, r.removed_relevant),
                *(r.unjudged_at_10, r.unjudged_at_depth),
            ]
            for r in self.runs
        ]
        return csv_text(header, rows)


RunReport = EvaluationReport | StabilityReport | PoolBiasReport
RUN_REPORTS: dict[str, type[RunReport]] = {
    "evaluation": EvaluationReport,
    "stability": StabilityReport,
    "pool_bias": PoolBiasReport,
}


def run_report_from_dict(data: dict[str, Any]) -> RunReport:
    """A report a job stored (``to_dict()``), read back."""
    return RUN_REPORTS[data["report"]].from_dict(data)
