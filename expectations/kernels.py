"""The expectations prepflow generates from the config, and the common ones of user suites, on
numpy/pyarrow kernels (no GX import).

User suites: ``user_kernel`` gives the kernel of an expectation whose type and kwargs a kernel covers
(``USER_KERNELS``: not/be null, between, in/not in set, regex, value lengths, unique, row count,
mean/min/max/sum, proportion of non-null, distinct values containing numbers; no row condition, no
result format, no suite parameter); the others run on GX (``expectations.gx_suites``). A kernel makes
GX's own pandas call where one decides (``isin``, ``astype(str).str.contains``, ``.mean()`` on the
column's partitions concatenated in row order) and reports kwargs as GX does (no None, no defaults).
``tests/unit/gates/test_gx_user_kernels.py`` checks each against GX.

Each generated expectation type has a kernel: ``partial(frame)`` reads one pandas partition (which
carries its global row index) and returns a small, mergeable value; ``merge(partials)`` (partials in
partition order, which is row order) returns the result JSON (``expectations.results``) that Great
Expectations 1.x gives for the whole frame. ``tests/unit/gates/`` checks every kernel
against GX itself, on hypothesis frames cut into partitions anywhere.

* row-wise checks (between, not null, the number pattern) count per partition and keep their first
  ``PARTIAL_UNEXPECTED_COUNT`` unexpected values and index labels; counts add, lists concatenate.
* uniqueness keeps each partition's non-null values (numbers; anything else as pandas hashes,
  verified value by value among equal hashes) and a sorted copy; the merge sorts the runs together
  (numpy's stable sort merges sorted runs in about linear time) and flags every row of a repeated
  value, as GX's ``duplicated(keep=False)``.
* distinct values merge as sets, the row count and the non-null proportion as counts.

The number pattern (``NUMBER_PATTERN``, Python ``re`` semantics, the regex GX is given) runs on
Arrow's RE2 engine as ``NUMBER_PATTERN_ASCII``, which matches the same ASCII strings (Python's
``\\s`` on ASCII also matches ``\\x1c``-``\\x1f``, its ``\\d`` only ``0-9``); the rare values with
other characters (Unicode digits and spaces differ between the engines) are matched by ``re``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.lazy import pandas as pd
from expectations import gx_suites, results
from expectations.kernel_base import (
    _BETWEEN_TYPE_ERROR,
    Kernel,
    KernelError,
    _float_bound,
    is_numeric,
    numbers,
)
from expectations.suites import PARTIAL_UNEXPECTED_COUNT
from expectations.unique_kernel import ValuesToBeUnique

NUMBER_PATTERN = r"^\s*(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[Nn][Aa][Nn]?|[Nn][Uu][Ll][Ll]|[Nn]one)?\s*$"
_S = r"[\t\n\x0b\x0c\r \x1c-\x1f]"
NUMBER_PATTERN_ASCII = (rf"^{_S}*(?:[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[Nn][Aa][Nn]?|[Nn][Uu][Ll][Ll]"
                        rf"|[Nn]one)?{_S}*$")
# Regexes the kernel runs on RE2, with their RE2 equivalent on ASCII strings.
RE2_EQUIVALENT = {NUMBER_PATTERN: NUMBER_PATTERN_ASCII}


# ---- schema and table --------------------------------------------------------------------------

class ColumnToExist(Kernel):
    type = "expect_column_to_exist"

    @property
    def absent(self) -> None:
        return None

    def partial(self, frame):
        return None

    def result(self, partials):
        return self.column in self.table_columns, {}


class TableRowCountToEqual(Kernel):
    type = "expect_table_row_count_to_equal"

    def partial(self, frame):
        return len(frame)

    def result(self, partials):
        rows = int(sum(partials))
        return rows == self.kwargs["value"], {"observed_value": rows}


class ProportionOfNonNull(Kernel):
    type = "expect_column_proportion_of_non_null_values_to_be_between"

    def reported_kwargs(self):
        return {k: _float_bound(v) if k in ("min_value", "max_value") else v for k, v in self.kwargs.items()}

    def partial(self, frame):
        col = frame[self.column]
        return len(col), int(col.notna().sum())

    def result(self, partials):
        rows, nonnull = sum(p[0] for p in partials), sum(p[1] for p in partials)
        observed = nonnull / rows if rows > 0 else 0
        kw = self.kwargs
        return results.between(observed, kw.get("min_value"), kw.get("max_value"), kw.get("strict_min", False),
                               kw.get("strict_max", False)), {"observed_value": observed}


class DistinctValuesToContainSet(Kernel):
    type = "expect_column_distinct_values_to_contain_set"

    def partial(self, frame):
        col = frame[self.column].dropna()
        return set(pd.unique(numbers(col)).tolist() if is_numeric(col.dtype) else col.unique().tolist())

    def result(self, partials):
        present = set().union(*partials) if partials else set()
        # GX's own set difference (value set minus the column's distinct values), so the missing values
        # come in its order: a set's, fixed for numbers (whose hashes are not randomized)
        missing = list(set(self.kwargs["value_set"]) - present)
        return not missing, {"observed_value": None, "missing_count": len(missing),
                             "partial_missing_list": missing[:PARTIAL_UNEXPECTED_COUNT]}


# ---- row-wise ----------------------------------------------------------------------------------

class _RowWise(Kernel):
    """A map expectation: nulls set apart (``missing_count``), ``unexpected(non-null values)`` decides."""

    def unexpected(self, values: pd.Series) -> np.ndarray:
        raise NotImplementedError

    def partial(self, frame):
        col = frame[self.column]
        null = col.isna().to_numpy(dtype=bool)
        missing = int(null.sum())
        values = col[~null] if missing else col
        mask = self.unexpected(values) if len(values) else np.zeros(0, dtype=bool)
        first = np.flatnonzero(mask)[:PARTIAL_UNEXPECTED_COUNT]
        return {"rows": len(col), "missing": missing, "unexpected": int(np.count_nonzero(mask)),
                "values": values.iloc[first].tolist(), "index": values.index[first].tolist()}

    def result(self, partials):
        return results.map_result(sum(p["rows"] for p in partials), sum(p["missing"] for p in partials),
                                  sum(p["unexpected"] for p in partials),
                                  [v for p in partials for v in p["values"]][:PARTIAL_UNEXPECTED_COUNT],
                                  [i for p in partials for i in p["index"]][:PARTIAL_UNEXPECTED_COUNT],
                                  self.kwargs.get("mostly", 1.0))


class ValuesToBeBetween(_RowWise):
    type = "expect_column_values_to_be_between"

    def reported_kwargs(self):
        return {k: _float_bound(v) if k in ("min_value", "max_value") else v for k, v in self.kwargs.items()}

    def partial(self, frame):
        low, high = self.kwargs.get("min_value"), self.kwargs.get("max_value")
        if low is None and high is None:
            raise KernelError("min_value and max_value cannot both be None")
        if low is not None and high is not None and low > high:
            raise KernelError("min_value cannot be greater than max_value")
        return super().partial(frame)

    def unexpected(self, values):
        if not is_numeric(values.dtype):
            raise KernelError(_BETWEEN_TYPE_ERROR)
        return ~within(numbers(values), self.kwargs)


def within(x: np.ndarray, kw: dict) -> np.ndarray:
    """``x`` inside GX's ``min_value``/``max_value`` bounds (either may be None; ``strict_min``/``strict_max``)."""
    low, high = kw.get("min_value"), kw.get("max_value")
    inside = np.ones(len(x), dtype=bool)
    if low is not None:
        inside &= x > low if kw.get("strict_min") else x >= low
    if high is not None:
        inside &= x < high if kw.get("strict_max") else x <= high
    return inside


class ValuesToMatchRegex(_RowWise):
    type = "expect_column_values_to_match_regex"

    def unexpected(self, values):
        regex = self.kwargs["regex"]
        if regex not in RE2_EQUIVALENT:
            raise KernelError(f"no RE2 equivalent of the regex {regex!r} is known to prepflow")
        if not pd.api.types.is_string_dtype(values.dtype) or values.dtype == object:
            values = values.astype(str)  # what GX matches: the values as Python strings
        arr = pa.array(values, type=pa.large_string())
        matched = pc.match_substring_regex(arr, RE2_EQUIVALENT[regex]).to_numpy(zero_copy_only=False)
        other = np.flatnonzero(~pc.string_is_ascii(arr).to_numpy(zero_copy_only=False))
        if len(other):  # non-ASCII values: Python's re, which GX uses
            pattern = re.compile(regex)
            matched = matched.copy()
            matched[other] = [pattern.search(s) is not None for s in arr.take(pa.array(other)).to_pylist()]
        return ~matched


class ValuesToNotBeNull(Kernel):
    type = "expect_column_values_to_not_be_null"

    def partial(self, frame):
        col = frame[self.column]
        null = col.isna().to_numpy(dtype=bool)
        first = np.flatnonzero(null)[:PARTIAL_UNEXPECTED_COUNT]
        # the null values themselves: GX counts each NaN apart (NaN != NaN) but None or pd.NA together
        return {"rows": len(col), "unexpected": int(null.sum()), "values": col.iloc[first].tolist(),
                "index": col.index[first].tolist()}

    def result(self, partials):
        return results.map_result(sum(p["rows"] for p in partials), None, sum(p["unexpected"] for p in partials),
                                  [v for p in partials for v in p["values"]][:PARTIAL_UNEXPECTED_COUNT],
                                  [i for p in partials for i in p["index"]][:PARTIAL_UNEXPECTED_COUNT],
                                  self.kwargs.get("mostly", 1.0))


class ValuesToBeNull(Kernel):
    type = "expect_column_values_to_be_null"

    def partial(self, frame):
        col = frame[self.column]
        nonnull = col.notna().to_numpy(dtype=bool)
        first = np.flatnonzero(nonnull)[:PARTIAL_UNEXPECTED_COUNT]
        return {"rows": len(col), "unexpected": int(nonnull.sum()), "values": col.iloc[first].tolist(),
                "index": col.index[first].tolist()}

    result = ValuesToNotBeNull.result


class ValuesToBeInSet(_RowWise):
    """GX: ``column.isin(value_set)`` on the non-null values (the same pandas call, per partition)."""

    type = "expect_column_values_to_be_in_set"

    def unexpected(self, values):
        return ~values.isin(self.kwargs["value_set"]).to_numpy(dtype=bool)


class ValuesToNotBeInSet(_RowWise):
    type = "expect_column_values_to_not_be_in_set"

    def unexpected(self, values):
        return values.isin(self.kwargs["value_set"]).to_numpy(dtype=bool)


class ValuesToMatchUserRegex(_RowWise):
    """A user's regex: GX's own pandas call (``astype(str).str.contains``) on the non-null values, so
    that the regex engine is the one GX uses on that dtype."""

    type = "expect_column_values_to_match_regex"

    def unexpected(self, values):
        return ~values.astype(str).str.contains(self.kwargs["regex"]).to_numpy(dtype=bool)


class ValuesToNotMatchUserRegex(_RowWise):
    type = "expect_column_values_to_not_match_regex"

    def unexpected(self, values):
        return values.astype(str).str.contains(self.kwargs["regex"]).to_numpy(dtype=bool)


class ValueLengthsToBeBetween(_RowWise):
    """GX: the lengths of ``astype(str)``, compared with the (optionally strict) bounds."""

    type = "expect_column_value_lengths_to_be_between"

    def unexpected(self, values):
        return ~within(values.astype(str).str.len().to_numpy(dtype=np.int64), self.kwargs)


class ValueLengthsToEqual(_RowWise):
    type = "expect_column_value_lengths_to_equal"

    def reported_kwargs(self):
        return {**self.kwargs, "value": float(self.kwargs["value"])}

    def unexpected(self, values):
        return values.astype(str).str.len().to_numpy(dtype=np.int64) != self.kwargs["value"]


class TableRowCountToBeBetween(Kernel):
    type = "expect_table_row_count_to_be_between"

    def partial(self, frame):
        return len(frame)

    def result(self, partials):
        rows = int(sum(partials))
        kw = self.kwargs
        return results.between(rows, kw.get("min_value"), kw.get("max_value"), kw.get("strict_min", False),
                               kw.get("strict_max", False)), {"observed_value": rows}


class _ColumnAggregate(Kernel):
    """An aggregate GX computes with one pandas call on the whole column, nulls included (``mean``,
    ``min``, ``max``, ``sum``): each partition gives its column, the merge concatenates them (in row
    order, so the same values in the same order as GX's frame) and makes the same call, so float
    sums round as GX's. A column that is not numeric is left to GX (``fallback``)."""

    method = ""

    def reported_kwargs(self):
        return {k: _float_bound(v) if k in ("min_value", "max_value") else v for k, v in self.kwargs.items()}

    def partial(self, frame):
        return frame[self.column]

    def per_file(self, dtypes):
        """A numeric column of a numpy dtype: its partials, the column itself, go as ``.npy`` files."""
        return self.absent is not None or dtypes.get(self.column, "").startswith(("float", "int", "uint"))

    def merge(self, partials):
        if self.absent is None and partials and not all(is_numeric(p.dtype) for p in partials):
            return self.fallback(partials)
        return super().merge(partials)

    def fallback(self, partials):
        column = pd.concat(partials) if len(partials) > 1 else partials[0]
        [out] = gx_suites.validate_frame([{"type": self.type, "kwargs": dict(self.kwargs)}],
                                         column.to_frame(self.column))
        return results.from_gx(out)

    def result(self, partials):
        column = pd.concat(partials) if len(partials) > 1 else partials[0]
        value = getattr(column, self.method)()
        if value is None or pd.isnull(value):
            return False, {"observed_value": None}
        kw = self.kwargs
        return results.between(value, kw.get("min_value"), kw.get("max_value"), kw.get("strict_min", False),
                               kw.get("strict_max", False)), {"observed_value": value}


class ColumnMeanToBeBetween(_ColumnAggregate):
    type = "expect_column_mean_to_be_between"
    method = "mean"


class ColumnMinToBeBetween(_ColumnAggregate):
    type = "expect_column_min_to_be_between"
    method = "min"


class ColumnMaxToBeBetween(_ColumnAggregate):
    type = "expect_column_max_to_be_between"
    method = "max"


class ColumnSumToBeBetween(_ColumnAggregate):
    type = "expect_column_sum_to_be_between"
    method = "sum"


KERNELS: dict[str, type[Kernel]] = {k.type: k for k in (
    ColumnToExist, TableRowCountToEqual, ProportionOfNonNull, DistinctValuesToContainSet, ValuesToBeBetween,
    ValuesToMatchRegex, ValuesToNotBeNull, ValuesToBeUnique)}


# ---- user suites ---------------------------------------------------------------------------------

def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)


def _bounds_ok(kw: dict) -> bool:
    low, high = kw.get("min_value"), kw.get("max_value")
    return ((low is None or _num(low)) and (high is None or _num(high)) and (low is not None or high is not None)
            and (low is None or high is None or low <= high)
            and all(isinstance(kw.get(k, False), bool) for k in ("strict_min", "strict_max")))


def _mostly_ok(kw: dict) -> bool:
    return "mostly" not in kw or (_num(kw["mostly"]) and 0 <= kw["mostly"] <= 1)


def _scalar_set(kw: dict) -> bool:
    values = kw.get("value_set")
    return isinstance(values, list) and all(v is None or isinstance(v, (str, int, float)) for v in values)


def _number_set(kw: dict) -> bool:
    """Numbers only: GX lists the missing ones in its set's order, which is sorted for numbers only
    (for strings it varies with Python's hash seed, so GX runs those)."""
    values = kw.get("value_set")
    return isinstance(values, list) and all(_num(v) for v in values)


def _regex_ok(kw: dict) -> bool:
    try:
        re.compile(kw.get("regex"))
    except (TypeError, re.error):
        return False
    return True


_ROW = {"column", "mostly"}
_BOUNDS = {"min_value", "max_value", "strict_min", "strict_max"}
# user expectation type -> (kernel, the kwargs it takes, a check of their values); anything else
# (row_condition, result_format, a suite parameter, an odd value) runs on GX.
USER_KERNELS: dict[str, tuple[type[Kernel], set[str], Any]] = {
    "expect_column_to_exist": (ColumnToExist, {"column"}, lambda kw: True),
    "expect_table_row_count_to_equal": (TableRowCountToEqual, {"value"},
                                        lambda kw: isinstance(kw.get("value"), int) and not isinstance(
                                            kw["value"], bool)),
    "expect_table_row_count_to_be_between": (TableRowCountToBeBetween, _BOUNDS, lambda kw: _bounds_ok(kw) and all(
        v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in (kw.get("min_value"),
                                                                                kw.get("max_value")))),
    "expect_column_values_to_not_be_null": (ValuesToNotBeNull, _ROW, _mostly_ok),
    "expect_column_values_to_be_null": (ValuesToBeNull, _ROW, _mostly_ok),
    "expect_column_values_to_be_between": (ValuesToBeBetween, _ROW | _BOUNDS,
                                           lambda kw: _mostly_ok(kw) and _bounds_ok(kw)),
    "expect_column_values_to_be_in_set": (ValuesToBeInSet, _ROW | {"value_set"},
                                          lambda kw: _mostly_ok(kw) and _scalar_set(kw)),
    "expect_column_values_to_not_be_in_set": (ValuesToNotBeInSet, _ROW | {"value_set"},
                                              lambda kw: _mostly_ok(kw) and _scalar_set(kw)),
    "expect_column_values_to_match_regex": (ValuesToMatchUserRegex, _ROW | {"regex"},
                                            lambda kw: _mostly_ok(kw) and _regex_ok(kw)),
    "expect_column_values_to_not_match_regex": (ValuesToNotMatchUserRegex, _ROW | {"regex"},
                                                lambda kw: _mostly_ok(kw) and _regex_ok(kw)),
    "expect_column_value_lengths_to_be_between": (ValueLengthsToBeBetween, _ROW | _BOUNDS, lambda kw: _mostly_ok(
        kw) and _bounds_ok(kw) and all(v is None or isinstance(v, int) for v in (kw.get("min_value"),
                                                                                   kw.get("max_value")))),
    "expect_column_value_lengths_to_equal": (ValueLengthsToEqual, _ROW | {"value"}, lambda kw: _mostly_ok(kw) and (
        isinstance(kw.get("value"), int) and not isinstance(kw["value"], bool))),
    "expect_column_values_to_be_unique": (ValuesToBeUnique, _ROW, _mostly_ok),
    "expect_column_proportion_of_non_null_values_to_be_between": (ProportionOfNonNull, {"column"} | _BOUNDS,
                                                                  _bounds_ok),
    "expect_column_distinct_values_to_contain_set": (DistinctValuesToContainSet, {"column", "value_set"},
                                                     _number_set),
    "expect_column_mean_to_be_between": (ColumnMeanToBeBetween, {"column"} | _BOUNDS, _bounds_ok),
    "expect_column_min_to_be_between": (ColumnMinToBeBetween, {"column"} | _BOUNDS, _bounds_ok),
    "expect_column_max_to_be_between": (ColumnMaxToBeBetween, {"column"} | _BOUNDS, _bounds_ok),
    "expect_column_sum_to_be_between": (ColumnSumToBeBetween, {"column"} | _BOUNDS, _bounds_ok),
}


def user_kernel(expectation: dict, columns: list[str]) -> Kernel | None:
    """The kernel that runs a user's expectation exactly as GX would, or None when GX must run it (a type
    or kwargs prepflow has no kernel for). GX checks the kwargs of the ones it runs; the kwargs a kernel
    takes are checked here, strictly enough that GX would accept them too."""
    spec = USER_KERNELS.get(expectation.get("type"))
    kwargs = expectation.get("kwargs") or {}
    if spec is None or not set(kwargs) <= spec[1]:
        return None
    kernel, _keys, valid = spec
    if "column" in spec[1] and not isinstance(kwargs.get("column"), str):
        return None
    return kernel(kwargs, columns) if valid(kwargs) else None


def kernels(suite: dict, columns: list[str]) -> list[Kernel]:
    """The kernels of a generated suite's expectations, in suite order."""
    out = []
    for exp in suite["expectations"]:
        if exp["type"] not in KERNELS:  # a generator and its kernels disagree: a bug, not a user error
            raise AssertionError(f"no kernel for generated expectation type {exp['type']}")
        out.append(KERNELS[exp["type"]](exp.get("kwargs", {}), columns))
    return out


def scan(checks: list[Kernel], frame: pd.DataFrame) -> list:
    """One partition's partials, one per kernel."""
    return [check.scan(frame) for check in checks]
