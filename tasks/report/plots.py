"""The plots of the data report (``tasks/report/page.py``). Plain bar charts (number histograms, token
and stage bars: most of a tabular report) are hand-written SVG (``tasks/report/svg.py``, much faster);
the others are drawn with matplotlib.

matplotlib is imported only here, when a report is built (it is slow to import). Figures are plain
``matplotlib.figure.Figure`` objects rendered by the Agg (PNG) and SVG canvases: no pyplot, so no
global figure state and no backend selection. Vector plots come back as inline ``<svg>`` text, the
same bytes for the same inputs (no date; ``svg.hashsalt`` is the plot's id, so the element ids of
two plots on one page never collide). Pixel data (image samples, spectrograms) come back as PNG
``data:`` URIs.
"""

from __future__ import annotations

import base64
import contextlib
import io

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.image import imsave

from tasks.report import svg as report_svg

SPLIT_COLORS = {"train": "#4C72B0", "validation": "#DD8452", "test": "#55A868"}
BEFORE_COLOR = "#A0A0A0"
MARK_COLOR = "#C44E52"
STYLE = {
    "font.size": 9, "axes.titlesize": 10, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "axes.grid.axis": "y", "grid.color": "#E5E5E5", "axes.axisbelow": True,
    "text.parse_math": False,  # a token like "$5" is text, not mathtext
    "svg.fonttype": "none",  # text stays text (the page's font), not glyph outlines
}
LABEL_CHARS = 28


@contextlib.contextmanager
def _style(plot_id: str):
    with matplotlib.rc_context({**STYLE, "svg.hashsalt": plot_id}):
        yield


def _figure(width: float, height: float, ncols: int = 1, left: float = 0.6, right: float = 0.2,
            top: float = 0.3, bottom: float = 0.45, gap: float = 0.7):
    """A figure with margins in inches (fixed margins: constrained layout costs more than drawing)."""

    fig = Figure(figsize=(width, height))
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    panel = (width - left - right - gap * (ncols - 1)) / ncols
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height,
                        wspace=gap / panel if ncols > 1 else 0.2)
    return fig, list(axes)


def _svg(fig) -> str:
    buf = io.BytesIO()
    FigureCanvasSVG(fig).print_svg(buf, metadata={"Date": None})
    text = buf.getvalue().decode("utf-8")
    return text[text.index("<svg"):]


def _png_uri(fig, dpi: int = 100) -> str:
    buf = io.BytesIO()
    FigureCanvasAgg(fig)  # the figure draws on Agg
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def short(label: str, limit: int = LABEL_CHARS) -> str:
    label = str(label)
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"


def number_histograms(plot_id: str, before: dict, after: dict, meta: dict) -> str:
    """Values as read (after the fill) and as published, side by side (hand-written SVG: ``report_svg``)."""

    chart = report_svg.Chart(9.0, 2.8, plot_id)
    panel_w, top, height = (chart.width - 80 - 60 - 20) / 2, 28, chart.height - 28 - 44
    marks = []
    if meta.get("mean") is not None:
        marks.append(("mean", float(meta["mean"]), "5,3"))
    fill = (meta.get("preprocessing") or {}).get("computed_fill_value")
    if isinstance(fill, (int, float)) and not isinstance(fill, bool) and fill != meta.get("mean"):
        marks.append(("fill value", float(fill), "2,2"))
    norm = meta.get("normalization", "none")
    edges = [float(e) for e in meta.get("bin_edges", [])[1:-1]] if norm == "bins" else []
    log_before, log_after = log_spaced(before["starts"]), log_spaced(after["starts"])
    report_svg.histogram(chart, 60, top, panel_w, height, before["starts"], before["counts"][1:-1], BEFORE_COLOR,
                         f"as read, after fill ({sum(before['counts'])} rows)" + (", log axis" if log_before else ""),
                         ylabel="rows", marks=marks, thin_lines=edges, log_axis=log_before)
    right = 60 + panel_w + 80
    row = report_svg.LEGEND_ROW if marks and len(before["starts"]) >= 2 else 0  # plotting areas level
    if norm == "bins":
        counts = after["counts"][1:-1]
        report_svg.columns(chart, right, top + row, panel_w, height - row, counts, SPLIT_COLORS["train"],
                           f"published: {len(counts)} quantile bins (edges marked left)", xlabel="bin id",
                           title_top=top)
    else:
        report_svg.histogram(chart, right, top + row, panel_w, height - row, after["starts"], after["counts"][1:-1],
                             SPLIT_COLORS["train"], f"published: {norm}" + (", log axis" if log_after else ""),
                             title_top=top, log_axis=log_after)
    return chart.svg()


def log_spaced(starts: list[float]) -> bool:
    """Whether histogram buckets widen along the axis (``tasks.encode.feature_stats.log_starts``, for a
    heavy-tailed column) rather than being equal: drawn then on a logarithmic axis, every bucket equally wide."""
    widths = np.diff(np.asarray(starts[:-1], dtype=np.float64))  # the last start is nudged above the max
    return len(widths) >= 2 and widths[0] > 0 and widths[-1] > 4 * widths[0]


def token_bars(plot_id: str, tokens: list[tuple[str, int]], title: str) -> str:
    """The most frequent tokens, most frequent on top (hand-written SVG: ``report_svg``)."""

    return report_svg.horizontal_bars(plot_id, [short(t) for t, _n in tokens], [float(n) for _t, n in tokens],
                                      [SPLIT_COLORS["train"]] * len(tokens), title,
                                      "frequency in the rows the vocabulary was fitted on")


def _bucket_label(lo: float | None, hi: float | None) -> str:
    if lo is None and hi == 1:
        return "0"
    if lo is None:
        return f"<{hi:g}"
    if hi is None:
        return f"\u2265{lo:g}"
    return f"{lo:g}" if hi - lo == 1 else f"{lo:g}\u2013{hi - 1:g}"


def length_histogram(plot_id: str, hist: dict, limit: int | None, truncated: int | None, unit: str) -> str:
    """Row lengths in power-of-two buckets, with the chosen maximum length marked."""
    starts, counts = hist["starts"], hist["counts"]
    edges = [None, *starts, None]
    limit_bucket = None if limit is None else int(np.searchsorted(starts, limit, side="right"))
    filled = [i for i, n in enumerate(counts) if n] or [0]
    first, last = min(filled), max(filled)
    if limit_bucket is not None:
        first, last = min(first, limit_bucket), max(last, limit_bucket)
    shown = range(first, last + 1)
    total = sum(counts)
    with _style(plot_id):
        fig, (ax,) = _figure(7.0, 2.8, bottom=0.8)
        ax.bar(range(len(shown)), [counts[i] for i in shown], color=SPLIT_COLORS["train"], width=0.8)
        ax.set_xticks(range(len(shown)), [_bucket_label(edges[i], edges[i + 1]) for i in shown], rotation=30)
        ax.set_xlabel(f"length ({unit}, before truncation)")
        ax.set_ylabel("rows")
        title = f"{total} rows"
        if limit is not None:
            lo, hi = edges[limit_bucket], edges[limit_bucket + 1]
            frac = 0.5 if lo is None or hi is None else (limit + 1 - lo) / (hi - lo)
            x = limit_bucket - first - 0.5 + min(max(frac, 0.0), 1.0)
            ax.axvline(x, color=MARK_COLOR, linestyle="--", linewidth=1.2, label=f"max length {limit}")
            ax.legend(loc="upper right", fontsize=8, frameon=False)
            if truncated is not None:
                share = truncated / total if total else 0.0
                title += f"; {truncated} longer than {limit} were truncated ({share:.1%})"
        ax.set_title(title)
        return _svg(fig)


def class_bars(plot_id: str, names: list[str], series: dict[str, list[int]], title: str) -> str:
    """Grouped bars: one group per class, one bar per series (split, before/after balancing)."""
    with _style(plot_id):
        rotate = len(names) > 6
        # the left margin holds the widest count's tick label and the axis label beside it
        digits = len(f"{max([max(c, default=0) for c in series.values()], default=0):,}")
        fig, (ax,) = _figure(min(3.6 + 0.35 * len(names) * max(len(series), 1), 9.0), 2.8, right=1.9,
                             bottom=0.9 if rotate else 0.45, left=0.45 + 0.075 * digits)
        width = 0.8 / max(len(series), 1)
        x = np.arange(len(names))
        for i, (label, counts) in enumerate(series.items()):
            color = SPLIT_COLORS.get(label.split(" ")[0], BEFORE_COLOR)
            if label.endswith("before balancing"):
                color = BEFORE_COLOR
            bars = ax.bar(x + (i - (len(series) - 1) / 2) * width, counts, width=width * 0.95, label=label,
                          color=color)
            ax.bar_label(bars, fontsize=7, padding=1)
        ax.set_xticks(x, [short(n, 16) for n in names], rotation=30 if rotate else 0)
        ax.set_ylabel("rows")
        ax.set_title(title)
        ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig)


def stage_bars(plot_id: str, stages: list[dict]) -> str:
    """Seconds per stage; cache hits in grey (hand-written SVG: ``report_svg``)."""

    secs = [float(s["seconds"]) for s in stages]
    return report_svg.horizontal_bars(
        plot_id, [s["name"] for s in stages], secs,
        [BEFORE_COLOR if s["cached"] else SPLIT_COLORS["train"] for s in stages], None, "seconds",
        value_labels=[f"{x:.3f} s" + (" (cached)" if s["cached"] else "") for x, s in zip(secs, stages, strict=True)],
        x_max=max(secs + [0.001]) * 1.35)


# ---- pixels ----------------------------------------------------------------------------------------

def to_hwc(item: np.ndarray, channels: int | None) -> np.ndarray:
    """One image as H x W x C: the artifact holds C x H x W (channels first, as torch wants)."""
    x = np.asarray(item)
    if x.ndim == 2:
        return x[:, :, None]
    if x.ndim == 3 and (x.shape[0] == channels or (channels is None and x.shape[0] in (1, 3, 4))):
        return np.transpose(x, (1, 2, 0))
    return x


def contact_sheet(images: list[np.ndarray], channels: int | None, columns: int = 8, min_side: int = 64) -> str:
    """A grid of ``images`` (uint8) as a PNG data URI; small images are enlarged (nearest neighbour)."""

    tiles = [to_hwc(im, channels) for im in images]
    h, w, c = tiles[0].shape
    scale = max(1, int(np.ceil(min_side / max(min(h, w), 1))))
    cols = min(columns, len(tiles))
    rows = -(-len(tiles) // cols)
    gap = 2
    sheet = np.full((rows * (h * scale + gap) - gap, cols * (w * scale + gap) - gap, c), 255, dtype=np.uint8)
    for i, tile in enumerate(tiles):
        r, q = divmod(i, cols)
        big = np.repeat(np.repeat(np.asarray(tile, dtype=np.uint8), scale, axis=0), scale, axis=1)
        y, x = r * (h * scale + gap), q * (w * scale + gap)
        sheet[y:y + h * scale, x:x + w * scale] = big
    buf = io.BytesIO()
    if c == 1:
        imsave(buf, sheet[:, :, 0], format="png", cmap="gray", vmin=0, vmax=255, metadata={"Software": None})
    else:
        imsave(buf, sheet, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def spectrogram(plot_id: str, item: np.ndarray, meta: dict) -> str:
    """One audio row as an image: frames x bands features shown as is, a raw waveform as its STFT."""
    x = np.asarray(item, dtype=np.float64)
    kind = (meta.get("preprocessing") or {}).get("type", "fbank")
    with _style(plot_id):
        fig, (ax,) = _figure(7.0, 2.8, right=0.8)
        if x.ndim == 1 or (x.ndim == 2 and 1 in x.shape):
            rate = int(meta.get("sampling_rate_in_hz") or 16000)
            *_rest, image = ax.specgram(x.reshape(-1), Fs=rate, NFFT=min(512, max(16, x.size // 8)), cmap="magma")
            ax.set_xlabel("seconds")
            ax.set_ylabel("Hz")
        else:
            image = ax.imshow(x.T, origin="lower", aspect="auto", cmap="magma", interpolation="nearest")
            ax.set_xlabel("frame")
            ax.set_ylabel("band" if kind == "fbank" else "feature")
        ax.grid(False)
        fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
        ax.set_title(f"first training row, {kind} features as published ({' x '.join(map(str, x.shape))})")
        return _png_uri(fig)
