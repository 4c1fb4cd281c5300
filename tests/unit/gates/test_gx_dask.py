"""User suites through Great Expectations' public API, per partition, equal GX on the whole frame.

Every supported expectation type is run (passing and failing variants, ``mostly``, row conditions)
on partitions of uneven size, one of them empty, cut anywhere (hypothesis), and compared with GX on
the concatenated frame: the whole result JSON (success, counts, percentages, unexpected values and
their row indices, observed values) must be equal.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import ConfigError
from expectations import gx_suites, results, runner, suites
from tasks.validate import stage as validate

N = 1200  # rows: enough for every expectation to pass and fail somewhere; GX's cost grows with them


def make_frame(n: int = N, seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "x": rng.normal(10, 3, n),
        "i": rng.integers(0, 50, n).astype(np.int64),
        "u": np.arange(n, dtype=np.int64) * 7,
        "s": pd.Series(rng.choice(["apple", "pear", "fig", "kiwi", "x1", "A-7"], n), dtype="string"),
        "a": rng.integers(0, 10, n),
        "b": rng.integers(0, 10, n),
        "j": pd.Series(rng.choice(['{"k": 1}', "[1, 2]", "nope", "3"], n), dtype="string"),
    })
    df.loc[rng.random(n) < 0.05, "x"] = np.nan
    df.loc[rng.random(n) < 0.03, "s"] = pd.NA
    df.loc[[5, n * 5 // 6], "u"] = 35  # one repeated value, far apart: in different partitions
    return df


def partitions(df: pd.DataFrame, cuts: list[int]) -> list[pd.DataFrame]:
    bounds = [0, *cuts, len(df)]
    return [df.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


E = {
    "expect_column_values_to_not_be_null": [{"column": "x"}, {"column": "i"}, {"column": "x", "mostly": 0.9}],
    "expect_column_values_to_be_null": [{"column": "x"}, {"column": "x", "mostly": 0.01}],
    "expect_column_values_to_be_between": [
        {"column": "x", "min_value": 4, "max_value": 16},
        {"column": "x", "min_value": 0, "max_value": 30},
        {"column": "i", "min_value": 0, "max_value": 49, "strict_max": True, "mostly": 0.95},
        {"column": "x", "min_value": 9, "row_condition": "i > 40", "condition_parser": "pandas"},
    ],
    "expect_column_values_to_be_in_set": [{"column": "s", "value_set": ["apple", "pear", "fig"]},
                                          {"column": "i", "value_set": list(range(50))}],
    "expect_column_values_to_not_be_in_set": [{"column": "s", "value_set": ["kiwi"]}],
    "expect_column_values_to_match_regex": [{"column": "s", "regex": "^[a-z]+$"}],
    "expect_column_values_to_not_match_regex": [{"column": "s", "regex": "[0-9]"}],
    "expect_column_values_to_match_regex_list": [{"column": "s", "regex_list": ["^a", "^p"], "match_on": "any"}],
    "expect_column_values_to_not_match_regex_list": [{"column": "s", "regex_list": ["^k", "^x"]}],
    "expect_column_value_lengths_to_be_between": [{"column": "s", "min_value": 3, "max_value": 4}],
    "expect_column_value_lengths_to_equal": [{"column": "s", "value": 4}],
    "expect_column_values_to_be_json_parseable": [{"column": "j"}],
    "expect_column_pair_values_to_be_equal": [{"column_A": "a", "column_B": "b"}],
    "expect_column_pair_values_a_to_be_greater_than_b": [{"column_A": "a", "column_B": "b", "or_equal": True}],
    "expect_multicolumn_sum_to_equal": [{"column_list": ["a", "b"], "sum_total": 9}],
    "expect_select_column_values_to_be_unique_within_record": [{"column_list": ["a", "b"]}],
    "expect_table_row_count_to_be_between": [{"min_value": 1, "max_value": N}, {"min_value": N + 1}],
    "expect_table_row_count_to_equal": [{"value": N}, {"value": 7}],
    "expect_column_values_to_be_unique": [{"column": "u"}, {"column": "x"}, {"column": "i", "mostly": 0.5}],
    "expect_column_mean_to_be_between": [{"column": "x", "min_value": 9, "max_value": 11},
                                         {"column": "i", "max_value": 10}],
    "expect_column_sum_to_be_between": [{"column": "i", "min_value": 0}, {"column": "x", "max_value": 100}],
    "expect_column_stdev_to_be_between": [{"column": "x", "min_value": 2, "max_value": 4}],
    "expect_column_min_to_be_between": [{"column": "x", "min_value": 0}, {"column": "i", "min_value": 0}],
    "expect_column_max_to_be_between": [{"column": "x", "max_value": 15}, {"column": "i", "max_value": 40}],
    "expect_column_median_to_be_between": [{"column": "x", "min_value": 9, "max_value": 11}],
    "expect_column_quantile_values_to_be_between": [
        {"column": "x", "quantile_ranges": {"quantiles": [0.05, 0.5, 0.95], "value_ranges": [[0, 6], [9, 11], [14, 20]]}}],
    "expect_column_proportion_of_non_null_values_to_be_between": [{"column": "x", "min_value": 0.99},
                                                                   {"column": "s", "min_value": 0.9}],
    "expect_column_proportion_of_unique_values_to_be_between": [{"column": "i", "max_value": 0.1}],
    "expect_column_unique_value_count_to_be_between": [{"column": "s", "min_value": 6, "max_value": 6}],
    "expect_column_distinct_values_to_be_in_set": [{"column": "s", "value_set": ["apple", "pear", "fig", "kiwi"]}],
    "expect_column_distinct_values_to_contain_set": [{"column": "s", "value_set": ["apple", "banana"]}],
    "expect_column_distinct_values_to_equal_set": [{"column": "i", "value_set": list(range(50))}],
    "expect_column_to_exist": [{"column": "x"}, {"column": "nope"}],
    "expect_table_columns_to_match_set": [{"column_set": ["x", "i"], "exact_match": False},
                                          {"column_set": ["x", "i"], "exact_match": True}],
    "expect_table_columns_to_match_ordered_list": [{"column_list": ["x", "i", "u", "s", "a", "b", "j"]}],
    "expect_table_column_count_to_equal": [{"value": 7}],
    "expect_table_column_count_to_be_between": [{"min_value": 1, "max_value": 3}],
}


def suite_json() -> dict:
    return {"name": "every-supported-type",
            "expectations": [{"type": t, "kwargs": kw} for t, kws in E.items() for kw in kws]}


def whole_frame(suite: dict, frame: pd.DataFrame) -> list[dict]:
    return [results.from_gx(d) for d in gx_suites.validate_frame(suite["expectations"], frame)]


def test_every_supported_type_is_covered():
    assert set(E) == suites.SUPPORTED


def assert_same(merged: list[dict], reference: list[dict]) -> None:
    assert len(merged) == len(reference)
    for mine, gx in zip(merged, reference, strict=True):
        assert mine == gx, (mine, gx)


@pytest.fixture(scope="module")
def frame():
    return make_frame()


@pytest.fixture(scope="module")
def reference(frame):
    return whole_frame(suite_json(), frame)


@pytest.mark.parametrize("cuts", [[], [400, 400, 880], [1, 2, 3, N - 1]], ids=["one", "uneven+empty", "tiny"])
def test_merged_partitions_equal_gx_on_the_whole_frame(frame, reference, cuts):
    [entry] = runner.run([("user.json", suite_json())], partitions(frame, cuts), list(frame.columns))
    assert_same(entry["results"], reference)
    # the suite both passes and fails somewhere, so the comparison is not vacuous
    assert {r["success"] for r in entry["results"]} == {True, False}
    assert any(r["result"].get("partial_unexpected_index_list") for r in entry["results"])


@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 400), max_size=3), st.integers(0, 2**16))
def test_partition_cuts_anywhere(cuts, seed):
    frame = make_frame(400, seed)
    [entry] = runner.run([("user.json", suite_json())], partitions(frame, sorted(cuts)), list(frame.columns),
                         scheduler="sync")
    assert_same(entry["results"], whole_frame(suite_json(), frame))


def test_dask_delayed_partitions_give_the_same_results(frame, reference):
    import dask

    parts = [dask.delayed(lambda p: p)(p) for p in partitions(frame, [280, 760])]
    [entry] = runner.run([("user.json", suite_json())], parts, list(frame.columns))
    assert_same(entry["results"], reference)


def test_an_unsupported_expectation_type_is_a_clear_error():
    data = {"name": "s", "expectations": [{"type": "expect_column_kl_divergence_to_be_less_than",
                                           "kwargs": {"column": "x"}}]}
    with pytest.raises(suites.SuiteError, match="expectations\\[0\\].*kl_divergence.*not supported.*Supported:"):
        suites.check_suite(data, "my_suite.json")


def test_a_misspelled_type_gets_a_suggestion():
    data = {"name": "s", "expectations": [{"type": "expect_column_values_to_be_betwen", "kwargs": {}}]}
    with pytest.raises(suites.SuiteError, match="did you mean 'expect_column_values_to_be_between'"):
        suites.check_suite(data, "s.json")


def test_kwargs_gx_refuses_are_a_config_error_naming_the_file(frame):
    data = {"name": "s", "expectations": [{"type": "expect_column_values_to_be_between",
                                           "kwargs": {"column": "x", "min_value": [1]}}]}
    with pytest.raises(ConfigError, match="bad.json: invalid expectation suite"):
        validate.run_suites([("bad.json", data)], [frame], list(frame.columns))


def test_a_missing_column_fails_the_expectation_like_gx(frame):
    data = {"name": "s", "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "q"}},
                                          {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "q"}}]}
    [entry] = runner.run([("s.json", data)], partitions(frame, [N // 2]), list(frame.columns))
    assert_same(entry["results"], whole_frame(data, frame))
    for r in entry["results"]:
        assert r["success"] is False and '"q"' in r["exception"]
