"""The direct column map metrics (``engine._direct``) and the sort/hash uniqueness check give what
GX gives on the whole frame, on random frames of every dtype a partition can hold.

``test_gx_dask.py`` checks every supported expectation type on one fixed frame; this adds hypothesis
frames (narrow ints and floats, nullable ints, Arrow strings, object columns, nulls, repeats,
partitions cut anywhere) for the expectation types whose metrics skip GX's metric graph, and checks
that those metrics really are computed directly (otherwise the speed-up would be silently lost).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expectations import engine
from tests.unit.test_gx_dask import _compare, _key

WORDS = ["a", "bb", "ccc", "x1", "", "Zz", "é", "ccc "]


@st.composite
def frames(draw):
    n = draw(st.integers(1, 60))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    nulls = rng.random(n) < draw(st.sampled_from([0.0, 0.2, 0.9]))
    f64 = rng.normal(0, 5, n).round(1)
    f64[nulls] = np.nan
    f32 = rng.normal(0, 5, n).astype(np.float32)
    words = rng.choice(WORDS, n).astype(object)
    words[nulls] = None
    frame = pd.DataFrame({
        "f64": f64,
        "f32": f32,
        "i32": rng.integers(-5, 6, n).astype(np.int32),
        "u8": rng.integers(0, 9, n).astype(np.uint8),
        "i64": rng.integers(-3, 4, n).astype(np.int64),
        "nint": pd.array(np.where(nulls, 0, rng.integers(0, 5, n)), dtype="Int64"),
        "s": pd.Series(words, dtype="str"),
        "obj": pd.Series(words, dtype=object),
    })
    frame.loc[nulls, "nint"] = pd.NA
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    return frame, cuts


def expectations(draw_bounds: tuple[float, float]) -> list[dict]:
    lo, hi = draw_bounds
    exps = []
    for col in ("f64", "f32", "i32", "u8", "i64", "nint"):
        exps += [{"type": "expect_column_values_to_be_between", "kwargs": {"column": col, "min_value": lo,
                                                                           "max_value": hi}},
                 {"type": "expect_column_values_to_be_between", "kwargs": {"column": col, "min_value": lo,
                                                                           "strict_min": True, "mostly": 0.5}},
                 {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": col, "value_set": [0, 1, 2]}},
                 {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": col}},
                 {"type": "expect_column_values_to_be_unique", "kwargs": {"column": col}}]
    for col in ("s", "obj"):
        exps += [{"type": "expect_column_values_to_be_in_set", "kwargs": {"column": col, "value_set": ["a", "bb"]}},
                 {"type": "expect_column_values_to_not_be_in_set", "kwargs": {"column": col, "value_set": ["x1"]}},
                 {"type": "expect_column_values_to_be_null", "kwargs": {"column": col, "mostly": 0.3}},
                 {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": col}},
                 {"type": "expect_column_values_to_match_regex", "kwargs": {"column": col, "regex": "^[a-z]+$"}},
                 {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": col, "min_value": 1,
                                                                                  "max_value": 2}},
                 {"type": "expect_column_values_to_be_unique", "kwargs": {"column": col}}]
    return exps


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.tuples(st.integers(-6, 0), st.integers(0, 6)))
def test_direct_metrics_equal_gx_on_the_whole_frame(data, bounds):
    frame, cuts = data
    suite_json = {"name": "direct", "expectations": expectations(bounds)}
    suite = engine.to_gx_suite(suite_json, "test")
    reference = {_key(r): r for r in engine.run_whole_frame(suite, frame).results}
    edges = [0, *cuts, len(frame)]
    parts = [frame.iloc[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]
    [merged] = engine.run([suite], parts, list(frame.columns), scheduler="sync")
    for exp, result in zip(suite_json["expectations"], merged.results, strict=True):
        _compare(exp["type"], result, reference[_key(result)])


def test_simple_map_metrics_do_not_go_through_gx_metric_graph(monkeypatch):
    """None of these metrics reaches ``Validator.compute_metrics``."""
    frame = pd.DataFrame({"x": np.arange(100, dtype=np.int32), "s": pd.Series(["a", "b"] * 50, dtype="str")})
    suite_json = {"name": "direct", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "x", "min_value": 0, "max_value": 50}},
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "s", "value_set": ["a"]}},
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "s"}},
        {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "s", "regex": "a"}},
        {"type": "expect_table_row_count_to_equal", "kwargs": {"value": 100}},
    ]}
    seen: list[str] = []
    compute = engine._compute

    def spy(part, configs):
        seen.extend(c.metric_name for c in configs)
        return compute(part, configs)

    monkeypatch.setattr(engine, "_compute", spy)
    suite = engine.to_gx_suite(suite_json, "test")
    [result] = engine.run([suite], [frame.iloc[:40], frame.iloc[40:]], list(frame.columns), scheduler="sync")
    assert [r.success for r in result.results] == [False, False, True, False, True]
    assert result.results[0].result["unexpected_count"] == 49
    assert seen == [], seen


@pytest.mark.parametrize("values", [
    pd.Series(np.arange(1000, dtype=np.int64)),
    pd.Series(np.r_[np.arange(500.0), [3.0]]),
    pd.Series([f"id{i}" for i in range(1000)] + ["id7", "id7"], dtype="str"),
    pd.Series([1, "a", 2.5, "a"], dtype=object),
])
def test_repeated_values_match_pandas_value_counts(values):
    parts = [values.iloc[: len(values) // 3], values.iloc[len(values) // 3:]]
    found = engine._repeated_values([engine._value_counts(p) for p in parts])
    counts = values.value_counts()
    assert sorted(map(str, found)) == sorted(map(str, counts[counts > 1].index))
