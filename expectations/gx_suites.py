"""The expectations of user suites that have no kernel (``expectations.kernels.user_kernel``: a type
or kwargs the kernels do not cover, such as a row condition), through Great Expectations' public API
(GX 1.x), per partition where results merge.

GX runs a suite on a pandas frame with an ephemeral context, a pandas data source, a whole-dataframe
batch definition and ``Batch.validate(ExpectationSuite, result_format=...)``; prepflow reads only the
public ``to_json_dict()`` of the results. What runs where:

* row-wise expectations (``suites.ROW_WISE``: each row passes or fails on its own) run on every
  partition; their public results merge exactly: ``element_count``, ``missing_count`` and
  ``unexpected_count`` add, the first ``PARTIAL_UNEXPECTED_COUNT`` unexpected values and index
  labels concatenate in partition (= row) order, and ``expectations.results.map_result`` recomputes
  the percentages, the value counts and ``mostly`` with GX's rules. A partition where GX raised
  makes the expectation fail with GX's message.
* schema expectations (``suites.SCHEMA``) run on the first partition's empty head: only the column
  names and dtypes matter.
* the others (``suites.GLOBAL``: row counts, uniqueness, means, quantiles, distinct values) have no
  public result that merges (a partition's median says nothing about the table's), so GX runs them
  once on the partitions concatenated, only the columns they name (all of them with a
  ``row_condition``), as one Dask task: on a worker when Dask is distributed.

GX is imported on first use (it is slow to import), paid only by runs with a user suite.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from core.lazy import pandas as pd
from expectations import results
from expectations.suites import GLOBAL, PARTIAL_UNEXPECTED_COUNT, RESULT_FORMAT, ROW_WISE, SCHEMA, SuiteError

_LOCAL = threading.local()
_PRELOAD: list[threading.Thread] = []


def gx():
    """``import great_expectations`` (slow), with its usage statistics off."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations  # optional heavy dependency: only runs with a user suite import it

    return great_expectations


def preload() -> None:
    """Import GX in a background thread, so that its import overlaps the stages before the first gate.
    A failure is ignored here: the gate imports GX again and reports it."""
    if _PRELOAD:
        return

    def work() -> None:
        try:
            _batch_definition()
        except Exception:  # pragma: no cover - reported by the gate's own import
            pass

    _PRELOAD.append(threading.Thread(target=work, name="prepflow-gx-import", daemon=True))
    _PRELOAD[0].start()


def _batch_definition():
    """This thread's whole-dataframe batch definition in an ephemeral GX context (GX contexts are
    not thread-safe, so each Dask worker thread has its own), created once."""
    definition = getattr(_LOCAL, "definition", None)
    if definition is None:
        from great_expectations.data_context.types.base import (  # GX: optional heavy dependency
            DataContextConfig,
            InMemoryStoreBackendDefaults,
            ProgressBarsConfig,
        )

        config = DataContextConfig(store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
                                   analytics_enabled=False,
                                   progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False))
        context = gx().get_context(mode="ephemeral", project_config=config)
        definition = _LOCAL.definition = (context.data_sources.add_pandas("prepflow")
                                          .add_dataframe_asset("partition")
                                          .add_batch_definition_whole_dataframe("whole"))
    return definition


def to_gx_suite(data: dict, source: str):
    """``gx.ExpectationSuite`` of the suite JSON, GX's complaints about kwargs reported against ``source``."""
    try:
        return gx().ExpectationSuite(**{k: v for k, v in data.items()
                                        if k in ("name", "expectations", "meta", "notes", "suite_parameters")})
    except Exception as exc:  # pydantic / GX configuration errors
        raise SuiteError(f"{source}: invalid expectation suite: {exc}") from None


def check(data: dict, source: str) -> None:
    """GX accepts every expectation's kwargs (raises ``SuiteError`` naming the file otherwise)."""
    to_gx_suite(data, source)


def validate_frame(expectations: list[dict], frame: pd.DataFrame) -> list[dict]:
    """GX on one pandas frame: each expectation's ``to_json_dict()`` (its ``result`` as GX made it, the
    public ``ExpectationValidationResult.result``), in the order given."""
    if not expectations:
        return []
    tagged = [{**e, "meta": {**(e.get("meta") or {}), "prepflow_position": i}} for i, e in enumerate(expectations)]
    suite = gx().ExpectationSuite(name="prepflow-part", expectations=tagged)
    validation = _batch_definition().get_batch(batch_parameters={"dataframe": frame}).validate(
        suite, result_format=dict(RESULT_FORMAT))
    out: list[Any] = [None] * len(expectations)
    for r in validation.results:  # GX does not keep the suite's order
        d = r.to_json_dict()
        # the result as GX made it, not as JSON: a merge must count the values as GX does (NaNs apart)
        d["result"] = dict(r.result or {})
        out[d["expectation_config"]["meta"]["prepflow_position"]] = d
    return out


# ---- what runs where -----------------------------------------------------------------------------

class Plan:
    """A user suite's expectations split by where GX runs them (see the module docstring)."""

    def __init__(self, suite: dict, columns: list[str]):
        self.suite = suite
        exps = suite["expectations"]
        self.row_wise = [i for i, e in enumerate(exps) if e["type"] in ROW_WISE]
        self.schema = [i for i, e in enumerate(exps) if e["type"] in SCHEMA]
        self.whole = [i for i, e in enumerate(exps) if e["type"] in GLOBAL]
        self.whole_columns = self._columns(self.whole, columns)
        self.row_columns = self._columns(self.row_wise, columns)

    def _columns(self, positions: list[int], columns: list[str]) -> list[str]:
        """The columns GX needs for these expectations: those they name (all with a row condition).
        GX's cost (it also md5-hashes every batch it is given) grows with the columns it gets."""
        named: list[str] = []
        for i in positions:
            kwargs = self.suite["expectations"][i].get("kwargs", {})
            if kwargs.get("row_condition"):
                return list(columns)
            named += [kwargs[k] for k in ("column", "column_A", "column_B") if isinstance(kwargs.get(k), str)]
            named += [c for k in ("column_list", "column_set") for c in kwargs.get(k) or [] if isinstance(c, str)]
        return [c for c in dict.fromkeys(named) if c in columns]

    def expectations(self, positions: list[int]) -> list[dict]:
        return [self.suite["expectations"][i] for i in positions]


def scan(plans: list[Plan], frame: pd.DataFrame, first: bool) -> list[dict]:
    """One partition: the row-wise results of every suite (and the schema ones on the first)."""
    out = []
    for plan in plans:
        out.append({"row_wise": validate_frame(plan.expectations(plan.row_wise), frame[plan.row_columns]),
                    "schema": validate_frame(plan.expectations(plan.schema), frame.iloc[:0]) if first else None})
    return out


def whole(plans: list[Plan], *frames: pd.DataFrame) -> list[list[dict]]:
    """The global expectations of every suite, on the partitions concatenated."""
    out = []
    for plan in plans:
        if not plan.whole:
            out.append([])
            continue
        frame = pd.concat([f[plan.whole_columns] for f in frames]) if len(frames) > 1 else frames[0][plan.whole_columns]
        out.append(validate_frame(plan.expectations(plan.whole), frame))
    return out


def merge_row_wise(expectation: dict, parts: list[dict]) -> dict:
    """One row-wise expectation's public per-partition results (``to_json_dict()``) as GX's result on
    the partitions together."""
    head = results.from_gx(parts[0])
    raised = [r for r in map(results.from_gx, parts) if r.get("exception")]
    if raised:
        return raised[0]
    res = [p.get("result") or {} for p in parts]
    keeps_missing = any("missing_count" in r for r in res)
    success, merged = results.map_result(
        sum(r.get("element_count", 0) for r in res),
        sum(r.get("missing_count", 0) for r in res) if keeps_missing else None,
        sum(r.get("unexpected_count", 0) for r in res),
        [v for r in res for v in r.get("partial_unexpected_list", [])][:PARTIAL_UNEXPECTED_COUNT],
        [i for r in res for i in r.get("partial_unexpected_index_list", [])][:PARTIAL_UNEXPECTED_COUNT],
        (expectation.get("kwargs") or {}).get("mostly", 1.0))
    return results.entry(head["expectation_type"], head["kwargs"], success, merged)


def merge(plan: Plan, scanned: list[dict], whole_results: list[dict]) -> list[dict]:
    """Result JSON per expectation of the suite, in suite order."""
    out: list[Any] = [None] * len(plan.suite["expectations"])
    for k, i in enumerate(plan.row_wise):
        out[i] = merge_row_wise(plan.suite["expectations"][i], [s["row_wise"][k] for s in scanned])
    for k, i in enumerate(plan.schema):
        out[i] = results.from_gx(scanned[0]["schema"][k])
    for k, i in enumerate(plan.whole):
        out[i] = results.from_gx(whole_results[k])
    return out
