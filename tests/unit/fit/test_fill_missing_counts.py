"""fill_missing hands a missing-value combiner that reads no values (``needs_values()`` false) the fit rows'
``NullCount`` instead of a copy of the column: the fitted states and the fit rows' null counts must be what
the values give, for every strategy, with drop_row features and either ``fit_on``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core import combiner
from core.combiner import accumulate, merge_extract
from tasks.config.constants import ROW
from tasks.config.loader import parse_config
from tasks.features.base import MissingStatistics, NullCount
from tasks.fill_missing import stage as fill_missing
from tasks.runtime.context import RunContext

FEATURES = [
    {"name": "c", "type": "category"},
    {"name": "m", "type": "category", "column": "c", "preprocessing": {"missing_value_strategy": "fill_with_mode"}},
    {"name": "x", "type": "number"},
    {"name": "xc", "type": "number", "column": "x", "preprocessing": {"missing_value_strategy": "fill_with_const",
                                                                      "fill_value": 2}},
    {"name": "d", "type": "number", "column": "x2", "preprocessing": {"missing_value_strategy": "drop_row"}},
    {"name": "b", "type": "binary"},
]


def _features():
    config = parse_config({"input_features": FEATURES, "output_features": [{"name": "y", "type": "category"}]})
    return RunContext(config, "unused", None).features


def _table(seed: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)

    def holes(values, share):  # the first 3 rows (training rows) keep a value: a mode needs one
        values = values.astype(object)
        values[3:][rng.random(n - 3) < share] = None
        return values

    return pd.DataFrame({
        "c": pd.array(holes(rng.choice(["a", "b", "c"], n), 0.3), dtype="string"),
        "x": pd.array(holes(rng.normal(size=n), 0.25), dtype="Float64"),
        "x2": pd.array(holes(rng.normal(size=n), 0.1), dtype="Float64"),
        "b": pd.array(holes(rng.choice(["yes", "no"], n), 0.2), dtype="string"),
        "y": pd.array(holes(rng.choice(["p", "q"], n), 0.05), dtype="string"),
        ROW: np.arange(n),
    })


def _fit(features, pdf, assign, fit_on, counted):
    combiners = {f.name: combiner.WithNulls(f.missing_combiner()) for f in features}
    return merge_extract(combiners, [accumulate(combiners, fill_missing._batches(pdf, features, assign, fit_on,
                                                                                 counted))])


def test_only_the_combiners_that_read_no_values_are_counted():
    combiners = {f.name: combiner.WithNulls(f.missing_combiner()) for f in _features()}
    # the mode reads values, and so do the mean and the binary's raw counts (its own add)
    assert {name for name, c in combiners.items() if not c.needs_values()} == {"c", "xc", "d", "y"}


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**16), st.integers(3, 60), st.sampled_from(["train", "all"]))
def test_counted_batches_fit_what_the_values_fit(seed, n, fit_on):
    features = _features()
    pdf = _table(seed, n)
    assign = np.random.default_rng(seed + 1).choice(np.array([-1, 0, 0, 1, 2], np.int8), n)  # -1: not sampled
    assign[:3] = 0
    combiners = {f.name: combiner.WithNulls(f.missing_combiner()) for f in features}
    counted = {name for name, c in combiners.items() if not c.needs_values()}
    batches = fill_missing._batches(pdf, features, assign, fit_on, counted)
    assert all(isinstance(batches[name], NullCount) for name in counted)
    assert _fit(features, pdf, assign, fit_on, counted) == _fit(features, pdf, assign, fit_on, set())


def test_a_subclass_with_its_own_add_gets_values():
    class Seen(MissingStatistics):
        def add(self, acc, values):
            assert isinstance(values, pd.Series)
            return super().add(acc, values)

    feature = _features()[0]
    assert Seen(feature).needs_values() and not MissingStatistics(feature).needs_values()


@pytest.mark.parametrize("strategy", ["fill_with_const", "bfill", "ffill", "drop_row"])
def test_a_null_count_adds_as_its_values_do(strategy):
    feature = _features()[0].__class__  # category
    config = parse_config({"input_features": [{"name": "c", "type": "category",
                                               "preprocessing": {"missing_value_strategy": strategy}}],
                           "output_features": [{"name": "y", "type": "category"}]})
    f = RunContext(config, "unused", None).features[0]
    assert isinstance(f, feature)
    values = pd.Series(pd.array(["a", None, "b", None, None], dtype="string"))
    c = f.missing_combiner()
    assert c.add(c.create(), NullCount(3, 5)) == c.add(c.create(), values)
