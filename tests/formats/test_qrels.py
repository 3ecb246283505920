"""Qrels files: `topic iteration docid label`, labels kept as integers, duplicates by policy."""

from __future__ import annotations

import gzip
import io

import pytest

from campaigns.textfiles import ParseError
from qrels.formats import (
    CONFLICT_POLICIES,
    QrelsJudgment,
    parse_qrels,
    qrels_sort_key,
    read_qrels_file,
    write_qrels,
)

QRELS = """\
301 0 FR940104-0-00001 2
301 0 FR940104-0-00007 0
302 0 WSJ910101-0004 1
"""


def problems(error: pytest.ExceptionInfo[ParseError]) -> list[tuple[int | None, str]]:
    return [(problem.line, problem.message) for problem in error.value.problems]


def triples(parsed) -> list[tuple[str, str, int]]:
    return [(j.topic_id, j.doc_id, j.label) for j in parsed.judgments]


def test_it_reads_judgments_in_file_order():
    parsed = parse_qrels(QRELS.splitlines())
    assert parsed.judgments == [
        QrelsJudgment("301", "FR940104-0-00001", 2, "0", 1),
        QrelsJudgment("301", "FR940104-0-00007", 0, "0", 2),
        QrelsJudgment("302", "WSJ910101-0004", 1, "0", 3),
    ]
    assert parsed.warnings == []
    assert parsed.policy == "refuse"


@pytest.mark.parametrize(
    "text",
    [
        QRELS.replace(" ", "\t"),
        QRELS.replace(" ", "  "),
        QRELS.replace("\n", "\r\n"),
        QRELS.rstrip("\n"),
        "\ufeff" + QRELS,
        "# judged by NIST\n\n" + QRELS + "   \n",
        QRELS.replace("\n", " \r\n"),  # Cranfield's trailing space before CRLF
    ],
    ids=["tabs", "two-spaces", "crlf", "no-final-newline", "bom", "comments", "trailing-space"],
)
def test_it_reads_every_whitespace_variant_alike(text):
    parsed = read_qrels_file(io.BytesIO(text.encode()), name="q.txt")
    assert triples(parsed) == triples(parse_qrels(QRELS.splitlines()))


def test_it_reads_gzip_by_extension_and_by_magic_bytes():
    data = gzip.compress(QRELS.encode())
    assert len(read_qrels_file(io.BytesIO(data), name="q.gz").judgments) == 3
    assert len(read_qrels_file(io.BytesIO(data), name="q.txt").judgments) == 3


def test_it_keeps_the_iteration_column_as_written():
    parsed = parse_qrels(["1 0.5  010vptx3 2", "1 Q0 a 1", "1 1 b 0"])
    assert [j.iteration for j in parsed.judgments] == ["0.5", "Q0", "1"]


def test_it_keeps_leading_zeros_and_negative_labels():
    parsed = parse_qrels(["051 0 0001 -1", "051 0 0002 -2", "051 0 0003 +3"])
    assert triples(parsed) == [("051", "0001", -1), ("051", "0002", -2), ("051", "0003", 3)]


@pytest.mark.parametrize("label", ["1.0", "x", "1_0", "\u0661", "2e0", "0x1"])
def test_it_refuses_a_label_that_is_not_an_integer(label):
    with pytest.raises(ParseError) as error:
        parse_qrels(["1 0 a 1", f"1 0 b {label}"])
    assert problems(error) == [(2, f"label {label!r} is not an integer")]


def test_it_names_the_non_integer_label():
    with pytest.raises(ParseError) as error:
        parse_qrels(["1 0 a 1.0"], source="q.txt")
    assert str(error.value) == "q.txt line 1: label '1.0' is not an integer"


def test_it_refuses_three_columns_saying_what_four_are_expected():
    with pytest.raises(ParseError) as error:
        parse_qrels(["1 184 2", "1 29 2"], source="cranqrel")
    assert problems(error) == [
        (
            1,
            "has 3 columns; a qrels line has 4: topic iteration docid label "
            "(is the iteration column missing?)",
        ),
    ]
    assert error.value.problems[0].also == (2,)


def test_a_cranqrel_of_three_columns_is_one_problem_naming_its_first_lines():
    lines = [f"1 {doc} 2" for doc in range(1, 101)]
    with pytest.raises(ParseError) as error:
        parse_qrels(lines, source="cranqrel")
    assert str(error.value) == (
        "cranqrel lines 1, 2, 3 … (97 more): has 3 columns; a qrels line has 4: "
        "topic iteration docid label (is the iteration column missing?)"
    )
    assert error.value.count == 100


def test_a_no_break_space_inside_an_id_is_named_where_python_would_see_another_column():
    with pytest.raises(ParseError) as error:
        parse_qrels(["1 0 doc\u00a0x 1"], source="q.txt")
    ((line, message),) = problems(error)
    assert line == 1
    assert message.startswith(
        "document id 'doc\\xa0x' contains a no-break space (U+00A0): trec_eval splits columns "
        "on ASCII whitespace only"
    )


def test_it_refuses_five_columns():
    with pytest.raises(ParseError) as error:
        parse_qrels(["1 0 a 1 extra"])
    assert problems(error) == [
        (1, "has 5 columns; a qrels line has 4: topic iteration docid label")
    ]


def test_it_refuses_bad_ids():
    with pytest.raises(ParseError) as error:
        parse_qrels(["1 0 a\u200b 1", "1\x01 0 b 1"])
    assert problems(error) == [
        (1, "document id 'a\\u200b' contains the control character U+200B"),
        (2, "topic id '1\\x01' contains the control character U+0001"),
    ]


def test_it_collapses_a_repeated_pair_with_the_same_label():
    parsed = parse_qrels(["1 0 a 2", "1 0 b 0", "1 1 a 2"])
    assert triples(parsed) == [("1", "a", 2), ("1", "b", 0)]
    assert parsed.warnings == ["line 3 repeats line 1 (same label): collapsed"]


def test_it_refuses_conflicting_labels_listing_every_conflict():
    lines = ["1 0 a 2", "1 0 b 0", "1 0 a 0", "2 0 c 1", "1 0 b 1", "2 0 c 1"]
    with pytest.raises(ParseError) as error:
        parse_qrels(lines)
    assert problems(error) == [
        (3, "topic '1' document 'a': label 0 conflicts with label 2 at line 1"),
        (5, "topic '1' document 'b': label 1 conflicts with label 0 at line 2"),
    ]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("max", [2, 1]), ("min", [0, 0]), ("first", [2, 0])],
)
def test_a_policy_resolves_conflicts_never_by_line_order(policy, expected):
    lines = ["1 0 a 2", "1 0 b 0", "1 0 a 0", "1 0 b 1", "1 0 a 1"]
    parsed = parse_qrels(lines, on_conflict=policy)
    assert [j.doc_id for j in parsed.judgments] == ["a", "b"]
    assert [j.label for j in parsed.judgments] == expected
    assert parsed.policy == policy
    assert len(parsed.warnings) == 3


def test_the_kept_judgment_carries_the_line_of_its_label():
    parsed = parse_qrels(["1 0 a 0", "1 Q0 a 3"], on_conflict="max")
    assert parsed.judgments == [QrelsJudgment("1", "a", 3, "Q0", 2)]
    assert parsed.warnings == [
        "line 2: topic '1' document 'a' label 3 conflicts with label 0 at line 1; "
        "kept 3 (policy max)"
    ]


def test_it_refuses_an_unknown_policy():
    assert CONFLICT_POLICIES == ("refuse", "max", "min", "first")
    with pytest.raises(ParseError, match="unknown conflict policy 'last'"):
        parse_qrels(QRELS.splitlines(), on_conflict="last")


def test_it_reports_100_problems_and_counts_the_rest():
    with pytest.raises(ParseError) as error:
        parse_qrels([f"1 0 d{i} x{i}" for i in range(250)])
    assert len(error.value.problems) == 100
    assert error.value.more == 150


def test_it_refuses_an_empty_file():
    with pytest.raises(ParseError, match="has no judgments"):
        parse_qrels([])


def test_it_refuses_invalid_utf8_and_nul_bytes_naming_the_line():
    with pytest.raises(ParseError) as error:
        read_qrels_file(io.BytesIO(b"1 0 a 1\n1 0 \xe9 1\n"), name="q")
    assert error.value.problems[0].line == 2
    with pytest.raises(ParseError) as error:
        read_qrels_file(io.BytesIO(b"1 0 a 1\n1 0 b\x00 1\n"), name="q")
    assert problems(error) == [(2, "contains a NUL byte")]


# --- Writing ------------------------------------------------------------------------------------


def test_it_writes_four_columns_with_single_spaces():
    out = io.StringIO()
    count = write_qrels([("051", "0001", -1), ("051", "d2", 2)], out)
    assert count == 2
    assert out.getvalue() == "051 0 0001 -1\n051 0 d2 2\n"
    assert triples(parse_qrels(out.getvalue().splitlines())) == [
        ("051", "0001", -1),
        ("051", "d2", 2),
    ]


def test_it_refuses_to_write_what_would_not_read_back():
    with pytest.raises(ValueError, match="contains whitespace"):
        write_qrels([("1", "a b", 1)], io.StringIO())
    with pytest.raises(ValueError, match="not an integer"):
        write_qrels([("1", "a", 1.5)], io.StringIO())


def test_the_sort_key_is_plain_code_point_order():
    rows = [("9", "b"), ("10", "a"), ("10", "B"), ("051", "z")]
    assert sorted(rows, key=lambda row: qrels_sort_key(*row)) == [
        ("051", "z"),
        ("10", "B"),
        ("10", "a"),
        ("9", "b"),
    ]
