"""The encoded gate's expected row count (tasks/validate/stage.py ``expected_encoded_rows``): counted by Dask tasks over
ranges of ``split.npy`` and ``multiplicity.npy``, the same total for any range size."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.runtime.outputs import Multiplicity, SplitAssignment
from tasks.validate import stage as validate


@settings(max_examples=50, deadline=None)
@given(assign=st.lists(st.integers(-1, 2), max_size=300), balanced=st.booleans(), data=st.data(),
       rows=st.sampled_from([1, 7, 64, 1 << 24]), dropped=st.integers(0, 5))
def test_the_count_is_the_same_for_any_range_size(tmp_path_factory, assign, balanced, data, rows, dropped):
    folder = tmp_path_factory.mktemp("rows")
    np.save(folder / "split.npy", np.array(assign, dtype=np.int8))
    mult = np.array(data.draw(st.lists(st.integers(0, 4), min_size=len(assign), max_size=len(assign))),
                    dtype=np.int32)
    if balanced:
        np.save(folder / "multiplicity.npy", mult)
    encoded = SimpleNamespace(statistics={"fill_missing.rows_dropped.x": {"count": dropped},
                                          "encode.rows_out": {"count": 99}})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(validate, "COUNT_ROWS", rows)
        got = validate.expected_encoded_rows(SplitAssignment.at(folder), Multiplicity.at(folder), encoded)
    a = np.array(assign, dtype=np.int8)
    train = int(mult[a == 0].sum()) if balanced else int((a == 0).sum())
    assert got == train + int((a == 1).sum()) + int((a == 2).sum()) - dropped
