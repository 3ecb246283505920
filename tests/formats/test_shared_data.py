"""The parsers on real data: TREC-COVID round 1 runs and qrels, and both Cranfield copies.

Runs only where ../shared/data exists beside the project (it is never copied into it).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from campaigns.formats import iter_documents, parse_topics
from campaigns.textfiles import ParseError, decode_lines, iter_lines, read_bytes
from pooling.formats import read_run_file, trec_eval_keys
from qrels.formats import read_qrels_file

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
if not DATA.is_dir():
    pytest.skip(f"{DATA} is absent", allow_module_level=True)

pytestmark = pytest.mark.shared_data

COVID = DATA / "trec-covid-round1"
CRANFIELD = DATA / "cranfield"
VARIANTS = ["variant-A_noramtboraas", "variant-B_xyxxyyxy"]


def read_lines(path: Path) -> list[str]:
    return decode_lines(read_bytes(path), source=path.name)


def test_all_143_trec_covid_runs_parse():
    paths = sorted((COVID / "runs").iterdir())
    assert len(paths) == 143
    total = 0
    topics: set[str] = set()
    for path in paths:
        (run,) = read_run_file(path)
        total += run.lines
        topics.update(run.topics)
        for ranked in run.topics.values():
            # trec_eval order, ties included: scores compared as trec_eval's 32-bit floats.
            pairs = list(zip(trec_eval_keys(ranked.scores), ranked.docids, strict=True))
            assert pairs == sorted(pairs, reverse=True)
    assert total == 3_509_493
    assert topics == {str(n) for n in range(1, 31)}


def test_the_trec_covid_round_1_qrels_parse_with_their_iteration_column():
    qrels = read_qrels_file(COVID / "qrels" / "qrels-rnd1.txt")
    assert len(qrels.judgments) == 8_691
    assert Counter(j.label for j in qrels.judgments) == {0: 6339, 1: 1115, 2: 1237}
    assert {j.iteration for j in qrels.judgments} == {"0.5", "1"}
    assert len({j.topic_id for j in qrels.judgments}) == 30
    assert qrels.warnings == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_both_cranfield_collections_hold_1400_documents(variant):
    path = CRANFIELD / variant / "cran.all.1400"
    documents = list(iter_documents(iter_lines(path), source=path.name))
    assert len(documents) == 1400
    assert [d.doc_id for d in documents] == [str(n) for n in range(1, 1401)]
    first = documents[0]
    assert first.title == (
        "experimental investigation of the aerodynamics of a wing in a slipstream ."
    )
    assert first.body.startswith(
        "Authors: brenckman,m.\nSource: j. ae. scs. 25, 1958, 324.\n\n"
        "experimental investigation of the aerodynamics"
    )
    assert "\r" not in "".join(d.body for d in documents)


@pytest.mark.parametrize("variant", VARIANTS)
def test_both_cranfield_query_files_hold_225_topics(variant):
    lines = read_lines(CRANFIELD / variant / "cran.qry")
    by_id = parse_topics(lines, source="cran.qry")
    assert len(by_id) == 225
    assert by_id[0].topic_id == "001"
    assert by_id[2].topic_id == "004"
    assert by_id[-1].topic_id == "365"
    by_position = parse_topics(lines, source="cran.qry", positional_ids=True)
    assert [t.topic_id for t in by_position] == [str(n) for n in range(1, 226)]
    assert [t.title for t in by_position] == [t.title for t in by_id]
    # Only 2 of the 225 .I ids equal their position: Cranfield's qrels must use positions.
    assert sum(int(t.topic_id) == n for n, t in enumerate(by_id, 1)) == 2


def test_the_positions_match_the_derived_mapping():
    mapping = [
        line.split("\t")
        for line in read_lines(CRANFIELD / "derived" / "cran.qry.position-to-I-id.tsv")
    ]
    topics = parse_topics(read_lines(CRANFIELD / VARIANTS[0] / "cran.qry"))
    assert [(str(n), t.topic_id) for n, t in enumerate(topics, 1)] == [tuple(m) for m in mapping]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_three_column_cranqrel_is_refused_with_a_clear_message(variant):
    with pytest.raises(ParseError) as error:
        read_qrels_file(CRANFIELD / variant / "cranqrel")
    first = error.value.problems[0]
    assert first.line == 1
    assert first.message == (
        "has 3 columns; a qrels line has 4: topic iteration docid label "
        "(is the iteration column missing?)"
    )
    # One problem, not one per line: the first lines listed, the others counted.
    assert len(error.value.problems) == 1
    assert first.also == (2, 3)
    assert error.value.count == first.occurrences == 1_837


def test_the_derived_four_column_cranqrel_keeps_its_negative_labels():
    qrels = read_qrels_file(CRANFIELD / "derived" / "cranqrel.variantA.trec-format.txt")
    labels = Counter(j.label for j in qrels.judgments)
    assert labels == {-1: 225, 1: 128, 2: 387, 3: 734, 4: 363}
    assert {j.iteration for j in qrels.judgments} == {"0"}
