"""vector: golden, inferred/configured size, wrong-length rows name the row, property test."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import DataError
from tests.unit.feature_helpers import feature, fit


def test_golden_and_missing_is_zeros():
    f = feature("vector")
    meta = fit(f, ["1 2 3", "0.5 -1 1e3", ""])
    assert meta == {"vector_size": 3}
    out = f.encode(pd.Series(["1 2 3", "", "4 5 6"], dtype="string"), meta)["f"]
    assert out.dtype == np.float32 and out.tolist() == [[1, 2, 3], [0, 0, 0], [4, 5, 6]]
    assert [(c.name, c.dtype, c.shape) for c in f.output_columns(meta)] == [("f", "float32", (3,))]


def test_wrong_length_names_the_row_in_cast_and_encode():
    f = feature("vector")
    with pytest.raises(DataError, match=r"row 5, column 'f': vector feature 'f' expects 2 values per row, got 3"):
        f.cast(pd.Series(["1 2", "1 2 3"], dtype="string"), np.array([4, 5]))
    sized = feature("vector", vector_size=3)
    with pytest.raises(DataError, match=r"row 4, .* expects 3 values per row, got 2"):
        sized.cast(pd.Series(["1 2", "1 2 3"], dtype="string"), np.array([4, 5]))
    meta = {"vector_size": 2}
    values = pd.Series(["1 2", "1 2 3"], dtype="string", index=[10, 41])  # the encode stage indexes by input row
    with pytest.raises(DataError, match=r"row 41, .* expects 2 values per row, got 3"):
        f.encode(values, meta)


def test_inconsistent_fitted_lengths_are_an_error():
    f = feature("vector")
    with pytest.raises(DataError, match=r"different lengths \(2 values in 2 rows, 3 values in 1 rows\)"):
        fit(f, ["1 2", "1 2 3", "3 4"], npartitions=3)


def test_non_numbers_and_bad_fill_value():
    f = feature("vector")
    with pytest.raises(DataError, match=r"row 1, column 'f': .* got 'a,1' in 'a,1 b'"):
        f.cast(pd.Series(["1 2", "a,1 b"], dtype="string"), np.array([0, 1]))
    with pytest.raises(DataError, match="fill_value must have 2 values"):
        feature("vector", vector_size=2).fill_value_from_config("1 2 3")
    assert feature("vector", vector_size=2).fill_value_from_config([0, 1]) == "0 1"


@settings(max_examples=60, deadline=None, derandomize=True)
@given(size=st.integers(1, 5), data=st.data(), nparts=st.integers(1, 4))
def test_encode_gives_the_values_back(size, data, nparts):
    rows = data.draw(st.lists(st.one_of(st.none(), st.lists(st.floats(-1e6, 1e6, width=32), min_size=size,
                                                             max_size=size)), min_size=1, max_size=20))
    if all(r is None for r in rows):
        rows[0] = [0.0] * size
    f = feature("vector")
    cast = f.cast(pd.Series(rows, dtype=object), np.arange(len(rows)))  # list inputs
    filled = cast.fillna("")
    meta = fit(f, filled, npartitions=nparts)
    assert meta == {"vector_size": size}
    out = f.encode(filled, meta)["f"]
    want = np.array([r if r is not None else [0.0] * size for r in rows], dtype=np.float32)
    assert np.array_equal(out, want)
