"""Bar charts for the data report written directly as SVG text.

matplotlib's SVG canvas is slow per plot (and slow to import): drawn with it, the report of a wide table
took longer than every stage of a mid-sized run together. The report's most common plots are plain bar
charts (number histograms, token and stage bars), so they are drawn here with a few ``<rect>``,
``<line>`` and ``<text>`` elements, a small fraction of the cost. Same inputs, same bytes: coordinates are
rounded to 0.1 px and numbers printed with ``:g`` formats. Text is escaped; the page's font applies.
"""

from __future__ import annotations

import bisect
import math
from html import escape

PX = 96  # pixels per inch: sizes are given in inches like the matplotlib plots
FONT = 12
GRID = "#E5E5E5"
AXIS = "#444444"
MARK = "#C44E52"  # marked values (mean, fill value) and their legend
LEGEND_ROW = 16  # px above a plotting area for its legend
LEGEND_CHAR = 6.5  # px per character of a legend label at FONT - 2


def _n(x: float) -> str:
    return f"{round(x, 1):g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round values (steps of 1, 2 or 5 x 10^k) covering ``[lo, hi]``."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    if not (raw > 0 and math.isfinite(raw)):  # a range too narrow (or too wide) for a float step
        return [lo]
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= hi + step * 1e-9:
        ticks.append(round(k * step, 12))
        k += 1
    return ticks


def _label(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e12 else f"{x:.4g}"


class Chart:
    """One SVG of ``width`` x ``height`` inches holding panels side by side."""

    def __init__(self, width: float, height: float, plot_id: str):
        self.width, self.height, self.plot_id = width * PX, height * PX, plot_id
        self.parts: list[str] = []

    def text(self, x: float, y: float, s: str, anchor: str = "middle", size: int = FONT, **attrs: str) -> None:
        extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
        self.parts.append(f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}" font-size="{size}"{extra}>'
                          f"{escape(str(s))}</text>")

    def line(self, x1: float, y1: float, x2: float, y2: float, color: str = AXIS, width: float = 1.0,
             dash: str | None = None) -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" stroke="{color}" '
                          f'stroke-width="{width:g}"{d}/>')

    def rect(self, x: float, y: float, w: float, h: float, color: str) -> None:
        self.parts.append(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(max(w, 0.0))}" height="{_n(max(h, 0.0))}" '
                          f'fill="{color}" stroke="white" stroke-width="0.5"/>')

    def svg(self) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(self.width)}" '
                f'height="{_n(self.height)}" viewBox="0 0 {_n(self.width)} {_n(self.height)}" '
                f'font-family="sans-serif">' + "".join(self.parts) + "</svg>")


class Box:
    """A panel's plotting area (pixels) with linear x and y scales."""

    def __init__(self, chart: Chart, left: float, top: float, width: float, height: float,
                 x_range: tuple[float, float], y_range: tuple[float, float], x_starts: list[float] | None = None):
        """``x_starts``: bucket starts drawn equally wide (a logarithmic axis for logarithmic buckets); x maps
        linearly within each bucket and the x ticks are some of the starts."""
        self.c, self.left, self.top, self.w, self.h = chart, left, top, width, height
        self.x0, self.x1 = x_range
        self.y0, self.y1 = y_range
        self.x_starts = x_starts if x_starts is not None and len(x_starts) >= 2 else None

    def x(self, v: float) -> float:
        if self.x_starts is not None:
            return self.left + self._position(v) / (len(self.x_starts) - 1) * self.w
        span = (self.x1 - self.x0) or 1.0
        return self.left + (v - self.x0) / span * self.w

    def _position(self, v: float) -> float:
        """``v``'s position in bucket units (0 at the first start), clamped to the buckets."""
        s = self.x_starts
        i = min(max(bisect.bisect_right(s, v) - 1, 0), len(s) - 2)
        width = s[i + 1] - s[i]
        return min(max(i + ((v - s[i]) / width if width > 0 else 0.0), 0.0), len(s) - 1.0)

    def y(self, v: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.top + self.h - (v - self.y0) / span * self.h

    def frame(self, title: str, xlabel: str | None = None, ylabel: str | None = None, grid: str = "y",
              x_ticks: bool = True, title_top: float | None = None) -> None:
        """Axes, title, labels, and ticks with grid lines along ``grid`` ("y": horizontal lines at the
        y ticks; "x": vertical lines at the x ticks, no y ticks); ``x_ticks=False``: the caller labels x;
        the title sits just above ``title_top`` (default: the plotting area's top)."""
        c = self.c
        ticks_y = nice_ticks(self.y0, self.y1) if grid == "y" else []
        for t in ticks_y:
            c.line(self.left, self.y(t), self.left + self.w, self.y(t), GRID)
            c.text(self.left - 4, self.y(t) + 4, _label(t), anchor="end", size=FONT - 2)
        ticks_x = nice_ticks(self.x0, self.x1) if x_ticks and self.x_starts is None else []
        for t in ticks_x:
            if grid == "x":
                c.line(self.x(t), self.top, self.x(t), self.top + self.h, GRID)
            c.text(self.x(t), self.top + self.h + 14, _label(t), size=FONT - 2)
        if x_ticks and self.x_starts is not None:  # some bucket starts, evenly placed on the bucket axis
            last = len(self.x_starts) - 1
            for i in sorted({round(k * last / 5) for k in range(6)}):
                c.text(self.x(self.x_starts[i]), self.top + self.h + 14, f"{self.x_starts[i]:.3g}", size=FONT - 2)
        c.line(self.left, self.top + self.h, self.left + self.w, self.top + self.h)
        c.line(self.left, self.top, self.left, self.top + self.h)
        c.text(self.left + self.w / 2, (self.top if title_top is None else title_top) - 8, title, size=FONT + 1)
        if xlabel:
            c.text(self.left + self.w / 2, self.top + self.h + 30, xlabel, size=FONT - 1)
        if ylabel:
            cx, cy = self.left - 42, self.top + self.h / 2
            c.text(cx, cy, ylabel, size=FONT - 1, transform=f"rotate(-90 {_n(cx)} {_n(cy)})")


def histogram(chart: Chart, left: float, top: float, width: float, height: float, starts: list[float],
              counts: list[int], color: str, title: str, ylabel: str | None = None,
              marks: list[tuple[str, float, str]] = (), thin_lines: list[float] = (),
              title_top: float | None = None, log_axis: bool = False) -> None:
    """Bars over ``[starts[i], starts[i + 1])`` of height ``counts[i]``; ``marks``: labelled vertical
    lines ``(label, x, dash)``, named in a legend row above the plotting area (no bar reaches it);
    ``thin_lines``: unlabelled vertical lines; ``title_top``: see ``Box.frame``; ``log_axis``: every bucket
    drawn equally wide (``Box``'s ``x_starts``: logarithmic buckets on a logarithmic axis)."""
    if len(starts) < 2:
        Box(chart, left, top, width, height, (0.0, 1.0), (0.0, 1.0)).frame(title, ylabel=ylabel, title_top=title_top)
        return
    row = LEGEND_ROW if marks else 0.0
    xs = [*starts, *(x for _label, x, _dash in marks), *thin_lines]
    box = Box(chart, left, top + row, width, height - row, (min(xs), max(xs)),
              (0.0, max(max(counts, default=0), 1) * 1.05), x_starts=list(starts) if log_axis else None)
    box.frame(title, ylabel=ylabel, title_top=top if title_top is None else title_top)
    for lo, hi, n in zip(starts[:-1], starts[1:], counts, strict=False):
        box.c.rect(box.x(lo), box.y(n), box.x(hi) - box.x(lo), box.y(0) - box.y(n), color)
    for x in thin_lines:
        box.c.line(box.x(x), box.top, box.x(x), box.top + box.h, "#555555", 0.6)
    for _label, x, dash in marks:
        box.c.line(box.x(x), box.top, box.x(x), box.top + box.h, MARK, 1.2, dash)
    if marks:
        legend(chart, left + 6, top, [(f"{label} {x:.4g}", dash) for label, x, dash in marks])


def legend(chart: Chart, left: float, top: float, items: list[tuple[str, str]]) -> None:
    """One row of ``(label, dash)`` entries from ``left``, each a line sample then its label, in a
    ``<g class="legend">`` within ``[top, top + LEGEND_ROW)``; label widths are estimated from their
    length (``LEGEND_CHAR`` px a character, more than a sans-serif digit or lower-case letter takes)."""
    chart.parts.append('<g class="legend">')
    x = left
    for label, dash in items:
        chart.line(x, top + LEGEND_ROW / 2, x + 18, top + LEGEND_ROW / 2, MARK, 1.2, dash)
        chart.text(x + 22, top + LEGEND_ROW / 2 + 3.5, label, anchor="start", size=FONT - 2, fill=MARK)
        x += 22 + LEGEND_CHAR * len(label) + 14
    chart.parts.append("</g>")


def columns(chart: Chart, left: float, top: float, width: float, height: float, counts: list[int], color: str,
            title: str, xlabel: str | None = None, title_top: float | None = None) -> None:
    """One bar per index 0..n-1 (e.g. quantile bin ids), every index labelled when they fit."""
    n = max(len(counts), 1)
    box = Box(chart, left, top, width, height, (-0.5, n - 0.5), (0.0, max(max(counts, default=0), 1) * 1.05))
    box.frame(title, xlabel=xlabel, x_ticks=False, title_top=title_top)
    every = max(1, math.ceil(n / 20))
    for i, count in enumerate(counts):
        chart.rect(box.x(i - 0.4), box.y(count), box.x(i + 0.4) - box.x(i - 0.4), box.y(0) - box.y(count), color)
        if i % every == 0:
            chart.text(box.x(i), top + height + 14, str(i), size=FONT - 2)


def horizontal_bars(plot_id: str, labels: list[str], values: list[float], colors: list[str], title: str | None,
                    xlabel: str, value_labels: list[str] | None = None, x_max: float | None = None) -> str:
    """One bar per label, the first label on top; ``value_labels`` written after each bar."""
    text_w = 18 + 7.5 * max((len(s) for s in labels), default=1)
    row = 22
    top = 30 if title else 12
    height = top + row * max(len(labels), 1) + 44
    chart = Chart(6.5, height / PX, plot_id)
    width = chart.width - text_w - 24
    hi = x_max if x_max is not None else max([*values, 0.0]) * (1.35 if value_labels else 1.05)
    box = Box(chart, text_w, top, width, row * max(len(labels), 1), (0.0, hi or 1.0), (0.0, 1.0))
    box.frame(title or "", xlabel=xlabel, grid="x")
    for i, (label, value, color) in enumerate(zip(labels, values, colors, strict=True)):
        y = top + i * row
        chart.rect(box.x(0), y + 3, box.x(value) - box.x(0), row - 6, color)
        chart.text(text_w - 6, y + row / 2 + 4, label, anchor="end", size=FONT - 1)
        if value_labels:
            chart.text(box.x(value) + 4, y + row / 2 + 4, value_labels[i], anchor="start", size=FONT - 3)
    return chart.svg()


def paired_columns(plot_id: str, labels: list[str], series: list[tuple[str, list[float], str]], title: str,
                   ylabel: str) -> str:
    """Grouped bars: one group per label, one bar per ``(name, values, color)`` of ``series`` side by side,
    every label written under its group (slanted when long), the series named in a legend row."""
    n = max(len(labels), 1)
    longest = max((len(s) for s in labels), default=1)
    slanted = longest * 6.5 > 560 / n
    bottom = 24 + (min(longest, 24) * 4.6 if slanted else 0)
    chart = Chart(6.5, (40 + 170 + bottom) / PX, plot_id)
    top, left = 40, 56
    box = Box(chart, left, top, chart.width - left - 16, 170, (-0.5, n - 0.5),
              (0.0, max([v for _name, values, _c in series for v in values] + [0.0]) * 1.1 or 1.0))
    box.frame(title, ylabel=ylabel, x_ticks=False, title_top=top - LEGEND_ROW)
    width = 0.8 / max(len(series), 1)
    for k, (_name, values, color) in enumerate(series):
        for i, v in enumerate(values):
            x = i - 0.4 + k * width
            chart.rect(box.x(x), box.y(v), box.x(x + width) - box.x(x), box.y(0) - box.y(v), color)
    for i, label in enumerate(labels):
        text = label if len(label) <= 24 else label[:23] + "…"
        if slanted:
            x, y = box.x(i), top + 170 + 12
            chart.text(x, y, text, anchor="end", size=FONT - 3, transform=f"rotate(-40 {_n(x)} {_n(y)})")
        else:
            chart.text(box.x(i), top + 170 + 14, text, size=FONT - 3)
    chart.parts.append('<g class="legend">')
    x = left + 6
    for name, _values, color in series:
        chart.rect(x, top - LEGEND_ROW + 3, 12, 10, color)
        chart.text(x + 16, top - LEGEND_ROW + 12, name, anchor="start", size=FONT - 2)
        x += 16 + LEGEND_CHAR * len(name) + 14
    chart.parts.append("</g>")
    return chart.svg()
