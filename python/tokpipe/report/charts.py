"""Small static SVG charts for the report and ``tokpipe stats --plot``: no library, no script.

- :func:`histogram`: bars of one or more series over shared bins (kept against rejected,
  documents against tokens), with y ticks, x ticks (powers of ten on a log axis), vertical
  lines for thresholds and percentiles, and a hover title per bar.
- :func:`funnel`: one horizontal bar per stage, the kept share.
- :func:`columns`: a bar per category (duplicate cluster sizes).
- :func:`line_chart`: one line of points per series over a shared x axis, linear or log
  (``tokpipe eval-tokenizer --train``: compression against vocabulary size, per language).
- :func:`bin_edges`: shared bins for several arrays, log-spaced where values span orders of
  magnitude.

Text sits in reserved margins (tick labels left and below, line labels on staggered rows
above the plot), so labels never overlap the bars or each other's rows.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Series", "Line", "Curve", "PALETTE", "histogram", "funnel", "columns", "line_chart", "bin_edges",
           "nice_ticks", "compact"]

KEPT, REJECTED, THRESHOLD, MARK = "#3b6fb6", "#e07b39", "#c62828", "#555555"
#: Colours of the series of a :func:`line_chart`, in order (then again from the first).
PALETTE = (KEPT, REJECTED, "#2e7d32", "#8e44ad", "#c62828", "#00838f", "#6d4c41", "#ad1457", MARK, "#9e9d24")


@dataclass
class Series:
    """One set of bars: a value per bin (``len(edges) - 1``), drawn in ``color``."""

    label: str
    values: Sequence[float]
    color: str = KEPT


@dataclass
class Line:
    """A vertical line at ``x``: a threshold (solid red) or a mark (dashed grey)."""

    x: float
    label: str
    threshold: bool = True


def compact(value: float) -> str:
    """``1234567`` as ``1.2M``: short tick labels."""
    magnitude = abs(value)
    for size, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}" if value != int(value) else f"{int(value)}"


def nice_ticks(high: float, count: int = 4) -> list[float]:
    """0 and round steps (1, 2 or 5 times a power of ten) up to at least ``high``."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(math.ceil(high / step - 1e-9)) + 1)]


def bin_edges(arrays: Sequence[np.ndarray], bins: int = 30, log: bool | None = None,
              integer: bool = False, include: Sequence[float] = ()) -> tuple[np.ndarray, bool]:
    """Bins shared by ``arrays`` and whether they are log-spaced (chosen when ``log`` is None:
    non-negative values spanning more than two orders of magnitude). The range stretches to
    take in the values of ``include`` (thresholds) that lie within ten times its span, so a
    threshold near the data is drawn on the axis."""
    values = [a[np.isfinite(a)] for a in arrays if len(a)]
    values = [a for a in values if len(a)]
    if not values:
        return np.array([0.0, 1.0]), False
    low = min(float(a.min()) for a in values)
    high = max(float(a.max()) for a in values)
    span = max(high - low, abs(high), 1e-9)
    for extra in include:
        if high < extra and (extra <= high + 10 * span if low < 0 or high <= 0 else extra <= high * 10):
            high = extra
        elif extra < low and (extra >= low - 10 * span if extra <= 0 else extra >= low / 10):
            low = extra
    values.append(np.array([low, high]))
    positive = [a[a > 0] for a in values]
    low_positive = min((float(a.min()) for a in positive if len(a)), default=1.0)
    if log is None:
        log = low >= 0 and high > 0 and high / low_positive > 100
    if log:
        low_edge = max(low_positive, 1.0) if integer else low_positive
        edges = np.geomspace(low_edge, max(high, low_edge) * 1.0001, bins + 1)
        if integer:
            edges = np.unique(np.ceil(edges))
            if len(edges) < 2:
                edges = np.array([low_edge, low_edge + 1])
        return edges, True
    if high == low:
        high = low + 1
    if integer and high - low + 1 <= bins:
        return np.arange(math.floor(low), math.floor(high) + 2, dtype=np.float64), False
    return np.linspace(low, high * (1 + 1e-9) if high > 0 else high + 1e-9, bins + 1), False


def _x_ticks(low: float, high: float, log: bool) -> list[float]:
    if log:
        first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
        decades = [10.0 ** p for p in range(first, last + 1)]
        ticks = [t for t in decades if low <= t <= high]
        if len(ticks) < 3:
            ticks = sorted({t * m for t in decades for m in (1, 2, 5) if low <= t * m <= high})
        return ticks
    step_ticks = nice_ticks(high - low, 5)
    step = step_ticks[1] - step_ticks[0]
    start = math.ceil(low / step) * step
    return [start + i * step for i in range(int((high - start) / step) + 1)]


def histogram(series: Sequence[Series], edges: np.ndarray, log: bool, *, x_label: str, y_label: str,
              lines: Sequence[Line] = (), percent: bool = False, width: int = 560, height: int = 260) -> str:
    """An SVG histogram; ``percent`` labels the y axis in percent (values are shares)."""
    left, right, bottom = 62, 16, 48
    plot_w = width - left - right
    low, high = float(edges[0]), float(edges[-1])

    def x_of(value: float) -> float:
        value = min(max(value, low), high)
        if log:
            return left + plot_w * (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))
        return left + plot_w * (value - low) / (high - low)

    labels = _place_labels(lines, x_of, left, width - right, (low, high))
    top = 14 + 13 * (max((row for *_, row in labels), default=-1) + 1)
    plot_h = height - top - bottom
    peak = max((float(max(s.values, default=0)) for s in series), default=0.0)
    ticks = nice_ticks(peak)
    top_value = ticks[-1] or 1.0

    def y_of(value: float) -> float:
        return top + plot_h * (1 - value / top_value)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart histogram" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="11">']
    for tick in ticks:
        y = y_of(tick)
        label = f"{tick * 100:.3g}%" if percent else compact(tick)
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#333">{label}</text>')
    for s in series:
        for i, value in enumerate(s.values):
            if value <= 0:
                continue
            x0, x1 = x_of(float(edges[i])), x_of(float(edges[i + 1]))
            y = y_of(float(value))
            shown = f"{value * 100:.2f}%" if percent else f"{value:,.0f}"
            out.append(f'<rect x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0 - 0.5, 0.8):.1f}" '
                       f'height="{top + plot_h - y:.1f}" fill="{s.color}" fill-opacity="0.6">'
                       f'<title>{html.escape(s.label)}: {float(edges[i]):,.4g} to {float(edges[i + 1]):,.4g}: '
                       f'{shown}</title></rect>')
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#333"/>')
    for tick in _x_ticks(low, high, log):
        x = x_of(tick)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + plot_h}" y2="{top + plot_h + 4}" stroke="#333"/>'
                   f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" fill="#333">{compact(tick)}</text>')
    for line, text, anchor, row in labels:
        x = x_of(line.x)
        color = THRESHOLD if line.threshold else MARK
        dash = "" if line.threshold else ' stroke-dasharray="4 3"'
        label_y = 11 + 13 * row
        dx = -3 if anchor == "end" else 3
        out.append(f'<line class="{"threshold" if line.threshold else "mark"}" x1="{x:.1f}" x2="{x:.1f}" '
                   f'y1="{label_y + 2}" y2="{top + plot_h}" stroke="{color}" stroke-width="1.5"{dash}/>'
                   f'<text x="{x + dx:.1f}" y="{label_y}" text-anchor="{anchor}" fill="{color}">'
                   f'{html.escape(text)}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="#111">'
               f'{html.escape(x_label)}{" (log scale)" if log else ""}</text>')
    out.append(f'<text transform="translate(13 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle" '
               f'fill="#111">{html.escape(y_label)}</text>')
    out.append("</svg>")
    return "".join(out)


#: Width of a character of the 11 px sans-serif labels, a little generous (DejaVu Sans's digits
#: are 7 px at 11 px; the estimate only has to keep labels apart).
CHAR_W = 6.8


def _place_labels(lines: Sequence[Line], x_of: Callable[[float], float], low_x: float, high_x: float,
                  span: tuple[float, float]) -> list[tuple[Line, str, str, int]]:
    """Each line's label text, anchor and row above the plot. A line runs down from its
    label's row, so a label takes the first row where it clears the labels already in that
    row and every line that starts in a row above; and its own line must not cross a label
    already placed lower down. So no label overlaps another or is crossed by a line."""
    placed: list[tuple[float, float, float, int]] = []  # label start, end, line x, row
    out = []
    # Right to left: a label then tends to sit left of its line, below the labels of the lines
    # to its right, a staircase in which no line crosses a label.
    for line in sorted(lines, key=lambda item: -item.x):
        x = x_of(line.x)
        outside = not span[0] <= line.x <= span[1]
        text = f"{line.label} {compact(line.x)}" + (" (off the axis)" if outside else "")
        width = len(text) * CHAR_W
        # Right of the line where the label fits in the chart, else left of it.
        sides = [(anchor, start) for anchor, start in (("start", x + 3), ("end", x - 3 - width))
                 if start >= 0 and start + width <= high_x] or [("end", max(x - 3 - width, 0.0))]

        def clear(start: float, row: int, strict: bool) -> bool:
            end = start + width
            return all((r != row or start > b + 6 or end + 6 < a)  # the labels of this row
                       and (not strict or r >= row or not start - 2 <= lx <= end + 2)  # lines from rows above
                       and (not strict or r <= row or not a - 2 <= x <= b + 2)  # labels below, on this line
                       for a, b, lx, r in placed)

        # Lines crossing no label where possible; else labels clear of each other at least.
        choice = next(((row, anchor, max(start, 0.0)) for strict in (True, False) for row in range(len(lines) + 1)
                       for anchor, start in sides if clear(max(start, 0.0), row, strict)))
        row, anchor, start = choice
        end = start + width
        placed.append((start, end, x, row))
        out.append((line, text, anchor, row))
    return out


def funnel(rows: Sequence[tuple[str, int, int]], width: int = 720) -> str:
    """One bar per ``(stage, documents in, kept)``: kept in blue, dropped in orange, scaled to
    the first stage's input, with the kept count and share written after the bar."""
    label_w, text_w, row_h = 150, 190, 26
    bar_w = width - label_w - text_w
    total = max((r[1] for r in rows[:1]), default=0) or 1
    height = row_h * len(rows) + 8
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart funnel" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="12">']
    for n, (stage, documents_in, kept) in enumerate(rows):
        y = 4 + n * row_h
        kept_w, in_w = bar_w * kept / total, bar_w * documents_in / total
        out.append(f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end" fill="#111">{html.escape(stage)}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 3}" width="{max(in_w, 0.5):.1f}" height="{row_h - 8}" '
                   f'fill="{REJECTED}" fill-opacity="0.45"><title>{html.escape(stage)}: {documents_in:,} in, '
                   f'{documents_in - kept:,} dropped</title></rect>')
        out.append(f'<rect x="{label_w}" y="{y + 3}" width="{max(kept_w, 0.5):.1f}" height="{row_h - 8}" '
                   f'fill="{KEPT}"><title>{html.escape(stage)}: {kept:,} kept</title></rect>')
        out.append(f'<text x="{label_w + bar_w + 8}" y="{y + 16}" fill="#111">{kept:,} ({kept / total:.1%})</text>')
    out.append("</svg>")
    return "".join(out)


def columns(labels: Sequence[str], values: Sequence[float], *, x_label: str, y_label: str, width: int = 560,
            height: int = 220) -> str:
    """A bar per category, labelled below, with y ticks."""
    left, right, top, bottom = 62, 16, 12, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    ticks = nice_ticks(max(values, default=0))
    top_value = ticks[-1] or 1.0
    step = plot_w / max(len(values), 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart columns" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="11">']
    for tick in ticks:
        y = top + plot_h * (1 - tick / top_value)
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#333">{compact(tick)}</text>')
    for i, (label, value) in enumerate(zip(labels, values)):
        h = plot_h * value / top_value
        x = left + i * step
        out.append(f'<rect x="{x + step * 0.15:.1f}" y="{top + plot_h - h:.1f}" width="{step * 0.7:.1f}" '
                   f'height="{h:.1f}" fill="{KEPT}"><title>{html.escape(label)}: {value:,.0f}</title></rect>'
                   f'<text x="{x + step / 2:.1f}" y="{top + plot_h + 15}" text-anchor="middle" fill="#333">'
                   f'{html.escape(label)}</text>')
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#333"/>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" fill="#111">'
               f'{html.escape(x_label)}</text>')
    out.append(f'<text transform="translate(13 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle" '
               f'fill="#111">{html.escape(y_label)}</text>')
    out.append("</svg>")
    return "".join(out)


@dataclass
class Curve:
    """One line of a :func:`line_chart`: ``(x, y)`` points, drawn in ``color``."""

    label: str
    points: Sequence[tuple[float, float]]
    color: str = KEPT


def line_chart(curves: Sequence[Curve], *, x_label: str, y_label: str, log_x: bool = False, percent: bool = False,
               x_ticks: Sequence[float] | None = None, width: int = 560, height: int = 260) -> str:
    """An SVG line chart: each curve's points joined by a line and marked by a dot with a
    hover title; y from 0; x ticks at ``x_ticks`` (the data's x values when None), those that
    would crowd the one before left unlabelled. The legend is the caller's (HTML beside the
    chart), so no label can fall on a line."""
    left, right, top, bottom = 62, 24, 14, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = sorted({float(x) for c in curves for x, _ in c.points if not log_x or x > 0})
    ticks = sorted({float(t) for t in (x_ticks if x_ticks is not None else xs) if not log_x or t > 0})
    low, high = (min(xs + ticks), max(xs + ticks)) if xs or ticks else (1.0, 10.0)
    if log_x:
        low, high = low / 1.15, high * 1.15
    else:
        pad = (high - low) * 0.04 or 1.0
        low, high = low - pad, high + pad

    def x_of(value: float) -> float:
        if log_x:
            return left + plot_w * (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))
        return left + plot_w * (value - low) / (high - low)

    peak = max((float(y) for c in curves for _, y in c.points if math.isfinite(y)), default=0.0)
    y_ticks = nice_ticks(peak)
    top_value = y_ticks[-1] or 1.0

    def y_of(value: float) -> float:
        return top + plot_h * (1 - value / top_value)

    def shown(value: float) -> str:
        return f"{value * 100:.3g}%" if percent else compact(value)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart lines" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="11">']
    for tick in y_ticks:
        y = y_of(tick)
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#333">{shown(tick)}</text>')
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#333"/>')
    last_end = -math.inf
    for tick in ticks:
        x = x_of(tick)
        label = compact(tick)
        half = len(label) * CHAR_W / 2
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + plot_h}" y2="{top + plot_h + 4}" stroke="#333"/>')
        if x - half > last_end + 6 and x + half <= width:
            out.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" fill="#333">{label}</text>')
            last_end = x + half
    for curve in curves:
        points = [(float(x), float(y)) for x, y in curve.points if (not log_x or x > 0) and math.isfinite(y)]
        if len(points) > 1:
            path = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{curve.color}" stroke-width="2"/>')
        for x, y in points:
            out.append(f'<circle cx="{x_of(x):.1f}" cy="{y_of(y):.1f}" r="3.5" fill="{curve.color}">'
                       f'<title>{html.escape(curve.label)}: {compact(x)}: {shown(y)}</title></circle>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="#111">'
               f'{html.escape(x_label)}{" (log scale)" if log_x else ""}</text>')
    out.append(f'<text transform="translate(13 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle" '
               f'fill="#111">{html.escape(y_label)}</text>')
    out.append("</svg>")
    return "".join(out)
