"""A mergeable quantile sketch whose result does not depend on partitioning or merge order.

Each finite float64 is mapped to an order-preserving 64-bit key (its IEEE bit pattern with the
sign handled, ``-0.0`` as ``0.0``). The sketch is a histogram over ``key >> level``: per bucket
the exact count, minimum and maximum. ``level`` is the smallest number of dropped low bits that
keeps the number of non-empty buckets within ``cap``:

* level 0 (at most ``cap`` distinct values, 2**20 by default): every bucket is one distinct
  value, so the sketch *is* the data and ``quantiles`` equals ``numpy.quantile`` bit for bit
  (linear interpolation, numpy's ``_lerp``);
* level > 0: a bucket spans values that agree on all but the low ``level`` key bits. An order
  statistic is estimated inside its bucket (linearly between the bucket's minimum and maximum), so
  its error is at most the bucket's width, ``max - min``, which for ``level <= 52`` is below
  ``2**(level - 52) * |value|`` (relative error). ``error_bound`` reports the largest width used.

Why merging is exact: a partition that needs level ``l`` has more than ``cap`` buckets at every
lower level, and so does any superset of its rows; so the level chosen for the whole column is
at least every partial's level. Merging re-buckets both sides at the larger level, adds counts,
takes min/max (all exact and commutative), and raises the level while there are more than
``cap`` buckets. The result is the histogram of the whole column at the whole column's level,
whatever the partitioning and merge order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CAP = 1 << 20
SIGN = np.uint64(1 << 63)


def float_keys(x: np.ndarray) -> np.ndarray:
    """Order-preserving uint64 keys of finite float64 values."""
    x = np.where(x == 0.0, 0.0, np.asarray(x, dtype=np.float64))  # -0.0 -> 0.0
    bits = x.view(np.uint64)
    return np.where(bits & SIGN, ~bits, bits | SIGN)


def keys_to_floats(keys: np.ndarray) -> np.ndarray:
    keys = np.asarray(keys, dtype=np.uint64)
    return np.where(keys & SIGN, keys & ~SIGN, ~keys).view(np.float64)


def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's quantile interpolation (numpy/lib/_function_base_impl.py ``_lerp``), bit for bit."""
    diff = b - a
    out = np.asarray(a + diff * t)
    np.subtract(b, diff * (1 - t), out=out, where=t >= 0.5)
    return out


@dataclass
class QuantileSketch:
    level: int
    buckets: np.ndarray  # uint64, sorted, unique: key >> level
    counts: np.ndarray  # int64
    mins: np.ndarray  # float64
    maxs: np.ndarray  # float64
    cap: int = CAP

    @classmethod
    def from_values(cls, values: np.ndarray, cap: int = CAP) -> "QuantileSketch":
        x = np.asarray(values, dtype=np.float64)
        x = x[np.isfinite(x)]
        keys, counts = np.unique(float_keys(x), return_counts=True)
        vals = keys_to_floats(keys)
        return cls(0, keys, counts.astype(np.int64), vals, vals.copy(), cap)._fit_cap()

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    def _regroup(self, level: int) -> "QuantileSketch":
        if level == self.level or not len(self.buckets):
            return QuantileSketch(level, self.buckets >> np.uint64(level - self.level), self.counts, self.mins,
                                  self.maxs, self.cap)
        b = self.buckets >> np.uint64(level - self.level)
        starts = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
        return QuantileSketch(level, b[starts], np.add.reduceat(self.counts, starts),
                              np.minimum.reduceat(self.mins, starts), np.maximum.reduceat(self.maxs, starts), self.cap)

    def _fit_cap(self) -> "QuantileSketch":
        sketch = self
        while len(sketch.buckets) > sketch.cap:
            sketch = sketch._regroup(sketch.level + 1)
        return sketch

    def merge(self, other: "QuantileSketch") -> "QuantileSketch":
        level = max(self.level, other.level)
        a, b = self._regroup(level), other._regroup(level)
        buckets = np.concatenate([a.buckets, b.buckets])
        order = np.argsort(buckets, kind="stable")
        joined = QuantileSketch(level, buckets[order], np.concatenate([a.counts, b.counts])[order],
                                np.concatenate([a.mins, b.mins])[order], np.concatenate([a.maxs, b.maxs])[order],
                                min(self.cap, other.cap))
        # regroup at the same level merges equal buckets (reduceat over runs of equal keys)
        starts = np.flatnonzero(np.concatenate([[True], joined.buckets[1:] != joined.buckets[:-1]])) \
            if len(joined.buckets) else np.zeros(0, np.int64)
        if len(starts) != len(joined.buckets):
            joined = QuantileSketch(level, joined.buckets[starts], np.add.reduceat(joined.counts, starts),
                                    np.minimum.reduceat(joined.mins, starts),
                                    np.maximum.reduceat(joined.maxs, starts), joined.cap)
        return joined._fit_cap()

    @property
    def exact(self) -> bool:
        return self.level == 0

    def error_bound(self) -> float:
        """The largest bucket width (0.0 when exact): no estimate is off by more."""
        return float(np.max(self.maxs - self.mins)) if len(self.buckets) else 0.0

    def order_statistics(self, ranks: np.ndarray) -> np.ndarray:
        """The values at 0-based ``ranks`` of the sorted column (estimated inside a bucket when level > 0)."""
        ranks = np.asarray(ranks, dtype=np.int64)
        cum = np.cumsum(self.counts)
        j = np.searchsorted(cum, ranks, side="right")
        within = ranks - (cum[j] - self.counts[j])
        span = np.maximum(self.counts[j] - 1, 1)
        lo, hi = self.mins[j], self.maxs[j]
        return np.where(hi > lo, lo + (hi - lo) * (within / span), lo)

    def quantiles(self, q: np.ndarray) -> np.ndarray:
        """``numpy.quantile(column, q)`` (method ``linear``): exact at level 0."""
        n = self.n
        if n == 0:
            raise ValueError("no values")
        q = np.asarray(q, dtype=np.float64)
        virtual = (n - 1) * q
        prev = np.floor(virtual).astype(np.int64)
        nxt = prev + 1
        above = virtual >= n - 1
        prev[above] = n - 1
        nxt[above] = n - 1
        below = virtual < 0
        prev[below] = 0
        nxt[below] = 0
        gamma = virtual - prev
        return _lerp(self.order_statistics(prev), self.order_statistics(nxt), gamma)
