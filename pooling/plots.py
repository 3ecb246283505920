"""Server-rendered SVG plots for the organiser's pages.

No JavaScript and no inline ``style`` attributes (the CSP allows neither): shapes carry SVG
presentation attributes and classes that ``pooljudge.css`` may refine. Every plot is an
``role="img"`` with a title and a description that say in words what it shows; the numbers are
also in the table next to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString

from pooling.strategies import PlannerRow
from pooljudge.common import svg_document

WIDTH, HEIGHT = 640, 340
TIMES, EN_DASH = "\N{MULTIPLICATION SIGN}", "\N{EN DASH}"
ACCENT, REFERENCE, BAND, OK, GRID, AXIS = (
    "#2d5bd3",
    "#8a5a00",
    "#e8eefc",
    "#1f7a4d",
    "#e6e9ef",
    "#5b6475",
)


@dataclass(frozen=True)
class Frame:
    """An SVG of ``width`` x ``height`` units and the plotting area inside its margins."""

    width_total: float = WIDTH
    height_total: float = HEIGHT
    left: float = 64
    right_margin: float = 16
    top: float = 16
    bottom_margin: float = 56

    @property
    def right(self) -> float:
        return self.width_total - self.right_margin

    @property
    def bottom(self) -> float:
        return self.height_total - self.bottom_margin

    @property
    def width(self) -> float:
        return self.right - self.left

    @property
    def height(self) -> float:
        return self.bottom - self.top


def nice_ticks(high: float, *, count: int = 5, integer: bool = True) -> list[float]:
    """0 and round steps (1, 2, 2.5 or 5 times a power of ten) up to the first tick >= high."""
    if not high > 0:
        return [0, 1]
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if raw <= m * magnitude)
    if integer:
        step = max(1, round(step)) if step >= 1 else 1
    n = math.ceil(high / step - 1e-9)
    return [i * step for i in range(n + 1)]


def log_ticks(low: float, high: float) -> list[float]:
    """1, 2, 5, 10, 20, 50 … covering low..high (for depth axes spanning orders of magnitude)."""
    ticks = []
    decade = 10 ** math.floor(math.log10(max(low, 1)))
    while decade <= high * 10:
        for m in (1, 2, 5):
            value = m * decade
            if low <= value <= high * 1.0001 or (not ticks and value >= low):
                ticks.append(value)
        decade *= 10
    return [t for t in ticks if t <= high * 1.0001] or [low, high]


def _number(value: float) -> str:
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.1f}"


def _svg(title: str, description: str, body: list[str], *, ident: str, frame: Frame) -> SafeString:
    return svg_document(
        title, description, body, ident=ident, width=frame.width_total, height=frame.height_total
    )


def _y_axis(frame: Frame, ticks: list[float], to_y, label: str) -> list[str]:
    parts = []
    for tick in ticks:
        y = to_y(tick)
        parts.append(
            f'<line x1="{frame.left}" x2="{frame.right}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="{GRID}" stroke-width="1" class="grid"/>'
            f'<text x="{frame.left - 8}" y="{y + 4:.1f}" text-anchor="end">{_number(tick)}</text>'
        )
    middle = frame.top + frame.height / 2
    parts.append(
        f'<text x="16" y="{middle:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {middle:.1f})" class="axis-label">{escape(label)}</text>'
        f'<line x1="{frame.left}" x2="{frame.left}" y1="{frame.top}" y2="{frame.bottom}" '
        f'stroke="{AXIS}" stroke-width="1"/>'
        f'<line x1="{frame.left}" x2="{frame.right}" y1="{frame.bottom}" y2="{frame.bottom}" '
        f'stroke="{AXIS}" stroke-width="1"/>'
    )
    return parts


def _legend(
    frame: Frame, items: list[tuple[str, str, str]], *, width: float, row: bool = False
) -> list[str]:
    """items: (label, colour, kind) with kind "line", "dashed" or "box". Stacked at the top left of
    the plotting area on a white panel (so grid lines and data do not run through the text), or
    in one row above it (``row``: the frame leaves room at the top)."""
    x, y = frame.left + 12, frame.top + 14
    parts = []
    if row:
        x, y = frame.left, 14
    else:
        parts.append(
            f'<rect x="{x - 6}" y="{y - 13}" width="{width:g}" height="{18 * len(items) + 6}" '
            f'fill="#ffffff" fill-opacity="0.9" stroke="{GRID}" rx="4"/>'
        )
    for label, colour, kind in items:
        if kind == "box":
            parts.append(
                f'<rect x="{x}" y="{y - 8}" width="16" height="10" fill="{colour}" '
                f'stroke="{AXIS}" stroke-width="0.5"/>'
            )
        else:
            dash = ' stroke-dasharray="6 4"' if kind == "dashed" else ""
            parts.append(
                f'<line x1="{x}" x2="{x + 16}" y1="{y - 3}" y2="{y - 3}" stroke="{colour}" '
                f'stroke-width="2.5"{dash}/>'
            )
        parts.append(f'<text x="{x + 22}" y="{y + 1}" class="legend">{escape(label)}</text>')
        if row:
            x += 22 + 7 * len(label) + 18
        else:
            y += 18
    return parts


# --- The depth planner's plot ---------------------------------------------------------------------


def depth_plot(rows: Sequence[PlannerRow], *, runs: int, topics: int) -> SafeString | None:
    """Documents to judge per topic against pool depth, beside runs x k (what the runs propose,
    the work if they never overlapped): the shape of seed 000's Cranfield figure, right panel.

    The pool's mean per topic is a line over a band from the smallest to the largest topic. The
    depth axis is linear up to 200 and logarithmic beyond. None when there is nothing to plot.
    """
    rows = sorted(rows, key=lambda r: r.depth)
    if not rows or topics == 0:
        return None
    frame = Frame()
    depths = [r.depth for r in rows]
    proposals = [
        (r.total_docs / r.share_of_runs_x_k / topics) if r.share_of_runs_x_k else runs * r.depth
        for r in rows
    ]
    high_y = max([*proposals, *(r.docs_per_topic_max for r in rows)], default=1)
    y_ticks = nice_ticks(high_y)
    logarithmic = depths[-1] > 200 and depths[-1] / depths[0] >= 50
    if logarithmic:
        low_x, high_x = depths[0], depths[-1]
        x_ticks = log_ticks(low_x, high_x)

        def to_x(depth: float) -> float:
            span = math.log10(high_x) - math.log10(low_x) or 1
            return frame.left + (math.log10(depth) - math.log10(low_x)) / span * frame.width

    else:
        x_ticks = nice_ticks(depths[-1], count=5)

        def to_x(depth: float) -> float:
            return frame.left + depth / x_ticks[-1] * frame.width

    def to_y(value: float) -> float:
        return frame.bottom - value / y_ticks[-1] * frame.height

    body = _y_axis(frame, y_ticks, to_y, "Documents per topic")
    for tick in x_ticks:
        x = to_x(tick)
        body.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.bottom}" y2="{frame.bottom + 5}" '
            f'stroke="{AXIS}" stroke-width="1"/>'
            f'<text x="{x:.1f}" y="{frame.bottom + 20}" text-anchor="middle">{_number(tick)}</text>'
        )
    body.append(
        f'<text x="{frame.left + frame.width / 2:.1f}" y="{frame.height_total - 10}" '
        f'text-anchor="middle" '
        f'class="axis-label">Pool depth k{" (log scale)" if logarithmic else ""}</text>'
    )
    # Band: smallest to largest topic.
    upper = [f"{to_x(r.depth):.1f},{to_y(r.docs_per_topic_max):.1f}" for r in rows]
    lower = [f"{to_x(r.depth):.1f},{to_y(r.docs_per_topic_min):.1f}" for r in reversed(rows)]
    body.append(
        f'<polygon points="{" ".join(upper + lower)}" fill="{BAND}" stroke="none" class="band"/>'
    )
    reference = " ".join(
        f"{to_x(d):.1f},{to_y(p):.1f}" for d, p in zip(depths, proposals, strict=True)
    )
    body.append(
        f'<polyline points="{reference}" fill="none" stroke="{REFERENCE}" stroke-width="2" '
        f'stroke-dasharray="6 4" class="series-reference"/>'
    )
    mean = " ".join(f"{to_x(r.depth):.1f},{to_y(r.docs_per_topic_mean):.1f}" for r in rows)
    body.append(
        f'<polyline points="{mean}" fill="none" stroke="{ACCENT}" stroke-width="2.5" '
        f'class="series-pool"/>'
    )
    for row, proposed in zip(rows, proposals, strict=True):
        x = to_x(row.depth)
        body.append(
            f'<circle cx="{x:.1f}" cy="{to_y(proposed):.1f}" r="3" fill="{REFERENCE}">'
            f"<title>k = {row.depth}: runs {TIMES} k = {_number(round(proposed, 1))} "
            f"per topic</title></circle>"
            f'<circle cx="{x:.1f}" cy="{to_y(row.docs_per_topic_mean):.1f}" r="4" fill="{ACCENT}">'
            f"<title>k = {row.depth}: {row.docs_per_topic_mean:,.1f} documents per topic "
            f"({row.docs_per_topic_min:,}{EN_DASH}{row.docs_per_topic_max:,}), "
            f"{row.share_of_runs_x_k:.0%} of runs {TIMES} k</title></circle>"
        )
    body += _legend(
        frame,
        [
            ("Pool: documents to judge per topic (mean)", ACCENT, "line"),
            ("Smallest to largest topic", BAND, "box"),
            (f"Runs {TIMES} k ({runs} runs, if they never overlapped)", REFERENCE, "dashed"),
        ],
        width=300,
    )
    last = rows[-1]
    description = (
        f"Over {topics} topics and {runs} runs, the pool grows from "
        f"{rows[0].docs_per_topic_mean:,.1f} documents per topic at depth {rows[0].depth} to "
        f"{last.docs_per_topic_mean:,.1f} at depth {last.depth}, "
        f"{last.share_of_runs_x_k:.0%} of the {proposals[-1]:,.0f} that runs {TIMES} k would need. "
        + " ".join(f"k={r.depth}: {r.docs_per_topic_mean:,.1f} per topic." for r in rows)
    )
    return _svg(
        "Documents to judge per topic against pool depth",
        description,
        body,
        ident="depth-plot",
        frame=frame,
    )


# --- A pool's judging progress --------------------------------------------------------------------


@dataclass(frozen=True)
class TopicBar:
    topic_id: str
    to_judge: int
    judged: int
    relevant: int


def progress_plot(bars: Sequence[TopicBar]) -> SafeString | None:
    """Per topic, in topic order: documents to judge, judged so far and judged relevant, as three
    overlaid bars. None without topics."""
    if not bars:
        return None
    # Narrower than the planner's plot: it sits in half a page and its labels must stay legible.
    frame = Frame(width_total=480, height_total=300, left=52, top=34, bottom_margin=64)
    y_ticks = nice_ticks(max((b.to_judge for b in bars), default=1))
    slot = frame.width / len(bars)
    gap = min(2.0, slot * 0.2)

    def to_y(value: float) -> float:
        return frame.bottom - value / y_ticks[-1] * frame.height

    body = _y_axis(frame, y_ticks, to_y, "Documents")
    every = max(1, math.ceil(len(bars) / 24))
    for index, bar in enumerate(bars):
        x = frame.left + index * slot + gap / 2
        width = max(0.5, slot - gap)
        title = (
            f"Topic {bar.topic_id}: {bar.judged:,} of {bar.to_judge:,} judged, "
            f"{bar.relevant:,} relevant"
        )
        body.append(f"<g><title>{escape(title)}</title>")
        for value, colour in ((bar.to_judge, BAND), (bar.judged, ACCENT), (bar.relevant, OK)):
            if value:
                y = to_y(value)
                body.append(
                    f'<rect x="{x:.2f}" y="{y:.1f}" width="{width:.2f}" '
                    f'height="{frame.bottom - y:.1f}" fill="{colour}"/>'
                )
        body.append("</g>")
        if index % every == 0:
            cx = x + width / 2
            label = escape(bar.topic_id if len(bar.topic_id) <= 10 else bar.topic_id[:9] + "…")
            body.append(
                f'<text x="{cx:.1f}" y="{frame.bottom + 12}" text-anchor="end" '
                f'transform="rotate(-45 {cx:.1f} {frame.bottom + 12})">{label}</text>'
            )
    body.append(
        f'<text x="{frame.left + frame.width / 2:.1f}" y="{frame.height_total - 6}" '
        f'text-anchor="middle" '
        f'class="axis-label">Topic</text>'
    )
    body += _legend(
        frame,
        [("To judge", BAND, "box"), ("Judged", ACCENT, "box"), ("Judged relevant", OK, "box")],
        width=0,
        row=True,
    )
    to_judge = sum(b.to_judge for b in bars)
    judged = sum(b.judged for b in bars)
    relevant = sum(b.relevant for b in bars)
    done = sum(1 for b in bars if b.judged >= b.to_judge)
    description = (
        f"{judged:,} of {to_judge:,} documents judged over {len(bars)} topics "
        f"({done} complete), {relevant:,} judged relevant."
    )
    return _svg("Judging progress per topic", description, body, ident="progress-plot", frame=frame)


# --- Adaptive orders compared ---------------------------------------------------------------------

ORDER_COLOURS = {"depth": REFERENCE, "random": AXIS, "mtf": OK, "bandit": ACCENT}
ORDER_NAMES = {
    "depth": "Depth-k",
    "random": "Shuffled",
    "mtf": "Move-to-front",
    "bandit": "Bandit",
}


def gain_plot(
    curves: dict[str, Sequence[tuple[int, float]]], *, target: float
) -> SafeString | None:
    """Share of the relevant documents found against judgments made (summed over topics), one
    line per order, with the recall target as a dashed line. None when there is nothing to plot."""
    curves = {order: points for order, points in curves.items() if points}
    if not curves:
        return None
    frame = Frame(top=36)  # the legend runs in one row above the plot, clear of the curves
    high_x = max(points[-1][0] for points in curves.values()) or 1
    x_ticks = nice_ticks(high_x)
    y_ticks = [0, 25, 50, 75, 100]

    def to_x(value: float) -> float:
        return frame.left + value / x_ticks[-1] * frame.width

    def to_y(share: float) -> float:
        return frame.bottom - share * frame.height

    body = _y_axis(frame, y_ticks, lambda tick: to_y(tick / 100), "Relevant found (%)")
    for tick in x_ticks:
        x = to_x(tick)
        body.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.bottom}" y2="{frame.bottom + 5}" '
            f'stroke="{AXIS}" stroke-width="1"/>'
            f'<text x="{x:.1f}" y="{frame.bottom + 20}" text-anchor="middle">{_number(tick)}</text>'
        )
    body.append(
        f'<text x="{frame.left + frame.width / 2:.1f}" y="{frame.height_total - 10}" '
        f'text-anchor="middle" class="axis-label">Judgments (all topics)</text>'
        f'<line x1="{frame.left}" x2="{frame.right}" y1="{to_y(target):.1f}" '
        f'y2="{to_y(target):.1f}" stroke="{AXIS}" stroke-width="1" stroke-dasharray="4 4"/>'
    )
    legend = []
    words = []
    for order, points in curves.items():
        colour = ORDER_COLOURS.get(order, ACCENT)
        line = " ".join(f"{to_x(x):.1f},{to_y(y):.1f}" for x, y in points)
        body.append(
            f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2.5" '
            f'class="series-{escape(order)}"/>'
        )
        name = ORDER_NAMES.get(order, order)
        legend.append((name, colour, "line"))
        reached = next((x for x, y in points if y >= target), None)
        words.append(
            f"{name}: {target:.0%} after {reached:,} judgments."
            if reached is not None
            else f"{name}: never reaches {target:.0%}."
        )
    body += _legend(frame, legend, width=0, row=True)
    return _svg(
        "Relevant documents found against judgments, per judging order",
        " ".join(words),
        body,
        ident="gain-plot",
        frame=frame,
    )
