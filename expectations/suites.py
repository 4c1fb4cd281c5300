"""Expectation suites as JSON (Great Expectations 1.x layout), checked without importing GX.

A suite is ``{"name": ..., "expectations": [{"type": ..., "kwargs": {...}}, ...]}``. prepflow runs:

* the suites it generates from the config with its own kernels (``expectations.kernels``), and
* of the user's suites, the common expectation types on those kernels too (``kernels.USER_KERNELS``,
  results equal to GX's) and the others with GX's public API (``expectations.gx_suites``), which this
  module classifies for it:
  ``ROW_WISE`` expectations decide each row on its own, so GX runs them per partition and the
  results add up; ``GLOBAL`` ones need every row at once (a mean, uniqueness, the row count) and
  GX runs them on the whole column(s); ``SCHEMA`` ones look at the column names only.

Any other type is refused before data is read (``SuiteError``), with a suggestion for a typo.
"""

from __future__ import annotations

import difflib
from typing import Any

PARTIAL_UNEXPECTED_COUNT = 20
RESULT_FORMAT = {"result_format": "SUMMARY", "partial_unexpected_count": PARTIAL_UNEXPECTED_COUNT}
GENERATED_BY = "prepflow"

ROW_WISE = (
    "expect_column_values_to_not_be_null",
    "expect_column_values_to_be_null",
    "expect_column_values_to_be_between",
    "expect_column_values_to_be_in_set",
    "expect_column_values_to_not_be_in_set",
    "expect_column_values_to_match_regex",
    "expect_column_values_to_not_match_regex",
    "expect_column_values_to_match_regex_list",
    "expect_column_values_to_not_match_regex_list",
    "expect_column_value_lengths_to_be_between",
    "expect_column_value_lengths_to_equal",
    "expect_column_values_to_be_json_parseable",
    "expect_column_pair_values_to_be_equal",
    "expect_column_pair_values_a_to_be_greater_than_b",
    "expect_multicolumn_sum_to_equal",
    "expect_select_column_values_to_be_unique_within_record",
)
GLOBAL = (
    "expect_table_row_count_to_be_between",
    "expect_table_row_count_to_equal",
    "expect_column_values_to_be_unique",
    "expect_column_mean_to_be_between",
    "expect_column_sum_to_be_between",
    "expect_column_stdev_to_be_between",
    "expect_column_min_to_be_between",
    "expect_column_max_to_be_between",
    "expect_column_median_to_be_between",
    "expect_column_quantile_values_to_be_between",
    "expect_column_proportion_of_non_null_values_to_be_between",
    "expect_column_proportion_of_unique_values_to_be_between",
    "expect_column_unique_value_count_to_be_between",
    "expect_column_distinct_values_to_be_in_set",
    "expect_column_distinct_values_to_contain_set",
    "expect_column_distinct_values_to_equal_set",
)
SCHEMA = (
    "expect_column_to_exist",
    "expect_table_columns_to_match_set",
    "expect_table_columns_to_match_ordered_list",
    "expect_table_column_count_to_equal",
    "expect_table_column_count_to_be_between",
)
SUPPORTED = frozenset(ROW_WISE + GLOBAL + SCHEMA)


class SuiteError(ValueError):
    """A suite prepflow cannot run: not GX 1.x JSON, an unsupported expectation type, bad kwargs."""


def check_suite(data: Any, source: str) -> dict:
    """Check a suite's JSON: a mapping with ``name`` and supported ``expectations``; returns it."""
    if not isinstance(data, dict) or not isinstance(data.get("expectations"), list):
        raise SuiteError(f"{source}: not a Great Expectations 1.x suite (expected a JSON object with 'name' "
                         "and an 'expectations' list)")
    if not isinstance(data.get("name"), str) or not data["name"]:
        raise SuiteError(f"{source}: the suite needs a 'name'")
    for i, exp in enumerate(data["expectations"]):
        where = f"{source}: expectations[{i}]"
        if not isinstance(exp, dict) or not isinstance(exp.get("type"), str):
            raise SuiteError(f"{where}: expected an object with 'type' and 'kwargs'")
        kind = exp["type"]
        if kind not in SUPPORTED:
            close = difflib.get_close_matches(kind, sorted(SUPPORTED), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise SuiteError(f"{where}: expectation type '{kind}' is not supported{hint} "
                             f"Supported: {', '.join(sorted(SUPPORTED))}")
        if not isinstance(exp.get("kwargs", {}), dict):
            raise SuiteError(f"{where}: 'kwargs' must be an object")
    return data


def is_generated(suite: dict) -> bool:
    """Whether prepflow generated the suite (its kernels run it) rather than the user (GX runs it)."""
    return (suite.get("meta") or {}).get("generated_by") == GENERATED_BY


def referenced_columns(data: dict) -> list[str]:
    """Every column an expectation of the suite JSON names, in order of appearance."""
    out: list[str] = []
    for exp in data.get("expectations", []):
        kwargs = exp.get("kwargs", {})
        for key in ("column", "column_A", "column_B"):
            if isinstance(kwargs.get(key), str):
                out.append(kwargs[key])
        for key in ("column_list", "column_set"):
            if isinstance(kwargs.get(key), list):
                out.extend(c for c in kwargs[key] if isinstance(c, str))
    return list(dict.fromkeys(out))
