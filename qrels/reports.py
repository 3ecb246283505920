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
)


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

    def to_csv(self) -> str:
        """Every pair of assessors, overall ("all") and per topic, one figure a column."""
        rows = []
        for pair in self.pairs:
            for topic, result in [("all", pair), *pair.per_topic.items()]:
                f = pair_figures(result)
                rows.append(
                    [pair.a, pair.b, topic]
                    + [f[column] for column in AGREEMENT_COLUMNS[3:10]]
                    + [int(f["small_n"]), f["negative"], f["identical"]]
                )
        return csv_text(AGREEMENT_COLUMNS, rows)

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-safe: per pair the figures, the confusion matrix, the 95% intervals
        and the per-topic figures; the group statistics."""
        pairs = [
            {
                "a": pair.a,
                "b": pair.b,
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
            "pairs": pairs,
            "group": group,
            "computed_at": self.computed_at,
        }

    def to_json(self) -> str:
        return json_text(self.to_dict())
