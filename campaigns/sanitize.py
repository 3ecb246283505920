"""Showing document bodies safely: HTML is sanitised with nh3, plain text is escaped.

Documents come from outside (web crawls, news wires, JSON dumps) and are shown to assessors
inside the judging page, so their markup is untrusted. The allow-list keeps only structural and
text-level tags with no attributes (colspan/rowspan excepted), which also keeps blinding intact:
no links, images, frames, scripts, styles, forms, URLs, event handlers, hx-*/data-* attributes or
comments can come through.
"""

from __future__ import annotations

import itertools
import re
from html import escape

import nh3

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "div", "span",
        "h1", "h2", "h3", "h4", "h5", "h6",
        "ul", "ol", "li", "dl", "dt", "dd",
        "b", "i", "u", "s", "em", "strong", "small", "mark", "sub", "sup",
        "del", "ins", "abbr", "cite", "q", "dfn", "kbd", "samp", "var", "tt",
        "blockquote", "pre", "code", "address",
        "table", "caption", "thead", "tbody", "tfoot", "tr", "th", "td", "colgroup", "col",
        "article", "section", "header", "footer", "main", "aside", "figure", "figcaption",
    }
)  # fmt: skip

# Elements whose content is code, media or widgets rather than text a reader should see.
DROPPED_WITH_CONTENT = frozenset(
    {
        "script", "style", "template", "noscript", "iframe", "frame", "frameset", "noframes",
        "object", "embed", "applet", "svg", "math", "canvas", "audio", "video",
        "head", "title", "textarea", "select", "button", "datalist", "option",
    }
)  # fmt: skip

ALLOWED_ATTRIBUTES = {"td": {"colspan", "rowspan"}, "th": {"colspan", "rowspan"}}

HTML_ELEMENT_NAMES = (
    ALLOWED_TAGS
    | DROPPED_WITH_CONTENT
    | {
        "html", "body", "a", "img", "form", "input", "label", "link", "meta", "base", "font",
        "center", "nav", "picture", "source", "area", "map", "fieldset", "legend", "wbr",
    }
)  # fmt: skip

# A start or end tag of a real HTML element, or an HTML comment / doctype: "a < b" is not markup.
_MARKUP = re.compile(
    r"<(?:/?(?:" + "|".join(sorted(HTML_ELEMENT_NAMES, key=len, reverse=True)) + r")"
    r"(?=[\s/>])[^<>]*>|!--|!doctype\b)",
    re.IGNORECASE,
)
# Blank lines between blocks (lines are right-stripped first, so a blank line is empty).
_BLOCK_BREAK = re.compile(r"\n{2,}")


def looks_like_html(text: str) -> bool:
    """True when the text holds real HTML markup: a known element's tag, a comment, a doctype."""
    return "<" in text and _MARKUP.search(text) is not None


def _span_filter(tag: str, attribute: str, value: str) -> str | None:
    # Only small integers survive; anything else (scripts, URLs, huge spans) is dropped.
    if (
        attribute in {"colspan", "rowspan"}
        and value.isascii()
        and value.isdigit()
        and 1 <= int(value) <= 1000
    ):
        return value
    return None


def sanitize_html(html: str) -> str:
    """The HTML restricted to harmless structural and text tags, without attributes or comments.

    Links keep their text and lose their address; images, scripts, styles, frames, SVG, MathML
    and form widgets are removed (scripts, styles, frames and widgets with their content).
    """
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        clean_content_tags=set(DROPPED_WITH_CONTENT),
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        attribute_filter=_span_filter,
        strip_comments=True,
        link_rel=None,
        url_schemes=set(),
        generic_attribute_prefixes=set(),
    )


# Hard-wrapped text never runs past its wrap column; a line longer than this was not wrapped.
WRAP_COLUMN_MAX = 120
# A wrap column below this is a list or an address, not wrapped prose.
WRAP_COLUMN_MIN = 40
# A line filled to this share of the block's wrap column ends where the wrapping put it.
FULL_LINE = 0.6
# A list item, a field of a reStructuredText field list (":param name: ..."), or a labelled line
# ("Source: ...", as SMART documents start).
_LIST_ITEM = re.compile(
    r"(?:[-*+\u2022\u2013]|\d{1,3}[.)]|[a-z][.)]|:[^:\s][^:]*:|[A-Z][A-Za-z]{1,20}:)\s"
)
_COLUMN_GAP = re.compile(r"\S {3,}\S")


def _ends_sentence(line: str) -> bool:
    return line.rstrip("'\")]")[-1:] in {".", "?", "!", ":", ";"}


def _hyphenated(line: str) -> bool:
    """Ends with a letter and a hyphen: a word broken at the wrap ("boundary-" / "layer")."""
    return line.endswith("-") and line[-2:-1].isalpha()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_code(lines: list[str]) -> bool:
    """Source code, an interpreter session or an aligned table: indented as a whole (four spaces
    or more, as Markdown and reStructuredText mark code; not a list), a ``>>>`` prompt, or
    columns lined up with runs of spaces on most lines."""
    if lines[0].lstrip().startswith(">>>"):
        return True
    if all(line.startswith("    ") for line in lines):
        # An indented list is still a list, not code.
        return not all(_LIST_ITEM.match(line.strip()) for line in lines)
    aligned = sum(1 for line in lines if "   " in line and _COLUMN_GAP.search(line.strip()))
    return len(lines) >= 3 and aligned * 3 >= len(lines) * 2


def _prose(lines: list[str]) -> str:
    """A block of prose as paragraphs that wrap on any screen.

    In a block wrapped at 40 characters or more, a line end is a hard wrap, and becomes a space
    (nothing after a hyphen), unless the next line is a list item (kept as a line break) or
    indented (a new paragraph, but for a hanging indent continuing a sentence), or the line
    ends a sentence well before the wrap column (a new paragraph). Wrapping may be ragged (old
    collections were typed, not filled). In a block of short lines (a list, an address) every
    line end is kept; a line longer than any wrap column is a paragraph of its own."""
    column = max((len(line) for line in lines if len(line) <= WRAP_COLUMN_MAX), default=0)
    wrapped = len(lines) > 1 and column >= WRAP_COLUMN_MIN
    margin = min(_indent(line) for line in lines)
    # Paragraphs of lines of pieces: joined once at the end, so a long block stays linear.
    paragraphs: list[list[list[str]]] = [[[lines[0].strip()]]]
    for previous, line in itertools.pairwise(lines):
        text = line.strip()
        item = _LIST_ITEM.match(text) is not None
        indented = _indent(line) > margin
        ends_sentence = _ends_sentence(previous)
        short = len(previous) < FULL_LINE * column
        # A paragraph ends with a sentence that stops short of the wrap column, or before an
        # indented line (unless that line is a hanging indent continuing a sentence).
        paragraph_ends = (ends_sentence and short) or (indented and (ends_sentence or short))
        if len(previous) > WRAP_COLUMN_MAX:
            paragraphs.append([[text]])
        elif not wrapped or item:
            paragraphs[-1].append([text])
        elif paragraph_ends:
            paragraphs.append([[text]])
        elif _hyphenated(previous) and text[:1].islower():
            pieces = paragraphs[-1][-1]
            pieces[-1] += text
        else:
            paragraphs[-1][-1].append(text)
    return "".join(
        "<p>" + "<br>".join(escape(" ".join(pieces)) for pieces in paragraph) + "</p>"
        for paragraph in paragraphs
    )


def render_plain_text(text: str) -> str:
    """Escaped text that reads like a page: blank-line separated blocks, the hard line wraps of
    prose joined so that it wraps to the screen (see ``_prose``), and code, interpreter sessions
    and aligned tables kept line for line in ``<pre><code>`` (the only monospace)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").expandtabs(8)
    lines = [line.rstrip() for line in text.split("\n")]
    base = min((_indent(line) for line in lines if line), default=0)
    out = []
    for block in _BLOCK_BREAK.split("\n".join(line[base:] for line in lines).strip("\n")):
        block_lines = block.split("\n")
        if not block:
            continue
        if _is_code(block_lines):
            margin = min(_indent(line) for line in block_lines)
            code = "\n".join(line[margin:] for line in block_lines)
            out.append("<pre><code>" + escape(code) + "</code></pre>")
        else:
            out.append(_prose(block_lines))
    return "".join(out)


def render_body(body: str) -> tuple[str, bool]:
    """(safe HTML to show, whether the body was HTML)."""
    if looks_like_html(body):
        return sanitize_html(body), True
    return render_plain_text(body), False
