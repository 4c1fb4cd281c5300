"""Great Expectations 1.x suites on Dask partitions, with the results GX gives on the whole frame.

GX has no Dask engine. Every expectation is split into the metrics GX computes for it
(``Expectation.get_validation_dependencies``), and each metric is computed where it can be:

* **per partition, by GX** (``Validator.compute_metrics`` on a pandas batch; one ephemeral GX
  context per worker thread or process, created lazily and reused): row counts and the
  ``*.unexpected_count`` / ``*.unexpected_values`` / ``*.unexpected_index_list`` of row-wise (map)
  expectations. They merge exactly: counts add, and the unexpected values and indices are the
  first ``partial_unexpected_count`` in partition order, which is row order, which is what GX
  reports for the whole frame. Schema metrics (``table.columns``, ...) come from the first partition.
* **globally, with Dask**, what needs every row at once: mean, sum and standard deviation merge
  exact partial sums (``storage.exact_sum``); min/max merge partition minima/maxima; distinct-value
  metrics merge value sets; median and quantiles gather the column's non-null values; uniqueness
  merges value counts, then (only when a value repeats) flags the rows holding a repeated value.
  Where the reduced data keeps a metric's meaning (the set of distinct values, the gathered column,
  the partition minima) GX computes the metric on it, so the semantics are GX's own.

The merged metrics go to ``Expectation.metrics_validate``: the success rule (``mostly``, strict
bounds, ...) and the result format are GX's. ``SUPPORTED`` lists the expectation types for which
this holds; ``tests/unit/test_gx_dask.py`` checks every one against GX on the whole frame (counts,
values and indices equal; a float mean/sum/stdev equal to within 1e-12 relative, because the exact
merged sum is correctly rounded where pandas' is not). Any other type raises ``SuiteError`` before
data is read, never silently skipped. A row condition is accepted on row-wise expectations only.

Partitions must carry a global index (row numbers) so that unexpected indices are the same as on
the whole frame. GX is imported lazily (it costs ~3 s); its progress bars and analytics are off.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import os
import sys
import threading
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from storage.exact_sum import ExactSum

PARTIAL_UNEXPECTED_COUNT = 20
RESULT_FORMAT = {"result_format": "SUMMARY", "partial_unexpected_count": PARTIAL_UNEXPECTED_COUNT}

# Row-wise (map) expectations: GX per partition, counts and first unexpected values merged.
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
# Expectations on the whole table or column: metrics computed globally with Dask.
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
# Expectations on the table's columns only.
SCHEMA = (
    "expect_column_to_exist",
    "expect_table_columns_to_match_set",
    "expect_table_columns_to_match_ordered_list",
    "expect_table_column_count_to_equal",
    "expect_table_column_count_to_be_between",
)
SUPPORTED = frozenset(ROW_WISE + GLOBAL + SCHEMA)

# Metrics computed globally: name -> the partial each partition returns for its column.
_GLOBAL_METRICS = {
    "column.mean": "moments",
    "column.sum": "moments",
    "column.standard_deviation": "squares",
    "column.min": "minmax",
    "column.max": "minmax",
    "column.median": "gather",
    "column.quantile_values": "gather",
    "column.non_null_proportion": "count",
    "column.unique_proportion": "distinct",
    "column.distinct_values": "distinct",
    "column.distinct_values.count": "distinct",
    "column.distinct_values.not_in_set": "distinct",
    "column.distinct_values.not_in_set.count": "distinct",
    "column.distinct_values.missing_from_column": "distinct",
    "column.distinct_values.missing_from_column.count": "distinct",
    "column_values.unique.unexpected_count": "counts",
    "column_values.unique.unexpected_values": "counts",
    "column_values.unique.unexpected_index_list": "counts",
    "column_values.unique.unexpected_index_query": "counts",
}
_SCHEMA_METRICS = ("table.columns", "table.column_types", "table.column_count")
_HEAD_SUFFIXES = ("unexpected_values", "unexpected_index_list", "unexpected_rows")
_SUM_SUFFIXES = ("unexpected_count", "filtered_row_count")


class SuiteError(ValueError):
    """A suite prepflow cannot run: not GX 1.x JSON, an unsupported expectation type, bad kwargs."""


# ---- GX, lazily ----------------------------------------------------------------------------------

_LOCAL = threading.local()


def gx():
    """Import great_expectations (slow: ~3 s) with usage statistics off."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations

    return great_expectations


_PRELOAD: list[threading.Thread] = []


def preload() -> None:
    """Start importing GX in a background thread: its ~3 s import (and first use) then overlaps the
    stages before the first gate. A failure here is ignored; the gate imports GX again and reports it."""
    if _PRELOAD or "great_expectations.execution_engine" in sys.modules:
        return

    def work() -> None:
        try:
            gx()
            import great_expectations.execution_engine  # noqa: F401

            # GX's first validation in a process costs ~1 s more than the next ones: pay it here too
            suite = to_gx_suite({"name": "warmup", "expectations": [
                {"type": "expect_column_values_to_be_between", "kwargs": {"column": "x", "min_value": 0}},
                {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "s", "value_set": ["a"]}},
                {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "x", "min_value": 0}}]}, "warmup")
            import dask.local  # the function, not the name "sync": a name makes Dask import distributed

            run([suite], [pd.DataFrame({"x": [1.0, 2.0], "s": ["a", "b"]})], ["x", "s"], scheduler=dask.local.get_sync)
        except Exception:  # pragma: no cover - reported by the gate's own import
            pass

    _PRELOAD.append(threading.Thread(target=work, name="prepflow-gx-import", daemon=True))
    _PRELOAD[0].start()


def _widen(frame: pd.DataFrame) -> pd.DataFrame:
    """Narrow numpy ints/floats as int64/float64 (same values): GX compares only those two dtypes
    vectorized and falls back to a Python call per value for int32, int8, float32, ..."""
    casts = {c: ("int64" if t.kind in "iu" else "float64") for c, t in frame.dtypes.items()
             if isinstance(t, np.dtype) and t.kind in "iuf" and t.itemsize < 8}
    return frame.astype(casts) if casts else frame


def _gx_context():
    """This thread's ephemeral GX context and whole-dataframe batch definition, created once."""
    state = getattr(_LOCAL, "state", None)
    if state is None:
        from great_expectations.data_context.types.base import (
            DataContextConfig,
            InMemoryStoreBackendDefaults,
            ProgressBarsConfig,
        )
        from great_expectations.execution_engine import pandas_execution_engine

        # GX md5-hashes every batch under 1 GB for a fingerprint prepflow never reads (~30% of a
        # partition's validation time): off.
        pandas_execution_engine.HASH_THRESHOLD = 0
        config = DataContextConfig(store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
                                   analytics_enabled=False,
                                   progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False))
        context = gx().get_context(mode="ephemeral", project_config=config)
        batch_definition = (context.data_sources.add_pandas("prepflow").add_dataframe_asset("partition")
                            .add_batch_definition_whole_dataframe("whole"))
        state = _LOCAL.state = (context, batch_definition)
    return state


def _compute(frame: pd.DataFrame, configs: list) -> tuple[dict, dict]:
    """GX metrics on one pandas frame: ``({metric id: value}, {metric id: error message})``."""
    context, batch_definition = _gx_context()
    batch = batch_definition.get_batch(batch_parameters={"dataframe": frame})
    validator = context.get_validator(batch=batch)
    try:
        resolved, aborted = validator.compute_metrics(configs, {"result_format": RESULT_FORMAT})
    finally:  # the engine keeps every batch it loaded; a long run must not keep every partition
        validator.execution_engine.batch_manager.reset_batch_cache()
    errors = {}
    for metric_id, info in aborted.items():
        exc = info.get("exception_info")
        errors[metric_id] = _message(exc)
    return {c.id: resolved[c.id] for c in configs if c.id in resolved}, errors


def _message(exc: Any) -> str:
    if isinstance(exc, dict):
        exc = next(iter(exc.values()), exc) if "exception_message" not in exc else exc
        if isinstance(exc, dict):
            return str(exc.get("exception_message"))
    message = getattr(exc, "exception_message", None)
    return str(message if message is not None else exc)


# ---- suites --------------------------------------------------------------------------------------

def check_suite(data: Any, source: str) -> dict:
    """Check a suite's JSON (no GX import): a mapping with ``name`` and supported ``expectations``."""
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
            raise SuiteError(f"{where}: expectation type '{kind}' is not supported on Dask partitions{hint} "
                             f"Supported: {', '.join(sorted(SUPPORTED))}")
        kwargs = exp.get("kwargs", {})
        if not isinstance(kwargs, dict):
            raise SuiteError(f"{where}: 'kwargs' must be an object")
        if kwargs.get("row_condition") and kind not in ROW_WISE:
            raise SuiteError(f"{where}: row_condition is supported on row-wise expectations only, not on '{kind}'")
    return data


def to_gx_suite(data: dict, source: str):
    """``gx.ExpectationSuite(**json)``, with GX's complaints about kwargs reported against ``source``."""
    check_suite(data, source)
    try:
        return gx().ExpectationSuite(**{k: v for k, v in data.items() if k in ("name", "expectations", "meta",
                                                                                  "notes", "id",
                                                                                  "suite_parameters")})
    except Exception as exc:  # pydantic / GX configuration errors
        raise SuiteError(f"{source}: invalid expectation suite: {exc}") from None


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


# ---- plan ----------------------------------------------------------------------------------------

@dataclass
class _Item:
    suite: int
    expectation: Any
    metrics: dict[str, Any] = field(default_factory=dict)  # metric name -> MetricConfiguration
    missing: list[str] = field(default_factory=list)
    result_format: Any = None  # as GX parsed it for this expectation


def _domain_columns(config) -> list[str]:
    kw = config.metric_domain_kwargs
    cols = [kw[k] for k in ("column", "column_A", "column_B") if kw.get(k) is not None]
    return cols + list(kw.get("column_list") or [])


def _is_row_metric(name: str) -> bool:
    if name in _GLOBAL_METRICS:
        return False
    return (name == "table.row_count" or name in _SCHEMA_METRICS
            or name.rsplit(".", 1)[-1] in _SUM_SUFFIXES + ("unexpected_index_query", *_HEAD_SUFFIXES))


def _plan(suites: list, columns: list[str]) -> tuple[list[_Item], dict, dict]:
    from great_expectations.execution_engine import PandasExecutionEngine

    engine = PandasExecutionEngine()
    items: list[_Item] = []
    row_configs: dict = {}
    global_configs: dict = {}
    for s, suite in enumerate(suites):
        for expectation in suite.expectations:
            deps = expectation.get_validation_dependencies(execution_engine=engine,
                                                           runtime_configuration={"result_format": RESULT_FORMAT})
            item = _Item(s, expectation, dict(deps.metric_configurations), result_format=deps.result_format)
            items.append(item)
            for config in item.metrics.values():
                item.missing += [c for c in _domain_columns(config) if c not in columns and c not in item.missing]
            if item.missing:
                continue
            for name, config in item.metrics.items():
                if name.endswith(".unexpected_index_query"):
                    continue  # a query string of every unexpected index; SUMMARY results never show it
                if _is_row_metric(name):
                    row_configs[config.id] = config
                elif name in _GLOBAL_METRICS:
                    global_configs[config.id] = config
                else:
                    raise SuiteError(f"expectation '{expectation.expectation_type}' needs metric '{name}', which "
                                     "prepflow cannot compute on Dask partitions")
    return items, row_configs, global_configs


# ---- per-partition work --------------------------------------------------------------------------

def _exact_squares(x: np.ndarray) -> ExactSum:
    """Exact sum of squares: Veltkamp-split each value so every partial product is exact."""
    c = x * 134217729.0  # 2**27 + 1
    hi = c - (c - x)
    lo = x - hi
    total = ExactSum().add_array(hi * hi).merge(ExactSum().add_array(2.0 * hi * lo))
    return total.merge(ExactSum().add_array(lo * lo))


def _partial(frame: pd.DataFrame, kind: str, column: str):
    col = frame[column]
    nonnull = col.dropna() if col.hasnans else col
    if kind == "count":
        return len(col), len(nonnull)
    if kind in ("moments", "squares"):
        integers = pd.api.types.is_integer_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype)
        x = nonnull.to_numpy(dtype=np.float64)
        out = {"n": len(x), "int_sum": int(nonnull.to_numpy(dtype=np.int64).sum()) if integers else None,
               "sum": ExactSum().add_array(x), "sumsq": ExactSum()}
        if kind == "squares":
            out["sumsq"] = _exact_squares(x)
        return out
    if kind == "minmax":
        return nonnull if nonnull.empty else pd.Series([nonnull.min(), nonnull.max()], dtype=col.dtype)
    if kind == "distinct":
        return pd.Series(nonnull.unique(), dtype=col.dtype)
    if kind == "gather":
        return nonnull
    if kind == "counts":
        return _value_counts(nonnull)
    raise AssertionError(kind)


def _value_counts(values: pd.Series):
    """A partition's non-null values for the uniqueness check, in the cheapest form that finds repeats:
    ``("sorted", array)`` for numbers (a sort and a neighbour comparison find every repeat);
    ``("hashed", uint64 hashes, Arrow array, sorted hashes)`` for strings (``storage.string_hash``: repeats can only be
    among equal hashes, and only those few candidates are compared as strings); otherwise pandas' value
    counts. Arrow's ``count_distinct`` costs 0.3 s on 1M values, the sort 0.03 s."""
    import pyarrow as pa

    from storage.string_hash import hash_strings

    dtype = values.dtype
    if (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)) \
            and not isinstance(dtype, pd.CategoricalDtype):
        try:
            return ("sorted", np.sort(values.to_numpy()))
        except (TypeError, ValueError):
            pass
    if pd.api.types.is_string_dtype(dtype) and not isinstance(dtype, pd.CategoricalDtype):
        try:
            arr = pa.array(values, from_pandas=True)
            if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
                hashes = hash_strings(arr)
                return ("hashed", hashes, arr, np.sort(hashes))  # sorted here, on the partition's thread
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
            pass
    return ("counts", values.value_counts(sort=False))


def _repeats_in_sorted(values: np.ndarray) -> np.ndarray:
    same = values[1:] == values[:-1]
    return np.unique(values[1:][same]) if same.any() else values[:0]


def _merge_sorted(runs: list[np.ndarray]) -> np.ndarray:
    """The sorted runs as one sorted array: numpy's stable sort (timsort) merges presorted runs in about
    linear time (1M int64 in 2 runs: 3.5 ms, against 60 ms for the default quicksort)."""
    return np.sort(np.concatenate(runs), kind="stable")


def _repeated_values(parts: list) -> pd.Series:
    """The values that occur more than once over all partitions (``_value_counts`` partials)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kinds = {p[0] for p in parts}
    if kinds == {"sorted"}:
        return pd.Series(_repeats_in_sorted(_merge_sorted([p[1] for p in parts])))
    if kinds == {"hashed"}:
        collided = _repeats_in_sorted(_merge_sorted([p[3] for p in parts]))
        if not len(collided):
            return pd.Series([], dtype=object)
        candidates = pa.chunked_array([p[2].filter(pa.array(np.isin(p[1], collided))).cast(pa.large_string())
                                       for p in parts], type=pa.large_string())
        counted = pc.value_counts(candidates)
        found = counted.field("values").filter(pc.greater(counted.field("counts"), 1))
        return pd.Series(found.to_pandas())
    series = [p[1] if p[0] == "counts" else pd.Series(p[1]).value_counts(sort=False) if p[0] == "sorted"
              else p[2].to_pandas().value_counts(sort=False) for p in parts]
    series = [p for p in series if len(p)]
    if not series:
        return pd.Series([], dtype=object)
    counts = pd.concat(series).groupby(level=0, sort=False).sum()
    return pd.Series(counts[counts > 1].index)


def _projection(config) -> tuple | str | None:
    """The part of a partition a metric needs: "schema" (no rows), a tuple of columns, or None
    (everything: a row condition may name any column). GX filters the whole frame by the domain's
    null mask for every metric, so handing it only the needed columns saves most of its time."""
    if config.metric_name in _SCHEMA_METRICS:
        return "schema"
    if config.metric_domain_kwargs.get("row_condition"):
        return None
    return tuple(sorted(set(_domain_columns(config))))


# Column map metrics whose pandas condition GX defines as a plain function of the (null-filtered)
# column. For these, ``_direct`` calls GX's own condition function and counts/lists the unexpected
# values the way GX's map-metric helpers do, without GX's metric graph (its resolution, ids and
# pydantic copies cost more than the data work on a 500k-row partition). Anything else (a row
# condition, another result format, a condition that raises) goes through ``Validator.compute_metrics``.
_DIRECT_CONDITIONS = frozenset({
    "column_values.nonnull", "column_values.null", "column_values.between", "column_values.in_set",
    "column_values.not_in_set", "column_values.match_regex", "column_values.not_match_regex",
    "column_values.match_regex_list", "column_values.not_match_regex_list",
    "column_values.value_length.between", "column_values.value_length.equals", "column_values.json_parseable",
})
_DIRECT_SUFFIXES = ("unexpected_count", "unexpected_values", "unexpected_index_list")


def _direct_key(config) -> tuple | None:
    """``(condition, column, value kwargs as JSON)`` when ``_direct`` can compute the metric, else None."""
    base, _, suffix = config.metric_name.rpartition(".")
    if suffix not in _DIRECT_SUFFIXES or base not in _DIRECT_CONDITIONS:
        return None
    domain = {k: v for k, v in config.metric_domain_kwargs.items() if v is not None}
    if set(domain) != {"column"}:
        return None
    kwargs = dict(config.metric_value_kwargs)
    result_format = kwargs.pop("result_format", None)
    if result_format is not None and (result_format.get("result_format") != "SUMMARY"
                                      or result_format.get("unexpected_index_column_names")):
        return None
    try:
        return base, domain["column"], json.dumps(kwargs, sort_keys=True)
    except TypeError:
        return None


@functools.lru_cache(maxsize=None)
def _condition_function(condition: str):
    """GX's registered pandas condition for ``condition`` (``cls, fn``), unwrapped to the plain
    function of the column that the ``column_condition_partial`` decorator wraps."""
    from great_expectations.execution_engine import PandasExecutionEngine
    from great_expectations.expectations.registry import get_metric_provider

    cls, fn = get_metric_provider(f"{condition}.condition", PandasExecutionEngine())
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return cls, fn


def _direct(frame: pd.DataFrame, condition: str, column: str, kwargs: dict) -> dict:
    """GX's map metric ``unexpected_count`` / ``unexpected_values`` / ``unexpected_index_list`` for one
    condition on one partition, computed as GX's pandas map-metric helpers do (column_condition_partial,
    _pandas_map_condition_unexpected_count, _pandas_column_map_condition_values,
    _pandas_map_condition_index with a default index): nulls filtered first unless the provider keeps
    them, ``~condition`` is unexpected, the first ``PARTIAL_UNEXPECTED_COUNT`` values and index labels."""
    cls, fn = _condition_function(condition)
    col = frame[column]
    if condition == "column_values.between":
        col = _widen(col.to_frame())[column]
    if getattr(cls, "filter_column_isnull", True):
        present = col.notnull()
        if not present.all():  # filtering a column without nulls would only copy it
            col = col[present]
    unexpected = ~fn(cls, col, **kwargs, _metrics={"table.columns": list(frame.columns)})
    count = int(np.count_nonzero(unexpected))
    if not count:
        return {"unexpected_count": 0, "unexpected_values": [], "unexpected_index_list": []}
    mask = np.asarray(unexpected)
    if mask.dtype == bool:  # only the first few are listed: take their positions, filter nothing
        first = np.flatnonzero(mask)[:PARTIAL_UNEXPECTED_COUNT]
        return {"unexpected_count": count, "unexpected_values": list(col.iloc[first]),
                "unexpected_index_list": list(col.index[first])}
    return {"unexpected_count": count,  # a nullable mask: GX's own selections
            "unexpected_values": list(col[unexpected == True][:PARTIAL_UNEXPECTED_COUNT]),  # noqa: E712 (GX's mask)
            "unexpected_index_list": list(col[unexpected].index[:PARTIAL_UNEXPECTED_COUNT])}


# Table metrics as GX's pandas providers compute them (table_row_count, table_columns,
# table_column_types, table_column_count), without a GX call.
_TABLE_DIRECT = {
    "table.row_count": len,
    "table.columns": lambda frame: list(frame.columns),
    "table.column_types": lambda frame: [{"name": n, "type": t} for n, t in zip(frame.columns, frame.dtypes, strict=True)],
    "table.column_count": lambda frame: len(frame.columns),
}


def _scan(frame: pd.DataFrame, row_configs: list, requests: list[tuple[str, str]], schema: bool = True):
    """One partition: GX metrics (row counts and the simple column map metrics directly, see
    ``_direct``; the rest with one GX call per group of metrics: those on numeric columns share one,
    since filtering numbers is cheap; other column sets get their own; schema metrics only where
    ``schema``), and the partials of global metrics."""
    numeric = {c for c, t in frame.dtypes.items() if pd.api.types.is_numeric_dtype(t)}
    metrics, errors = {}, {}
    direct: dict = {}
    for config in row_configs:
        if config.metric_name in _TABLE_DIRECT and not any(config.metric_domain_kwargs.values()):
            if schema or config.metric_name == "table.row_count":
                metrics[config.id] = _TABLE_DIRECT[config.metric_name](frame)
            continue
        key = _direct_key(config)
        if key is not None:
            direct.setdefault(key, []).append(config)
    for (condition, column, kwargs), configs in direct.items():
        try:
            values = _direct(frame, condition, column, json.loads(kwargs))
        except Exception:  # left to GX's own call below, which reports it the way GX does
            continue
        for config in configs:
            metrics[config.id] = values[config.metric_name.rpartition(".")[2]]
    groups: dict = {}
    for config in row_configs:
        if config.id in metrics:
            continue
        key = _projection(config)
        if key == "schema" and not schema:
            continue
        if isinstance(key, tuple) and all(c in numeric for c in key):
            key = "numeric"
        groups.setdefault(key, []).append(config)
    for key, configs in groups.items():
        if key == "numeric":
            part = frame[sorted({c for config in configs for c in _domain_columns(config)})]
        else:
            part = frame if key is None else frame.iloc[:0] if key == "schema" else frame[list(key)]
        got, failed = _compute(_widen(part), configs)
        metrics.update(got)
        errors.update(failed)
    partials = {}
    for req in requests:
        try:
            partials[req] = _partial(frame, *req)
        except (TypeError, ValueError) as exc:
            partials[req] = exc
    return metrics, errors, partials


def _flag_repeats(frame: pd.DataFrame, column: str, repeated: pd.Series, limit: int):
    nonnull = frame[column].dropna()
    hit = nonnull[nonnull.isin(repeated)]
    return len(hit), hit.iloc[:limit].tolist(), hit.index[:limit].tolist()


# ---- merge ---------------------------------------------------------------------------------------

def _merge_row_metric(name: str, values: list):
    if name in _SCHEMA_METRICS:
        return values[0]
    suffix = name.rsplit(".", 1)[-1]
    if name == "table.row_count" or suffix in _SUM_SUFFIXES:
        return sum(values)
    if suffix == "unexpected_index_query":
        return None
    if suffix == "unexpected_rows":
        return pd.concat(values).head(PARTIAL_UNEXPECTED_COUNT)
    return [v for part in values for v in part][:PARTIAL_UNEXPECTED_COUNT]


def _moments(parts: list[dict]) -> dict:
    out = {"n": 0, "int_sum": 0, "sum": ExactSum(), "sumsq": ExactSum()}
    for p in parts:
        out["n"] += p["n"]
        out["int_sum"] = None if p["int_sum"] is None or out["int_sum"] is None else out["int_sum"] + p["int_sum"]
        out["sum"] = out["sum"].merge(p["sum"])  # merge returns a new sum
        out["sumsq"] = out["sumsq"].merge(p["sumsq"])
    return out


def _global_value(name: str, config, merged: dict):
    """One global metric from the merged partials (GX computes it where a reduced frame suffices)."""
    column = config.metric_domain_kwargs["column"]
    kind = _GLOBAL_METRICS[name]
    value = merged[(kind, column)]
    if kind in ("moments", "squares"):
        n, total = value["n"], value["sum"].fraction()
        if name == "column.sum":
            return value["int_sum"] if value["int_sum"] is not None else float(total)
        if name == "column.mean":
            return float(total / n) if n else float("nan")
        if n < 2:
            return float("nan")
        var = (value["sumsq"].fraction() * n - total * total) / (n * (n - 1))
        return _sqrt(var)
    if kind == "count":
        rows, nonnull = value
        return nonnull / rows if rows > 0 else 0
    if name == "column.unique_proportion":
        rows, nonnull = merged[("count", column)]
        return len(value) / nonnull if rows > 0 and nonnull > 0 else 0
    reduced = _widen(pd.DataFrame({column: value}))
    metrics, errors = _compute(reduced, [config])
    if errors:
        raise _MetricError(next(iter(errors.values())))
    return metrics[config.id]


def _sqrt(value: Fraction) -> float:
    return math.sqrt(float(value)) if value > 0 else 0.0


class _MetricError(Exception):
    pass


def _concat(kind: str, parts: list):
    if kind == "count":
        return (sum(p[0] for p in parts), sum(p[1] for p in parts))
    if kind in ("moments", "squares"):
        return _moments(parts)
    if kind == "counts":
        return _repeated_values(parts)
    series = pd.concat(parts, ignore_index=True)
    return pd.Series(series.unique(), dtype=series.dtype) if kind == "distinct" else series


# ---- entry point ---------------------------------------------------------------------------------

@dataclass
class SuiteResult:
    name: str
    results: list  # GX ExpectationValidationResult, in suite order

    @property
    def success(self) -> bool:
        return all(r.success for r in self.results)


def planned(named: list[tuple[str, dict]], columns: list[str]) -> tuple[list, tuple]:
    """``(GX suites, plan)`` for ``(source, suite JSON)`` pairs on frames of ``columns``, for ``run``.
    Kept per process (the gate server's lifetime): GX's planning of 10 expectations costs ~35 ms, as
    much as a third of validating 1M rows. The plan holds GX objects that ``run`` only reads."""
    return _planned(json.dumps(named, sort_keys=True, default=str), tuple(columns))


@functools.lru_cache(maxsize=16)
def _planned(named_json: str, columns: tuple[str, ...]) -> tuple[list, tuple]:
    suites = [to_gx_suite(s, src) for src, s in json.loads(named_json)]
    return suites, _plan(suites, list(columns))


def run(suites: list, parts: list, columns: list[str], scheduler: str | None = None,
        plan: tuple | None = None) -> list[SuiteResult]:
    """Validate ``parts`` (pandas frames or Dask delayed frames, in row order, with a global index)
    against GX ``ExpectationSuite`` objects; ``columns`` are the frames' columns. ``scheduler``: Dask's
    (default: the active one, a distributed Client if set). ``plan``: from ``planned`` (else made here)."""
    import dask

    items, row_configs, global_configs = plan if plan is not None else _plan(suites, list(columns))
    requests = sorted({(_GLOBAL_METRICS[c.metric_name], c.metric_domain_kwargs["column"])
                       for c in global_configs.values()})
    if any(c.metric_name == "column.unique_proportion" for c in global_configs.values()):
        requests = sorted(set(requests) | {("count", c.metric_domain_kwargs["column"])
                                           for c in global_configs.values()
                                           if c.metric_name == "column.unique_proportion"})
    rows = list(row_configs.values())
    scanned = list(dask.compute(*[dask.delayed(_scan)(p, rows, requests, i == 0) for i, p in enumerate(parts)],
                                scheduler=scheduler))
    if not scanned:
        empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in columns})
        scanned = [_scan(empty, rows, requests)]

    errors: dict = {}
    merged_metrics: dict = {c.id: None for item in items for name, c in item.metrics.items()
                            if name.endswith(".unexpected_index_query")}
    for config in rows:
        for _m, errs, _p in scanned:
            if config.id in errs:
                errors.setdefault(config.id, errs[config.id])
        if config.id not in errors:
            merged_metrics[config.id] = _merge_row_metric(config.metric_name,
                                                          [m[config.id] for m, _e, _p in scanned if config.id in m])
    merged_partials: dict = {}
    for req in requests:
        values = [p[req] for _m, _e, p in scanned]
        bad = next((v for v in values if isinstance(v, Exception)), None)
        merged_partials[req] = bad if bad is not None else _concat(req[0], values)

    unique_columns = sorted({c.metric_domain_kwargs["column"] for c in global_configs.values()
                             if c.metric_name.startswith("column_values.unique.")})
    repeats = {}
    for column in unique_columns:
        repeated = merged_partials[("counts", column)]
        if isinstance(repeated, Exception):
            continue
        if len(repeated):
            flagged = dask.compute(*[dask.delayed(_flag_repeats)(p, column, repeated, PARTIAL_UNEXPECTED_COUNT)
                                     for p in parts], scheduler=scheduler)
        else:
            flagged = [(0, [], [])]
        repeats[column] = (sum(f[0] for f in flagged), [v for f in flagged for v in f[1]][:PARTIAL_UNEXPECTED_COUNT],
                           [i for f in flagged for i in f[2]][:PARTIAL_UNEXPECTED_COUNT])
    for config in global_configs.values():
        name, column = config.metric_name, config.metric_domain_kwargs["column"]
        partial = merged_partials[(_GLOBAL_METRICS[name], column)]
        if isinstance(partial, Exception):
            errors[config.id] = str(partial)
            continue
        if name.startswith("column_values.unique."):
            count, values, index = repeats[column]
            suffix = name.rsplit(".", 1)[-1]
            merged_metrics[config.id] = {"unexpected_count": count, "unexpected_values": values,
                                         "unexpected_index_list": index, "unexpected_index_query": None}[suffix]
            continue
        try:
            merged_metrics[config.id] = _global_value(name, config, merged_partials)
        except _MetricError as exc:
            errors[config.id] = str(exc)

    from great_expectations.execution_engine import PandasExecutionEngine

    engine = PandasExecutionEngine()
    results: list[list] = [[] for _ in suites]
    for item in items:
        results[item.suite].append(_evaluate(item, merged_metrics, errors, engine))
    return [SuiteResult(suite.name, res) for suite, res in zip(suites, results, strict=True)]


def _evaluate(item: _Item, metrics: dict, errors: dict, engine):
    from great_expectations.core import ExpectationValidationResult

    config = item.expectation.configuration
    message = None
    if item.missing:
        message = "; ".join(f'The column "{c}" in BatchData does not exist.' for c in item.missing)
    else:
        message = next((errors[c.id] for c in item.metrics.values() if c.id in errors), None)
    if message is None:
        try:  # what ``Expectation.metrics_validate`` does, without computing the dependencies again
            provided = {name: metrics[c.id] for name, c in item.metrics.items()}
            raw = item.expectation._validate(metrics=provided, execution_engine=engine,
                                             runtime_configuration={"result_format": item.result_format})
            return item.expectation._build_evr(raw_response=raw)
        except Exception as exc:  # GX raises for e.g. bounds of the wrong type; reported like GX does
            message = f"{type(exc).__name__}: {exc}"
    return ExpectationValidationResult(success=False, expectation_config=config, result={},
                                       exception_info={"raised_exception": True, "exception_message": message,
                                                       "exception_traceback": None})


def run_whole_frame(suite, frame: pd.DataFrame):
    """GX itself on one pandas frame: the reference the merged results must equal."""
    _context, batch_definition = _gx_context()
    return batch_definition.get_batch(batch_parameters={"dataframe": frame}).validate(
        suite, result_format=dict(RESULT_FORMAT))
