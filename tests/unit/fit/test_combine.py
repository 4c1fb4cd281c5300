"""The one fit protocol (tasks/runtime/combine.py): create, add, merge, extract; the result must not depend on
how the rows are split into batches, on the merge order, or on whether Dask runs the partitions."""

from __future__ import annotations

import random
from fractions import Fraction
from functools import reduce

import dask
import numpy as np
import pandas as pd
import pytest
from dask import delayed
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core import combiner, task_tree
from core.combiner import Combiner, accumulate, fit_batches, merge_extract
from tasks import Stage
from tasks.runtime import combine
from tests.unit.feature_helpers import feature


def _splits(values: list, cuts: list[int]) -> list[pd.Series]:
    edges = [0, *sorted({c % (len(values) + 1) for c in cuts}), len(values)]
    series = pd.Series(values, dtype="float64")
    return [series.iloc[a:b] for a, b in zip(edges, edges[1:], strict=False)]


def _shuffled_fit(c: Combiner, batches: list, seed: int):
    accs = [c.add(c.create(), b) for b in batches]
    random.Random(seed).shuffle(accs)
    return c.extract(reduce(c.merge, accs))


numbers = st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False, width=32)), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(numbers, st.lists(st.integers(0, 40), max_size=5), st.integers(0, 9),
       st.sampled_from(["zscore", "minmax", "iq", "bins"]), st.sampled_from(["fill_with_mean", "fill_with_mode"]))
# found by Hypothesis: 0.0 and -0.0 tie with -1.0 for the mode, and the key kept (so the fill) depended on the split
@example(values=[None] * 7 + [0.0, -0.0, -1.0, -1.0], cuts=[8], seed=1, normalization="zscore",
         strategy="fill_with_mode")
def test_a_number_fits_the_same_over_any_split(values, cuts, seed, normalization, strategy):
    f = feature("number", normalization=normalization, missing_value_strategy=strategy)
    if all(v is None for v in values):
        return
    whole = pd.Series(values, dtype="float64")
    batches = _splits(values, cuts)
    state = fit_batches(f.missing_combiner(), [whole])
    assert _shuffled_fit(f.missing_combiner(), batches, seed) == state
    fitted = fit_batches(f.fit_combiner(state), [whole.dropna()])
    assert _shuffled_fit(f.fit_combiner(state), [b.dropna() for b in batches], seed) == fitted
    c = f.fit_combiner(state)  # every row added to one accumulator
    assert c.extract(reduce(c.add, [whole.dropna().iloc[i:i + 1] for i in range(whole.notna().sum())],
                            c.create())) == fitted


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "é", "c d", "<UNK>"])), min_size=1, max_size=30),
       st.lists(st.integers(0, 30), max_size=4), st.integers(0, 9))
def test_a_category_vocabulary_is_the_same_over_any_split(values, cuts, seed):
    f = feature("category", num_oov_buckets=1, most_common=3)
    series = pd.Series(values, dtype="string").fillna("<UNK>")
    edges = [0, *sorted({c % (len(values) + 1) for c in cuts}), len(values)]
    batches = [series.iloc[a:b] for a, b in zip(edges, edges[1:], strict=False)]
    assert _shuffled_fit(f.fit_combiner({}), batches, seed) == fit_batches(f.fit_combiner({}), [series])


def test_fit_over_dask_partitions_is_the_in_memory_fit():
    x = pd.Series(np.random.default_rng(0).normal(size=500)).mask(lambda s: s > 1.5)
    parts = [delayed(x.iloc[a:a + 120].to_frame("x")) for a in range(0, 500, 120)]
    f = feature("number", normalization="iq")

    def batches(part, column):
        return {"missing": part[column], "fit": part[column].dropna()}

    state = fit_batches(f.missing_combiner(), [x])
    got = combine.fit({"missing": f.missing_combiner(), "fit": f.fit_combiner(state)}, parts, batches, "x")
    assert got == {"missing": state, "fit": fit_batches(f.fit_combiner(state), [x.dropna()])}
    kept = x.dropna().tolist()
    assert got["missing"]["computed_fill_value"] == float(sum(map(Fraction, kept)) / len(kept))  # the exact mean


class _Concat(Combiner):
    """Associative but not commutative: a merge tree that reordered partitions would show."""

    def create(self):
        return []

    def add(self, acc, batch):
        return acc + list(batch)

    def merge(self, a, b):
        return a + b


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 70), st.integers(2, 9))
def test_the_merge_tree_keeps_partition_order(n, fan_in):
    parts = [delayed({"k": [i, -i]}) for i in range(n)]
    root = task_tree.tree(parts, combiner.merge_all, {"k": _Concat()}, fan_in=fan_in)
    if n == 0:
        assert root is None and combine.merged({"k": _Concat()}, parts) == []
        return
    expected = [v for i in range(n) for v in (i, -i)]
    assert dask.compute(root, scheduler="sync")[0] == {"k": expected}
    assert dask.compute(*combine.merged({"k": _Concat()}, parts), scheduler="sync")[0] == {"k": expected}


def test_a_key_no_partition_accumulated_is_left_out():
    f = feature("number")
    c = {"a": f.missing_combiner(), "b": f.missing_combiner()}
    accs = [accumulate(c, {"a": pd.Series([1.0, None])}), accumulate(c, {"a": pd.Series([3.0])})]
    assert merge_extract(c, accs) == {"a": {"missing_value_strategy": "fill_with_mean", "computed_fill_value": 2.0}}


def test_fill_with_mean_without_values_fills_zero():
    """tasks.split.degenerate warns about such a feature before the fit; the mean fill of no value is 0.0."""
    f = feature("number", missing_value_strategy="fill_with_mean")
    state = fit_batches(f.missing_combiner(), [pd.Series([None, None], dtype="float64"), pd.Series([], dtype="float64")])
    assert state["computed_fill_value"] == 0.0


class Total(Stage):
    input_type = {"x": "int64"}
    output_type = {"y": "int64"}

    def create(self):
        return 0

    def add(self, acc, df):
        return acc + int(df["x"].sum())

    def merge(self, a, b):
        return a + b

    def extract(self, acc):
        return {"total": acc}

    def transform(self, df, state):
        return df.assign(y=df["x"] + state["total"])


class Unfitted(Stage):
    input_type = {"x": "int64"}
    output_type = {"y": "int64"}

    def transform(self, df):
        return df.assign(y=df["x"])


def test_a_stage_is_a_combiner_and_fits_when_it_defines_add():
    assert isinstance(Total(), Combiner) and Total().fits and not Unfitted().fits
    df = pd.DataFrame({"x": np.arange(10)})
    assert fit_batches(Total(), [df.iloc[:3], df.iloc[3:]]) == {"total": 45}


def test_a_stage_that_adds_without_create_says_so():
    class NoCreate(Total):
        create = Stage.create

    with pytest.raises(NotImplementedError, match="stage 'no_create' fits: it must define create"):
        fit_batches(NoCreate(), [pd.DataFrame({"x": [1]})])
