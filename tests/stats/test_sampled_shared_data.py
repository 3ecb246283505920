"""qrels.sampled against NIST's sample_eval.pl, run by perl, to 1e-4 on every run and topic.

The oracle lives beside the checkout (``../shared/reference/sample_eval.pl``, see its README);
the real runs and qrels in ``../shared/data/trec-covid-round1``. Without them (or without perl)
the tests are skipped. sample_eval prints four decimals, hence the tolerance.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from pooling.strategies import Stratum, sample_pool
from qrels.sampled import (
    SampledEvaluator,
    SampledPair,
    format_sample_qrels,
    parse_sample_qrels,
    pool_sample_qrels,
)

SHARED = Path(__file__).resolve().parents[3] / "shared"
SAMPLE_EVAL = SHARED / "reference" / "sample_eval.pl"
DATA = SHARED / "data" / "trec-covid-round1"
PERL = shutil.which("perl")

pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.skipif(not SAMPLE_EVAL.is_file(), reason=f"{SAMPLE_EVAL} is absent"),
    pytest.mark.skipif(PERL is None, reason="perl is not installed"),
]

# sample_eval's names -> ours.
NAMES = {
    "infAP": "xinfAP",
    "infNDCG": "infNDCG",
    "iP10": "iP@10",
    "iP50": "iP@50",
    "iP1000": "iP@1000",
    "inum_rel_ret": "inum_rel_ret",
    "inum_rel": "inum_rel",
    "num_ret": "num_ret",
}


def sample_eval(
    tmp_path: Path, qrels: Mapping, run: Mapping, *, gain_map: str | None = None
) -> dict[str, dict[str, float]]:
    """sample_eval.pl -q's per-topic and "all" lines, as topic -> our measure name -> value."""
    qrels_file = tmp_path / "qrels.sample_eval.txt"
    qrels_file.write_text("".join(format_sample_qrels(qrels)))
    run_file = tmp_path / "run.txt"
    run_file.write_text(
        "".join(
            f"{topic} Q0 {doc} 0 {score!r} tag\n"
            for topic, docs in run.items()
            for doc, score in docs.items()
        )
    )
    # -q and -G cannot be given together (the script miscounts its arguments), so a gain map
    # is applied to the qrels file instead, which is what -G does to the labels it reads.
    if gain_map:
        mapping = dict(item.split("=") for item in gain_map.split())
        qrels_file.write_text(
            "".join(
                f"{t} 0 {d} {p.stratum} {mapping.get(str(p.label), p.label)}\n"
                for t, docs in qrels.items()
                for d, p in docs.items()
            )
        )
    result = subprocess.run(
        [PERL, str(SAMPLE_EVAL), "-q", str(qrels_file), str(run_file)],
        capture_output=True,
        text=True,
        check=True,
    )
    values: dict[str, dict[str, float]] = {}
    for line in result.stdout.splitlines():
        name, topic, value = line.split()
        if name in NAMES:
            values.setdefault(topic, {})[NAMES[name]] = float(value)
    return values


def assert_agrees(ours: dict[str, dict[str, float]], oracle: dict[str, dict[str, float]]):
    assert set(ours) == set(oracle) - {"all"}
    for topic, measures in ours.items():
        for name, value in measures.items():
            assert value == pytest.approx(oracle[topic][name], abs=1e-4), (topic, name)


def check(tmp_path: Path, qrels, run, *, gains=None, gain_map=None) -> None:
    estimates = SampledEvaluator(qrels, gains=gains).evaluate("run", run)
    oracle = sample_eval(tmp_path, qrels, run, gain_map=gain_map)
    assert_agrees(estimates.per_topic, oracle)
    for name in ("xinfAP", "infNDCG", "iP@10", "iP@50", "iP@1000"):
        assert estimates.mean[name] == pytest.approx(oracle["all"][name], abs=1e-4), name


HAND_QRELS = """\
1 0 d1 1 1
1 0 d2 1 0
1 0 d3 1 2
1 0 d4 2 -1
1 0 d5 2 1
1 0 d6 2 -1
1 0 d7 2 0
1 0 d8 2 -1
2 0 e1 1 0
2 0 e2 1 0
2 0 e3 2 -1
3 0 f1 1 -1
3 0 f2 2 2
3 0 f3 2 -1
"""
# Ties (x1/d4, d1/d2, f3/f2), a document outside the pool (x1), a topic with no relevant
# document (2), a stratum with no sampled document (topic 3, stratum 1), labels 0/1/2.
HAND_RUN = {
    "1": {"d3": 5.0, "x1": 4.0, "d4": 4.0, "d5": 3.0, "d1": 2.0, "d2": 2.0, "d8": 1.0},
    "2": {"e1": 3.0, "e3": 2.0},
    "3": {"f1": 3.0, "f3": 2.0, "f2": 2.0},
    "4": {"g1": 1.0},  # a topic the qrels lack: left out, as sample_eval does
}


def hand_qrels():
    return parse_sample_qrels(HAND_QRELS.splitlines(), source="hand")


def test_hand_made_fixture_agrees(tmp_path):
    check(tmp_path, hand_qrels(), HAND_RUN)


def test_a_gain_map_agrees_with_sample_evals_G(tmp_path):
    check(tmp_path, hand_qrels(), HAND_RUN, gains={1: 1, 2: 3}, gain_map="1=1 2=3")
    check(tmp_path, hand_qrels(), HAND_RUN, gains={1: 0}, gain_map="1=0")


def test_the_mean_with_G_agrees_with_sample_evals_own_G(tmp_path):
    """The -G option itself (without -q), for the means."""
    qrels = hand_qrels()
    (tmp_path / "q").write_text("".join(format_sample_qrels(qrels)))
    (tmp_path / "r").write_text(
        "".join(f"{t} Q0 {d} 0 {s} x\n" for t, docs in HAND_RUN.items() for d, s in docs.items())
    )
    out = subprocess.run(
        [PERL, str(SAMPLE_EVAL), str(tmp_path / "q"), str(tmp_path / "r"), "-G", "1=1", "2=3"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    means = {line.split()[0]: float(line.split()[-1]) for line in out.splitlines()}
    ours = SampledEvaluator(qrels, gains={1: 1, 2: 3}).evaluate("run", HAND_RUN).mean
    assert ours["infNDCG"] == pytest.approx(means["infNDCG"], abs=1e-4)
    assert ours["xinfAP"] == pytest.approx(means["infAP"], abs=1e-4)


@pytest.mark.parametrize("seed", range(12))
def test_random_pools_agree(tmp_path, seed):
    """Random topics: 1-4 strata of 1-40 documents sampled at random rates (some not at all),
    labels 0-3, runs with tied scores and documents outside the pool."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, SampledPair]] = {}
    run: dict[str, dict[str, float]] = {}
    for topic in map(str, range(1, 8)):
        docs = {}
        for stratum in range(rng.randint(1, 4)):
            rate = rng.choice([0.0, 0.1, 0.3, 1.0])
            for i in range(rng.randint(1, 40)):
                label = rng.choice([0, 0, 0, 1, 2, 3]) if rng.random() < rate else -1
                docs[f"t{topic}s{stratum}d{i}"] = SampledPair(f"S{stratum}", label)
        qrels[topic] = docs
        pooled = list(docs)
        retrieved = rng.sample(pooled, rng.randint(1, len(pooled)))
        retrieved += [f"out{i}" for i in range(rng.randint(0, 30))]
        run[topic] = {doc: float(rng.randint(0, 15)) for doc in retrieved}
    check(tmp_path, qrels, run)


def test_a_run_past_1000_documents_is_cut_as_sample_eval_cuts_it(tmp_path):
    docs = {
        f"d{i:04d}": SampledPair("1" if i < 600 else "2", i % 3 if i % 2 else -1)
        for i in range(1500)
    }
    qrels = {"7": docs}
    run = {"7": {doc: float(1500 - i) for i, doc in enumerate(sorted(docs, reverse=True))}}
    check(tmp_path, qrels, run)


# --- (b) a pool built by Pooljudge over real TREC-COVID runs -------------------------------------


def read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            topic, _q0, doc, _rank, score, _tag = line.split()
            run.setdefault(topic, {})[doc] = float(score)
    return run


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    labels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            topic, _iteration, doc, label = line.split()
            labels.setdefault(topic, {})[doc] = int(label)
    return labels


@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is absent")
def test_a_sampled_pool_over_ten_trec_covid_runs_agrees(tmp_path):
    paths = sorted((DATA / "runs").iterdir())[::14][:10]
    runs = {path.name: read_run(path) for path in paths}
    ordered = {
        name: {
            topic: sorted(docs, key=lambda d, docs=docs: (docs[d], d), reverse=True)
            for topic, docs in run.items()
        }
        for name, run in runs.items()
    }
    pool = sample_pool(
        ordered,
        strata=[Stratum(1, 10, 1.0), Stratum(11, 50, 0.3), Stratum(51, 200, 0.1)],
        seed=16,
    )
    entries = [(topic, e.doc_id, e.stratum, e.sampled) for topic, es in pool.items() for e in es]
    qrels = pool_sample_qrels(entries, read_qrels(DATA / "qrels" / "qrels-rnd1.txt"))
    # Labels 0, 1 and 2 and -1 (not sampled, or sampled but not judged in round 1) all occur.
    assert {p.label for docs in qrels.values() for p in docs.values()} == {-1, 0, 1, 2}
    evaluator = SampledEvaluator(qrels)
    for name, run in runs.items():
        oracle = sample_eval(tmp_path, qrels, run)
        assert_agrees(evaluator.evaluate(name, run).per_topic, oracle)
