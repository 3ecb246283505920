"""Marking a topic's terms in a document, on the server, inside HTML that is already sanitised.

The HTML is never parsed again as HTML: it is cut into tags (copied unchanged, attributes and
all) and the text between them. Only text is searched, and only text that contains a term is
rewritten: its character references are decoded, and every piece (the text around a term and the
term itself) is escaped again, with ``<mark class="term">`` the only markup added. So a term can
never land inside a tag or an attribute, and text that spells markup (``&lt;script&gt;``) stays
text.

Terms are the words of the topic's title and description, minus stopwords and words shorter than
three letters, matched as whole words (``\b``: a term inside ``snake_case`` is not one),
case-insensitively, with light stemming (simple English plurals:
study/studies, box/boxes, gene/genes). Caps bound the work on any document: at most MAX_TERMS
terms, MAX_MARKS marks per document, and text past MAX_SCAN characters is copied unmarked.

Everything here is pure (no Django models, no database).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import lru_cache

MIN_TERM_LENGTH = 3
MAX_TERMS = 40
MAX_MARKS = 1000
# Characters of text searched per document (about 1 MB of text): beyond it marks would not be
# read, and a longer document must not cost more.
MAX_SCAN = 1_000_000
MARK_OPEN = '<mark class="term">'
MARK_CLOSE = "</mark>"

# English function words, and the words TREC-style topics use to ask rather than to describe
# ("Identify documents that discuss ..."): marking those would mark every document.
STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can cannot could couldn't did didn't do does doesn't
    doing don't down during each either etc even ever every few for from further had hadn't has
    hasn't have haven't having he her here hers herself him himself his how however i if in into
    is isn't it it's its itself just least less let like made make many may me might more most
    much must my myself neither no nor not of off often on once one only or other others ought
    our ours ourselves out over own per rather same several shall she should shouldn't since so
    some such than that the their theirs them themselves then there these they this those
    through thus to too toward towards under until up upon us very via was wasn't we were
    weren't what when where whether which while who whom whose why will with within without
    would wouldn't yet you your yours yourself yourselves
    describe described describes describing discuss discussed discusses discussing document
    documents find finding identify identifies information mention mentioned mentions
    provide provides regarding relevant concerning pertaining pertinent specific specifically
    example examples question questions topic topics
    """.split()  # noqa: SIM905 (a word list reads better as words)
)

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
# A tag with quoted attribute values (which may hold ">"), or a comment: copied unchanged.
_TAG = re.compile(r"<!--.*?-->|<(?:[^<>\"']|\"[^\"]*\"|'[^']*')*>", re.S)
# Elements whose content is not text to read (never present after sanitising; skipped whole
# should some other HTML be given).
_SPACE = re.compile(r"\s")
_RAW_TEXT = re.compile(r"<(script|style|textarea|title)\b", re.I)


@dataclass(frozen=True)
class Terms:
    """The terms of a topic, the compiled pattern that finds them, and the lower-case stem each
    match begins with (a fast test of where a match can be)."""

    words: tuple[str, ...]
    pattern: re.Pattern[str] | None
    stems: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.pattern is not None


def _forms(word: str) -> tuple[str, str]:
    """The stem of ``word`` (lower case) and a pattern matching it in singular and simple plural
    forms."""
    vowels = "aeiou"
    if word.endswith("ies") and len(word) > 4:
        return word[:-3], "(?:y|ies)"
    if word.endswith("y") and len(word) > 3 and word[-2] not in vowels:
        return word[:-1], "(?:y|ies)"
    if word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        return word[:-2], "(?:es)?"
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1], "(?:s|es)?"
    return word, "(?:s|es)?"


def extract_terms(*texts: str) -> tuple[str, ...]:
    """The distinct words of ``texts`` worth marking, lower case, in first-seen order."""
    seen: dict[str, None] = {}
    for text in texts:
        for match in _WORD.finditer(text or ""):
            word = match.group().lower().replace("\u2019", "'").removesuffix("'s")
            if len(word) < MIN_TERM_LENGTH or word in STOPWORDS or word.isdigit():
                continue
            seen.setdefault(word, None)
            if len(seen) >= MAX_TERMS:
                return tuple(seen)
    return tuple(seen)


@lru_cache(maxsize=256)
def topic_terms(title: str, description: str = "") -> Terms:
    """The terms of a topic's ``title`` and ``description`` with their pattern (cached: a topic's
    text rarely changes, and every document of the topic uses the same pattern)."""
    words = extract_terms(title, description)
    if not words:
        return Terms((), None)
    forms = {_forms(word) for word in words}
    # Longest first, so that of two forms sharing a beginning the longer one is tried first.
    alternatives = sorted((re.escape(stem) + ending for stem, ending in forms), key=len)[::-1]
    # The look-ahead on first letters rejects most positions at once: half the time on 1 MB.
    firsts = "".join(sorted({re.escape(word[0]) for word in words}))
    pattern = re.compile(rf"\b(?=[{firsts}])(?:{'|'.join(alternatives)})\b", re.IGNORECASE)
    return Terms(words, pattern, tuple(sorted({stem for stem, _ in forms})))


def highlight_html(
    safe_html: str, terms: Terms, *, max_marks: int = MAX_MARKS, max_scan: int = MAX_SCAN
) -> str:
    """``safe_html`` with every occurrence of ``terms`` in its text wrapped in
    ``<mark class="term">``; tags, attributes and comments are copied unchanged."""
    if not terms or not safe_html:
        return safe_html
    pattern = terms.pattern
    stems = terms.stems
    # A text segment where no stem occurs (a C-speed substring search, case-insensitive through
    # the lower-cased copy) holds no term, and is copied without a regex search. Lower-casing
    # can change the length of some non-ASCII text: then every segment is searched.
    lowered = safe_html.lower()
    if len(lowered) != len(safe_html):
        lowered = None
    elif not any(stem in lowered for stem in stems):
        return safe_html
    out: list[str] = []
    marks = 0
    scanned = 0
    position = 0
    length = len(safe_html)
    while position < length:
        if marks >= max_marks or scanned >= max_scan:
            out.append(safe_html[position:])
            break
        tag = _TAG.search(safe_html, position)
        end = tag.start() if tag else length
        if end > position and lowered is not None and not _holds(lowered, stems, position, end):
            out.append(safe_html[position:end])
            scanned += end - position
        elif end > position:
            segment = safe_html[position:end]
            marked, count = _mark_text(segment, pattern, max_marks - marks, max_scan - scanned)
            scanned += len(segment)
            out.append(marked)
            marks += count
        if tag is None:
            break
        raw = _RAW_TEXT.match(tag.group())
        if raw is not None:
            closing = re.compile(rf"</{raw.group(1)}\s*>", re.I).search(safe_html, tag.end())
            stop = closing.end() if closing else length
            out.append(safe_html[tag.start() : stop])
            position = stop
            continue
        out.append(tag.group())
        position = tag.end()
    return "".join(out)


def _holds(lowered: str, stems: tuple[str, ...], start: int, end: int) -> bool:
    return any(lowered.find(stem, start, end) >= 0 for stem in stems)


def _mark_text(segment: str, pattern: re.Pattern[str], budget: int, scan: int) -> tuple[str, int]:
    """A text segment (HTML-escaped text, no tags) with at most ``budget`` terms marked in about
    its first ``scan`` characters, and how many were. Unchanged, byte for byte, when it holds no
    term."""
    if "&" in segment:
        if pattern.search(segment) is None:
            # The sanitiser writes only &amp; &lt; &gt; &quot; and &nbsp; as references (never a
            # letter), so decoding cannot make a term where there was none.
            return segment, 0
        text = html.unescape(segment)
    else:
        text = segment
    stop = len(text)
    if scan < stop:
        # End the search between words, so that no word is cut into a false match.
        space = _SPACE.search(text, scan)
        stop = space.start() if space else stop
    pieces: list[str] = []
    count = 0
    last = 0
    for match in pattern.finditer(text, 0, stop):
        pieces.append(html.escape(text[last : match.start()], quote=False))
        pieces.append(MARK_OPEN + html.escape(match.group(), quote=False) + MARK_CLOSE)
        last = match.end()
        count += 1
        if count >= budget:
            break
    if not count:
        return segment, 0
    pieces.append(html.escape(text[last:], quote=False))
    return "".join(pieces), count
