"""Server-rendered SVG for the reports: a confusion matrix as a heat map, a bump chart of two
rankings, and per-topic bars.

Like pooling/plots.py: no script and no ``style`` attribute (the CSP allows neither), only SVG
presentation attributes and classes; every figure is ``role="img"`` with a title and a
description in words, and the numbers are also in a table beside it. Every text placed in the SVG
goes through ``escape``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString

from pooling.plots import Frame, nice_ticks
from pooljudge.common import svg_document

ACCENT, MUTED_LINE, GRID, AXIS, TEXT, OK, WARN = (
    "#2d5bd3",
    "#b8bfcc",
    "#e6e9ef",
    "#5b6475",
    "#1d2330",
    "#1f7a4d",
    "#8a5a00",
)
ARROW, TIMES = "\N{RIGHTWARDS ARROW}", "\N{MULTIPLICATION SIGN}"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\N{HORIZONTAL ELLIPSIS}"


def _fmt(value: float | None, digits: int = 4) -> str:
    return "\N{EM DASH}" if value is None else f"{value:.{digits}f}"


# --- Confusion matrix ----------------------------------------------------------------------------


def confusion_heatmap(
    confusion: Sequence[Sequence[int]],
    labels: Sequence[int],
    *,
    a: str,
    b: str,
    names: Mapping[int, str] | None = None,
    ident: str = "confusion",
    links: Callable[[int, int], str] | None = None,
) -> SafeString | None:
    """The confusion matrix of two assessors as a heat map: rows ``a``'s label, columns ``b``'s,
    each cell shaded by its count (darkest = the largest cell) and labelled with the count and
    its share of all pairs; the agreement diagonal is outlined. With ``links``, a cell with
    pairs links to ``links(a's label, b's label)``. None without pairs."""
    k = len(labels)
    total = sum(sum(row) for row in confusion)
    if not k or not total:
        return None
    names = names or {}
    cell = 72 if k <= 4 else max(40, 300 // k)
    left, top = 150, 78
    width = left + k * cell + 24
    height = top + k * cell + 20
    largest = max(max(row) for row in confusion)
    body = [
        f'<text x="{left + k * cell / 2:.1f}" y="18" text-anchor="middle" class="axis-label">'
        f"{escape(_short(b, 30))}\N{RIGHT SINGLE QUOTATION MARK}s label</text>",
        f'<text x="18" y="{top + k * cell / 2:.1f}" text-anchor="middle" class="axis-label" '
        f'transform="rotate(-90 18 {top + k * cell / 2:.1f})">'
        f"{escape(_short(a, 24))}\N{RIGHT SINGLE QUOTATION MARK}s label</text>",
    ]
    for j, label in enumerate(labels):
        x = left + j * cell + cell / 2
        body.append(
            f'<text x="{x:.1f}" y="{top - 26}" text-anchor="middle" class="legend">{label}</text>'
            f'<text x="{x:.1f}" y="{top - 10}" text-anchor="middle">'
            f"{escape(_short(names.get(label, ''), max(6, cell // 7)))}</text>"
        )
    for i, label in enumerate(labels):
        y = top + i * cell + cell / 2
        body.append(
            f'<text x="{left - 10}" y="{y - 2:.1f}" text-anchor="end" class="legend">{label}</text>'
            f'<text x="{left - 10}" y="{y + 13:.1f}" text-anchor="end">'
            f"{escape(_short(names.get(label, ''), 16))}</text>"
        )
    for i, row in enumerate(confusion):
        for j, count in enumerate(row):
            x, y = left + j * cell, top + i * cell
            share = count / largest if largest else 0
            opacity = 0.0 if not count else 0.08 + 0.87 * share
            dark = opacity > 0.5
            ink = "#ffffff" if dark else TEXT
            ink_class = "ink-light" if dark else "ink-dark"
            tip = (
                f"{a} {labels[i]}, {b} {labels[j]}: {count:,} pair{'s' if count != 1 else ''} "
                f"({count / total:.1%})"
            )
            body.append(
                f"<g><title>{escape(tip)}</title>"
                f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="#ffffff" '
                f'stroke="{GRID}"/>'
                f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{ACCENT}" '
                f'fill-opacity="{opacity:.3f}" stroke="{GRID}"/>'
                f'<text x="{x + cell / 2:.1f}" y="{y + cell / 2 + 1:.1f}" text-anchor="middle" '
                f'fill="{ink}" class="cell-count {ink_class}">{count:,}</text>'
                f'<text x="{x + cell / 2:.1f}" y="{y + cell / 2 + 17:.1f}" text-anchor="middle" '
                f'fill="{ink}" class="cell-share {ink_class}">{count / total:.0%}</text></g>'
            )
            if links is not None and count:
                href = escape(links(labels[i], labels[j]))
                body[-1] = f'<a href="{href}" class="heatmap-link">{body[-1]}</a>'

    for i in range(k):
        x, y = left + i * cell, top + i * cell
        body.append(
            f'<rect x="{x + 1.5}" y="{y + 1.5}" width="{cell - 3}" height="{cell - 3}" '
            f'fill="none" stroke="{OK}" stroke-width="2.5"/>'
        )
    agree = sum(confusion[i][i] for i in range(k))
    cells = "; ".join(
        f"{a} {labels[i]} and {b} {labels[j]}: {confusion[i][j]}"
        for i in range(k)
        for j in range(k)
        if confusion[i][j]
    )
    description = (
        f"Confusion matrix of {total:,} pairs judged by both {a} and {b}: they gave the same "
        f"label to {agree:,} ({agree / total:.1%}). {cells}."
    )
    return svg_document(
        f"Labels of {a} against {b}", description, body, ident=ident, width=width, height=height
    )


# --- Bump chart ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bump:
    run: str
    rank_first: int
    rank_second: int
    first: float
    second: float


def bump_chart(
    rows: Sequence[Bump], *, first: str, second: str, measure: str, ident: str = "bump"
) -> SafeString | None:
    """Rank of each run under the first qrels (left) joined by a line to its rank under the
    second (right), best at the top; beside each rank the run's name and, outermost, its score.
    Runs that change place are drawn in the accent colour, the others in grey. ``first`` and
    ``second`` are short column titles ("A", "B"). None with fewer than two runs."""
    n = len(rows)
    if n < 2:
        return None
    row = 20 if n <= 40 else 15
    top, bottom = 50, 14
    width = 820
    x1, x2 = 330, 490
    height = top + row * (n - 1) + bottom + 8
    label_chars = 30

    def y(rank: int) -> float:
        return top + (rank - 1) * row

    body = [
        f'<text x="{x1}" y="18" text-anchor="middle" class="axis-label">{escape(first)}</text>'
        f'<text x="{x2}" y="18" text-anchor="middle" class="axis-label">{escape(second)}</text>'
        f'<text x="{(x1 + x2) / 2}" y="34" text-anchor="middle">rank by {escape(measure)}</text>'
        f'<text x="10" y="34">{escape(measure)}</text>'
        f'<text x="{width - 10}" y="34" text-anchor="end">{escape(measure)}</text>'
    ]
    still = [r for r in rows if r.rank_first == r.rank_second]
    moved = [r for r in rows if r.rank_first != r.rank_second]
    for r in still + moved:  # moved lines on top
        changed = r.rank_first != r.rank_second
        colour, stroke = (ACCENT, 2.5) if changed else (MUTED_LINE, 1.5)
        tip = (
            f"{r.run}: rank {r.rank_first} {ARROW} {r.rank_second}, {measure} "
            f"{_fmt(r.first)} {ARROW} {_fmt(r.second)}"
        )
        ya, yb = y(r.rank_first), y(r.rank_second)
        body.append(
            f'<g class="{"bump-moved" if changed else "bump-still"}">'
            f"<title>{escape(tip)}</title>"
            f'<line x1="{x1}" y1="{ya:.1f}" x2="{x2}" y2="{yb:.1f}" stroke="{colour}" '
            f'stroke-width="{stroke}"/>'
            f'<circle cx="{x1}" cy="{ya:.1f}" r="3.5" fill="{colour}"/>'
            f'<circle cx="{x2}" cy="{yb:.1f}" r="3.5" fill="{colour}"/></g>'
        )
    for r in rows:
        weight = ' class="legend"' if r.rank_first != r.rank_second else ""
        ya, yb = y(r.rank_first) + 4, y(r.rank_second) + 4
        body.append(
            f'<text x="{x1 - 10}" y="{ya:.1f}" text-anchor="end" class="report-rank">'
            f"{r.rank_first}</text>"
            f'<text x="{x1 - 38}" y="{ya:.1f}" text-anchor="end"{weight}>'
            f"{escape(_short(r.run, label_chars))}</text>"
            f'<text x="10" y="{ya:.1f}">{_fmt(r.first)}</text>'
            f'<text x="{x2 + 10}" y="{yb:.1f}" class="report-rank">{r.rank_second}</text>'
            f'<text x="{x2 + 38}" y="{yb:.1f}"{weight}>{escape(_short(r.run, label_chars))}</text>'
            f'<text x="{width - 10}" y="{yb:.1f}" text-anchor="end">{_fmt(r.second)}</text>'
        )
    changes = ", ".join(f"{r.run} {r.rank_first} {ARROW} {r.rank_second}" for r in moved)
    description = f"Ranks of {n} runs by {measure} under {first} (left) and {second} (right). " + (
        f"{len(moved)} runs change place: {changes}." if moved else "No run changes place."
    )
    return svg_document(
        f"Ranking of runs under two qrels ({measure})",
        description,
        body,
        ident=ident,
        width=width,
        height=height,
    )


# --- Per-topic bars ------------------------------------------------------------------------------


def topic_bars(
    values: Sequence[tuple[str, float | None]],
    *,
    measure: str,
    mean: float | None = None,
    ident: str = "topic-bars",
) -> SafeString | None:
    """One bar per topic (its value of ``measure``, 0 to 1), a gap where the run returned
    nothing for the topic, and the mean over all topics as a dashed line. None without topics."""
    if not values:
        return None
    frame = Frame(width_total=1080, height_total=300, left=56, top=28, bottom_margin=58)
    high = max([v for _, v in values if v is not None] + [mean or 0, 0])
    ticks = [t / 100 for t in nice_ticks(100 * max(high, 0.01), count=4, integer=False)]
    if ticks[-1] > 1 and high <= 1:
        ticks = [0, 0.25, 0.5, 0.75, 1.0]

    def to_y(value: float) -> float:
        return frame.bottom - value / ticks[-1] * frame.height

    body = []
    for tick in ticks:
        ty = to_y(tick)
        body.append(
            f'<line x1="{frame.left}" x2="{frame.right}" y1="{ty:.1f}" y2="{ty:.1f}" '
            f'stroke="{GRID}"/>'
            f'<text x="{frame.left - 8}" y="{ty + 4:.1f}" text-anchor="end">{tick:g}</text>'
        )
    middle = frame.top + frame.height / 2
    body.append(
        f'<text x="14" y="{middle:.1f}" text-anchor="middle" class="axis-label" '
        f'transform="rotate(-90 14 {middle:.1f})">{escape(measure)}</text>'
        f'<line x1="{frame.left}" x2="{frame.right}" y1="{frame.bottom}" y2="{frame.bottom}" '
        f'stroke="{AXIS}"/>'
    )
    slot = frame.width / len(values)
    gap = min(2.0, slot * 0.2)
    every = max(1, math.ceil(len(values) / 30))
    for index, (topic, value) in enumerate(values):
        x = frame.left + index * slot + gap / 2
        bar = max(0.5, slot - gap)
        shown = "not returned" if value is None else f"{value:.4f}"
        body.append(f"<g><title>{escape(f'Topic {topic}: {measure} {shown}')}</title>")
        if value is None:
            body.append(
                f'<rect x="{x:.2f}" y="{frame.bottom - 3}" width="{bar:.2f}" height="3" '
                f'fill="{WARN}"/>'
            )
        else:
            top = to_y(value)
            body.append(
                f'<rect x="{x:.2f}" y="{top:.1f}" width="{bar:.2f}" '
                f'height="{max(frame.bottom - top, 0.5):.1f}" fill="{ACCENT}"/>'
            )
        body.append("</g>")
        if index % every == 0:
            cx = x + bar / 2
            body.append(
                f'<text x="{cx:.1f}" y="{frame.bottom + 12}" text-anchor="end" '
                f'transform="rotate(-45 {cx:.1f} {frame.bottom + 12})">'
                f"{escape(_short(topic, 10))}</text>"
            )
    if mean is not None:
        my = to_y(mean)
        body.append(
            f'<line x1="{frame.left}" x2="{frame.right}" y1="{my:.1f}" y2="{my:.1f}" '
            f'stroke="{WARN}" stroke-width="1.5" stroke-dasharray="6 4"/>'
            f'<line x1="{frame.right - 150}" x2="{frame.right - 122}" y1="12" y2="12" '
            f'stroke="{WARN}" stroke-width="1.5" stroke-dasharray="6 4"/>'
            f'<text x="{frame.right - 116}" y="16" class="legend">mean {mean:.4f}</text>'
        )
    answered = [v for _, v in values if v is not None]
    description = (
        f"{measure} per topic over {len(values)} topics"
        + (
            f", {len(values) - len(answered)} not returned by the run"
            if len(answered) < len(values)
            else ""
        )
        + (f"; mean {mean:.4f}" if mean is not None else "")
        + ". "
        + " ".join(f"{t}: {'none' if v is None else f'{v:.3f}'}." for t, v in values[:60])
    )
    return svg_document(
        f"{measure} per topic",
        description,
        body,
        ident=ident,
        width=frame.width_total,
        height=frame.height_total,
    )
