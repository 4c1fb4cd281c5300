"""prepflow's kernels for the suites it generates (``expectations.kernels``) give what Great
Expectations gives on the whole frame, for every generated expectation type, on hypothesis frames
of every dtype a gate's partition holds (narrow ints and floats, nullable ints, Arrow strings with
Unicode digits and spaces, nulls, repeats) cut into partitions anywhere. The whole result JSON is
compared: success, counts, percentages, the first unexpected values and their row labels, kwargs.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expectations import gx_suites, kernel_base, kernels, results, runner
from expectations.kernels import NUMBER_PATTERN
from tests.conftest import ROOT

# Characters where Python's re (what GX runs) and RE2 could disagree, and the pattern's own letters.
CHARS = list("0123456789.eE+- \t\n\x0b\x0c\r\x1c\x1f\xa0\u2003\u0663\uff11NnAaUuLlox")
NUMERIC = ("f64", "f32", "i32", "u8", "i64", "nint", "split")


@st.composite
def frames(draw):
    n = draw(st.integers(0, 50))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    nulls = rng.random(n) < draw(st.sampled_from([0.0, 0.2, 0.9]))
    f64 = rng.normal(0, 5, n).round(1)
    f64[nulls] = np.nan
    words = draw(st.lists(st.one_of(st.text(alphabet=st.sampled_from(CHARS), max_size=6),
                                    st.sampled_from(["1", " 2.5e3 ", "-.5", "nan", "NULL", "None", "x", "1e"])),
                          min_size=n, max_size=n))
    text = np.array(words, dtype=object)
    text[nulls] = None
    frame = pd.DataFrame({
        "f64": f64,
        "f32": rng.normal(0, 5, n).astype(np.float32),
        "i32": rng.integers(-5, 6, n).astype(np.int32),
        "u8": rng.integers(0, 9, n).astype(np.uint8),
        "i64": rng.integers(-3, 40, n).astype(np.int64),
        "nint": pd.array(np.where(nulls, 0, rng.integers(0, 30, n)), dtype="Int64"),
        "split": rng.integers(0, 3, n).astype(np.int8),
        "s": pd.Series(text, dtype="string[pyarrow]"),
    }, index=pd.RangeIndex(7, 7 + n))
    frame.loc[nulls, "nint"] = pd.NA
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    return frame, cuts


def generated_suite(n: int, bounds: tuple[float, float]) -> dict:
    lo, hi = bounds
    exps = [{"type": "expect_column_to_exist", "kwargs": {"column": c}} for c in ("f64", "absent")]
    exps += [{"type": "expect_table_row_count_to_equal", "kwargs": {"value": v}} for v in (n, n + 1)]
    for col in NUMERIC:
        exps += [{"type": "expect_column_values_to_be_between", "kwargs": {"column": col, "min_value": lo,
                                                                           "max_value": hi}},
                 {"type": "expect_column_values_to_be_between", "kwargs": {"column": col, "min_value": lo}},
                 {"type": "expect_column_values_to_be_between", "kwargs": {"column": col, "max_value": hi - 0.5}},
                 {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": col}},
                 {"type": "expect_column_values_to_be_unique", "kwargs": {"column": col}},
                 {"type": "expect_column_distinct_values_to_contain_set", "kwargs": {"column": col,
                                                                                     "value_set": [0, 1, 2]}},
                 {"type": "expect_column_proportion_of_non_null_values_to_be_between",
                  "kwargs": {"column": col, "min_value": 0, "strict_min": True}}]
    exps += [{"type": "expect_column_values_to_match_regex", "kwargs": {"column": "s", "regex": NUMBER_PATTERN}},
             {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "s"}},
             {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "s"}},
             {"type": "expect_column_proportion_of_non_null_values_to_be_between",
              "kwargs": {"column": "s", "min_value": 0, "strict_min": True}},
             {"type": "expect_column_values_to_be_between", "kwargs": {"column": "s", "min_value": 0}},
             {"type": "expect_column_values_to_be_between", "kwargs": {"column": "absent", "min_value": 0}},
             {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "absent"}}]
    for e in exps:
        e["meta"] = {"generated_by": "prepflow"}
    return {"name": "generated", "expectations": exps, "meta": {"generated_by": "prepflow"}}


def gx_whole_frame(suite: dict, frame: pd.DataFrame) -> list[dict]:
    return [results.from_gx(d) for d in gx_suites.validate_frame(suite["expectations"], frame)]


def cut(frame: pd.DataFrame, cuts: list[int]) -> list[pd.DataFrame]:
    edges = [0, *cuts, len(frame)]
    return [frame.iloc[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]


def assert_same(kernel_results: list[dict], reference: list[dict]) -> None:
    assert len(kernel_results) == len(reference)
    for mine, gx in zip(kernel_results, reference, strict=True):
        assert mine == gx, (mine, gx)


def check_kernels_equal_gx(data, bounds) -> None:
    frame, cuts = data
    suite = generated_suite(len(frame), bounds)
    [entry] = runner.run([("generated:raw", suite)], cut(frame, cuts), list(frame.columns), scheduler="sync")
    assert_same(entry["results"], gx_whole_frame(suite, frame))


# GX validates each example's ~70 expectations in ~1-3 CPU s: the fast lane draws a few frames, CI's
# integration lane many more (below).
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.tuples(st.integers(-6, 0), st.integers(1, 30)))
def test_kernels_equal_gx_on_the_whole_frame(data, bounds):
    check_kernels_equal_gx(data, bounds)


@pytest.mark.integration
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.tuples(st.integers(-6, 0), st.integers(1, 30)))
def test_kernels_equal_gx_on_many_frames(data, bounds):
    check_kernels_equal_gx(data, bounds)


def test_the_comparison_is_not_vacuous():
    """On a fixed frame the generated suite both passes and fails, with unexpected values listed, and
    one kernel broken on purpose (an off-by-one bound) is caught by the comparison."""
    rng = np.random.default_rng(3)
    n = 200
    frame = pd.DataFrame({c: rng.integers(0, 40, n).astype(np.int64) for c in NUMERIC})
    frame["f64"] = frame["f64"].astype(float)
    frame.loc[5, "f64"] = np.nan
    frame["s"] = pd.Series(rng.choice(["1", "2.5", "x", "\u0663", " nan "], n), dtype="string[pyarrow]")
    suite = generated_suite(n, (0, 20))
    parts = cut(frame, [50, 51, 130])
    [entry] = runner.run([("generated:raw", suite)], parts, list(frame.columns), scheduler="sync")
    reference = gx_whole_frame(suite, frame)
    assert_same(entry["results"], reference)
    assert {r["success"] for r in reference} == {True, False}
    assert any(r["result"].get("partial_unexpected_index_list") for r in reference)

    original = kernels.ValuesToBeBetween.unexpected
    try:
        kernels.ValuesToBeBetween.unexpected = lambda self, values: original(
            self, values + 1 if kernel_base.is_numeric(values.dtype) else values)
        [broken] = runner.run([("generated:raw", suite)], parts, list(frame.columns), scheduler="sync")
    finally:
        kernels.ValuesToBeBetween.unexpected = original
    with pytest.raises(AssertionError):
        assert_same(broken["results"], reference)


def test_the_regex_equivalent_matches_like_python_on_ascii():
    """``NUMBER_PATTERN_ASCII`` on RE2 decides every short ASCII string like Python's ``re`` does with
    ``NUMBER_PATTERN`` (exhaustive over the characters that matter, up to 3 of them)."""
    import itertools
    import re

    import pyarrow as pa
    import pyarrow.compute as pc

    alphabet = "0 9.eE+-\t\n\x0b\x1c\x1fNanulx"
    strings = [""] + ["".join(p) for k in (1, 2, 3) for p in itertools.product(alphabet, repeat=k)]
    strings += ["nan", "NULL", "None", " 1.5e-3\n", "1.", ".5", "+.5e+2 "]
    python = [re.search(NUMBER_PATTERN, s) is not None for s in strings]
    re2 = pc.match_substring_regex(pa.array(strings), kernels.NUMBER_PATTERN_ASCII).to_pylist()
    assert python == re2


def test_generated_suites_and_kernel_run_user_suites_do_not_import_gx():
    script = """
import sys
import numpy as np, pandas as pd
from expectations import runner
from tests.unit.gates.test_gx_direct_metrics import generated_suite
frame = pd.DataFrame({c: np.arange(10) for c in ("f64", "f32", "i32", "u8", "i64", "nint", "split")})
frame["s"] = pd.Series(["1"] * 10, dtype="string[pyarrow]")
[entry] = runner.run([("generated:raw", generated_suite(10, (0, 5)))], [frame], list(frame.columns), scheduler="sync")
# and a user suite of every type the kernels run (tests/unit/gates/test_gx_user_kernels.py)
from tests.unit.gates.test_gx_user_kernels import suites
frame["str"] = frame["s"]
[user] = runner.run([("u.json", suites(10).example())], [frame], list(frame.columns), scheduler="sync")
print(entry["evaluated"], user["evaluated"], "great_expectations" in sys.modules)
"""
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    evaluated, user_evaluated, imported = proc.stdout.split()
    assert int(evaluated) > 50 and int(user_evaluated) > 40 and imported == "False"
