"""The hybrid-budget simulation (qrels/hybrid.py) on hand-made qrels, and on TREC RAG 2025."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from sklearn.metrics import cohen_kappa_score

from campaigns.textfiles import ParseError
from qrels import hybrid


def qrels(rows: dict[str, list[tuple[int, int]]]) -> tuple[dict, dict]:
    """topic -> [(model label, people label)] as two qrels mappings, docs d0, d1, ..."""
    people, model = {}, {}
    for topic, pairs in rows.items():
        for index, (m, p) in enumerate(pairs):
            model[(topic, f"d{index}")] = m
            people[(topic, f"d{index}")] = p
    return people, model


def test_per_topic_calibration_corrects_a_model_that_is_wrong_both_ways() -> None:
    # The model calls four pairs 2 that people find not relevant, and four pairs 0 that they
    # find relevant. Routing probes both labels (each starts maximally uncertain), label 2 first
    # (nearer the threshold), then alternates: two judged of each, and each label's majority
    # fixes the other two.
    people, model = qrels({"A": [(2, 0)] * 4 + [(0, 3)] * 4})
    result = hybrid.simulate(people=people, model=model, budget=50, routing="uncertain")
    assert (result.judged, result.filled, result.flipped) == (4, 4, 4)
    assert sorted(model[p] for p in result.judged_pairs) == [0, 0, 2, 2]
    assert result.kappa == pytest.approx(1.0)
    assert hybrid.model_alone_kappa(people=people, model=model) == pytest.approx(-1.0)


def test_unjudged_label_falls_back_to_other_topics_then_to_the_model() -> None:
    # A: boundary routing judges the two label-1 pairs (half of 4), never the label-3 ones.
    # C: one of two label-2 pairs is judged relevant, the other filled relevant.
    a_and_c = {"A": [(1, 0), (1, 0), (3, 0), (3, 0)], "C": [(2, 3), (2, 3)]}
    people, model = qrels(a_and_c)
    alone = hybrid.simulate(people=people, model=model, budget=50, routing="boundary")
    # Nobody judged a label-3 pair anywhere: A's two keep the model's verdict (relevant).
    # Truth 0 0 0 0 | 1 1, merged 0 0 1 1 | 1 1: po = 4/6, pe = 2/6*4/6 + 4/6*2/6 = 4/9,
    # kappa = (2/3 - 4/9) / (1 - 4/9) = 0.4.
    assert alone.kappa == pytest.approx(0.4)
    assert alone.flipped == 0
    # B: people judged one of its label-3 pairs not relevant; A's label 3 now follows B.
    people, model = qrels({**a_and_c, "B": [(3, 0), (3, 0)]})
    pooled = hybrid.simulate(people=people, model=model, budget=50, routing="boundary")
    assert pooled.kappa == pytest.approx(1.0)
    assert pooled.flipped == 3  # A's two label-3 pairs and B's unjudged one


def test_budget_is_at_most_the_share_of_each_topic() -> None:
    people, model = qrels({"A": [(1, 0), (2, 2), (3, 3)], "B": [(0, 0)] * 7})
    for routing in hybrid.ROUTINGS:
        result = hybrid.simulate(people=people, model=model, budget=50, routing=routing)
        per_topic = {t: sum(1 for p in result.judged_pairs if p[0] == t) for t in "AB"}
        assert per_topic == {"A": 1, "B": 3}, routing  # floor(1.5), floor(3.5)
        assert set(result.merged) == set(people)


def test_negative_labels_and_unmatched_pairs_are_left_out() -> None:
    people = {("A", "d0"): 2, ("A", "d1"): 0, ("A", "d2"): -1, ("A", "d3"): 2}
    model = {("A", "d0"): 2, ("A", "d1"): 0, ("A", "d2"): 2, ("A", "d4"): 0}
    result = hybrid.simulate(people=people, model=model, budget=0)
    assert (result.pairs, result.left_out) == (2, 3)
    assert result.kappa == pytest.approx(1.0)


def test_seeded_and_deterministic() -> None:
    rng = random.Random(7)
    rows = {t: [(rng.randint(0, 3), rng.randint(0, 3)) for _ in range(40)] for t in "ABC"}
    people, model = qrels(rows)
    for routing in hybrid.ROUTINGS:
        first = hybrid.simulate(people=people, model=model, budget=30, routing=routing, seed=3)
        again = hybrid.simulate(people=people, model=model, budget=30, routing=routing, seed=3)
        assert first.judged_pairs == again.judged_pairs
        assert first.kappa == again.kappa
    one = hybrid.simulate(people=people, model=model, budget=30, routing="random", seed=1)
    two = hybrid.simulate(people=people, model=model, budget=30, routing="random", seed=2)
    assert one.judged_pairs != two.judged_pairs


def test_binary_kappa_equals_sklearn() -> None:
    rng = random.Random(1)
    pairs = [("t", str(i)) for i in range(500)]
    a = {p: int(rng.random() < 0.4) for p in pairs}
    b = {p: a[p] if rng.random() < 0.7 else int(rng.random() < 0.6) for p in pairs}
    expected = cohen_kappa_score([a[p] for p in pairs], [b[p] for p in pairs])
    assert hybrid.binary_kappa(a, b) == pytest.approx(expected)


def test_probabilities_route_nearest_one_half_first() -> None:
    people, model = qrels({"A": [(0, 0), (3, 3), (2, 0), (1, 3)]})
    probabilities = {("A", "d0"): 0.02, ("A", "d1"): 0.97, ("A", "d2"): 0.55, ("A", "d3"): 0.45}
    result = hybrid.simulate(
        people=people, model=model, budget=50, routing="boundary", probabilities=probabilities
    )
    assert result.judged_pairs == {("A", "d2"), ("A", "d3")}
    assert result.kappa == pytest.approx(1.0)


def test_probabilities_file_errors_name_every_line() -> None:
    lines = ["1 d1 0.5", "1 d2 1.5", "1 d3", "1 d1 0.1", "1 d4 nan"]
    with pytest.raises(ParseError) as caught:
        hybrid.parse_probabilities(lines, source="p.txt")
    text = str(caught.value)
    for expected in ("line 2", "line 3", "line 4", "line 5", "p.txt"):
        assert expected in text
    assert hybrid.parse_probabilities(["# c", "1 d1 0.25"]) == {("1", "d1"): 0.25}


def test_command_prints_the_curve_and_refuses_bad_files(tmp_path: Path, capsys) -> None:
    people = tmp_path / "people.txt"
    model = tmp_path / "model.txt"
    people.write_text("".join(f"A 0 d{i} {3 if i < 4 else 0}\n" for i in range(8)))
    model.write_text("".join(f"A Q0 d{i} {0 if i < 4 else 2}\n" for i in range(8)))
    call_command("hybrid", str(people), str(model), "--budget", "0", "50", "--seeds", "1")
    out = capsys.readouterr().out
    assert "model alone: -1.000" in out
    assert "   50 %      1.000" in out  # the uncertain column
    call_command("hybrid", str(people), str(model), "--budget", "50", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["pairs"] == 8
    assert data["curve"][0]["kappa"] == pytest.approx(1.0)
    probabilities = tmp_path / "p.txt"
    # The model's probabilities say the opposite of its labels, and they are what the fill
    # follows: with nobody judging, the merged qrels are the probabilities' verdicts.
    probabilities.write_text("".join(f"A d{i} {0.9 if i < 4 else 0.1}\n" for i in range(8)))
    call_command(
        "hybrid",
        str(people),
        str(model),
        "--probabilities",
        str(probabilities),
        "--budget",
        "0",
        "--routing",
        "boundary",
        "--seeds",
        "1",
        "--json",
    )
    data = json.loads(capsys.readouterr().out)
    assert data["curve"][0]["kappa"] == pytest.approx(1.0)
    probabilities.write_text("A d0 2\n")
    with pytest.raises(CommandError, match="line 1: probability '2' is not a number"):
        call_command("hybrid", str(people), str(model), "--probabilities", str(probabilities))
    bad = tmp_path / "bad.txt"
    bad.write_text("A 0 d0 2\nA 0 d1 x\n")
    with pytest.raises(CommandError, match="line 2"):
        call_command("hybrid", str(people), str(bad))
    with pytest.raises(CommandError, match="percentage"):
        call_command("hybrid", str(people), str(model), "--budget", "120")


RAG = Path(settings.BASE_DIR).parent / "shared" / "data" / "trec-rag"


@pytest.mark.shared_data
@pytest.mark.skipif(not RAG.is_dir(), reason=f"{RAG} is absent")
def test_trec_rag_2025_routing_beats_random_at_30_percent() -> None:
    from qrels.formats import read_qrels_file

    def read(name: str) -> dict:
        return {(j.topic_id, j.doc_id): j.label for j in read_qrels_file(RAG / name).judgments}

    people, model = read("qrels.rag25.test.txt"), read("qrels.rag25.test-umbrela2.txt")
    assert round(hybrid.model_alone_kappa(people=people, model=model), 3) == 0.431
    kappa = {
        routing: hybrid.simulate(people=people, model=model, budget=30, routing=routing).kappa
        for routing in hybrid.ROUTINGS
    }
    # Measured (bench/hybrid.py, 5 seeds): uncertain 0.681, boundary 0.654, random 0.629; the
    # issue's 0.70 is above what routing on the model's label alone reached here.
    assert kappa["random"] == pytest.approx(0.63, abs=0.02)
    assert kappa["uncertain"] > kappa["boundary"] > kappa["random"]
    assert kappa["uncertain"] >= 0.66
