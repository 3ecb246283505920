"""Reading bytes, gzip, decoding and lines: the rules every parser shares."""

from __future__ import annotations

import gzip
import io
import pickle
import random

import pytest

from campaigns import textfiles
from campaigns.textfiles import (
    MAX_PROBLEMS,
    ParseError,
    Problem,
    ProblemCollector,
    check_id,
    decode_lines,
    is_skippable,
    iter_lines,
    iter_text_blocks,
    read_bytes,
    split_fields,
)


def problems_of(error: pytest.ExceptionInfo[ParseError]) -> list[tuple[int | None, str]]:
    return [(problem.line, problem.message) for problem in error.value.problems]


# --- Problems and the error ---------------------------------------------------------------------


def test_a_problem_reads_as_file_line_and_message():
    assert str(Problem("runs/bm25.txt", 12, "score 'abc' is not a number")) == (
        "runs/bm25.txt line 12: score 'abc' is not a number"
    )
    assert str(Problem("runs/bm25.txt", None, "is empty")) == "runs/bm25.txt: is empty"


def test_the_collector_keeps_100_problems_and_counts_the_rest():
    collector = ProblemCollector("bad.txt")
    for line in range(1, 251):
        collector.add(line, f"is wrong in its own way ({line})")
    with pytest.raises(ParseError) as error:
        collector.raise_if_any()
    assert len(error.value.problems) == MAX_PROBLEMS == 100
    assert error.value.more == 150
    assert len(collector) == error.value.count == 250
    text = str(error.value)
    assert text.splitlines()[0] == "bad.txt line 1: is wrong in its own way (1)"
    assert text.splitlines()[-1] == "… and 150 more problems"


def test_the_same_problem_on_many_lines_is_one_problem_listing_its_first_lines():
    collector = ProblemCollector("three.qrels")
    collector.add(None, "is odd as a whole")
    for line in range(1, 101):
        collector.add(line, "has 3 columns; a qrels line has 4")
    collector.add(101, "has 5 columns; a qrels line has 4")
    with pytest.raises(ParseError) as error:
        collector.raise_if_any()
    assert [str(problem) for problem in error.value.problems] == [
        "three.qrels: is odd as a whole",
        "three.qrels lines 1, 2, 3 … (97 more): has 3 columns; a qrels line has 4",
        "three.qrels line 101: has 5 columns; a qrels line has 4",
    ]
    assert error.value.count == len(collector) == 102
    assert error.value.problems[1].occurrences == 100


def test_a_problem_found_twice_on_one_line_names_that_line_once():
    collector = ProblemCollector("twice.tsv")
    collector.add(1, "has an empty id")
    collector.add(1, "has an empty id")
    collector.add(2, "has an empty id")
    collector.add(2, "has an empty id")
    assert [str(problem) for problem in collector.problems] == [
        "twice.tsv lines 1, 2: has an empty id"
    ]
    assert len(collector) == 2


def test_a_collector_without_problems_raises_nothing():
    collector = ProblemCollector("fine.txt")
    assert not collector
    collector.raise_if_any()


def test_a_parse_error_survives_pickling():
    error = ParseError([Problem("a.txt", 3, "is wrong")], more=7)
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 (our own bytes)
    assert copy.problems == error.problems
    assert copy.more == 7
    assert str(copy) == str(error)


# --- Bytes and gzip -----------------------------------------------------------------------------


def test_it_reads_a_plain_file_from_a_path(tmp_path):
    path = tmp_path / "run.txt"
    path.write_bytes(b"hello\n")
    assert read_bytes(path) == b"hello\n"
    assert read_bytes(str(path)) == b"hello\n"


def test_it_reads_a_binary_file_object():
    assert read_bytes(io.BytesIO(b"abc"), name="upload.txt") == b"abc"


def test_it_gunzips_a_file_named_gz(tmp_path):
    path = tmp_path / "run.txt.gz"
    path.write_bytes(gzip.compress(b"1 Q0 d 1 2.0 t\n"))
    assert read_bytes(path) == b"1 Q0 d 1 2.0 t\n"


def test_it_gunzips_by_magic_bytes_whatever_the_name():
    data = gzip.compress(b"content\n")
    assert read_bytes(io.BytesIO(data), name="misleading.txt") == b"content\n"


def test_it_reads_concatenated_gzip_members():
    data = gzip.compress(b"first\n") + gzip.compress(b"second\n")
    assert read_bytes(io.BytesIO(data), name="x.gz") == b"first\nsecond\n"


def test_it_refuses_a_gz_name_on_a_file_that_is_not_gzip():
    with pytest.raises(ParseError) as error:
        read_bytes(io.BytesIO(b"plain text"), name="run.gz")
    assert problems_of(error) == [(None, "is named .gz but is not a gzip file")]


def test_it_refuses_a_truncated_gzip_file():
    data = gzip.compress(b"some text that will be cut short\n" * 100)
    with pytest.raises(ParseError) as error:
        read_bytes(io.BytesIO(data[: len(data) // 2]), name="cut.gz")
    assert error.value.problems[0].source == "cut.gz"
    assert "truncated" in error.value.problems[0].message


def test_it_refuses_a_corrupt_gzip_file():
    data = bytearray(gzip.compress(b"some text\n" * 100))
    data[15:25] = b"\xff" * 10
    with pytest.raises(ParseError) as error:
        read_bytes(io.BytesIO(bytes(data)), name="corrupt.gz")
    assert "gzip" in error.value.problems[0].message


def test_it_refuses_garbage_after_the_gzip_stream():
    data = gzip.compress(b"text\n") + b"garbage"
    with pytest.raises(ParseError) as error:
        read_bytes(io.BytesIO(data), name="x.gz")
    assert "after the end" in error.value.problems[0].message


def test_it_refuses_a_gzip_bomb():
    bomb = gzip.compress(b"a" * (5 << 20), compresslevel=9)  # 5 MiB from a few kilobytes
    assert len(bomb) * 200 < 5 << 20
    with pytest.raises(ParseError) as error:
        read_bytes(io.BytesIO(bomb), name="bomb.gz")
    assert problems_of(error) == [
        (
            None,
            "decompresses to more than 200 times its compressed size: "
            "refused as a possible gzip bomb",
        )
    ]
    assert str(error.value).startswith("bomb.gz: ")


def test_it_refuses_a_gzip_bomb_while_streaming(tmp_path):
    path = tmp_path / "bomb.txt.gz"
    path.write_bytes(gzip.compress(b"a\n" * (3 << 20), compresslevel=9))
    with pytest.raises(ParseError, match="gzip bomb"):
        list(iter_lines(path))


def test_it_accepts_a_small_file_that_compresses_very_well():
    data = b"1 Q0 d 1 1.0 t\n" * 50_000  # 750 kB: under the 1 MiB allowance
    assert read_bytes(io.BytesIO(gzip.compress(data)), name="ok.gz") == data


def test_it_refuses_more_than_max_bytes():
    with pytest.raises(ParseError, match="larger than the limit of 10 bytes"):
        read_bytes(io.BytesIO(b"x" * 11), name="big.txt", max_bytes=10)
    with pytest.raises(ParseError, match="larger than the limit of 10 bytes once decompressed"):
        read_bytes(io.BytesIO(gzip.compress(b"x" * 11)), name="big.gz", max_bytes=10)
    assert read_bytes(io.BytesIO(b"x" * 10), name="ok.txt", max_bytes=10) == b"x" * 10


def test_it_names_a_file_it_cannot_read(tmp_path):
    with pytest.raises(ParseError) as error:
        read_bytes(tmp_path / "missing.txt")
    assert error.value.problems[0].line is None
    assert "cannot be read" in error.value.problems[0].message


# --- Decoding -----------------------------------------------------------------------------------


def test_it_splits_lines_and_drops_the_final_newline():
    assert decode_lines(b"a\nb\n", source="f") == ["a", "b"]
    assert decode_lines(b"a\nb", source="f") == ["a", "b"]
    assert decode_lines(b"a\n\nb\n\n", source="f") == ["a", "", "b", ""]
    assert decode_lines(b"", source="f") == []


def test_it_strips_crlf_line_ends():
    assert decode_lines(b"a\r\nb\r\n", source="f") == ["a", "b"]
    assert decode_lines(b"a\r\nb\r", source="f") == ["a", "b"]
    assert decode_lines(b"a\rb\n", source="f") == ["a\rb"]


def test_it_strips_a_utf8_byte_order_mark():
    assert decode_lines(b"\xef\xbb\xbf301\tx\n", source="f") == ["301\tx"]
    assert decode_lines(b"\xef\xbb\xbfx", source="f", encoding="utf-8") == ["x"]


def test_it_names_the_line_of_an_undecodable_byte():
    with pytest.raises(ParseError) as error:
        decode_lines(b"fine\nalso fine\ncaf\xe9\nok\n\xff\n", source="topics.txt")
    assert [problem.line for problem in error.value.problems] == [3, 5]
    message = error.value.problems[0].message
    assert "not valid UTF-8" in message
    assert "0xE9" in message
    assert "pass --encoding if the file is not UTF-8" in message


def test_it_decodes_another_encoding_when_asked():
    assert decode_lines(b"caf\xe9\n", source="f", encoding="latin-1") == ["café"]


def test_it_refuses_utf16_unless_an_encoding_is_given():
    data = "301\tfoo\n".encode("utf-16")
    with pytest.raises(ParseError) as error:
        decode_lines(data, source="f")
    assert error.value.problems[0].line is None
    assert "UTF-16" in error.value.problems[0].message
    assert decode_lines(data, source="f", encoding="utf-16") == ["301\tfoo"]


def test_it_refuses_nul_bytes_naming_the_line():
    with pytest.raises(ParseError) as error:
        decode_lines(b"one\ntwo\nth\x00ree\n", source="f")
    assert problems_of(error) == [(3, "contains a NUL byte")]


def test_it_says_a_file_full_of_nul_bytes_is_not_utf8_text():
    with pytest.raises(ParseError) as error:
        decode_lines("301 0 d 1\n".encode("utf-16-le"), source="f")
    assert error.value.problems[0].line is None
    assert "UTF-16 or a binary file" in error.value.problems[0].message


def test_it_refuses_an_unknown_encoding():
    with pytest.raises(ParseError, match="unknown encoding"):
        decode_lines(b"x", source="f", encoding="no-such-codec")


# --- Streaming ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"a\nb\n",
        b"a\r\nb",
        b"\xef\xbb\xbfa\nb",
        b"",
        b"\n\n",
        "caf\u00e9\n\u20ac\nz".encode(),
        b"x" * 50 + b"\n" + b"y" * 30,
    ],
)
def test_iter_lines_gives_the_lines_decode_lines_gives(data, monkeypatch):
    monkeypatch.setattr(textfiles, "CHUNK_SIZE", 7)  # exercise the chunk boundaries
    expected = decode_lines(data, source="f")
    assert [line for _, line in iter_lines(io.BytesIO(data), name="f")] == expected
    assert [number for number, _ in iter_lines(io.BytesIO(data), name="f")] == list(
        range(1, len(expected) + 1)
    )


def test_iter_lines_gunzips_and_numbers_lines(tmp_path):
    path = tmp_path / "docs.gz"
    path.write_bytes(gzip.compress(b"one\r\ntwo\r\nthree"))
    assert list(iter_lines(path)) == [(1, "one"), (2, "two"), (3, "three")]


def test_iter_lines_raises_at_the_bad_line_after_yielding_the_good_ones(monkeypatch):
    monkeypatch.setattr(textfiles, "CHUNK_SIZE", 4096)
    data = b"fine\n" * 5000 + b"bad\xff\nnever\n"
    lines = iter_lines(io.BytesIO(data), name="d")
    assert next(lines) == (1, "fine")
    with pytest.raises(ParseError) as error:
        list(lines)
    assert error.value.problems[0].line == 5001


def test_iter_lines_refuses_utf16_and_nul_bytes():
    with pytest.raises(ParseError, match="UTF-16"):
        list(iter_lines(io.BytesIO("x\n".encode("utf-16")), name="d"))
    with pytest.raises(ParseError) as error:
        list(iter_lines(io.BytesIO(b"a\nb\x00\n"), name="d"))
    assert problems_of(error) == [(2, "contains a NUL byte")]
    assert list(iter_lines(io.BytesIO("x\n".encode("utf-16")), name="d", encoding="utf-16")) == [
        (1, "x")
    ]


# --- Lines and ids ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "skippable"),
    [("", True), ("   \t", True), ("# comment", True), ("  # indented", True), ("301", False)],
)
def test_it_skips_blank_and_comment_lines(line, skippable):
    assert is_skippable(line) is skippable


@pytest.mark.parametrize(
    "value", ["051", "FR940104-0-00001", "doc_1.2", "clueweb09-en0000-00-00000"]
)
def test_it_accepts_ordinary_ids(value):
    assert check_id(value) is None


def test_it_accepts_non_ascii_ids():
    assert check_id("Zürich_(ville)") is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("", "is empty"),
        ("a b", "contains whitespace"),
        ("a\tb", "contains whitespace"),
        ("a\x07b", "contains the control character U+0007"),
        ("a\u200bb", "contains the control character U+200B"),
        ("x" * 201, "is longer than 200 characters"),
    ],
)
def test_it_refuses_bad_ids(value, reason):
    assert check_id(value) == reason


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("a\u00a0b", "a no-break space (U+00A0)"),
        ("a\u2003b", "an em space (U+2003)"),
        ("a\x1cb", "the character U+001C"),
    ],
)
def test_whitespace_trec_eval_keeps_inside_an_id_is_named(value, named):
    reason = check_id(value)
    assert reason.startswith(f"contains {named}: trec_eval splits columns on ASCII whitespace")


def test_columns_split_on_ascii_whitespace_only_as_trec_eval_splits_them():
    assert split_fields("1 0\tdoc\u00a0x  1\r") == ["1", "0", "doc\u00a0x", "1"]
    assert split_fields("1\x1c0 d 1") == ["1\x1c0", "d", "1"]
    assert split_fields(" \t ") == []
    assert split_fields("a b") == ["a", "b"]


def test_an_id_of_200_characters_is_fine():
    assert check_id("x" * 200) is None


def test_max_bytes_applies_to_the_decompressed_size_of_a_gzip_path(tmp_path):
    path = tmp_path / "run.txt"  # gzip by magic bytes, bigger compressed than the limit
    data = random.Random(7).randbytes(5000)  # incompressible
    path.write_bytes(gzip.compress(data))
    assert path.stat().st_size > len(data)
    assert read_bytes(path, max_bytes=len(data)) == data
    with pytest.raises(ParseError, match="once decompressed"):
        read_bytes(path, max_bytes=len(data) - 1)


def test_it_reports_nul_bytes_and_bad_utf8_together_in_line_order():
    with pytest.raises(ParseError) as error:
        decode_lines(b"ok\n\xff\nnul\x00\nok\n\xc3\n", source="f")
    assert [(line, message.split(" (")[0]) for line, message in problems_of(error)] == [
        (2, "is not valid UTF-8"),
        (3, "contains a NUL byte"),
        (5, "is not valid UTF-8"),
    ]


def test_it_names_the_line_of_a_byte_another_encoding_cannot_decode():
    with pytest.raises(ParseError) as error:
        decode_lines(b"fine\n\x81\n", source="f", encoding="cp1252")
    assert problems_of(error) == [(2, "cannot be decoded as cp1252 (byte 0x81 at column 1)")]


@pytest.mark.parametrize(
    "data",
    [b"", b"a", b"a\n", b"a\r\nb\r\n", b"\n\n", b"x\r", b"a\nb", b"a\r\r\n", b"\xef\xbb\xbfa\n"],
)
@pytest.mark.parametrize("chunk", [1, 2, 3, 1 << 20])
def test_text_blocks_hold_the_lines_of_the_whole_file(data, chunk, monkeypatch):
    monkeypatch.setattr(textfiles, "CHUNK_SIZE", chunk)
    blocks = list(iter_text_blocks(io.BytesIO(data), name="f.txt"))
    lines = [line for _first, text in blocks for line in text.split("\n")]
    assert lines == decode_lines(data, source="f.txt")
    numbers = [first for first, _text in blocks]
    sizes = [text.count("\n") + 1 for _first, text in blocks]
    assert numbers == [1 + sum(sizes[:i]) for i in range(len(blocks))]
