"""number discretization (normalization: bins) and its mergeable quantile sketch."""

from __future__ import annotations

import random
from functools import reduce

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ConfigError
from tasks.features.quantiles import QuantileSketch, float_keys, keys_to_floats
from tests.unit.feature_helpers import feature


def fit_number(f, x, nparts=1, seed=0):
    s = pd.Series(np.asarray(x, dtype=np.float64))
    parts = np.array_split(np.arange(len(s)), nparts)
    combiner = f.fit_combiner({})
    accs = [combiner.add(combiner.create(), s.iloc[p]) for p in parts]
    random.Random(seed).shuffle(accs)
    return combiner.extract(reduce(combiner.merge, accs))


def test_golden_quantile_bins():
    f = feature("number", normalization="bins", num_bins=4)
    x = np.arange(1.0, 10.0)  # 1..9: quartiles 1, 3, 5, 7, 9
    meta = fit_number(f, x, nparts=3)
    assert meta["bin_edges"] == [1.0, 3.0, 5.0, 7.0, 9.0]
    assert meta["num_bins"] == 4 and meta["bin_edges_exact"] is True
    out = f.encode(pd.Series([0.0, 1.0, 2.9, 3.0, 6.0, 9.0, 100.0]), meta)["f"]
    assert out.dtype == np.int32 and out.tolist() == [0, 0, 0, 1, 2, 3, 3]
    assert [(c.name, c.dtype) for c in f.output_columns(meta)] == [("f", "int32")]


def test_repeated_edges_are_dropped_and_a_constant_is_one_bin():
    f = feature("number", normalization="bins", num_bins=4)
    meta = fit_number(f, [1, 1, 1, 2, 2, 2])  # quantiles 1, 1, 1.5, 2, 2
    assert meta["bin_edges"] == [1.0, 1.5, 2.0] and meta["num_bins"] == 2
    meta = fit_number(f, [5, 5, 5])
    assert meta["bin_edges"] == [5.0, 5.0] and meta["num_bins"] == 1
    assert f.encode(pd.Series([4.0, 5.0, 6.0]), meta)["f"].tolist() == [0, 0, 0]


def test_user_bin_edges():
    f = feature("number", normalization="bins", bin_edges=[0, 10, 100])
    meta = fit_number(f, [5, 50])
    assert meta["bin_edges"] == [0.0, 10.0, 100.0] and meta["num_bins"] == 2
    assert f.encode(pd.Series([-1.0, 9.99, 10.0, 1e9]), meta)["f"].tolist() == [0, 0, 1, 1]


def test_config_errors():
    with pytest.raises(ConfigError, match="strictly increasing"):
        feature("number", normalization="bins", bin_edges=[0, 0, 1])
    with pytest.raises(ConfigError, match="only used with normalization 'bins'"):
        feature("number", normalization="zscore", bin_edges=[0, 1])
    with pytest.raises(ConfigError, match="num_bins"):
        feature("number", normalization="bins", num_bins=0)


def test_float_keys_preserve_order_and_round_trip():
    x = np.array([-np.inf, -1e300, -2.5, -1e-300, -0.0, 0.0, 5e-324, 1e-300, 3.0, 1e300, np.inf])
    keys = float_keys(x)
    assert (np.diff(keys.astype(object)) >= 0).all()
    assert keys[4] == keys[5]  # -0.0 is 0.0
    back = keys_to_floats(keys)
    assert np.array_equal(back[x != 0], x[x != 0])


floats = st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(x=st.lists(floats, min_size=1, max_size=200), q=st.lists(st.floats(0, 1), min_size=1, max_size=12),
       nparts=st.integers(1, 6), seed=st.integers(0, 100))
def test_exact_level_equals_numpy_quantile_for_any_partitioning(x, q, nparts, seed):
    x = np.asarray(x)
    parts = np.array_split(x, nparts)
    sketches = [QuantileSketch.from_values(p) for p in parts if len(p)]
    random.Random(seed).shuffle(sketches)
    merged = reduce(QuantileSketch.merge, sketches)
    assert merged.exact
    assert np.array_equal(merged.quantiles(np.asarray(q)), np.quantile(x, np.asarray(q)))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(x=st.lists(floats, min_size=2, max_size=300), cap=st.integers(2, 20), nparts=st.integers(1, 6),
       seed=st.integers(0, 100))
def test_capped_sketch_is_partition_independent_and_within_its_error(x, cap, nparts, seed):
    x = np.asarray(x)
    whole = QuantileSketch.from_values(x, cap=cap)
    rng = random.Random(seed)
    idx = list(range(len(x)))
    rng.shuffle(idx)  # partitions need not be contiguous or sorted
    parts = np.array_split(np.asarray(idx), nparts)
    sketches = [QuantileSketch.from_values(x[p], cap=cap) for p in parts if len(p)]
    rng.shuffle(sketches)
    merged = reduce(QuantileSketch.merge, sketches)
    assert merged.level == whole.level and len(merged.buckets) <= cap
    for name in ("buckets", "counts", "mins", "maxs"):
        assert np.array_equal(getattr(merged, name), getattr(whole, name))
    q = np.linspace(0, 1, 11)
    est, true = merged.quantiles(q), np.quantile(x, q)
    assert np.all(np.abs(est - true) <= merged.error_bound() * (1 + 1e-12) + 1e-300)
    if merged.level <= 52:
        span = np.maximum(np.abs(est), np.abs(true))
        assert np.all(np.abs(est - true) <= span * 2.0 ** (merged.level - 52) * 2 + 1e-300)


def test_large_column_uses_a_coarser_level_with_small_relative_error():
    rng = np.random.default_rng(0)
    x = rng.lognormal(0, 2, 200_000)
    sketch = QuantileSketch.from_values(x, cap=1 << 12)
    assert not sketch.exact and len(sketch.buckets) <= 1 << 12
    q = np.linspace(0, 1, 101)
    rel = np.abs(sketch.quantiles(q) - np.quantile(x, q)) / np.quantile(x, q)
    assert rel.max() < 2.0 ** (sketch.level - 52) * 2
    assert rel.max() < 0.01
