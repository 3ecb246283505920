"""Server-rendered SVG for the progress dashboard: judgments over time, one line per assessor.

No JavaScript and no ``style`` attributes (the CSP allows neither): shapes carry SVG presentation
attributes. The SVG is an ``role="img"`` with a title and a description that says in words what
it shows; the numbers are in the tables beside it.
"""

from __future__ import annotations

import math
from datetime import datetime

from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 720, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 14, 40
GRID, AXIS = "#e6e9ef", "#5b6475"
# Distinguishable for the common colour-vision deficiencies (Okabe-Ito, darkened for contrast on
# white); after eight, lines repeat the colours dashed.
COLOURS = ["#2d5bd3", "#d55e00", "#1f7a4d", "#b3478f", "#8a5a00", "#0072b2", "#6a3d9a", "#3c4352"]
DASHES = ["", "6 3", "2 3"]


def nice_step(high: float, count: int = 5) -> int:
    """A round step (1, 2, 5 times a power of ten) giving about ``count`` ticks up to ``high``."""
    if high <= count:
        return 1
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    return int(next(m * magnitude for m in (1, 2, 5, 10) if raw <= m * magnitude))


def _label(moment: datetime, bucket: str, *, with_day: bool) -> str:
    local = timezone.localtime(moment)
    if bucket == "day":
        return local.strftime("%d %b")
    return local.strftime("%d %b %H:%M" if with_day else "%H:%M")


def judgments_over_time(
    series: dict[str, list[tuple[datetime, int]]], *, bucket: str
) -> SafeString | None:
    """Cumulative judgments per assessor (``series`` as dashboard.cumulative_series gives it),
    or None when nobody has judged anything yet."""
    if not series:
        return None
    names = list(series)
    times = [t for t, _ in series[names[0]]]
    start, end = times[0], times[-1]
    span = max((end - start).total_seconds(), 1.0)
    high = max(count for points in series.values() for _, count in points) or 1
    step = nice_step(high)
    top_value = step * math.ceil(high / step)
    legend_rows = math.ceil(len(names) / 4)
    height = HEIGHT + 18 * (legend_rows - 1) + 4
    bottom = HEIGHT - BOTTOM
    plot_w, plot_h = WIDTH - LEFT - RIGHT, bottom - TOP

    def x(moment: datetime) -> float:
        return LEFT + plot_w * (moment - start).total_seconds() / span

    def y(value: float) -> float:
        return bottom - plot_h * value / top_value

    parts: list[str] = []
    for tick in range(0, top_value + 1, step):
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            f'stroke="{GRID}"/>'
            f'<text x="{LEFT - 8}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:,}</text>'
        )
    parts.append(
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{bottom}" stroke="{AXIS}"/>'
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{bottom}" y2="{bottom}" stroke="{AXIS}"/>'
    )
    # About six time labels, never overlapping: every k-th bucket edge (the last is "now").
    edges = times[:-1] or times
    every = max(1, math.ceil(len(edges) / 6))
    with_day = (
        bucket == "hour" and timezone.localtime(start).date() != timezone.localtime(end).date()
    )
    for index in range(0, len(edges), every):
        moment = edges[index]
        parts.append(
            f'<line x1="{x(moment):.1f}" x2="{x(moment):.1f}" y1="{bottom}" y2="{bottom + 4}" '
            f'stroke="{AXIS}"/>'
            f'<text x="{x(moment):.1f}" y="{bottom + 18}" '
            f'text-anchor="{"start" if index == 0 else "middle"}">'
            f"{escape(_label(moment, bucket, with_day=with_day and index == 0))}</text>"
        )
    for index, name in enumerate(names):
        colour = COLOURS[index % len(COLOURS)]
        dash = DASHES[(index // len(COLOURS)) % len(DASHES)]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        points = " ".join(f"{x(t):.1f},{y(c):.1f}" for t, c in series[name])
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2.5" '
            f'stroke-linejoin="round"{dash_attr}><title>{escape(name)}: '
            f"{series[name][-1][1]:,}</title></polyline>"
        )
        lx = LEFT + (index % 4) * (plot_w / 4)
        ly = HEIGHT - 6 + 18 * (index // 4)
        parts.append(
            f'<line x1="{lx:.1f}" x2="{lx + 22:.1f}" y1="{ly - 4}" y2="{ly - 4}" '
            f'stroke="{colour}" stroke-width="3"{dash_attr}/>'
            f'<text x="{lx + 28:.1f}" y="{ly}" class="legend">{escape(name)} '
            f"({series[name][-1][1]:,})</text>"
        )
    title = f"Judgments so far per assessor, by {bucket}"
    description = (
        f"Cumulative judgments from {_label(start, bucket, with_day=True)} to now: "
        + "; ".join(f"{name} {series[name][-1][1]:,}" for name in names)
        + "."
    )
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-labelledby="progress-plot-title" aria-describedby="progress-plot-desc" '
        f'class="plot-svg"><title id="progress-plot-title">{escape(title)}</title>'
        f'<desc id="progress-plot-desc">{escape(description)}</desc>'
    )
    # Every text placed in the SVG went through escape().
    return mark_safe(head + "".join(parts) + "</svg>")
