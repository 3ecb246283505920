"""Marking a topic's terms in sanitised HTML: around the terms, never inside a tag or an
attribute, never turning text into markup, and bounded on any document."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from assess.highlight import (
    MARK_CLOSE,
    MARK_OPEN,
    MAX_TERMS,
    extract_terms,
    highlight_html,
    topic_terms,
)
from campaigns.sanitize import render_body

XSS = (
    "<p>Covid <img src=x onerror=\"alert('covid')\"> origin</p>"
    "<script>alert('covid')</script>"
    '<a href="javascript:alert(1)" title="covid origin">covid link</a>'
    "&lt;script&gt;alert('covid')&lt;/script&gt;"
    '<svg onload="alert(1)"><text>covid</text></svg>'
    '<td colspan="2" rowspan="covid">covid cell</td>'
)


class Shape(HTMLParser):
    """The tags (with their attributes) and the text of an HTML string, as a browser reads
    them, with ``<mark class="term">`` elements set aside."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple] = []
        self.text: list[str] = []
        self.marked: list[str] = []
        self._in_mark = 0

    def handle_starttag(self, tag, attrs):
        if tag == "mark" and attrs == [("class", "term")]:
            self._in_mark += 1
            self.marked.append("")
            return
        self.tags.append(("start", tag, tuple(attrs)))

    def handle_endtag(self, tag):
        if tag == "mark" and self._in_mark:
            self._in_mark -= 1
            return
        self.tags.append(("end", tag))

    def handle_data(self, data):
        self.text.append(data)
        if self._in_mark:
            self.marked[-1] += data

    def handle_comment(self, data):
        self.tags.append(("comment", data))


def shape(html: str) -> Shape:
    parser = Shape()
    parser.feed(html)
    parser.close()
    return parser


def test_it_marks_the_topics_terms_in_text():
    terms = topic_terms("Coronavirus origin", "Where did the virus come from?")
    out = highlight_html("<p>The origin of the <b>Coronavirus</b> virus.</p>", terms)
    assert out == (
        f"<p>The {MARK_OPEN}origin{MARK_CLOSE} of the "
        f"<b>{MARK_OPEN}Coronavirus{MARK_CLOSE}</b> {MARK_OPEN}virus{MARK_CLOSE}.</p>"
    )


def test_it_matches_case_and_simple_plurals_but_not_parts_of_words():
    terms = topic_terms("study of boxes", "genes and viruses")
    text = (
        "<p>Studies STUDY box Boxes gene genes virus viruses "
        "studying boxing generic virusy gene_x</p>"
    )
    marked = shape(highlight_html(text, terms)).marked
    assert marked == ["Studies", "STUDY", "box", "Boxes", "gene", "genes", "virus", "viruses"]


def test_stopwords_short_words_and_numbers_are_not_terms():
    assert extract_terms("What is the effect of 5G on the 2020 flu?", "Identify documents") == (
        "effect",
        "flu",
    )
    assert not topic_terms("What is it?", "Find documents about the")


def test_marks_never_land_inside_tags_or_attributes():
    terms = topic_terms("covid origin", "colspan rowspan title")
    html = render_body(XSS)[0] + '<td colspan="2">title</td>'
    out = highlight_html(html, terms)
    before, after = shape(html), shape(out)
    assert after.tags == before.tags  # every tag and attribute exactly as it was
    assert "".join(after.text) == "".join(before.text)  # the text a browser reads, unchanged
    assert after.marked
    assert set(after.marked) <= {"covid", "origin", "title", "Covid"}
    for tag in re.findall(r"<[^>]*>", out):
        assert tag in (MARK_OPEN, MARK_CLOSE) or "mark" not in tag


def test_text_that_spells_markup_stays_text():
    terms = topic_terms("script alert", "")
    out = highlight_html("<p>&lt;script&gt;alert(1)&lt;/script&gt; &amp;lt;b&amp;gt;</p>", terms)
    assert "<script" not in out
    assert out == (
        f"<p>&lt;{MARK_OPEN}script{MARK_CLOSE}&gt;{MARK_OPEN}alert{MARK_CLOSE}(1)&lt;/"
        f"{MARK_OPEN}script{MARK_CLOSE}&gt; &amp;lt;b&amp;gt;</p>"
    )


def test_an_entity_is_never_cut_by_a_mark():
    terms = topic_terms("amp quot nbsp", "")
    html = "<p>AT&amp;T &quot;quoted&quot;&nbsp;amp</p>"
    out = highlight_html(html, terms)
    assert shape(out).marked == ["amp"]
    assert "".join(shape(out).text) == "".join(shape(html).text)


def test_text_without_a_term_is_returned_byte_for_byte():
    terms = topic_terms("covid", "")
    html = "<p>Nothing here &#x27;at all&#x27; &amp; more</p><br><hr>"
    assert highlight_html(html, terms) == html


def test_quoted_attributes_holding_angle_brackets_are_copied_whole():
    # Never produced by the sanitiser (which keeps no such attribute), but kept safe anyway.
    terms = topic_terms("covid", "")
    html = '<span title="a > covid <b>">covid</span>'
    assert highlight_html(html, terms) == (
        f'<span title="a > covid <b>">{MARK_OPEN}covid{MARK_CLOSE}</span>'
    )


def test_raw_text_elements_are_not_searched():
    terms = topic_terms("covid", "")
    html = "<style>.covid{}</style><script>var covid = 1;</script><p>covid</p>"
    assert highlight_html(html, terms) == (
        "<style>.covid{}</style><script>var covid = 1;</script>"
        f"<p>{MARK_OPEN}covid{MARK_CLOSE}</p>"
    )


def test_the_caps_bound_marks_terms_and_the_text_searched():
    terms = topic_terms("covid", "")
    html = "<p>" + "covid " * 50 + "</p>"
    assert highlight_html(html, terms, max_marks=10).count(MARK_OPEN) == 10
    # The search ends at the first space after 58 characters: the 10th word ends at 59.
    assert highlight_html(html, terms, max_scan=58).count(MARK_OPEN) == 10
    many = " ".join(f"word{i}x" for i in range(100))
    assert len(extract_terms(many)) == MAX_TERMS


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from([*"covid origin <>&\"'=/ab pscript-;#x27", "\n", "é"]),
        max_size=120,
    )
)
def test_any_sanitised_document_keeps_its_tags_and_text(raw):
    html, _ = render_body(raw)
    terms = topic_terms("covid origin", "script")
    out = highlight_html(html, terms)
    before, after = shape(html), shape(out)
    assert after.tags == before.tags
    assert "".join(after.text) == "".join(before.text)
    assert all(word.lower() in {"covid", "origin", "script"} for word in after.marked)
