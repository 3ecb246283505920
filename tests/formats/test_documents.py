"""Document collections (TREC SGML, JSONL, TSV, SMART), streamed; and showing bodies safely."""

from __future__ import annotations

import gzip
import io
import json

import pytest

from campaigns.formats import (
    DOCUMENT_FORMATS,
    DocumentRecord,
    guess_document_format,
    iter_documents,
    parse_documents,
)
from campaigns.sanitize import looks_like_html, render_body, sanitize_html
from campaigns.textfiles import ParseError, iter_lines

FT = """\
<DOC>
<DOCNO>FT911-3</DOCNO>
<PROFILE>AN-BEOA7AAIFT</PROFILE>
<DATE>910514
</DATE>
<HEADLINE>
FT  14 MAY 91 / International Company News: Contigas plans &amp; DM900m east
German project
</HEADLINE>
<TEXT>
CONTIGAS, the German gas group 81 per cent owned by the utility Bayernwerk, said
yesterday that it intends to invest DM900m (Dollars 522m) in the next four years.

The company has been given the task of supplying gas to Thuringia.
</TEXT>
<PUB>The Financial Times
</PUB>
</DOC>
"""

LATIMES = """\
<DOC>
<DOCNO> LA010189-0001 </DOCNO>
<DOCID> 1 </DOCID>
<HEADLINE>
<P>
YOU WANT IT, YOU GOT IT
</P>
</HEADLINE>
<TEXT>
<P>
Slightly <b>more</b> than a week ago.
</P>
</TEXT>
</DOC>
"""

CRANFIELD = """\
.I 1
.T
experimental investigation of the aerodynamics of a
wing in a slipstream .
.A
brenckman,m.
.B
j. ae. scs. 25, 1958, 324.
.W
experimental investigation of the aerodynamics of a
wing in a slipstream .
  an experimental study of a wing in a propeller slipstream was
made in order to determine the spanwise distribution of the lift
.I 2
.T
simple shear flow past a flat plate .
.A
ting-yili
.B
department of aeronautical engineering, rensselaer polytechnic
institute
.W
simple shear flow past a flat plate in an incompressible fluid of small
viscosity .
"""


def problems(error: pytest.ExceptionInfo[ParseError]) -> list[tuple[int | None, str]]:
    return [(problem.line, problem.message) for problem in error.value.problems]


# --- TREC SGML ----------------------------------------------------------------------------------


def test_it_reads_a_trec_document_keeping_the_text_and_dropping_the_wrappers():
    (doc,) = parse_documents(FT.splitlines())
    assert doc.doc_id == "FT911-3"
    assert doc.line == 1
    assert doc.title == (
        "FT 14 MAY 91 / International Company News: Contigas plans & DM900m east German project"
    )
    assert doc.body == (
        "AN-BEOA7AAIFT\n910514\n\n"
        "CONTIGAS, the German gas group 81 per cent owned by the utility Bayernwerk, said\n"
        "yesterday that it intends to invest DM900m (Dollars 522m) in the next four years.\n\n"
        "The company has been given the task of supplying gas to Thuringia.\n\n"
        "The Financial Times"
    )
    assert "<" not in doc.body


def test_it_keeps_html_inside_trec_bodies_raw():
    (doc,) = parse_documents(LATIMES.splitlines())
    assert doc.doc_id == "LA010189-0001"
    assert doc.title == "YOU WANT IT, YOU GOT IT"
    assert doc.body == "<P>\nSlightly <b>more</b> than a week ago.\n</P>"
    assert "1" not in doc.body.split()  # the DOCID element is dropped


def test_it_takes_the_title_from_a_title_element_and_drops_web_headers():
    text = (
        "<DOC>\n<DOCNO>WTX001-B01-1</DOCNO>\n<DOCHDR>\nhttp://example.com/ 1.2.3.4\n"
        "Content-type: text/html\n</DOCHDR>\n<html><head><title>A page</title></head>\n"
        "<body><p>Hello</p></body></html>\n</DOC>\n"
    )
    (doc,) = parse_documents(text.splitlines())
    assert doc.title == "A page"
    assert "example.com" not in doc.body
    assert "<p>Hello</p>" in doc.body


def test_it_reads_several_documents_on_one_line():
    text = "<DOC><DOCNO>a</DOCNO><TEXT>one</TEXT></DOC><DOC><DOCNO>b</DOCNO>two</DOC>"
    docs = parse_documents([text])
    assert [(d.doc_id, d.body, d.line) for d in docs] == [("a", "one", 1), ("b", "two", 1)]


def test_it_refuses_broken_trec_documents():
    text = (
        "<DOC>\n<TEXT>no number</TEXT>\n</DOC>\n"
        "stray\n"
        "<DOC>\n<DOCNO>a</DOCNO>\n<DOCNO>b</DOCNO>\n</DOC>\n"
        "<DOC>\n<DOCNO>c</DOCNO>\n<DOC>\n<DOCNO>d</DOCNO>\n</DOC>\n"
        "<DOC>\n<DOCNO>e</DOCNO>\n"
    )
    with pytest.raises(ParseError) as error:
        parse_documents(text.splitlines())
    assert problems(error) == [
        (1, "has a document without a <DOCNO> (its id)"),
        (4, "has text outside a <DOC> … </DOC> document"),
        (5, "has a document with 2 <DOCNO> elements"),
        (11, "opens <DOC> before the document of line 9 is closed"),
        (14, "has a <DOC> that is never closed by </DOC>"),
    ]


# --- JSONL, TSV, SMART --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [
        {"id": "d1", "title": "T", "text": "body"},
        {"docid": "d1", "title": "T", "contents": "body"},
        {"_id": "d1", "title": "T", "text": "body", "metadata": {}},
        {"doc_id": "d1", "title": "T", "body": "body"},
        {"id": "d1", "title": "T", "abstract": "body"},
    ],
)
def test_it_reads_jsonl_documents_with_any_of_the_usual_keys(record):
    (doc,) = parse_documents([json.dumps(record)])
    assert doc == DocumentRecord("d1", "T", "body", 1)


def test_it_keeps_jsonl_bodies_exactly_and_titles_optional():
    line = json.dumps({"id": 42, "text": "  line one\n\nline  two  "})
    assert parse_documents([line]) == [DocumentRecord("42", "", "  line one\n\nline  two  ", 1)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            '{"id": "d", "title": "t"}',
            "has no document text (expected one of the keys text, contents, body, abstract)",
        ),
        (
            '{"text": "x"}',
            "has no document id (expected one of the keys id, docid, _id, doc_id, docno)",
        ),
        ('{"id": 1.5, "text": "x"}', "document id 'id' must be a string or an integer, not float"),
        ('{"id": "d", "text": ["x"]}', "'text' must be a string, not list"),
        ('{"id": "d", "text": "a\\u0000"}', "'text' contains a NUL character"),
        (
            '{"id": "d\\u200b", "text": "x"}',
            "document id 'd\\u200b' contains the control character U+200B",
        ),
        ("not json", "is not valid JSON: Expecting value (column 1)"),
    ],
)
def test_it_refuses_bad_jsonl_documents(line, message):
    with pytest.raises(ParseError) as error:
        parse_documents(['{"id": "ok", "text": "fine"}', line], format="jsonl")
    assert problems(error) == [(2, message)]


def test_it_reads_tsv_documents_with_or_without_a_title():
    docs = parse_documents(["d1\tbody one", "d2\tTitle\tbody two", "# comment"])
    assert docs == [
        DocumentRecord("d1", "", "body one", 1),
        DocumentRecord("d2", "Title", "body two", 2),
    ]


def test_it_refuses_tsv_documents_with_other_column_counts():
    with pytest.raises(ParseError) as error:
        parse_documents(["d1\tbody", "d2\ta\tb\tc"], format="tsv")
    assert problems(error) == [
        (2, "has 4 tab-separated columns; expected 2 (id, text) or 3 (id, title, text)")
    ]


def test_it_reads_smart_documents_with_authors_and_source_above_the_text():
    first, second = parse_documents(CRANFIELD.splitlines())
    assert first.doc_id == "1"
    assert (
        first.title == "experimental investigation of the aerodynamics of a wing in a slipstream ."
    )
    assert first.body == (
        "Authors: brenckman,m.\nSource: j. ae. scs. 25, 1958, 324.\n\n"
        "experimental investigation of the aerodynamics of a\nwing in a slipstream .\n"
        "  an experimental study of a wing in a propeller slipstream was\n"
        "made in order to determine the spanwise distribution of the lift"
    )
    assert second.body.startswith(
        "Authors: ting-yili\n"
        "Source: department of aeronautical engineering, rensselaer polytechnic institute\n\n"
    )
    assert (first.line, second.line) == (1, 14)


def test_it_keeps_a_repeated_smart_marker_as_text():
    lines = [".I 240", ".T", "t", ".A", "dean", ".W", "one .", ".A", "two .", ".W", "three ."]
    (doc,) = parse_documents(lines)
    assert doc.body == "Authors: dean\n\none .\n.A\ntwo .\n.W\nthree ."


def test_it_reads_a_smart_document_without_text_and_skips_an_empty_trailing_record():
    docs = parse_documents([".I 471", ".T", ".A", ".B", ".W", ".I 472", ".W", "x", ".I"])
    assert docs == [DocumentRecord("471", "", "", 1), DocumentRecord("472", "", "x", 6)]


# --- Common rules -------------------------------------------------------------------------------


def test_it_refuses_duplicate_document_ids_naming_both_lines():
    with pytest.raises(ParseError) as error:
        parse_documents(["d1\ta", "d2\tb", "d1\tc"])
    assert problems(error) == [(3, "document id 'd1' repeats the document of line 1")]


def test_it_streams_good_documents_before_reporting_the_bad_ones():
    documents = iter_documents(["d1\ta", "d2\tb\tc\td", "d3\tc"])
    assert next(documents).doc_id == "d1"
    assert next(documents).doc_id == "d3"
    with pytest.raises(ParseError) as error:
        next(documents)
    assert [line for line, _ in problems(error)] == [2]


def test_it_reads_numbered_lines_from_a_gzipped_crlf_file(tmp_path):
    path = tmp_path / "docs.trec.gz"
    path.write_bytes(gzip.compress(("\ufeff" + FT).replace("\n", "\r\n").encode()))
    (doc,) = iter_documents(iter_lines(path), source=str(path))
    assert doc == parse_documents(FT.splitlines())[0]


def test_it_reads_a_file_object_without_a_final_newline():
    data = io.BytesIO(b"d1\tfirst\nd2\tsecond")
    assert [d.body for d in iter_documents(iter_lines(data, name="d.tsv"))] == ["first", "second"]


@pytest.mark.parametrize(
    ("first", "format"),
    [
        ("<DOC>", "trec"),
        ("<doc id='x'>", "trec"),
        ('{"id": 1}', "jsonl"),
        (".I 1", "smart"),
        ("d\tx", "tsv"),
    ],
)
def test_it_guesses_the_format_from_the_first_line(first, format):
    assert guess_document_format(["", first]) == format
    assert format in DOCUMENT_FORMATS


def test_it_says_when_it_cannot_guess_the_format():
    with pytest.raises(ParseError, match="cannot tell the documents format"):
        parse_documents(["<DOCNO>x</DOCNO>"])


# --- Showing bodies -----------------------------------------------------------------------------


def test_it_tells_markup_from_angle_brackets_in_text():
    assert looks_like_html("<p>Hello</p>")
    assert looks_like_html("line<br/>line")
    assert looks_like_html("<!-- PJG FTAG 4700 -->")
    assert not looks_like_html("a < b and c > d")
    assert not looks_like_html("x<y>z")
    assert not looks_like_html("plain text")


def test_it_renders_plain_text_as_escaped_paragraphs():
    html, is_html = render_body("first line\nsecond <line> & more\n\n  \nnext paragraph")
    assert not is_html
    assert html == ("<p>first line<br>second &lt;line&gt; &amp; more</p><p>next paragraph</p>")


def test_it_keeps_harmless_structure_and_drops_everything_active():
    dirty = (
        '<div class="x" style="color:red" hx-get="/steal" data-run="bm25" onclick="go()">'
        '<h2 id="h">Title</h2><p>Text <a href="javascript:alert(1)">link text</a>'
        '<img src="http://tracker/x.gif" onerror="x()"></p>'
        "<script>alert(1)</script><style>p{}</style><!-- bm25 rank 3 -->"
        '<iframe src="http://evil"></iframe><object data="x">fallback</object>'
        "<svg><text>svg</text></svg><math><mi>x</mi></math>"
        '<form action="/post"><input name="q" value="v">form text<button>Go</button></form>'
        '<table><tr><td colspan="2" rowspan="javascript:1">cell</td></tr></table></div>'
    )
    clean, is_html = render_body(dirty)
    assert is_html
    assert clean == sanitize_html(dirty)
    assert clean == (
        "<div><h2>Title</h2><p>Text link text</p>form text"
        '<table><tbody><tr><td colspan="2">cell</td></tr></tbody></table></div>'
    )


@pytest.mark.parametrize(
    "needle",
    [
        "script",
        "javascript",
        "onerror",
        "onclick",
        "href",
        "src",
        "style",
        "hx-",
        "data-",
        "<!--",
        "http",
    ],
)
def test_nothing_active_survives_sanitising(needle):
    dirty = (
        '<p style="x" onclick="a()" hx-post="/x" data-x="1">t</p>'
        '<a href="http://x">l</a><img src="http://x"><script>javascript:1</script><!-- c -->'
        '<svg onload="x()"></svg><iframe srcdoc="<script>x</script>"></iframe>'
    )
    assert needle not in sanitize_html(dirty).lower()


def test_it_refuses_a_file_without_documents():
    with pytest.raises(ParseError) as error:
        parse_documents(["", "# nothing"], format="tsv", source="d.tsv")
    assert str(error.value) == "d.tsv: has no documents"


# Issue 21: structure (tabs, JSON braces) decides the format before what an id looks like.
def test_a_tsv_document_whose_first_id_looks_like_a_smart_marker_is_tsv():
    # The example Hypothesis found on a fresh clone: one TSV document ".X" with an empty body.
    assert parse_documents([".X\t"]) == [DocumentRecord(".X", "", "", 1)]
    assert parse_documents([".W\tA title\tthe text", ".I\tsecond"]) == [
        DocumentRecord(".W", "A title", "the text", 1),
        DocumentRecord(".I", "", "second", 2),
    ]
    assert guess_document_format(["# ids", ".I 7\tseven"]) == "tsv"


def test_a_jsonl_document_whose_id_looks_like_a_smart_marker_is_jsonl():
    lines = [json.dumps({"docid": ".X", "contents": ".W"}), json.dumps({"docid": ".I", "text": ""})]
    assert [(d.doc_id, d.body) for d in parse_documents(lines)] == [(".X", ".W"), (".I", "")]


def test_a_tsv_document_whose_first_id_starts_like_json_is_tsv():
    assert parse_documents(["{a\tbody"]) == [DocumentRecord("{a", "", "body", 1)]
    # A broken JSON line without tabs is still JSONL, and its error says so.
    with pytest.raises(ParseError, match="line 1: is not valid JSON"):
        parse_documents(['{"docid": "d1", '])


def test_a_smart_file_with_a_tab_in_its_first_line_is_still_smart():
    (doc,) = parse_documents([".I\t12", ".W", "the text"])
    assert (doc.doc_id, doc.body) == ("12", "the text")


def test_when_structure_cannot_tell_it_asks_for_the_format():
    with pytest.raises(ParseError) as error:
        parse_documents([".I 1\tone", "plain words"], source="docs.txt")
    assert str(error.value) == (
        "docs.txt: cannot tell the documents format from the first lines: the first line could "
        "start a SMART record (.I) or be a TSV line (it has tabs); choose one of trec, jsonl, "
        "tsv, smart"
    )
    # Told the format, the lines are read as that format (and here line 2 is no TSV line).
    with pytest.raises(ParseError, match="line 2: has 1 tab-separated column; expected 2"):
        parse_documents([".I 1\tone", "plain words"], format="tsv")
