"""Number statistics under ``arithmetic: float32`` (``compatibility: ludwig``, issue 20): Ludwig's
(``ludwig/features/number_feature.py`` ZScoreTransformer: ``column.astype(np.float32).mean()`` / ``.std()``),
for any partitioning.

The std is pandas' float32 ``Series.std`` exactly (a float64 variance rounded to float32, its float32 square
root). The mean is pandas' float32 ``Series.mean`` exactly: numpy's pairwise float32 sum over the column in
row order (its rounding depends on the whole column's order and length), divided in float32; the fit keeps
each value's input row, so the partitioning and the merge order do not change it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.feature_helpers import feature, fit, fit_keeping_rows

finite = st.floats(-1e6, 1e6, allow_nan=False, width=64)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(values=st.lists(finite, min_size=2, max_size=300), npartitions=st.integers(1, 4), seed=st.integers(0, 9))
def test_float32_statistics_are_ludwigs_for_any_partitioning(values, npartitions, seed):
    series = pd.Series(values, dtype="float64")
    meta = fit_keeping_rows(feature("number", arithmetic="float32"), series, npartitions, seed)
    x32 = series.astype(np.float32)
    assert meta["mean"] == float(x32.mean())  # Ludwig's: pandas' mean of the float32 column, bit for bit
    assert meta["std"] == float(x32.std())  # and its std
    assert (meta["min"], meta["max"]) == (float(x32.min()), float(x32.max()))


def test_the_float32_mean_is_pandas_where_the_rounded_exact_mean_is_not():
    """A column whose pairwise float32 sum rounds away from the exact mean (found by search): the fit
    follows pandas, as Ludwig's own fit does."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        series = pd.Series(rng.normal(100, 50, int(rng.integers(2, 3000))).astype(np.float32).astype(np.float64))
        x32 = series.astype(np.float32)
        exact = float(np.float32(float(sum(Fraction(float(v)) for v in x32) / len(x32))))
        if exact != float(x32.mean()):
            break
    else:
        pytest.fail("no column where pandas' float32 mean and the rounded exact mean differ")
    assert fit_keeping_rows(feature("number", arithmetic="float32"), series, 3, 1)["mean"] == float(x32.mean())


def test_the_default_keeps_the_exact_float64_statistics():
    values = pd.Series([0.1, 0.2, 0.3, 1e-9, 7.25], dtype="float64")
    meta = fit(feature("number"), values, 2)
    exact = sum(Fraction(v) for v in values) / len(values)
    assert meta["mean"] == float(exact) and meta["mean"] != float(np.float32(float(exact)))
    assert meta["std"] == float(np.sqrt(float(sum((Fraction(v) - exact) ** 2 for v in values) / 4)))
