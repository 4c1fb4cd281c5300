"""timeseries: golden padding/truncation, list inputs, bad values name the row, property test."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import DataError
from tests.unit.feature_helpers import feature, fit


def test_golden():
    f = feature("timeseries")
    meta = fit(f, ["1 2.5 -3", "4", None, ""])
    assert meta == {"max_timeseries_length": 3}
    out = f.encode(pd.Series(["1 2.5 -3", "4", "", "1 2 3 4 5"], dtype="string"), meta)["f"]
    assert out.dtype == np.float32
    assert out.tolist() == [[1, 2.5, -3], [4, 0, 0], [0, 0, 0], [1, 2, 3]]
    assert [(c.name, c.dtype, c.shape) for c in f.output_columns(meta)] == [("f", "float32", (3,))]


def test_options_comma_limit_padding_value_left():
    f = feature("timeseries", tokenizer="comma", timeseries_length_limit=2, padding_value=-1.0, padding="left",
                truncation="left")
    meta = fit(f, ["1, 2, 3", "4"])
    assert meta["max_timeseries_length"] == 2
    assert f.encode(pd.Series(["1, 2, 3", "4"], dtype="string"), meta)["f"].tolist() == [[2, 3], [-1, 4]]


def test_list_values_from_parquet_or_json():
    f = feature("timeseries")
    values = pd.Series([[1.5, 2.0], None, np.array([3.0])], dtype=object)
    cast = f.cast(values, np.arange(3))
    assert cast.tolist()[0] == "1.5 2" and pd.isna(cast.iloc[1]) and cast.tolist()[2] == "3"


@pytest.mark.parametrize("bad", ["1 x 3", "1 inf", "nan"])
def test_a_bad_value_names_the_row(bad):
    f = feature("timeseries")
    with pytest.raises(DataError, match=r"row 7, column 'f': timeseries feature 'f' expects finite numbers"):
        f.cast(pd.Series(["1 2", bad], dtype="string"), np.array([3, 7]))
    with pytest.raises(DataError, match="fill_value"):
        f.fill_value_from_config("a b")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(rows=st.lists(st.one_of(st.none(), st.lists(st.floats(-1e6, 1e6, width=32), max_size=6)), min_size=1,
                     max_size=20),
       limit=st.integers(1, 8), nparts=st.integers(1, 4))
def test_encode_gives_the_values_back(rows, limit, nparts):
    values = [None if r is None else " ".join(repr(float(x)) for x in r) for r in rows]
    f = feature("timeseries", timeseries_length_limit=limit)
    meta = fit(f, values, npartitions=nparts)
    width = meta["max_timeseries_length"]
    assert width == max(1, min(limit, max(len(r or []) for r in rows)))
    out = f.encode(pd.Series(values, dtype="string"), meta)["f"]
    for got, r in zip(out, rows, strict=True):
        want = np.zeros(width, np.float32)
        kept = np.asarray((r or [])[:width], dtype=np.float32)
        want[: len(kept)] = kept
        assert np.array_equal(got, want)


def test_forecasting_options_are_recorded_for_ludwig_and_the_window_is_the_length():
    # Ludwig's build_data reads window_size and horizon from the metadata's preprocessing (0: whole series)
    options = feature("timeseries").options.model_dump()
    assert (options["window_size"], options["horizon"]) == (0, 0)
    f = feature("timeseries", window_size=3, timeseries_length_limit=2, padding="left", truncation="left")
    assert f.options.timeseries_length_limit == 3  # Ludwig ignores the limit for windows
    windows = ["0 0 1.5", "0 1.5 -2", "1.5 -2 4"]  # what tasks.runtime.timeseries_windows hands the feature
    meta = fit(f, windows)
    assert meta["max_timeseries_length"] == 3
    assert f.encode(pd.Series(windows, dtype="string"), meta)["f"].tolist() == [[0, 0, 1.5], [0, 1.5, -2],
                                                                                 [1.5, -2, 4]]


def test_a_windowed_feature_encodes_only_whole_windows():
    f = feature("timeseries", window_size=3)
    meta = {"max_timeseries_length": 3}
    with pytest.raises(DataError, match=r"^row 5, column 'f': timeseries feature 'f' \(window_size 3\) encodes series "
                                        r"of 3 values, which the pipeline builds from the whole column; got '2.5'"):
        f.encode(pd.Series(["1 2 3", "2.5"], dtype="string", index=[4, 5]), meta)
