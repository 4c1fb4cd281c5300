"""validate: the data-quality gates (DESIGN sections 4 and 8), expectation suites on Dask partitions.

Two gates, each a cached stage:

* ``validate_raw`` after ingest/infer_types, before split: the table as ingested (the config's
  columns plus any column a raw user suite names; ``__row__`` becomes the index, so an unexpected
  value's index is its 0-based input row).
* ``validate_encoded`` after encode, before publish: one row per encoded row of every split, with
  ``__split__`` (0/1/2), ``__row__`` (the input row; null on the extra copies oversampling makes)
  and, for an ``n x d`` matrix column ``c``, the per-row ``c__size``, ``c__min`` and ``c__max``
  (a NaN anywhere in the row makes ``c__min`` NaN, which GX counts as null).

Each gate runs prepflow's generated suite (``validation.generated``, default on) and the user suites
the config names (``validation: {raw: path-or-list, encoded: ..., on_failure: fail|warn}``; paths
relative to the working directory), through ``expectations.runner``: the generated suites on
prepflow's numpy/pyarrow kernels (``expectations.kernels``, no GX import), the user suites' common
expectation types on those kernels too (results equal to GX's) and the others through Great
Expectations' public API (``expectations.gx_suites``). Generated suites:

* raw: every declared column exists; a number feature stored as text matches a number pattern (text
  formats are read as float64 already, so there it holds by construction); every output feature
  keeps a value in some row after drop_row (``proportion_of_non_null > 0``); the optional
  ``validation.bounds: {column: [min, max]}`` (either may be null).
* encoded: no nulls/NaN in any published column; ids within ``[0, vocab_size)`` (category ids, and
  sequence/text ids; a feature type can say which columns hold ids with ``id_ranges(metadata)``);
  matrix widths as declared; every split with a share of the rows is non-empty; splits are
  disjoint (``__row__`` unique); the row count adds up: training rows weighted by their balance
  multiplicity plus validation and test rows, minus the rows drop_row removed.

Caching: key = parent key + sha of every suite's JSON (generated ones included) + code version.
``on_failure`` is not in the key: results are cached whatever they are, and a cached failing gate
fails again. ``enforce`` raises ``ValidationFailed`` naming the gate (``fail``; nothing is
published) or logs a warning (``warn``); the results go to manifest.json ``validation``.

Each gate's partitions are ``VIEWS[name](*args)`` (``tasks.validate.views``), Dask delayed frames: the gate's row work runs
on the Dask workers, the merge of its small per-partition results here. The raw gate of a dataset of
several files runs its suites file by file where it can, each file's partials a cache entry, so that a
run after a file was added scans that file only (``tasks.validate.raw_files``; same results).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import dask.threaded
import numpy as np
from dask import delayed

from core.errors import ConfigError, ValidationFailed
from expectations import gx_suites, runner
from expectations.kernels import NUMBER_PATTERN
from expectations.report import format_gate
from expectations.suites import SuiteError, is_generated
from storage.hashing import stable_hash
from tasks.config.constants import ROW, SPLIT_NAMES
from tasks.config.suites import user_suites
from tasks.custom import plan as custom_plan
from tasks.runtime import dask_run, fitted_metadata, frame
from tasks.runtime.dask_run import summed
from tasks.runtime.node import Node, Prepared
from tasks.runtime.outputs import (
    Encoded,
    GateResult,
    Ingested,
    MediaCached,
    Multiplicity,
    SplitAssignment,
)
from tasks.runtime.statistics import Statistics
from tasks.validate import raw_files
from tasks.validate.views import ORDERS, VALIDATION_ROWS, VIEWS, encoded_chunks, raw_frame

GATES = ("raw", "encoded")
STAGE = {"raw": "validate_raw", "encoded": "validate_encoded"}

log = logging.getLogger("prepflow.validate")


def _exp(kind: str, **kwargs) -> dict:
    return {"type": kind, "kwargs": kwargs, "meta": {"generated_by": "prepflow"}}


# ---- suite files ---------------------------------------------------------------------------------

def preload(config, local: bool | None = None) -> None:
    """Start importing Great Expectations in a background thread when a user suite will need it, so
    that its ~3 s import overlaps the stages before the first gate. Otherwise nothing is imported:
    prepflow's generated suites, and the user expectations with a kernel, run on prepflow's kernels.
    ``local``: whether Dask runs in this process (with a cluster, the workers import GX themselves,
    so nothing is preloaded here)."""
    if needs_gx(config) and local is not False:
        gx_suites.preload()


def needs_gx(config) -> bool:
    """Whether a user suite the config names has an expectation that only GX runs."""
    return any(runner.needs_gx(suite) for gate in GATES for _path, suite in user_suites(config, gate))


def check_config(config) -> None:
    """Every suite the config names loads and is supported; raised before any data is read."""
    for gate in GATES:
        user_suites(config, gate)
    columns = {f.source_column for f in config.features}
    for column, bounds in (getattr(config.validation, "bounds", None) or {}).items():
        if column not in columns:
            raise ConfigError(f"validation.bounds.{column}: not a column of a declared feature")
        if not isinstance(bounds, (list, tuple)) or len(bounds) != 2 or not all(
                b is None or (isinstance(b, (int, float)) and not isinstance(b, bool)) for b in bounds):
            raise ConfigError(f"validation.bounds.{column}: expected [min, max] (numbers, either may be null), "
                              f"got {bounds!r}")
        low, high = bounds
        if low is None and high is None:
            raise ConfigError(f"validation.bounds.{column}: min and max are both null; give at least one")
        if low is not None and high is not None and low > high:
            raise ConfigError(f"validation.bounds.{column}: min {low!r} is greater than max {high!r}")


# ---- generated suites ----------------------------------------------------------------------------

def raw_suite(ctx, dtypes: dict[str, str]) -> dict:
    """prepflow's suite for the ingested table (``dtypes``: column -> pandas dtype name)."""
    ctx = custom_plan.raw_view(ctx)  # columns that custom stages make are not in the ingested table
    config = ctx.config
    exps = []
    declared = list(dict.fromkeys([f.source_column for f in config.features]
                                  + ([config.preprocessing.split.column] if config.preprocessing.split.column
                                     else [])))
    for column in declared:
        exps.append(_exp("expect_column_to_exist", column=column))
    for f in ctx.features:
        if f.read_as() == "float64" and not _is_numeric(dtypes.get(f.column, "")):
            exps.append(_exp("expect_column_values_to_match_regex", column=f.column, regex=NUMBER_PATTERN))
    for f in ctx.features:
        if f.is_output and f.missing_strategy == "drop_row":
            exps.append(_exp("expect_column_proportion_of_non_null_values_to_be_between", column=f.column,
                             min_value=0, strict_min=True))
    for column, (low, high) in sorted((getattr(config.validation, "bounds", None) or {}).items()):
        exps.append(_exp("expect_column_values_to_be_between", column=column, min_value=low, max_value=high))
    return {"name": "prepflow-raw", "expectations": exps, "meta": {"generated_by": "prepflow"}}


def _is_numeric(dtype: str) -> bool:
    return any(dtype.lower().startswith(p) for p in ("float", "int", "uint", "double", "bool"))


def id_range(feature, column, metadata: dict) -> tuple[int, int] | None:
    """``(0, vocab_size)`` when ``column`` holds vocabulary ids, else None."""
    ranges = getattr(feature, "id_ranges", None)
    if callable(ranges):
        return ranges(metadata).get(column.name)
    if not column.dtype.startswith("int") or not fitted_metadata.has_vocabulary(metadata):
        return None
    if getattr(feature, "type_name", "") in ("set", "bag"):  # multi-hot counts, not ids
        return None
    key = "char_vocab_size" if column.name.endswith("_char") and "char_vocab_size" in metadata else "vocab_size"
    return (0, int(metadata[key])) if key in metadata else None


def encoded_suite(ctx, metadata: dict, expected_rows: int) -> dict:
    """prepflow's suite for the encoded rows (see the module docstring)."""
    exps = []
    for f in ctx.features:
        for col in f.output_columns(metadata[f.name]):
            ids = id_range(f, col, metadata[f.name])
            if not col.shape:
                exps.append(_exp("expect_column_values_to_not_be_null", column=col.name))
                if ids:
                    exps.append(_exp("expect_column_values_to_be_between", column=col.name, min_value=ids[0],
                                     max_value=ids[1] - 1))
                continue
            size = int(np.prod(col.shape))
            exps.append(_exp("expect_column_values_to_be_between", column=f"{col.name}__size", min_value=size,
                             max_value=size))
            if size:
                exps.append(_exp("expect_column_values_to_not_be_null", column=f"{col.name}__min"))
            if ids and size:
                exps.append(_exp("expect_column_values_to_be_between", column=f"{col.name}__min",
                                 min_value=ids[0]))
                exps.append(_exp("expect_column_values_to_be_between", column=f"{col.name}__max",
                                 max_value=ids[1] - 1))
    split = ctx.config.preprocessing.split
    required = [0] if split.type == "fixed" else [i for i, p in enumerate(split.probabilities) if p > 0]
    if ctx.extend:  # --extend: each new row's split is its own (a few new rows may leave a split empty)
        required = []
    elif ctx.fitted_from:  # prepflow apply: every row is in the one split it names
        required = [SPLIT_NAMES.index(ctx.fitted_from["split"])] if expected_rows else []
    exps.append(_exp("expect_column_distinct_values_to_contain_set", column="__split__", value_set=required))
    exps.append(_exp("expect_column_values_to_be_unique", column="__row__"))
    exps.append(_exp("expect_table_row_count_to_equal", value=int(expected_rows)))
    return {"name": "prepflow-encoded", "expectations": exps, "meta": {"generated_by": "prepflow"}}



# ---- running a gate ------------------------------------------------------------------------------

def run_suites(named: list[tuple[str, dict]], parts: list, columns: list[str], scheduler=None,
               order: list[int] | None = None) -> list[dict]:
    """Run ``(source, suite JSON)`` pairs on the partitions (``expectations.runner.run``); GX is imported
    only for the expectations of user suites that have no kernel (``runner.split_user_suite``), whose
    kwargs GX checks first (``ConfigError`` naming the file). ``scheduler``: Dask's (default: the active one, a distributed Client if set)."""
    user = [(src, runner.split_user_suite(s, columns)[1]) for src, s in named
            if not is_generated(s) and s["expectations"]]
    try:
        for src, rest in user:
            if rest["expectations"]:
                gx_suites.check(rest, src)
    except SuiteError as exc:
        raise ConfigError(str(exc)) from None
    return runner.run(named, parts, columns, scheduler=scheduler, order=order)


def gate_json(gate: str, suites: list[dict], rows: int) -> dict:
    return {"gate": gate, "success": all(s["success"] for s in suites), "rows": rows,
            "evaluated": sum(s["evaluated"] for s in suites), "failed": sum(s["failed"] for s in suites),
            "suites": suites}


def validate_view(named: list[tuple[str, dict]], view: str, args: list) -> tuple[list[dict], int]:
    """``run_suites`` on ``VIEWS[view](*args)``: ``(suites, rows)``."""


    parts, columns, rows = VIEWS[view](*args, read=lambda columns: runner.columns_read(named, columns))
    order = ORDERS[view](*args) if view in ORDERS else None
    # Dask's local default named, as in dask_run.compute: asking Dask would import distributed to find no Client
    scheduler = dask.threaded.get if dask_run.local_only() else None
    return run_suites(named, parts, columns, scheduler=scheduler, order=order), rows


def _prepared(named: list[tuple[str, dict]], value) -> Prepared:
    """The gate's suites join its key (a user suite's file, the generated suite's data-derived values)."""
    return Prepared(key={"suites": [[src, stable_hash(s, 64)] for src, s in named]}, value=(named, value))


def _write(out: Path, gate: str, named: list[tuple[str, dict]], suites: list[dict], rows: int) -> Statistics:
    """The gate's entry (``GateResult``) from its suites' results; its counters."""
    result = gate_json(gate, suites, rows)
    GateResult.write(out, result, [suite for _src, suite in named])
    stats = Statistics()
    stage = STAGE[gate]
    stats.counter(f"{stage}.rows_in", rows)
    stats.counter(f"{stage}.expectations", result["evaluated"])
    stats.counter(f"{stage}.failed", result["failed"])
    return stats


def _suites_for(ctx, gate: str, generated: dict | None) -> list[tuple[str, dict]]:
    named = []
    if generated is not None and ctx.config.validation.generated:
        named.append((f"generated:{gate}", generated))
    return named + user_suites(ctx.config, gate)


def preflight(ctx, local: bool) -> None:
    """Every suite the config names loads (before any data is read); GX starts importing in the
    background when a user suite needs it and Dask runs in this process (``local``)."""
    check_config(ctx.config)
    preload(ctx.config, local)


def prepare_raw(ctx, ingest: Ingested) -> Prepared:
    """The raw gate's suites, with the generated one for the ingested columns' types."""
    dtypes = {c: t for c, t in frame.column_dtypes(ingest.parts).items() if c != ROW}
    return _prepared(_suites_for(ctx, "raw", raw_suite(ctx, dtypes)), dtypes)


def compute_raw(ctx, out: Path, prepared: tuple, ingest: Ingested) -> Statistics:
    """Stage ``validate_raw``: the raw gate on the ingested table (a folder's files one by one)."""
    named, dtypes = prepared

    def whole(suites: list[tuple[str, dict]]) -> list[dict]:
        return validate_view(suites, "raw", [os.path.abspath(ingest.path), ctx.npartitions])[0]

    if not ingest.files:
        suites, rows = whole(named), ingest.num_rows
    else:
        per_partition = -(-ingest.num_rows // ctx.npartitions) if ctx.npartitions else VALIDATION_ROWS
        suites, rows = raw_files.evaluate(ctx, ingest, named, dtypes, per_partition, raw_frame, whole)
    return _write(out, "raw", named, suites, rows)


COUNT_ROWS = 1 << 24  # rows of split.npy (16 MiB) per task of ``expected_encoded_rows``


def split_counts(assign, mult, start: int, stop: int) -> np.ndarray:
    """``[training rows weighted by multiplicity, validation rows, test rows]`` among input rows
    ``[start, stop)``: one Dask task's share of ``expected_encoded_rows``."""
    part = np.asarray(assign[start:stop])
    train = part == 0
    weighted = int(np.asarray(mult[start:stop], dtype=np.int64)[train].sum()) if mult is not None \
        else int(np.count_nonzero(train))
    return np.array([weighted, np.count_nonzero(part == 1), np.count_nonzero(part == 2)], dtype=np.int64)


def expected_encoded_rows(split: SplitAssignment, balance: Multiplicity, encoded: Encoded) -> int:
    """Training rows weighted by multiplicity + validation + test rows - rows drop_row removed. The rows are
    counted by Dask tasks (the workers of a cluster) over ranges of ``split.npy`` and ``multiplicity.npy``,
    whose handles pickle as their paths: the flow's process reads neither (1 and 4 bytes per input row)."""

    assign = split.assignment()
    mult = balance.multiplicity()
    n = len(assign)  # the .npy header (memory-mapped, no data read)
    tasks = [delayed(split_counts, pure=False)(assign, mult, lo, min(lo + COUNT_ROWS, n))
             for lo in range(0, n, COUNT_ROWS)]
    weighted, validation, test = (int(c) for c in summed(tasks)) if tasks else (0, 0, 0)
    dropped = sum(s["count"] for name, s in encoded.statistics.items()
                  if name.startswith(("fill_missing.rows_dropped.", "media_cache.rows_skipped.")))
    return weighted + validation + test - dropped


def prepare_encoded(ctx, split: SplitAssignment, balance: Multiplicity, media: MediaCached) -> Prepared:
    """The encoded gate's suites, with the generated one for the fitted metadata and the expected rows."""
    metadata, encoded = media.fitted().metadata(), media.encoded()
    named = _suites_for(ctx, "encoded", encoded_suite(ctx, metadata, expected_encoded_rows(split, balance, encoded)))
    return _prepared(named, (metadata, encoded))


def compute_encoded(ctx, out: Path, prepared: tuple, split: SplitAssignment, balance: Multiplicity,
                    media: MediaCached) -> Statistics:
    """Stage ``validate_encoded``: the encoded gate on every encoded row of every split (media_cache's
    entry when it rewrote the parts)."""
    named, (metadata, encoded) = prepared
    shaped = {c.name: bool(c.shape) for f in ctx.features for c in f.output_columns(metadata[f.name])}
    suites, rows = validate_view(named, "encoded", [encoded_chunks(encoded, ctx.npartitions), shaped])
    return _write(out, "encoded", named, suites, rows)


def enforce(ctx, result: GateResult) -> dict:
    """Raise ``ValidationFailed`` for a failing ``fail`` gate; log a warning for ``warn``."""
    data = GateResult.of(result).results()
    if data["success"]:
        return data
    text = format_gate(data)
    if ctx.config.validation.on_failure == "fail":
        raise ValidationFailed(f"validation gate '{data['gate']}' failed (on_failure: fail); nothing was "
                               f"published\n{text}", gate=data["gate"], report=data)
    log.warning("validation gate '%s' failed (on_failure: warn)\n%s", data["gate"], text)
    return data


RAW = Node("validate_raw", compute_raw, inputs=("ingest",), output=GateResult, gate=True, enforce=enforce,
           preflight=preflight, prepare=prepare_raw, per_file=True)
ENCODED = Node("validate_encoded", compute_encoded, inputs=("split", "balance", "media_cache"),
               output=GateResult, gate=True, enforce=enforce, prepare=prepare_encoded)
