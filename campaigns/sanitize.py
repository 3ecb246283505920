"""Showing document bodies safely: HTML is sanitised with nh3, plain text is escaped.

Documents come from outside (web crawls, news wires, JSON dumps) and are shown to assessors
inside the judging page, so their markup is untrusted. The allow-list keeps only structural and
text-level tags with no attributes (colspan/rowspan excepted), which also keeps blinding intact:
no links, images, frames, scripts, styles, forms, URLs, event handlers, hx-*/data-* attributes or
comments can come through.
"""

from __future__ import annotations

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
_BLANK_LINES = re.compile(r"\n[ \t]*\n\s*")


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


def render_plain_text(text: str) -> str:
    """Escaped paragraphs: blank-line separated blocks become <p>, single newlines <br>."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
    paragraphs = [block for block in _BLANK_LINES.split(text) if block.strip()]
    return "".join(
        "<p>" + "<br>".join(escape(line) for line in block.split("\n")) + "</p>"
        for block in paragraphs
    )


def render_body(body: str) -> tuple[str, bool]:
    """(safe HTML to show, whether the body was HTML)."""
    if looks_like_html(body):
        return sanitize_html(body), True
    return render_plain_text(body), False
