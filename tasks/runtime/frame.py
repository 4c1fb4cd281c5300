"""Dask partitions of the ingested table, and the per-partition preparation every stage shares.

``partitions(parts, n)`` returns the ingested table's partitions as Dask delayed frames (in row
order); ``read_ingested`` is the same table as a Dask DataFrame.
``prepare`` turns one raw partition into typed, split-tagged, filled values:

    cast (per feature type) -> keep sampled rows -> normalize (binary str->bool)
        -> drop rows where a drop_row feature is missing -> fill (const/mode/mean/true/false,
           ffill/bfill with carries from earlier/later partitions)

It is pure pandas/numpy, so it is unit-testable without Dask or Prefect.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
import pyarrow.ipc as ipc
from dask import delayed

from core.lazy import pandas as pd
from tasks.config.constants import ROW
from tasks.features.base import FeatureType
from tasks.runtime.dask_run import compute, shared
from tasks.runtime.part_files import parts_in  # noqa: F401  (the parts a reader of the ingested table starts from)

if TYPE_CHECKING:  # Dask is imported when first used: a reused artifact's run never reads data
    import dask.dataframe as dd

SPLIT = "__split__"


def to_arrow(values: np.ndarray) -> pa.Array:
    """1-D arrays as plain columns, n x d (or n x a x b) arrays as fixed-size lists."""
    if values.ndim == 1:
        return pa.array(values)
    flat = pa.array(np.ascontiguousarray(values).reshape(-1))
    for width in reversed(values.shape[1:]):
        flat = pa.FixedSizeListArray.from_arrays(flat, width)
    return flat


# The compression of the cache's large Arrow IPC parts (ingest's of a Parquet input, and encode's), which the
# stages read several times: "lz4" writes about half the bytes, but on a local disk its encoding and the
# decoding on every read cost more CPU than writing the bytes (benchmarks/RESULTS.md, "Cache bytes"); a cache on
# storage where bytes are dear may choose it. Readers take either, and the artifact does not depend on it.
PART_COMPRESSION = "uncompressed"


def write_ipc(table: pa.Table, path: Path, compression: str = "uncompressed") -> None:
    """Cache files are Arrow IPC: far faster to write and read back than Parquet, and memory-mappable
    when uncompressed (the large parts are written with ``PART_COMPRESSION``). Parquet is for artifacts."""

    feather.write_feather(table, str(path), compression=compression)


def write_part(table: pa.Table, path: Path) -> None:
    """One of the cache's large parts (ingest's of a Parquet input, encode's), written with ``PART_COMPRESSION``."""
    write_ipc(table, path, PART_COMPRESSION)


def _strings(arrow_type):
    """Arrow strings straight to pandas' pyarrow-backed ``string`` dtype (what Dask would convert the
    frame to anyway), without a second conversion."""

    return pd.StringDtype("pyarrow") if arrow_type in (pa.string(), pa.large_string()) else None


def _to_pandas(table: pa.Table, dictionaries: frozenset[str] | tuple = ()) -> pd.DataFrame:
    """A part (or rows of parts) as pandas: ingest's dictionary-encoded category columns decoded back to
    strings (each row's value taken from its part's dictionary), but for the ``dictionaries`` named: those
    stay one Arrow dictionary array each (pandas ``ArrowDtype``), for the stages that count or look up each
    distinct value once (``tasks.features.category``)."""
    for i, name in enumerate(table.column_names):
        col = table.column(i)
        if not pa.types.is_dictionary(col.type):
            continue
        if name in dictionaries:  # one array: concatenating chunks of several dictionaries merges them
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        else:
            col = pa.chunked_array([c.dictionary.take(c.indices) for c in col.chunks], type=col.type.value_type)
        table = table.set_column(i, name, col)
    return table.to_pandas(types_mapper=_pandas_type)


def _pandas_type(arrow_type):
    return pd.ArrowDtype(arrow_type) if pa.types.is_dictionary(arrow_type) else _strings(arrow_type)


def _with_offset(table: pa.Table, offset: int) -> pa.Table:
    """A part's rows numbered in the dataset: its stored ``__row__`` (0-based in its file) plus the rows of the
    files before it (``offset``; 0 for one file)."""
    if not offset or ROW not in table.column_names:
        return table
    i = table.column_names.index(ROW)
    return table.set_column(i, ROW, pc.add(table.column(i), pa.scalar(offset, pa.int64())))


def _read_ipc(path: str, offset: int = 0, dictionaries: frozenset[str] | tuple = (),
              columns: list[str] | None = None) -> pd.DataFrame:
    return _to_pandas(_with_offset(feather.read_table(path, columns=columns, memory_map=True), offset), dictionaries)


def _meta(path: str) -> pd.DataFrame:
    """The empty frame of a part's schema (reads no rows), dictionary columns as their values' type."""

    with ipc.open_file(path) as reader:
        return _to_pandas(reader.schema.empty_table())


def read_ingested(parts: list[tuple[str, int]], npartitions: int | None) -> dd.DataFrame:
    """The ingested table as a Dask DataFrame (one partition per cached part, then repartitioned)."""
    import dask.dataframe as dd  # imported when first needed: a reused artifact's run never reads data

    ddf = dd.from_map(_read_ipc, [p for p, _o in parts], [o for _p, o in parts], meta=_meta(parts[0][0]))
    if npartitions and npartitions != ddf.npartitions:
        ddf = ddf.repartition(npartitions=npartitions)
    return ddf


def ipc_num_rows(path: str) -> int:
    """Rows of an Arrow IPC file, from its footer and batch headers (memory-mapped, no data read); read once
    per file in a process (``_rows``)."""
    stat = os.stat(path)
    return _rows(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=1 << 17)
def _rows(path: str, size: int, mtime_ns: int) -> int:
    """The flow's stages plan from the same parts' row counts (ingest's parts: fill_missing, validate_raw,
    split, vocab, encode): read once from the footer and the batches' headers, not once per stage. Cache entries are written once and renamed into place, never
    changed in place: a file of the same path, size and mtime is the same file."""
    with pa.memory_map(path) as source:
        reader = pa.ipc.open_file(source)
        return reader.count_rows()  # from the batches' headers: a compressed part's bodies are not decoded


def _read_rows(pieces: list[tuple[str, int, int, int]], dictionaries: frozenset[str] | tuple = (),
               columns: list[str] | None = None) -> pd.DataFrame:
    """Rows ``[start, stop)`` of each part (``(path, row offset, start, stop)``), in order, as one frame (the
    parts are memory-mapped)."""

    tables = [_with_offset(feather.read_table(path, columns=columns, memory_map=True).slice(start, stop - start), offset)
              for path, offset, start, stop in pieces]
    return _to_pandas(pa.concat_tables(tables), dictionaries)


def row_ranges(sizes: list[int], n: int) -> list[list[tuple[int, int, int]]]:
    """``n`` consecutive, near-equal row ranges over parts of ``sizes`` rows, each as
    ``[(part index, start, stop), ...]`` pieces in row order (a range may be empty when rows < n)."""
    total = sum(sizes)
    bounds = [total * i // n for i in range(n + 1)]
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        out.append([(i, max(lo, offsets[i]) - offsets[i], min(hi, offsets[i + 1]) - offsets[i])
                    for i in range(len(sizes)) if max(lo, offsets[i]) < min(hi, offsets[i + 1])])
    return out


def partitions(parts: list[tuple[str, int]], npartitions: int | None, dictionaries: tuple[str, ...] = (),
               columns: list[str] | None = None) -> list:
    """The ingested table's partitions as Dask delayed frames in row order: ``npartitions`` (default:
    as many as ingest's cached parts) near-equal row ranges. Built from ``dask.delayed`` alone: Dask's DataFrame layer
    (0.4 s to import, graph building per call) adds nothing for a list of partitions. ``dictionaries``: the
    dictionary-encoded columns to keep so (``dictionary_columns``); every other column is as ingest read it.
    ``columns``: only these (default: all)."""

    files = [p for p, _o in parts]
    sizes = [ipc_num_rows(f) for f in files]
    n = npartitions or len(files)
    keep = frozenset(dictionaries)
    # One partition per part when its dictionaries are kept (a range over two parts merges their dictionaries:
    # ~150 ms per 262k Criteo rows), or when the parts are equal; else near-equal ranges, also by default:
    # ingest's last part is short, and threads idle on it.
    if n == len(files) and (keep or max(sizes) - min(sizes) <= 1):
        return [delayed(_read_ipc, pure=True)(f, o, keep, columns) for f, o in parts]
    ranges = row_ranges(sizes, n)
    return [delayed(_read_rows, pure=True)([(*parts[i], a, b) for i, a, b in r] or [(*parts[0], 0, 0)], keep,
                                            columns)
            for r in ranges]


def dictionary_columns(features: list[FeatureType], custom_stages: bool,
                       counted: set[str] | None = None) -> tuple[str, ...]:
    """The columns a stage's partitions may keep as ingest's dictionaries (``tasks.ingest.spec.category_columns``):
    those whose every reader takes them so (``FeatureType.keeps_dictionary``; and is in ``counted``, when
    given), and none when ``custom_stages`` run inside the preparation (a stage reads columns as ingest read
    them)."""
    if custom_stages:
        return ()
    readers: dict[str, list[FeatureType]] = {}
    for f in features:
        readers.setdefault(f.column, []).append(f)
    return tuple(sorted(c for c, fs in readers.items()
                        if all(f.keeps_dictionary and (counted is None or f.name in counted) for f in fs)))


def largest_partition_rows(parts: list[tuple[str, int]], rows: int, npartitions: int | None) -> int:
    """Rows of the largest of ``partitions(parts, npartitions)`` for an ingested table of ``rows``, as if
    they differed by at most one row (``row_ranges``; one partition per part when the parts are not equal is
    an estimate: a short last part leaves the others a little larger). Reads no footer."""
    n = npartitions or len(parts)
    return -(-rows // max(n, 1))


def column_names(parts: list[tuple[str, int]]) -> list[str]:
    """The ingested table's columns, in order (the first part's schema; no rows read, no pandas)."""
    with ipc.open_file(parts[0][0]) as reader:
        return list(reader.schema.names)


def column_dtypes(parts: list[tuple[str, int]]) -> dict[str, str]:
    """The ingested table's columns and pandas dtypes (from the first part's schema, reading no rows). Read
    by a Dask task, so on a cluster a worker imports pandas for pandas' names, never the flow process."""
    return compute([delayed(_column_dtypes, pure=True)(parts[0][0])])[0]


def _column_dtypes(path: str) -> dict[str, str]:
    return {str(c): str(t) for c, t in _meta(path).dtypes.items()}


@dataclass
class Prepared:
    frame: pd.DataFrame  # typed (and, when fills are given, filled) columns by feature name + ROW, SPLIT
    filled: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    fit_cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)  # prepared_fit_rows


def cast_partition(pdf: pd.DataFrame, features: list[FeatureType], assign: np.ndarray) -> pd.DataFrame:
    rows = pdf[ROW].to_numpy(dtype=np.int64)
    split = assign[rows]
    keep = split >= 0
    if not keep.all():  # (a row filter copies every column, so only when rows are not sampled)
        pdf = pdf.loc[keep]
        rows, split = rows[keep], split[keep]
    out = {f.name: f.cast(pdf[f.column], rows).reset_index(drop=True) for f in features}
    frame = pd.DataFrame(out, copy=False)  # columns as they are: no copy into one consolidated block
    frame[ROW] = rows
    frame[SPLIT] = split
    return frame


def first_last_valid(frame: pd.DataFrame, names: list[str]) -> dict[str, tuple]:
    """Per column: (first non-null value, last non-null value), None when all are null."""
    out = {}
    for name in names:
        col = frame[name]
        first, last = col.first_valid_index(), col.last_valid_index()
        out[name] = (None if first is None else _py(col.loc[first]), None if last is None else _py(col.loc[last]))
    return out


def carries(edges: list[dict[str, tuple]], names: list[str]) -> list[dict[str, tuple]]:
    """For each partition: (last non-null before it, first non-null after it) per column."""
    result = [dict() for _ in edges]
    for name in names:
        before = None
        for i, edge in enumerate(edges):
            result[i][name] = [before, None]
            if edge[name][1] is not None:
                before = edge[name][1]
        after = None
        for i in range(len(edges) - 1, -1, -1):
            result[i][name][1] = after
            if edges[i][name][0] is not None:
                after = edges[i][name][0]
    return result


def normalize_and_fill(frame: pd.DataFrame, features: list[FeatureType], states: dict[str, dict],
                       carry: dict[str, list] | None = None, lazy: bool = False) -> Prepared:
    """``lazy``: a feature that reads a missing value as its fill (``FeatureType.reads_missing_as_fill``, a
    category's ``<UNK>``) keeps it missing (its missing values are still counted as filled): the stages'
    own partitions, read only by fit and encode (writing ``<UNK>`` into every string column cost ~6 ms per
    262k rows, twice per run)."""
    rows = frame[ROW].to_numpy()
    for f in features:
        frame[f.name] = f.normalize(frame[f.name], states[f.name], rows)
    dropped: dict[str, int] = {}
    drop_mask = np.zeros(len(frame), dtype=bool)
    for f in features:
        if states[f.name]["missing_value_strategy"] == "drop_row":
            missing = frame[f.name].isna().to_numpy()
            dropped[f.name] = int((missing & ~drop_mask).sum())
            drop_mask |= missing
    if drop_mask.any():
        frame = frame.loc[~drop_mask].reset_index(drop=True)
    filled: dict[str, int] = {}
    for f in features:
        state = states[f.name]
        strategy = state["missing_value_strategy"]
        col = frame[f.name]
        n_missing = int(col.isna().sum())
        if strategy in ("drop_row", "keep"):
            continue
        filled[f.name] = n_missing
        if n_missing == 0 or (lazy and strategy == "fill_with_const" and f.reads_missing_as_fill()):
            continue
        if strategy in ("ffill", "bfill"):
            before, after = (carry or {}).get(f.name, (None, None))
            primary, secondary = (col.ffill(), after) if strategy == "ffill" else (col.bfill(), before)
            lead = before if strategy == "ffill" else after
            if lead is not None:
                primary = primary.fillna(lead)
            # the opposite fill for a leading (ffill) or trailing (bfill) gap of the whole dataset
            primary = primary.bfill() if strategy == "ffill" else primary.ffill()
            if secondary is not None:
                primary = primary.fillna(secondary)
            frame[f.name] = primary
        else:
            frame[f.name] = fill_constant(col, state["computed_fill_value"])
    return Prepared(frame, filled, dropped)


def fill_constant(col: pd.Series, value) -> pd.Series:
    """``col.fillna(value)``; an Arrow string column by Arrow's ``fill_null`` (pandas' fillna goes through a
    NumPy object array: ~30x slower on 250k Criteo-like strings, the same values)."""
    if isinstance(col.array, pd.arrays.ArrowStringArray) and isinstance(value, str):
        filled = pc.fill_null(col.array.__arrow_array__(), value)
        return pd.Series(type(col.array)(filled), index=col.index, name=col.name, copy=False)
    return col.fillna(value)


def needs_carries(states: dict[str, dict]) -> list[str]:
    return sorted(n for n, s in states.items() if s["missing_value_strategy"] in ("ffill", "bfill"))


def _py(value):
    return value.item() if hasattr(value, "item") else value


def _edges(pdf, features, assign, states):
    frame = cast_partition(pdf, features, assign)
    names = needs_carries(states)
    prepared = normalize_and_fill(frame, features, {n: (s if n not in names else {**s, "missing_value_strategy":
                                                         "keep"}) for n, s in states.items()})
    return first_last_valid(prepared.frame, names)


def _prepare(pdf, features, assign, states, carry):
    return normalize_and_fill(cast_partition(pdf, features, assign), features, states, carry, lazy=True)


def filled_partitions(parts: list, features: list[FeatureType], assign: np.ndarray,
                      states: dict[str, dict]) -> list:
    """Delayed ``Prepared`` partitions: typed, split-tagged, rows dropped, values filled (a config with
    custom stages goes through ``tasks.custom.prepared.filled_partitions``, which runs them inside)."""

    names = needs_carries(states)
    f, a, s = shared(features), shared(assign), shared(states)
    carry_list: list = [None] * len(parts)
    if names:
        edges = compute([delayed(_edges)(p, f, a, s) for p in parts])
        carry_list = carries(edges, names)
    return [delayed(_prepare)(p, f, a, s, c) for p, c in zip(parts, carry_list, strict=True)]


def fit_mask(frame: pd.DataFrame, fit_on: str, drop: np.ndarray | None = None) -> np.ndarray | None:
    """Which rows statistics are fitted on (training rows, or all), less the ``drop`` ones; None for all."""
    keep = frame[SPLIT].to_numpy() == 0 if fit_on == "train" else None
    if drop is not None and drop.any():
        keep = ~drop if keep is None else keep & ~drop
    return None if keep is None or keep.all() else keep


def fit_rows(frame: pd.DataFrame, fit_on: str, drop: np.ndarray | None = None) -> pd.DataFrame:
    """The rows of ``fit_mask``; the frame itself (no copy) when that is every row."""
    keep = fit_mask(frame, fit_on, drop)
    return frame if keep is None else frame.loc[keep]


def prepared_fit_rows(prepared: Prepared, fit_on: str) -> pd.DataFrame:
    """``fit_rows`` of a prepared partition, made once per partition and reused by every caller."""
    cached = prepared.fit_cache.get(fit_on)
    if cached is None:
        cached = prepared.fit_cache[fit_on] = fit_rows(prepared.frame, fit_on)
    return cached
