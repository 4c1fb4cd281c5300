"""Exact, mergeable sums of float64 arrays.

Floating-point addition is not associative, so a mean computed from per-partition sums
depends on how the rows were partitioned, and the published z-scores would differ in the
last bit between ``--npartitions 1`` and ``--npartitions 7``. ``ExactSum`` avoids that: it
keeps the sum as an exact binary fraction (``numerator * 2**exponent`` with a Python int
numerator), so partial sums merge exactly in any order and the final float is correctly
rounded.

Vectorized: each float is split by ``np.frexp`` into a 53-bit integer mantissa and an
exponent; mantissas are split into two 26/27-bit halves and summed per exponent with
``np.bincount`` (its float64 accumulator is exact for these small integers as long as a
partition has fewer than 2**26 rows per exponent, which ``add_array`` enforces by chunking).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

_MANT_BITS = 53
_LO_BITS = 26
_CHUNK = 1 << 25  # rows per bincount pass; keeps every accumulator below 2**53
_BLOCK = 1 << 15  # values per vectorized step inside a chunk
_EXP_OFFSET = 1075  # frexp exponents of finite float64s are in [-1073, 1024]; slot = exponent + offset >= 0
_EXP_SLOTS = 2100
_SPAN = 20  # a block whose exponents span at most this many bits is summed as int64s shifted to one base


@dataclass
class ExactSum:
    numerator: int = 0
    exponent: int = 0  # value = numerator * 2**exponent

    def add_array(self, values: np.ndarray) -> "ExactSum":
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        for start in range(0, len(values), _CHUNK):
            self._add_chunk(values[start : start + _CHUNK])
        return self

    def _add_chunk(self, x: np.ndarray) -> None:
        """Per exponent, exact float64 sums of the mantissas' two halves, over blocks of ``_BLOCK`` values
        with reused buffers (fresh full-size temporaries cost more in page faults than in arithmetic). A
        block whose exponents span at most ``_SPAN`` bits (most data) skips the per-exponent bincounts: each
        half-mantissa shifted to the block's lowest exponent stays within 2**47, so int64 sums are exact."""
        if x.size == 0:
            return
        n = min(_BLOCK, x.size)
        mant, exp = np.empty(n), np.empty(n, dtype=np.int32)
        m, half = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        weights, finite = np.empty(n), np.empty(n, dtype=bool)
        sum_hi, sum_lo = np.zeros(_EXP_SLOTS), np.zeros(_EXP_SLOTS)
        exact = 0  # blocks summed as shifted integers, in units of 2**(-_EXP_OFFSET - _MANT_BITS)
        for begin in range(0, x.size, _BLOCK):
            xb = x[begin : begin + _BLOCK]
            k = len(xb)
            mb, eb, ib, hb, wb, fb = mant[:k], exp[:k], m[:k], half[:k], weights[:k], finite[:k]
            np.isfinite(xb, out=fb)
            if not fb.all():
                raise ValueError("ExactSum needs finite values")
            np.frexp(xb, out=(mb, eb))  # zeros: mantissa 0, so they add nothing wherever they land
            mb *= float(1 << _MANT_BITS)
            ib[...] = mb  # exact: |m| < 2**53
            eb += _EXP_OFFSET  # >= 0
            top = int(eb.max())
            if int(eb.min()) >= top - _SPAN:  # the usual case: exponents within 2**20 of each other
                base = max(top - _SPAN, 0)  # m * 2**e == (m << (e - base)) * 2**base, shifts in [0, 20]
                eb -= base
                np.right_shift(ib, _LO_BITS, out=hb)  # arithmetic shift; m == hi * 2**26 + lo, 0 <= lo < 2**26
                np.left_shift(hb, eb, out=hb)  # |hi << s| <= 2**47: 2**15 of them sum exactly in int64
                total_hi = int(hb.sum())
                np.bitwise_and(ib, (1 << _LO_BITS) - 1, out=hb)
                np.left_shift(hb, eb, out=hb)
                exact += (((total_hi << _LO_BITS) + int(hb.sum())) << base)
                continue
            np.right_shift(ib, _LO_BITS, out=hb)
            wb[...] = hb
            part = np.bincount(eb, weights=wb)
            sum_hi[: len(part)] += part
            np.bitwise_and(ib, (1 << _LO_BITS) - 1, out=hb)
            wb[...] = hb
            part = np.bincount(eb, weights=wb)
            sum_lo[: len(part)] += part
        total = exact
        for slot in np.flatnonzero((sum_hi != 0) | (sum_lo != 0)):
            total += ((int(sum_hi[slot]) << _LO_BITS) + int(sum_lo[slot])) << int(slot)
        self._add_exact(total, -_EXP_OFFSET - _MANT_BITS)

    def add_repeated(self, value: float, count: int) -> "ExactSum":
        """``count`` copies of the finite ``value`` added, exactly (``value`` is ``m * 2**e`` for an integer
        ``m``: the copies add ``m * count * 2**e``)."""
        if count and value:
            mant, exp = np.frexp(float(value))
            self._add_exact(int(mant * float(1 << _MANT_BITS)) * int(count), int(exp) - _MANT_BITS)
        return self

    def _add_exact(self, numerator: int, exponent: int) -> None:
        if numerator == 0:
            return
        if self.numerator == 0:
            self.numerator, self.exponent = numerator, exponent
            return
        low = min(self.exponent, exponent)
        self.numerator = (self.numerator << (self.exponent - low)) + (numerator << (exponent - low))
        self.exponent = low

    def merge(self, other: "ExactSum") -> "ExactSum":
        out = ExactSum(self.numerator, self.exponent)
        out._add_exact(other.numerator, other.exponent)
        return out

    def fraction(self) -> Fraction:
        if self.exponent >= 0:
            return Fraction(self.numerator << self.exponent)
        return Fraction(self.numerator, 1 << -self.exponent)

    def __float__(self) -> float:
        return float(self.fraction())

    def to_json(self) -> list:
        return [str(self.numerator), self.exponent]

    @classmethod
    def from_json(cls, data: list) -> "ExactSum":
        return cls(int(data[0]), int(data[1]))
