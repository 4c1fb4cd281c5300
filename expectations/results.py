"""Expectation results as plain, deterministic JSON, in the shape Great Expectations 1.x reports them.

One result is ``{"expectation_type", "kwargs", "success", "result"[, "exception"]}``: what
``ExpectationValidationResult.to_json_dict()`` holds, without GX's batch id and with an exception
reduced to its message. ``map_result`` builds the ``result`` of a row-wise (map) expectation from
counts and the first unexpected values exactly as GX's ``SUMMARY`` format does (percentages,
``partial_unexpected_counts`` ordered by count then value, the ``mostly`` rule); the kernels and the
merge of GX's per-partition results both use it, so both give GX's own numbers.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from expectations.suites import PARTIAL_UNEXPECTED_COUNT


def map_result(element_count: int, missing_count: int | None, unexpected_count: int, values: list, index: list,
               mostly: float = 1.0) -> tuple[bool, dict]:
    """``(success, result)`` of a map expectation. ``missing_count`` None: nulls are not set apart
    (``expect_column_values_to_not_be_null``), so the percentages count every row."""
    considered = element_count - (missing_count or 0)
    if element_count == 0 or considered == 0:
        success = True  # vacuously, as GX
    else:
        success = (float(considered) - float(unexpected_count)) / float(considered) >= mostly
    total = unexpected_count / element_count * 100 if element_count > 0 else None
    if missing_count is None:
        nonmissing = total
    else:
        nonmissing = unexpected_count / considered * 100 if element_count > 0 and considered > 0 else None
    result: dict[str, Any] = {"element_count": element_count, "unexpected_count": unexpected_count,
                              "unexpected_percent": nonmissing,
                              "partial_unexpected_list": list(values[:PARTIAL_UNEXPECTED_COUNT])}
    if missing_count is not None:
        result.update(missing_count=missing_count,
                      missing_percent=missing_count / element_count * 100 if element_count > 0 else None,
                      unexpected_percent_total=total, unexpected_percent_nonmissing=nonmissing)
    head = values[:PARTIAL_UNEXPECTED_COUNT]
    try:
        counted = Counter(tuple(v.values()) if isinstance(v, dict) else tuple(v) if isinstance(v, list) else v
                          for v in head)  # pairs and records (lists once in JSON) counted as tuples, as GX
        result["partial_unexpected_counts"] = [{"value": k, "count": c} for k, c in sorted(
            counted.most_common(PARTIAL_UNEXPECTED_COUNT), key=lambda x: (-x[1], x[0]))]
    except TypeError:  # values that do not sort or hash: GX leaves the counts out
        pass
    result["partial_unexpected_index_list"] = list(index[:PARTIAL_UNEXPECTED_COUNT])
    return success, result


def between(value, min_value=None, max_value=None, strict_min: bool = False, strict_max: bool = False) -> bool:
    """GX's bounds rule for an aggregate (an observed value within optional, optionally strict, bounds)."""
    above = True if min_value is None else value > min_value if strict_min else value >= min_value
    below = True if max_value is None else value < max_value if strict_max else value <= max_value
    return bool(above and below)


def entry(expectation_type: str, kwargs: dict, success: bool, result: dict, exception: str | None = None) -> dict:
    out = {"expectation_type": expectation_type, "kwargs": {k: v for k, v in kwargs.items() if k != "batch_id"},
           "success": bool(success), "result": clean(result)}
    if exception is not None:
        out["exception"] = exception
    return out


def failed(expectation_type: str, kwargs: dict, message: str) -> dict:
    """The result of an expectation that raised: not a success, no result, GX's message."""
    return entry(expectation_type, kwargs, False, {}, message)


def from_gx(d: dict) -> dict:
    """A GX result's ``to_json_dict()`` as prepflow's result JSON."""
    config = d["expectation_config"]
    info = d.get("exception_info") or {}
    message = None
    if info.get("raised_exception"):
        message = info.get("exception_message")
    elif info and "raised_exception" not in info:  # {metric id: info} when a metric raised
        raised = [v for v in info.values() if isinstance(v, dict) and v.get("raised_exception")]
        message = raised[0].get("exception_message") if raised else None
    return entry(config["type"], config["kwargs"], d["success"], d.get("result") or {}, message)


def clean(value):
    """Plain JSON: non-finite floats and pandas nulls become null, numpy scalars Python ones, tuples lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if type(value).__name__ in ("NAType", "NaTType"):  # pandas' nulls
        return None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    item = getattr(value, "item", None)  # a numpy scalar
    if callable(item) and not isinstance(value, (str, bytes)) and getattr(value, "ndim", None) == 0:
        return clean(item())
    return value


def suite_entry(name: str, source: str, results: list[dict]) -> dict:
    failed_count = sum(1 for r in results if not r["success"])
    return {"name": name, "source": source, "success": failed_count == 0, "evaluated": len(results),
            "failed": failed_count, "results": results}
