"""Pipeline statistics (after Magenta's ``statistics.py``): mergeable Counter and Histogram.

Names are ``stage.statistic`` (``fill_missing.filled.age``). Stages build them per partition and
merge them; merging is associative and commutative, so the result does not depend on the
partitioning. ``Statistics`` is a named collection; everything serializes to plain JSON.
"""

from __future__ import annotations

import bisect
from typing import Iterable

import numpy as np


class Statistic:
    kind = ""

    def __init__(self, name: str):
        self.name = name

    def merge_from(self, other: "Statistic") -> None:
        raise NotImplementedError

    def copy(self) -> "Statistic":
        return type(self).from_json(self.to_json())

    def to_json(self) -> dict:
        raise NotImplementedError

    @staticmethod
    def from_json(data: dict) -> "Statistic":
        return {"counter": Counter, "histogram": Histogram}[data["kind"]].from_json(data)


class Counter(Statistic):
    kind = "counter"

    def __init__(self, name: str, count: int = 0):
        super().__init__(name)
        self.count = int(count)

    def increment(self, by: int = 1) -> None:
        self.count += int(by)

    def merge_from(self, other: Statistic) -> None:
        if not isinstance(other, Counter) or other.name != self.name:
            raise TypeError(f"cannot merge {other!r} into counter {self.name}")
        self.count += other.count

    def to_json(self) -> dict:
        return {"kind": "counter", "name": self.name, "count": self.count}

    @classmethod
    def from_json(cls, data: dict) -> "Counter":
        return cls(data["name"], data["count"])

    def __repr__(self) -> str:
        return f"{self.name}: {self.count}"


class Histogram(Statistic):
    """Counts of values in buckets ``[-inf, b0), [b0, b1), ..., [bn, inf)`` for fixed starts."""

    kind = "histogram"

    def __init__(self, name: str, starts: Iterable[float], counts: Iterable[int] | None = None):
        super().__init__(name)
        self.starts = [float(s) for s in starts]
        if self.starts != sorted(self.starts):
            raise ValueError(f"histogram {name}: bucket starts must be sorted")
        self.counts = [int(c) for c in counts] if counts is not None else [0] * (len(self.starts) + 1)

    def add(self, value: float, count: int = 1) -> None:
        self.counts[bisect.bisect_right(self.starts, value)] += count

    def add_array(self, values: np.ndarray) -> None:
        counts = bucket_counts(np.asarray(self.starts, dtype=np.float64), np.asarray(values, dtype=np.float64))
        for i, n in enumerate(counts):
            self.counts[i] += int(n)

    def merge_from(self, other: Statistic) -> None:
        if not isinstance(other, Histogram) or other.starts != self.starts or other.name != self.name:
            raise TypeError(f"cannot merge {other!r} into histogram {self.name}")
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=False)]

    def to_json(self) -> dict:
        return {"kind": "histogram", "name": self.name, "starts": self.starts, "counts": self.counts}

    @classmethod
    def from_json(cls, data: dict) -> "Histogram":
        return cls(data["name"], data["starts"], data["counts"])

    def __repr__(self) -> str:
        return f"{self.name}: {sum(self.counts)} values in {len(self.counts)} buckets"


def _spacing(starts: np.ndarray) -> float | None:
    """Bucket width of equally spaced starts (at least 2, finite, each within 1e-9 of a bucket of
    ``lo + i * width``), else None."""
    k = len(starts)
    if k < 2 or not np.all(np.isfinite(starts)) or starts[-1] <= starts[0]:
        return None
    width = (starts[-1] - starts[0]) / (k - 1)
    dev = np.abs(starts - (starts[0] + np.arange(k) * width)) / width
    return float(width) if np.isfinite(width) and width > 0 and float(dev.max()) < 1e-9 else None


_EPS = 1e-6  # in buckets: far above the guess's rounding error (~1e-13) and the starts' deviation (< 1e-9)
_BLOCK = 1 << 16  # values per step: temporaries stay in the CPU cache, and the per-step overhead stays small


def bucket_counts(starts: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.bincount(np.searchsorted(starts, x, side="right"), minlength=len(starts) + 1)`` exactly
    (NaN counts in the last bucket), ~3x faster for equally spaced starts (the report's histograms).
    With ``t = (x - starts[0]) / width`` a value's bucket is ``floor(t) + 1`` whenever ``t`` is at least
    ``_EPS`` away from an integer: the starts deviate from ``starts[0] + i * width`` by less than 1e-9
    buckets (checked) and ``t``'s rounding error is ~1e-13 buckets, so such a value certainly lies
    between the same two starts. For the values near a start the guess is checked against the starts
    themselves (moved one bucket where it crossed a start), and binary-searched if still off."""
    k = len(starts)
    x = x.reshape(-1)
    width = _spacing(starts) if x.size >= 1024 else None
    if width is None:
        return np.bincount(np.searchsorted(starts, x, side="right"), minlength=k + 1)
    lo, scale = starts[0], 1.0 / width
    edges = np.concatenate([[-np.inf], starts, [np.inf]])  # bucket i holds edges[i] <= x < edges[i + 1]
    counts = np.zeros(k + 2, dtype=np.int64)
    n = min(_BLOCK, x.size)
    t, whole, g = np.empty(n), np.empty(n), np.empty(n, dtype=np.intp)
    near, tmp = np.empty(n, dtype=bool), np.empty(n, dtype=bool)
    with np.errstate(invalid="ignore", over="ignore"):
        for begin in range(0, x.size, _BLOCK):
            xb = x[begin:begin + _BLOCK]
            m = len(xb)
            tb, wb, gb, nb, sb = t[:m], whole[:m], g[:m], near[:m], tmp[:m]
            np.subtract(xb, lo, out=tb)
            tb *= scale
            np.fmin(tb, k + 0.5, out=tb)  # far above the last start, and NaN (fmin ignores NaN) -> k + 1
            np.fmax(tb, -0.5, out=tb)  # far below the first start -> 0
            np.floor(tb, out=wb)
            tb -= wb  # the fraction, in [0, 1)
            np.less(tb, _EPS, out=nb)
            np.greater(tb, 1.0 - _EPS, out=sb)
            nb |= sb
            np.add(wb, 1.0, out=wb)  # in [0, k + 1]; k + 1: beyond the last start, or NaN
            gb[...] = wb  # float -> int, exact (whole numbers)
            fix = np.flatnonzero(nb)
            if fix.size:  # near a start (e.g. whole numbers on whole-number starts): check the guess
                xf, gf = xb[fix], np.minimum(gb[fix], k)
                gf += xf >= edges[gf + 1]  # one bucket up or down: the scaled value rounded across a start
                gf -= xf < edges[gf]
                wrong = ~((edges[gf] <= xf) & (xf < edges[gf + 1]))
                if wrong.any():
                    gf[wrong] = np.searchsorted(starts, xf[wrong], side="right")
                gb[fix] = gf
            counts += np.bincount(gb, minlength=k + 2)
    counts[k] += counts[k + 1]  # searchsorted puts both after the last start
    return counts[:k + 1]


class Statistics:
    """A named set of statistics; ``merge`` adds counters and histograms of the same name."""

    def __init__(self, items: Iterable[Statistic] = ()):
        self.items: dict[str, Statistic] = {}
        for item in items:
            self.add(item)

    def add(self, stat: Statistic) -> None:
        if not isinstance(stat, Statistic):
            raise TypeError(f"statistics must be Counter or Histogram objects, got {type(stat).__name__}")
        if stat.name in self.items:
            self.items[stat.name].merge_from(stat)
        else:
            self.items[stat.name] = stat.copy()

    def counter(self, name: str, by: int = 1) -> None:
        self.add(Counter(name, by))

    def merge(self, other: "Statistics") -> "Statistics":
        out = Statistics(self.items.values())
        for stat in other.items.values():
            out.add(stat)
        return out

    def to_json(self) -> dict:
        return {name: self.items[name].to_json() for name in sorted(self.items)}

    @classmethod
    def from_json(cls, data: dict) -> "Statistics":
        return cls(Statistic.from_json(v) for v in data.values())

    def flat(self) -> dict[str, object]:
        return {n: (s.count if isinstance(s, Counter) else s.counts) for n, s in sorted(self.items.items())}


# ---- helpers for stages and feature types --------------------------------------------------------

LENGTH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def sequence_lengths(stage: str, feature: str, lengths: np.ndarray, max_length: int | None = None) -> Statistics:
    """For sequence-like feature types (sequence, text, timeseries, audio), per partition:
    ``<stage>.length.<feature>``, a histogram of lengths before truncation (buckets start at
    ``LENGTH_BUCKETS``, the same everywhere so partitions merge), and with ``max_length``
    ``<stage>.truncated.<feature>``, the rows longer than it."""
    lengths = np.asarray(lengths)
    hist = Histogram(f"{stage}.length.{feature}", LENGTH_BUCKETS)
    hist.add_array(lengths)
    out = Statistics([hist])
    if max_length is not None:
        out.counter(f"{stage}.truncated.{feature}", int((lengths > max_length).sum()))
    return out


def decode_failures(stage: str, feature: str, count: int) -> Statistics:
    """``<stage>.decode_failures.<feature>``: media values (images, audio) that could not be decoded."""
    return Statistics([Counter(f"{stage}.decode_failures.{feature}", count)])


SHOWN_BUCKETS = 4  # a histogram with more non-empty buckets is summarized (the HTML report plots it)


def _histogram_text(data: dict) -> str:
    starts, counts = data["starts"], data["counts"]
    edges = [None, *starts, None]
    filled = [i for i, n in enumerate(counts) if n]
    if len(filled) > SHOWN_BUCKETS:
        outside = counts[0] + counts[-1]
        return (f"{sum(counts)} values in {len(filled)} non-empty buckets of [{starts[0]:g}, {starts[-1]:g})"
                + (f", {outside} outside" if outside else ""))
    parts = []
    for i, n in enumerate(counts):
        if n:
            lo, hi = edges[i], edges[i + 1]
            label = f"<{hi:g}" if lo is None else f">={lo:g}" if hi is None else f"[{lo:g},{hi:g})"
            parts.append(f"{label}: {n}")
    return f"{sum(counts)} values; " + (", ".join(parts) if parts else "empty")


def summary_rows(stats: dict) -> list[tuple[str, str]]:
    """``(name, value)`` per statistic of a merged ``Statistics.to_json()``, for people: OOV counts
    with their rate among the split's encoded rows, histograms as their non-empty buckets."""
    rows = []
    for name in sorted(stats):
        data = stats[name]
        if data.get("kind") == "histogram":
            rows.append((name, _histogram_text(data)))
            continue
        value = f"{data['count']}"
        parts = name.split(".")
        if len(parts) == 4 and parts[:2] == ["encode", "oov"]:
            total = stats.get(f"encode.rows_out.{parts[2]}", {}).get("count")
            if total:
                value += f" ({100.0 * data['count'] / total:.2f}% of {total} rows)"
        rows.append((name, value))
    return rows


def merged(results: Iterable) -> dict:
    """The statistics of several stage results (``StageResult.statistics``) as one JSON mapping."""
    total = Statistics()
    for r in results:
        total = total.merge(Statistics.from_json(r.statistics))
    return total.to_json()
