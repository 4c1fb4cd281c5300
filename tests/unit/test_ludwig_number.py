"""Number statistics under ``arithmetic: float32`` (``compatibility: ludwig``, issue 20): Ludwig's
(``ludwig/features/number_feature.py`` ZScoreTransformer: ``column.astype(np.float32).mean()`` / ``.std()``),
for any partitioning.

The std is pandas' float32 ``Series.std`` exactly (a float64 variance rounded to float32, its float32 square
root). The mean is the exact mean of the float32 values rounded to float32: pandas sums a float32 column in
float32 (numpy's pairwise sum, whose rounding depends on the whole column's order and length), so that last
bit can differ from Ludwig's on some columns (tests/integration/test_ludwig_preprocess.py checks n=240).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.feature_helpers import feature, fit

finite = st.floats(-1e6, 1e6, allow_nan=False, width=64)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(values=st.lists(finite, min_size=2, max_size=60), npartitions=st.integers(1, 4), seed=st.integers(0, 9))
def test_float32_statistics_are_ludwigs_for_any_partitioning(values, npartitions, seed):
    series = pd.Series(values, dtype="float64")
    meta = fit(feature("number", arithmetic="float32"), series, npartitions, seed)
    x32 = series.astype(np.float32)
    exact = sum(Fraction(float(v)) for v in x32) / len(x32)
    assert meta["mean"] == float(np.float32(float(exact)))
    assert meta["std"] == float(x32.std())  # Ludwig's: pandas' std of the float32 column
    assert (meta["min"], meta["max"]) == (float(x32.min()), float(x32.max()))


def test_the_default_keeps_the_exact_float64_statistics():
    values = pd.Series([0.1, 0.2, 0.3, 1e-9, 7.25], dtype="float64")
    meta = fit(feature("number"), values, 2)
    exact = sum(Fraction(v) for v in values) / len(values)
    assert meta["mean"] == float(exact) and meta["mean"] != float(np.float32(float(exact)))
    assert meta["std"] == float(np.sqrt(float(sum((Fraction(v) - exact) ** 2 for v in values) / 4)))
