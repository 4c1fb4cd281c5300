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


@dataclass
class ExactSum:
    numerator: int = 0
    exponent: int = 0  # value = numerator * 2**exponent

    def add_array(self, values: np.ndarray) -> "ExactSum":
        values = np.asarray(values, dtype=np.float64)
        for start in range(0, len(values), _CHUNK):
            self._add_chunk(values[start : start + _CHUNK])
        return self

    def _add_chunk(self, x: np.ndarray) -> None:
        x = x[x != 0.0]
        if x.size == 0:
            return
        if not np.all(np.isfinite(x)):
            raise ValueError("ExactSum needs finite values")
        mant, exp = np.frexp(x)
        m = (mant * float(1 << _MANT_BITS)).astype(np.int64)  # exact: |m| < 2**53
        hi = m >> _LO_BITS  # arithmetic shift; m == hi * 2**26 + lo, 0 <= lo < 2**26
        lo = m & ((1 << _LO_BITS) - 1)
        emin = int(exp.min())
        idx = (exp - emin).astype(np.int64)
        sum_hi = np.bincount(idx, weights=hi.astype(np.float64))
        sum_lo = np.bincount(idx, weights=lo.astype(np.float64))
        total = 0
        for offset in np.flatnonzero((sum_hi != 0) | (sum_lo != 0)):
            part = (int(sum_hi[offset]) << _LO_BITS) + int(sum_lo[offset])
            total += part << int(offset)
        self._add_exact(total, emin - _MANT_BITS)

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
