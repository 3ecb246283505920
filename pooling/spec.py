"""A pool's definition as one typed value: what ``Pool.params`` holds, read in one place.

``pooling.pools.normalise_params`` validates what an organiser asked for and stores canonical
parameters on the pool; :meth:`PoolSpec.from_params` reads those back (no second validation),
and every module that needs a pool's strategy, depths, strata, budget, order or seed asks the
spec rather than the JSON. Pure: no Django.

Depth, defined once:

* :attr:`PoolSpec.depth` is the depth to which *every* run contributed: a depth pool's depth (its
  default one where some runs have their own), a stratified sample's last sampled rank, a fusion
  pool's cap if it has one; None when the pool has none. Reports and exports state this one.
* :attr:`PoolSpec.read_depth` is how far down any run is read to build the pool: the deepest of
  those depths, per-run depths included.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pooling.strategies import Stratum

DEPTH, SAMPLE, RRF, RBP = "depth", "sample", "rrf", "rbp"


@dataclass(frozen=True)
class PoolSpec:
    strategy: str
    order: str = "trec_eval"
    residual: bool = False
    seed: int | None = None
    base_depth: int | None = None  # "depth" in the params: a depth pool's, or a fusion cap
    depth_per_run: Mapping[str, int] = field(default_factory=dict)  # run pk (as text) -> depth
    strata: tuple[Stratum, ...] = ()
    budget: int | None = None
    k: float = 60.0
    p: float = 0.8
    aggregate: str = "sum"
    adjudication: Mapping[str, Any] | None = None

    @classmethod
    def from_params(
        cls, strategy: str, params: Mapping[str, Any] | None, seed: int | None = None
    ) -> PoolSpec:
        """The spec of canonical parameters (as ``normalise_params`` stores them)."""
        p = params or {}
        return cls(
            strategy=strategy,
            order=p.get("order") or "trec_eval",
            residual=bool(p.get("residual")),
            seed=seed,
            base_depth=p.get("depth"),
            depth_per_run=dict(p.get("depth_per_run") or {}),
            strata=tuple(Stratum(**s) for s in p.get("strata") or ()),
            budget=p.get("budget"),
            k=p.get("k", 60),
            p=p.get("p", 0.8),
            aggregate=p.get("aggregate") or "sum",
            adjudication=p.get("adjudication") or None,
        )

    @property
    def depth(self) -> int | None:
        """The depth every run contributed to (see the module's docstring)."""
        if self.strategy == SAMPLE:
            return max((s.last_rank for s in self.strata), default=None)
        return self.base_depth

    @property
    def read_depth(self) -> int | None:
        """How deep any run is read to build the pool; None for a fusion pool without a cap
        (every run read whole)."""
        if self.strategy == DEPTH:
            return max([self.base_depth, *self.depth_per_run.values()])
        return self.depth

    def run_depths(self, run_keys: Iterable[str]) -> int | dict[str, int]:
        """A depth pool's depth for each run (its own or the default), or the one depth when no
        run has its own."""
        if not self.depth_per_run:
            return self.base_depth
        return {key: self.depth_per_run.get(key, self.base_depth) for key in run_keys}

    def describe(self) -> str:
        """Strategy and parameters in one line, for tables and the exported documentation."""
        if self.strategy == DEPTH:
            text = f"depth {self.base_depth}"
            if self.depth_per_run:
                text += " (per-run depths)"
        elif self.strategy == SAMPLE:
            strata = ", ".join(f"{s.first_rank}-{s.last_rank} at {s.rate:.0%}" for s in self.strata)
            text = f"stratified sample ({strata}), seed {self.seed}"
        elif self.strategy == RRF:
            text = f"RRF budget {self.budget} per topic, k={self.k}"
        else:
            text = f"RBP budget {self.budget} per topic, p={self.p}, {self.aggregate}"
        if self.order == "file_rank":
            text += ", file rank order"
        if self.residual:
            text += ", residual"
        if self.adjudication:
            text += f", adaptive {self.adjudication['order']} order"
        return text
