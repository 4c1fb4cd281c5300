"""The expectations of a user suite that run on prepflow's kernels (``kernels.user_kernel``) give what
Great Expectations gives on the whole frame: every kernel-run type, with nulls, ``mostly``, strict
and one-sided bounds (``None`` given explicitly too), empty partitions and partitions cut anywhere
(hypothesis). The whole result JSON is compared (success, counts, percentages, the first unexpected
values and their rows, observed values, kwargs). Each drawn expectation is checked to be kernel-run,
so the comparison is kernels against GX, not GX against itself."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expectations import gx_suites, kernels, results, runner

WORDS = ["apple", "pear", "fig", "kiwi", "x1", "A-7", "", " 3", "\u0663\u0663"]
MOSTLY = st.sampled_from([None, 0.0, 0.5, 0.9, 1.0, 1])
STRICT = st.sampled_from([None, False, True])


@st.composite
def frames(draw):
    n = draw(st.integers(0, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    nulls = rng.random(n) < draw(st.sampled_from([0.0, 0.3, 1.0]))
    f64 = rng.normal(3, 4, n).round(1)
    f64[nulls] = np.nan
    words = np.array(rng.choice(WORDS, n), dtype=object)
    words[rng.random(n) < 0.2] = None
    frame = pd.DataFrame({
        "f64": f64,
        "i64": rng.integers(-3, 9, n).astype(np.int64),
        "nint": pd.array(np.where(nulls, 0, rng.integers(0, 9, n)), dtype="Int64"),
        "s": pd.Series(words, dtype="string[pyarrow]"),
        "str": pd.Series(words, dtype="str"),
    }, index=pd.RangeIndex(3, 3 + n))
    frame.loc[nulls, "nint"] = pd.NA
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    return frame, cuts


def _with(kwargs: dict, **optional) -> dict:
    """``kwargs`` plus the optional ones drawn (a None mostly/strict: not given)."""
    return {**kwargs, **{k: v for k, v in optional.items() if v is not None}}


@st.composite
def bounds(draw, numbers):
    low, high = draw(numbers), draw(numbers)
    if low is not None and high is not None and low > high:
        low, high = high, low
    if low is None and high is None:
        low = 0
    out = {"min_value": low, "max_value": high}
    if draw(st.booleans()):  # leave an absent bound out rather than give it as None
        out = {k: v for k, v in out.items() if v is not None}
    return _with(out, strict_min=draw(STRICT), strict_max=draw(STRICT))


NUM = st.one_of(st.none(), st.integers(-3, 9), st.floats(-3, 9).map(lambda x: round(x, 1)))
LEN = st.one_of(st.none(), st.integers(0, 5))


@st.composite
def suites(draw, n: int):
    numeric, text = ["f64", "i64", "nint"], ["s", "str"]
    exps = [("expect_column_to_exist", {"column": draw(st.sampled_from(numeric + text + ["absent"]))}),
            ("expect_table_row_count_to_equal", {"value": draw(st.sampled_from([n, n + 1, 0]))}),
            ("expect_table_row_count_to_be_between", draw(bounds(st.one_of(st.none(), st.integers(0, 45)))))]
    for col in numeric + text:
        m = draw(MOSTLY)
        exps += [("expect_column_values_to_not_be_null", _with({"column": col}, mostly=m)),
                 ("expect_column_values_to_be_null", _with({"column": col}, mostly=draw(MOSTLY))),
                 ("expect_column_values_to_be_unique", _with({"column": col}, mostly=draw(MOSTLY))),
                 ("expect_column_proportion_of_non_null_values_to_be_between",
                  {"column": col, **draw(bounds(st.sampled_from([None, 0, 0.5, 0.8, 1])))}),
                 ("expect_column_values_to_be_in_set", _with(
                     {"column": col, "value_set": draw(st.lists(st.sampled_from(WORDS + [0, 1, 2, 2.5, None]),
                                                                max_size=4))}, mostly=draw(MOSTLY))),
                 ("expect_column_values_to_not_be_in_set", _with(
                     {"column": col, "value_set": draw(st.lists(st.sampled_from(WORDS + [0, 1, 3]), max_size=3))},
                     mostly=draw(MOSTLY))),
                 ("expect_column_distinct_values_to_contain_set",
                  {"column": col, "value_set": draw(st.lists(st.sampled_from([0, 1, 2, 2.5]), max_size=3))})]
    for col in numeric:
        exps += [("expect_column_values_to_be_between", _with({"column": col, **draw(bounds(NUM))},
                                                              mostly=draw(MOSTLY)))]
        exps += [(f"expect_column_{agg}_to_be_between", {"column": col, **draw(bounds(NUM))})
                 for agg in ("mean", "min", "max", "sum")]
    for col in text:
        exps += [("expect_column_values_to_match_regex", _with(
                     {"column": col, "regex": draw(st.sampled_from(["^[a-z]+$", "[0-9]", "^$", "\\d"]))},
                     mostly=draw(MOSTLY))),
                 ("expect_column_values_to_not_match_regex", _with(
                     {"column": col, "regex": draw(st.sampled_from(["^[a-z]+$", "[0-9]", "\\s"]))},
                     mostly=draw(MOSTLY))),
                 ("expect_column_value_lengths_to_be_between", _with({"column": col, **draw(bounds(LEN))},
                                                                     mostly=draw(MOSTLY))),
                 ("expect_column_value_lengths_to_equal", _with({"column": col, "value": draw(st.integers(0, 5))},
                                                                mostly=draw(MOSTLY)))]
    return {"name": "user", "expectations": [{"type": t, "kwargs": kw} for t, kw in exps]}


def gx_whole_frame(suite: dict, frame: pd.DataFrame) -> list[dict]:
    return [results.from_gx(d) for d in gx_suites.validate_frame(suite["expectations"], frame)]


def cut(frame: pd.DataFrame, cuts: list[int]) -> list[pd.DataFrame]:
    edges = [0, *cuts, len(frame)]
    return [frame.iloc[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
def test_every_kernel_type_is_drawn():
    drawn = {e["type"] for e in suites(10).example()["expectations"]}
    assert drawn == set(kernels.USER_KERNELS)


def check_user_kernels_equal_gx(data, draw) -> None:
    frame, cuts = data
    suite = draw.draw(suites(len(frame)))
    columns = list(frame.columns)
    kernel_run, rest = runner.split_user_suite(suite, columns)
    assert rest["expectations"] == [] and len(kernel_run) == len(suite["expectations"])
    [entry] = runner.run([("user.json", suite)], cut(frame, cuts), columns, scheduler="sync")
    reference = gx_whole_frame(suite, frame)
    for mine, gx, exp in zip(entry["results"], reference, suite["expectations"], strict=True):
        assert mine == gx, (exp, mine, gx)


# GX validates each example's ~75 expectations in a few CPU seconds: the fast lane draws a few frames,
# CI's integration lane many more.
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.data())
def test_user_kernels_equal_gx_on_the_whole_frame(data, draw):
    check_user_kernels_equal_gx(data, draw)


@pytest.mark.integration
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.data())
def test_user_kernels_equal_gx_on_many_frames(data, draw):
    check_user_kernels_equal_gx(data, draw)


def test_the_comparison_is_not_vacuous():
    """On a fixed frame the kernel-run suite both passes and fails with unexpected values listed, and a
    kernel broken on purpose (in_set reading one value less) is caught."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"x": rng.normal(3, 4, 300).round(1), "s": pd.Series(rng.choice(WORDS, 300), dtype="str")})
    frame.loc[7, "x"] = np.nan
    suite = {"name": "u", "expectations": [
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "s", "value_set": ["fig", "pear"],
                                                                 "mostly": 0.2}},
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "x", "min_value": 0, "strict_min": True}},
        {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "x", "min_value": 0, "max_value": 9}}]}
    parts = cut(frame, [0, 100, 101])
    [entry] = runner.run([("u.json", suite)], parts, list(frame.columns), scheduler="sync")
    reference = gx_whole_frame(suite, frame)
    assert entry["results"] == reference
    assert {r["success"] for r in reference} == {True, False}
    assert any(r["result"].get("partial_unexpected_index_list") for r in reference)
    original = kernels.ValuesToBeInSet.unexpected
    try:
        kernels.ValuesToBeInSet.unexpected = lambda self, values: ~values.isin(self.kwargs["value_set"][:1]).to_numpy()
        [broken] = runner.run([("u.json", suite)], parts, list(frame.columns), scheduler="sync")
    finally:
        kernels.ValuesToBeInSet.unexpected = original
    assert broken["results"][0] != reference[0]


def test_kwargs_without_a_kernel_run_on_gx_only_those():
    """A row condition, a result format or an odd value sends that one expectation to GX."""
    columns = ["x", "s"]
    suite = {"name": "u", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "x", "min_value": 1}},
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "x", "min_value": 1,
                                                                  "row_condition": "s == 'a'",
                                                                  "condition_parser": "pandas"}},
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "x", "min_value": "a"}},
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "x", "mostly": 2}},
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "s", "value_set": [["a"]]}},
        {"type": "expect_column_median_to_be_between", "kwargs": {"column": "x", "min_value": 1}},
        {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "x", "min_value": 1}}]}
    kernel_run, rest = runner.split_user_suite(suite, columns)
    assert [i for i, _k in kernel_run] == [0, 6]
    assert rest["expectations"] == suite["expectations"][1:6]
