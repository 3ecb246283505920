"""pooling.spec.PoolSpec: a pool's parameters read in one place, with one definition of depth."""

from __future__ import annotations

import pytest

from pooling.spec import PoolSpec
from pooling.strategies import Stratum


def test_depth_is_the_depth_every_run_contributed_to():
    depth = PoolSpec.from_params("depth", {"depth": 10, "depth_per_run": {"7": 50, "8": 0}})
    assert depth.depth == 10
    assert depth.read_depth == 50  # how far down any run is read
    assert depth.run_depths(["7", "8", "9"]) == {"7": 50, "8": 0, "9": 10}
    assert PoolSpec.from_params("depth", {"depth": 10}).run_depths(["7"]) == 10

    strata = [
        {"first_rank": 1, "last_rank": 10, "rate": 1.0},
        {"first_rank": 11, "last_rank": 100, "rate": 0.1},
    ]
    sample = PoolSpec.from_params("sample", {"strata": strata}, seed=7)
    assert sample.strata == (Stratum(1, 10, 1.0), Stratum(11, 100, 0.1))
    assert sample.depth == sample.read_depth == 100

    assert PoolSpec.from_params("rrf", {"budget": 50, "k": 60.0}).depth is None
    capped = PoolSpec.from_params("rbp", {"budget": 50, "p": 0.8, "aggregate": "max", "depth": 30})
    assert capped.depth == capped.read_depth == 30


@pytest.mark.parametrize(
    ("strategy", "params", "text"),
    [
        ("depth", {"depth": 10, "order": "trec_eval"}, "depth 10"),
        (
            "depth",
            {"depth": 10, "depth_per_run": {"3": 20}, "order": "file_rank", "residual": True},
            "depth 10 (per-run depths), file rank order, residual",
        ),
        (
            "sample",
            {"strata": [{"first_rank": 1, "last_rank": 20, "rate": 0.5}]},
            "stratified sample (1-20 at 50%), seed 3",
        ),
        ("rrf", {"budget": 100, "k": 60.0}, "RRF budget 100 per topic, k=60.0"),
        (
            "rbp",
            {"budget": 100, "p": 0.8, "aggregate": "sum", "adjudication": {"order": "bandit"}},
            "RBP budget 100 per topic, p=0.8, sum, adaptive bandit order",
        ),
    ],
)
def test_describe_says_what_the_pool_is(strategy, params, text):
    assert PoolSpec.from_params(strategy, params, seed=3).describe() == text
