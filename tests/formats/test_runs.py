"""Run files: `topic Q0 docid rank score tag`, in trec_eval order, refused when anything is off."""

from __future__ import annotations

import gzip
import io
import random

import pytest
import pytrec_eval

from campaigns.textfiles import ParseError
from pooling.formats import (
    ParsedRun,
    RankedList,
    _careful_parse,
    _fast_parse,
    file_rank_order,
    parse_run,
    read_run_file,
    trec_eval_order,
    write_run,
)

RUN = """\
301 Q0 FBIS3-10082 1 12.5 bm25
301 Q0 FBIS3-10169 2 11.0 bm25
302 Q0 LA010189-0018 1 9.25 bm25
"""


def problems(error: pytest.ExceptionInfo[ParseError]) -> list[tuple[int | None, str]]:
    return [(problem.line, problem.message) for problem in error.value.problems]


def only_run(text: str, **kwargs) -> ParsedRun:
    (run,) = parse_run(text.splitlines(), **kwargs)
    return run


def read(data: bytes, name: str = "run.txt", **kwargs) -> list[ParsedRun]:
    return read_run_file(io.BytesIO(data), name=name, **kwargs)


def test_it_reads_a_run_by_topic_in_file_order():
    run = only_run(RUN, source="runs/bm25.txt")
    assert run.tag == "bm25"
    assert run.source == "runs/bm25.txt"
    assert run.lines == 3
    assert list(run.topics) == ["301", "302"]
    assert run.topics["301"] == RankedList(["FBIS3-10082", "FBIS3-10169"], [12.5, 11.0], [1, 2])


@pytest.mark.parametrize(
    "text",
    [
        RUN,
        RUN.replace(" ", "\t"),
        RUN.replace(" ", "   "),
        RUN.replace(" Q0 ", "\tQ0  \t "),
        RUN.replace("\n", "\r\n"),
        RUN.rstrip("\n"),
        RUN.replace("\n", "\r\n").rstrip("\n"),
        "\ufeff" + RUN,
        "# a comment\n" + RUN + "\n   \n  # another\n",
        "  " + RUN.replace("\n", "  \n"),
    ],
    ids=[
        "spaces",
        "tabs",
        "runs-of-spaces",
        "mixed",
        "crlf",
        "no-final-newline",
        "crlf-no-final-newline",
        "bom",
        "comments-and-blanks",
        "leading-and-trailing-whitespace",
    ],
)
def test_it_reads_every_whitespace_variant_alike(text):
    expected = only_run(RUN)
    (run,) = read(text.encode())
    assert run.topics == expected.topics
    assert run.tag == "bm25"
    assert run.lines == 3


def test_it_reads_gzip_by_extension_and_by_magic_bytes():
    data = gzip.compress(RUN.encode())
    assert read(data, name="bm25.txt.gz")[0].topics == only_run(RUN).topics
    assert read(data, name="bm25.txt")[0].topics == only_run(RUN).topics


def test_it_keeps_leading_zeros_in_ids():
    run = only_run("051 Q0 0001 1 1.0 t\n051 Q0 00010 2 0.5 t\n")
    assert list(run.topics) == ["051"]
    assert run.topics["051"].docids == ["0001", "00010"]


def test_equal_scores_put_the_greater_docid_first():
    run = only_run("1 Q0 a 1 5 t\n1 Q0 c 2 5 t\n1 Q0 b 3 5 t\n1 Q0 z 4 9 t\n1 Q0 y 5 1 t\n")
    assert run.topics["1"].docids == ["z", "c", "b", "a", "y"]
    assert run.topics["1"].ranks == [4, 2, 3, 1, 5]


def test_docid_ties_compare_as_strings_not_numbers():
    run = only_run("1 Q0 9 1 1.0 t\n1 Q0 10 2 1.0 t\n")
    assert run.topics["1"].docids == ["9", "10"]


def test_the_score_orders_results_whatever_the_rank_column_says():
    zero_based = "1 Q0 a 0 1.0 t\n1 Q0 b 1 3.0 t\n1 Q0 c 2 2.0 t\n"
    reversed_ranks = "1 Q0 a 3 1.0 t\n1 Q0 b 2 3.0 t\n1 Q0 c 1 2.0 t\n"
    assert only_run(zero_based).topics["1"].docids == ["b", "c", "a"]
    assert only_run(reversed_ranks).topics["1"].docids == ["b", "c", "a"]


def test_file_rank_order_follows_the_rank_column():
    zero_based = only_run("1 Q0 a 0 1.0 t\n1 Q0 b 1 3.0 t\n1 Q0 c 2 2.0 t\n").topics["1"]
    assert zero_based.ranks == [1, 2, 0]
    assert file_rank_order(zero_based) == ["a", "b", "c"]
    tied_ranks = only_run("1 Q0 a 1 1.0 t\n1 Q0 b 1 3.0 t\n1 Q0 c 2 2.0 t\n").topics["1"]
    assert file_rank_order(tied_ranks) == ["b", "a", "c"]  # tie on rank 1: trec_eval order


def test_trec_eval_order_sorts_by_score_then_docid_descending():
    ranked = trec_eval_order(["a", "b", "c", "d"], [1.0, 2.0, 1.0, -0.5], [10, 20, 30, 40])
    assert ranked == RankedList(["b", "c", "a", "d"], [2.0, 1.0, 1.0, -0.5], [20, 30, 10, 40])


def test_scores_equal_as_32_bit_floats_tie_and_go_by_document_id_as_in_trec_eval():
    # tm_lda400 (TREC-COVID round 1) writes scores that differ only beyond a float's precision.
    text = "1 Q0 aaa 1 0.40868028804263584 t\n1 Q0 zzz 2 0.4086802880426358 t\n"
    assert only_run(text).topics["1"].docids == ["zzz", "aaa"]
    # The scores themselves are kept as written.
    assert only_run(text).topics["1"].scores == [0.4086802880426358, 0.40868028804263584]
    ranked = trec_eval_order(["a", "b", "c"], [1e300, 3.5e38, -1e300], [1, 2, 3])
    assert ranked.docids == ["b", "a", "c"]  # both beyond a float's range: infinite, a tie


def test_the_order_is_the_one_pytrec_eval_evaluates():
    rng = random.Random(10)
    base = 0.482043
    results = [(f"d{n:03d}", base + rng.randrange(40) * 1e-9) for n in range(300)]
    text = "".join(f"7 Q0 {doc} {n} {score!r} t\n" for n, (doc, score) in enumerate(results))
    ranked = only_run(text).topics["7"]
    run = {"7": dict(results)}
    for depth in (5, 20, 50, 100):
        qrels = {"7": dict.fromkeys(ranked.docids[:depth], 1)}
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {f"P.{depth}"})
        assert evaluator.evaluate(run)["7"][f"P_{depth}"] == 1.0, depth


def test_a_topic_may_come_back_after_others():
    run = only_run("1 Q0 a 1 3 t\n2 Q0 x 1 1 t\n1 Q0 b 2 4 t\n")
    assert list(run.topics) == ["1", "2"]
    assert run.topics["1"].docids == ["b", "a"]


def test_the_q0_column_is_opaque():
    run = only_run("1 0 a 1 3 t\n1 whatever b 2 4 t\n")
    assert run.topics["1"].docids == ["b", "a"]


def test_it_accepts_negative_and_exponent_scores_and_signed_ranks():
    run = only_run("1 Q0 a -1 -2.5e-3 t\n1 Q0 b +2 1E2 t\n1 Q0 c 003 .5 t\n")
    assert run.topics["1"].scores == [100.0, 0.5, -0.0025]
    assert run.topics["1"].ranks == [2, 3, -1]


def test_it_accepts_a_generator_of_lines():
    (run,) = parse_run(line for line in RUN.splitlines())
    assert run.topics == only_run(RUN).topics


# --- Refusals -----------------------------------------------------------------------------------


def test_it_refuses_a_wrong_column_count_with_the_line():
    with pytest.raises(ParseError) as error:
        parse_run(["1 Q0 a 1 2.0 t", "1 Q0 b 2 1.0", "1 Q0 c 3 0.5 t extra"], source="r.txt")
    assert problems(error) == [
        (2, "has 5 columns; a run line has 6: topic Q0 docid rank score tag"),
        (3, "has 7 columns; a run line has 6: topic Q0 docid rank score tag"),
    ]
    assert str(error.value).startswith("r.txt line 2: has 5 columns")


@pytest.mark.parametrize(
    ("score", "message"),
    [
        ("abc", "score 'abc' is not a number"),
        ("nan", "score 'nan' is not a number (NaN)"),
        ("NaN", "score 'NaN' is not a number (NaN)"),
        ("inf", "score 'inf' is not a finite number"),
        ("-Infinity", "score '-Infinity' is not a finite number"),
        ("1e309", "score '1e309' is not a finite number"),
        ("1_0", "score '1_0' is not a number"),
        ("\u0661", "score '\u0661' is not a number"),
        ("0x10", "score '0x10' is not a number"),
        ("1,5", "score '1,5' is not a number"),
    ],
)
def test_it_refuses_a_score_that_is_not_a_finite_number(score, message):
    with pytest.raises(ParseError) as error:
        parse_run(["1 Q0 a 1 2.0 t", f"1 Q0 b 2 {score} t"])
    assert problems(error) == [(2, message)]


@pytest.mark.parametrize(
    ("rank", "message"),
    [
        ("1.0", "rank '1.0' is not an integer"),
        ("one", "rank 'one' is not an integer"),
        ("1_0", "rank '1_0' is not an integer"),
        ("99999999999", "rank '99999999999' is out of range"),
    ],
)
def test_it_refuses_a_rank_that_is_not_an_integer(rank, message):
    with pytest.raises(ParseError) as error:
        parse_run(["1 Q0 a 1 2.0 t", f"1 Q0 b {rank} 1.0 t"])
    assert problems(error) == [(2, message)]


def test_it_refuses_the_same_document_twice_in_a_topic_naming_both_lines():
    text = "1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n2 Q0 a 1 1.0 t\n1 Q0 a 3 0.5 t\n"
    with pytest.raises(ParseError) as error:
        parse_run(text.splitlines())
    assert problems(error) == [
        (4, "document 'a' appears twice in topic '1' of run 't' (first at line 1)")
    ]


def test_it_refuses_several_tags_unless_asked_to_split_them():
    text = "1 Q0 a 1 2.0 bm25\n1 Q0 a 1 2.0 ql\n2 Q0 b 1 1.0 bm25\n"
    with pytest.raises(ParseError) as error:
        parse_run(text.splitlines())
    assert problems(error) == [
        (
            2,
            "has a second run tag, 'ql' (line 1 has 'bm25'; the file holds runs bm25, ql): "
            "import with --split-tags (on the upload page: “Split a file with several tags into "
            "several runs”) to get one run per tag",
        )
    ]
    bm25, ql = parse_run(text.splitlines(), split_tags=True)
    assert (bm25.tag, bm25.lines, list(bm25.topics)) == ("bm25", 2, ["1", "2"])
    assert (ql.tag, ql.lines, list(ql.topics)) == ("ql", 1, ["1"])


def test_it_refuses_bad_ids():
    long_id = "d" * 201
    text = f"1 Q0 a\u200b 1 2.0 t\n1 Q0 {long_id} 2 1.0 t\n1\x07 Q0 c 3 1.0 t\n"
    with pytest.raises(ParseError) as error:
        parse_run(text.splitlines())
    assert [line for line, _ in problems(error)] == [1, 2, 3]
    assert "contains the control character U+200B" in problems(error)[0][1]
    assert "is longer than 200 characters" in problems(error)[1][1]
    assert problems(error)[2][1] == "topic id '1\\x07' contains the control character U+0007"


def test_it_collects_every_problem_of_a_line_and_of_the_file():
    with pytest.raises(ParseError) as error:
        parse_run(["1 Q0 a x y t", "1 Q0 b 1 1.0 t", "oops"])
    assert problems(error) == [
        (1, "score 'y' is not a number"),
        (1, "rank 'x' is not an integer"),
        (3, "has 1 column; a run line has 6: topic Q0 docid rank score tag"),
    ]


def test_it_reports_100_problems_and_counts_the_rest():
    lines = ["1 Q0 a 1 2.0 t"] + [f"1 Q0 d{i} 1 bad{i} t" for i in range(250)]
    with pytest.raises(ParseError) as error:
        parse_run(lines)
    assert len(error.value.problems) == 100
    assert error.value.more == 150
    assert str(error.value).endswith("… and 150 more problems")


def test_the_same_problem_on_every_line_is_reported_once_with_its_lines():
    lines = ["1 Q0 a 1 2.0 t"] + [f"1 Q0 d{i} 1 2.0" for i in range(250)]
    with pytest.raises(ParseError) as error:
        parse_run(lines, source="r.txt")
    assert str(error.value) == (
        "r.txt lines 2, 3, 4 … (247 more): has 5 columns; a run line has 6: "
        "topic Q0 docid rank score tag"
    )
    assert error.value.count == 250


def test_a_no_break_space_inside_an_id_is_named_not_counted_as_a_column():
    with pytest.raises(ParseError) as error:
        parse_run(["1 Q0 doc\u00a0x 1 2.0 t"], source="r.txt")
    ((line, message),) = problems(error)
    assert line == 1
    assert message.startswith("document id 'doc\\xa0x' contains a no-break space (U+00A0)")


def test_it_refuses_a_file_without_run_lines():
    with pytest.raises(ParseError) as error:
        parse_run(["# only a comment", ""])
    assert problems(error) == [(None, "has no run lines (topic Q0 docid rank score tag)")]


def test_it_refuses_invalid_utf8_naming_the_line():
    with pytest.raises(ParseError) as error:
        read(b"1 Q0 a 1 2.0 t\n1 Q0 caf\xe9 2 1.0 t\n")
    assert error.value.problems[0].line == 2
    assert "pass --encoding" in error.value.problems[0].message


def test_it_reads_another_encoding_when_asked():
    (run,) = read(b"1 Q0 caf\xe9 1 2.0 t\n", encoding="latin-1")
    assert run.topics["1"].docids == ["café"]


def test_it_refuses_nul_bytes_and_utf16():
    with pytest.raises(ParseError) as error:
        read(b"1 Q0 a 1 2.0 t\n1 Q0 b\x00 2 1.0 t\n")
    assert problems(error) == [(2, "contains a NUL byte")]
    with pytest.raises(ParseError, match="UTF-16"):
        read(RUN.encode("utf-16"))


def test_it_refuses_a_truncated_gzip_run():
    data = gzip.compress(RUN.encode() * 100)
    with pytest.raises(ParseError, match="truncated"):
        read(data[:-20], name="run.gz")


# --- The fast pass and the careful pass agree ----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        RUN,
        RUN.replace(" ", "\t"),
        "1 Q0 a 1 5 t\n1 Q0 c 2 5 t\n1 Q0 b 3 5 t\n2 Q0 a 1 0.0 t\n2 Q0 b 2 -0.0 t\n",
        "1 Q0 a 1 3 t\n2 Q0 x 1 1 t\n1 Q0 b 2 4 t\n",
        "1 Q0 Zürich 1 3 t\n1 Q0 a 2 4 t\n",
        "1 Q0 a 20000 3 t\n1 Q0 b -5 4 t\n",
        "1\t\tQ0\ta\t1\t2.0\tt\n",  # a doubled tab is one separator
    ],
)
def test_the_fast_pass_gives_what_the_careful_pass_gives(text):
    fast = _fast_parse(text, "r")
    assert fast is not None
    assert fast == _careful_parse(text.splitlines(), "r", False)


@pytest.mark.parametrize(
    "text",
    [
        "1 Q0 a 1 2.0 t\n\n1 Q0 b 2 1.0 t\n",  # a blank line
        "#1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n",  # a comment with six columns
        "1\tQ0\ta b\t1\t2.0\tt\n",  # a space inside a tab-separated column
        "1 Q0 a 1 2.0 t\n1 Q0 a 2 1.0 t\n",  # duplicate
        "1 Q0 a 1 nan t\n",
        "1 Q0 a 1 1_0 t\n",
        "1 Q0 a\x0bb 1 1.0 t\n",
        "1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 u\n",
    ],
)
def test_the_fast_pass_hands_anything_unusual_to_the_careful_pass(text):
    assert _fast_parse(text, "r") is None


# --- Writing ------------------------------------------------------------------------------------


def test_it_writes_a_run_that_reads_back_the_same():
    run = only_run("051 Q0 d2 7 0.1 t\n051 Q0 d1 3 0.30000000000000004 t\n052 Q0 x 1 -1e-300 t\n")
    out = io.StringIO()
    write_run(run, out)
    assert out.getvalue() == (
        "051 Q0 d1 1 0.30000000000000004 t\n051 Q0 d2 2 0.1 t\n052 Q0 x 1 -1e-300 t\n"
    )
    (again,) = parse_run(out.getvalue().splitlines())
    assert [(t, r.docids, r.scores) for t, r in again.topics.items()] == [
        (t, r.docids, r.scores) for t, r in run.topics.items()
    ]
