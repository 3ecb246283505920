"""Topic files: TREC SGML (and the XML topics of later tracks), TSV, JSONL and SMART."""

from __future__ import annotations

import json

import pytest

from campaigns.formats import TOPIC_FORMATS, TopicRecord, guess_topic_format, parse_topics
from campaigns.textfiles import ParseError

ROBUST = """\
<top>
<num> Number: 301
<title> International Organized Crime

<desc> Description:
Identify organizations that participate in international criminal
activity, the activity, and, if possible, collaborating organizations.

<narr> Narrative:
A relevant document must as a minimum identify the organization and the
type of illegal activity (e.g., Columbian cartel exporting cocaine).
</top>

<top>
<num> Number: 302
<title> Poliomyelitis and Post-Polio

<desc> Description:
Is the disease of Poliomyelitis (polio) under control in the world?

<narr> Narrative:
Relevant documents should contain data or outbreaks.
</top>
"""

CLOSED = """\
<top>
<num>051</num>
<title>Airbus Subsidies</title>
<desc>Document will discuss government assistance to Airbus Industrie.</desc>
<narr>To be relevant, a document must cite or discuss assistance.</narr>
</top>
"""

TREC_COVID = """\
<?xml version="1.0" encoding="UTF-8"?>
<topics task="COVIDSearch 2020" batch="Round1">
  <topic number="1">
    <query>coronavirus origin</query>
    <question>what is the origin of COVID-19</question>
    <narrative>seeking information about the virus's origin &amp; spread</narrative>
  </topic>
  <topic number="2">
    <query>coronavirus response to weather changes</query>
    <question>how does the coronavirus respond to changes in the weather</question>
    <narrative>seeking range of information</narrative>
  </topic>
</topics>
"""

CRAN_QRY = """\
.I 001
.W
what similarity laws must be obeyed when constructing aeroelastic models
of heated high speed aircraft .
.I 002
.W
what are the structural and aeroelastic problems associated with flight
of high speed aircraft .
.I 004
.W
what problems of heat conduction in composite slabs have been solved so
far .
"""


def problems(error: pytest.ExceptionInfo[ParseError]) -> list[tuple[int | None, str]]:
    return [(problem.line, problem.message) for problem in error.value.problems]


def test_it_reads_trec_topics_with_unclosed_fields_and_prefixes():
    topics = parse_topics(ROBUST.splitlines())
    assert [t.topic_id for t in topics] == ["301", "302"]
    first = topics[0]
    assert first.title == "International Organized Crime"
    assert first.description == (
        "Identify organizations that participate in international criminal activity, "
        "the activity, and, if possible, collaborating organizations."
    )
    assert first.narrative.startswith("A relevant document must as a minimum identify")
    assert first.narrative.endswith("(e.g., Columbian cartel exporting cocaine).")
    assert (first.line, topics[1].line) == (1, 14)


def test_it_reads_trec_topics_with_closed_fields_and_without_prefixes():
    (topic,) = parse_topics(CLOSED.splitlines())
    assert topic == TopicRecord(
        "051",
        "Airbus Subsidies",
        "Document will discuss government assistance to Airbus Industrie.",
        "To be relevant, a document must cite or discuss assistance.",
        1,
    )


def test_it_reads_trec_topics_written_on_one_line():
    text = (
        "<top><num>7</num><title>a b</title><desc>Description: c</desc></top>"
        "<top><num>8</num><title>d</title></top>"
    )
    topics = parse_topics([text])
    assert [(t.topic_id, t.title, t.description) for t in topics] == [
        ("7", "a b", "c"),
        ("8", "d", ""),
    ]


def test_it_skips_the_older_fields_of_trec_topics():
    text = """<top>
<head> Tipster Topic Description
<num> Number: 051
<dom> Domain: International Economics
<title> Topic: Airbus Subsidies
<desc> Description:
Document will discuss government assistance.
<smry> Summary:
Something.
<narr> Narrative:
To be relevant.
<con> Concept(s):
1. Airbus Industrie
<fac> Factor(s):
<nat> Nationality: U.S.
</fac>
<def> Definition(s):
</top>"""
    (topic,) = parse_topics(text.splitlines())
    assert topic == TopicRecord(
        "051",
        "Airbus Subsidies",
        "Document will discuss government assistance.",
        "To be relevant.",
        1,
    )


def test_it_reads_the_xml_topics_of_later_tracks():
    topics = parse_topics(TREC_COVID.splitlines())
    assert [t.topic_id for t in topics] == ["1", "2"]
    assert topics[0].title == "coronavirus origin"
    assert topics[0].description == "what is the origin of COVID-19"
    assert topics[0].narrative.endswith("virus's origin & spread")
    assert topics[0].line == 3


def test_it_refuses_a_trec_topic_without_num_or_title_or_closing_tag():
    text = "<top>\n<title> no number\n</top>\n<top>\n<num> 5\n</top>\n<top>\n<num> 6\n<title> x\n"
    with pytest.raises(ParseError) as error:
        parse_topics(text.splitlines())
    assert problems(error) == [
        (1, "has a topic without a <num> (its id)"),
        (4, "topic '5' has no title"),
        (7, "has a <top> that is never closed by </top>"),
    ]


def test_it_refuses_text_outside_trec_topics():
    with pytest.raises(ParseError) as error:
        parse_topics(["stray words", *CLOSED.splitlines()], format="trec")
    assert problems(error) == [(1, "has text outside a <top> … </top> topic")]


def test_it_reads_tsv_topics_with_two_three_or_four_columns():
    lines = ["051\tAirbus Subsidies", "052\tSouth African Sanctions\tdesc", "053\tt\td\tn"]
    topics = parse_topics(lines)
    assert topics == [
        TopicRecord("051", "Airbus Subsidies", "", "", 1),
        TopicRecord("052", "South African Sanctions", "desc", "", 2),
        TopicRecord("053", "t", "d", "n", 3),
    ]


def test_it_refuses_tsv_topics_with_other_column_counts():
    with pytest.raises(ParseError) as error:
        parse_topics(["1\ta", "2\ta\tb\tc\td", "3 no tab"], format="tsv")
    assert [line for line, _ in problems(error)] == [2, 3]
    assert problems(error)[0][1].startswith("has 5 tab-separated columns; expected 2 (id, title)")


@pytest.mark.parametrize(
    "record",
    [
        {"id": "051", "title": "Airbus"},
        {"topic_id": "051", "query": "Airbus"},
        {"qid": "051", "text": "Airbus"},
        {"query_id": "051", "title": "Airbus"},
    ],
)
def test_it_reads_jsonl_topics_with_any_of_the_usual_keys(record):
    (topic,) = parse_topics([json.dumps(record)])
    assert (topic.topic_id, topic.title) == ("051", "Airbus")


def test_it_reads_jsonl_descriptions_narratives_and_integer_ids():
    line = json.dumps({"id": 7, "title": "t", "description": "d", "narrative": None})
    assert parse_topics([line]) == [TopicRecord("7", "t", "d", "", 1)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": 1.0, "title": "t"}', "topic id 'id' must be a string or an integer, not float"),
        ('{"id": true, "title": "t"}', "topic id 'id' must be a string or an integer, not bool"),
        ('{"id": null, "title": "t"}', "topic id 'id' must be a string or an integer, not null"),
        (
            '{"title": "t"}',
            "has no topic id (expected one of the keys id, topic_id, qid, query_id, number)",
        ),
        ('{"id": "1"}', "has no topic title (expected one of the keys title, query, text)"),
        ('{"id": "1", "title": 5}', "'title' must be a string, not int"),
        ('{"id": "1", "title": "a\\u0000b"}', "'title' contains a NUL character"),
        (
            '{"id": "1", "title": "\\ud800"}',
            "'title' contains an unpaired surrogate (invalid Unicode)",
        ),
        ('{"id": "1 2", "title": "t"}', "topic id '1 2' contains whitespace"),
        ("[1, 2]", "is a JSON list, not an object"),
        (
            '{"id": "1",',
            "is not valid JSON: Expecting property name enclosed in double quotes (column 12)",
        ),
        ("[" * 100_000, "is not valid JSON: too deeply nested"),
    ],
)
def test_it_refuses_bad_jsonl_topics(line, message):
    with pytest.raises(ParseError) as error:
        parse_topics(['{"id": "0", "title": "fine"}', line], format="jsonl")
    assert problems(error) == [(2, message)]


def test_it_reads_smart_topics_by_their_i_ids():
    topics = parse_topics(CRAN_QRY.splitlines())
    assert [t.topic_id for t in topics] == ["001", "002", "004"]
    assert topics[0].title == (
        "what similarity laws must be obeyed when constructing aeroelastic models "
        "of heated high speed aircraft ."
    )
    assert [t.line for t in topics] == [1, 5, 9]


def test_it_numbers_smart_topics_by_position_when_asked():
    topics = parse_topics(CRAN_QRY.splitlines(), positional_ids=True)
    assert [t.topic_id for t in topics] == ["1", "2", "3"]


def test_it_skips_an_empty_trailing_smart_record():
    topics = parse_topics((CRAN_QRY + ".I\n").splitlines())
    assert [t.topic_id for t in topics] == ["001", "002", "004"]
    topics = parse_topics((CRAN_QRY + ".I\n").splitlines(), positional_ids=True)
    assert [t.topic_id for t in topics] == ["1", "2", "3"]


def test_it_refuses_an_empty_smart_record_in_the_middle():
    with pytest.raises(ParseError) as error:
        parse_topics([".I 1", ".W", "a", ".I", ".I 3", ".W", "c"])
    assert problems(error) == [(4, "has a .I line without an id")]


def test_it_refuses_a_smart_topic_without_text():
    with pytest.raises(ParseError) as error:
        parse_topics([".I 1", ".W", "a", ".I 2", ".T", "title only"])
    assert problems(error) == [(4, "topic '2' has no .W text")]


def test_it_refuses_duplicate_topic_ids_naming_both_lines():
    with pytest.raises(ParseError) as error:
        parse_topics(["301\ta", "302\tb", "301\tc"])
    assert problems(error) == [(3, "topic id '301' repeats the topic of line 1")]


def test_it_refuses_bad_topic_ids_and_collects_every_problem():
    with pytest.raises(ParseError) as error:
        parse_topics(["a b\tt", "\tt", "ok\t", "x" * 201 + "\tt"], format="tsv")
    assert problems(error) == [
        (1, "topic id 'a b' contains whitespace"),
        (2, "topic id '' is empty"),
        (3, "topic 'ok' has no title"),
        (4, f"topic id {'x' * 60 + '…'!r} is longer than 200 characters"),
    ]


@pytest.mark.parametrize(
    ("lines", "format"),
    [
        (['{"id": "#1", "title": "t"}'], "jsonl"),
        (["<top>", "<num> #1", "<title> t", "</top>"], "trec"),
    ],
)
def test_a_topic_id_that_would_read_as_a_comment_in_runs_and_qrels_is_refused(lines, format):
    # "#1 0 d1 1" is a comment to Pooljudge's run and qrels readers: the topic's judgments would
    # be dropped on re-import while trec_eval counts them.
    with pytest.raises(ParseError) as error:
        parse_topics(lines, format=format)
    [(line, message)] = problems(error)
    assert line == 1
    assert message.startswith("topic id '#1' starts with '#'")


def test_it_skips_blank_and_comment_lines_in_line_formats():
    topics = parse_topics(["# topics", "", "1\ta", "  "])
    assert [t.topic_id for t in topics] == ["1"]


def test_it_accepts_numbered_lines_and_lines_with_their_ends():
    assert parse_topics([(7, "1\ta")]) == [TopicRecord("1", "a", "", "", 7)]
    assert parse_topics(["1\ta\r\n", "2\tb\n"]) == [
        TopicRecord("1", "a", "", "", 1),
        TopicRecord("2", "b", "", "", 2),
    ]


@pytest.mark.parametrize(
    ("first", "format"),
    [
        ("<top>", "trec"),
        ("<?xml version='1.0'?>", "trec"),
        ('{"id": "1", "title": "x"}', "jsonl"),
        (".I 1", "smart"),
        ("1\tx", "tsv"),
    ],
)
def test_it_guesses_the_format_from_the_first_line(first, format):
    assert guess_topic_format(["", "# comment", first]) == format
    assert format in TOPIC_FORMATS


def test_it_says_when_it_cannot_guess_the_format():
    with pytest.raises(ParseError) as error:
        parse_topics(["just words"], source="topics.txt")
    assert str(error.value) == (
        "topics.txt: cannot tell the topics format from the first lines; "
        "choose one of trec, tsv, jsonl, smart"
    )


def test_it_refuses_an_unknown_format_and_an_empty_file():
    with pytest.raises(ParseError, match="unknown topics format 'xml'"):
        parse_topics(["1\ta"], format="xml")
    with pytest.raises(ParseError) as error:
        parse_topics([], source="t.txt")
    assert str(error.value) == "t.txt: is empty"
    with pytest.raises(ParseError) as error:
        parse_topics(["", "  ", "# a comment"], source="t.txt")
    assert str(error.value) == "t.txt: holds only blank lines and # comments"


def test_it_refuses_a_file_without_topics():
    with pytest.raises(ParseError) as error:
        parse_topics(["# nothing here", ""], format="tsv", source="t.tsv")
    assert str(error.value) == "t.tsv: has no topics"


# Issue 21: the topic twin of the TSV document whose first id looks like a SMART marker.
def test_a_tsv_topic_whose_id_looks_like_a_smart_marker_is_tsv():
    assert parse_topics([".X\tA title"]) == [TopicRecord(".X", "A title", "", "", 1)]
    assert [t.topic_id for t in parse_topics([".W\ta\tb\tc", ".I\td"])] == [".W", ".I"]
    assert parse_topics(["{q\ttitle"]) == [TopicRecord("{q", "title", "", "", 1)]


def test_a_smart_topic_file_with_a_tab_in_its_first_line_is_still_smart():
    assert parse_topics([".I\t3", ".W", "what is it"]) == [TopicRecord("3", "what is it", line=1)]


def test_when_structure_cannot_tell_the_topics_format_it_asks():
    with pytest.raises(ParseError, match=r"could start a SMART record \(\.I\) or be a TSV line"):
        parse_topics([".I 1\tone", "plain words"])
    with pytest.raises(ParseError, match="starts like a JSON object but is not one"):
        parse_topics(['{"id": 1,\t', "x"])


def test_a_tsv_topic_that_mentions_a_trec_tag_is_tsv():
    # Tabs make it a TSV line; "<num>" in its title no longer makes the file TREC SGML.
    assert parse_topics(["7\tthe <num> element"]) == [TopicRecord("7", "the <num> element", line=1)]
    assert guess_topic_format(["<num> 301", "<title> x"]) == "trec"
