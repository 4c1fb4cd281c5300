"""Uniqueness of dense integer keys (expectations.kernels.ValuesToBeUnique): a partition's distinct keys in
a narrow range go to the merge as a bitmap (the encoded gate's ``__row__``: one bit a row, not two int64
copies, in the flow process); any repeat makes the runner rescan with the exact partials. Whatever the
route, the result is the exact one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expectations import kernels, runner

SUITE = {"name": "u", "meta": {"generated_by": "prepflow"},
         "expectations": [{"type": "expect_column_values_to_be_unique", "kwargs": {"column": "k"},
                           "meta": {"generated_by": "prepflow"}},
                          {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "k", "mostly": 0.5},
                           "meta": {"generated_by": "prepflow"}}]}


def _parts(keys: list, cuts: list[int], nullable: bool) -> list[pd.DataFrame]:
    col = pd.array(keys, dtype="Int64") if nullable else np.asarray(keys, dtype=np.int64)
    frame = pd.DataFrame({"k": col})
    bounds = [0, *sorted(min(c, len(keys)) for c in cuts), len(keys)]
    return [frame.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a] or [frame]


def _run(parts: list[pd.DataFrame]) -> list[dict]:
    [entry] = runner.run([("generated:encoded", SUITE)], parts, ["k"], scheduler="sync")
    return entry["results"]


def _exact(parts, monkeypatch) -> list[dict]:
    with monkeypatch.context() as m:
        m.setattr(kernels.ValuesToBeUnique, "exact", True)
        return _run(parts)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.integers(-40, 40), st.integers(-2**62, 2**62)), min_size=1, max_size=60),
       st.lists(st.integers(0, 60), max_size=4), st.booleans(), st.booleans())
def test_every_route_gives_the_exact_result(keys, cuts, nullable, with_nulls):
    if nullable and with_nulls:
        keys = [None if i % 7 == 3 else k for i, k in enumerate(keys)]
    parts = _parts(keys, cuts, nullable)
    mp = pytest.MonkeyPatch()
    try:
        assert _run(parts) == _exact(parts, mp)
    finally:
        mp.undo()


def test_dense_distinct_keys_go_as_bitmaps_and_a_repeat_across_partitions_is_found(monkeypatch):
    parts = _parts(list(range(1000)), [250, 500, 750], nullable=False)
    check = kernels.ValuesToBeUnique({"column": "k"}, ["k"])
    assert all("bitmap" in check.partial(p) for p in parts)
    assert [r["success"] for r in _run(parts)] == [True, True]
    repeated = _parts([*range(500), 3, *range(501, 1000)], [250, 500, 750], nullable=False)  # 3 twice, apart
    assert all("bitmap" in check.partial(p) for p in repeated)  # each partition alone is distinct
    found = _run(repeated)
    assert found == _exact(repeated, monkeypatch)
    assert not found[0]["success"] and found[0]["result"]["unexpected_count"] == 2
    assert found[0]["result"]["partial_unexpected_index_list"] == [3, 500]


def test_wide_or_repeating_keys_take_the_exact_partial():
    check = kernels.ValuesToBeUnique({"column": "k"}, ["k"])
    assert "bitmap" not in check.partial(pd.DataFrame({"k": np.array([0, 10**9], np.int64)}))
    assert "bitmap" not in check.partial(pd.DataFrame({"k": np.array([1, 2, 2], np.int64)}))
    assert "bitmap" not in check.partial(pd.DataFrame({"k": np.array([1.0, 2.0])}))
