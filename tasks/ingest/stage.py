"""ingest: read the dataset into the stage cache as Arrow IPC parts with a global row number.

Formats: CSV, TSV, JSON (array of records), JSONL, Parquet, Feather/Arrow IPC, Excel; local
paths or fsspec URLs. Only the columns the config names are read. Text formats read number
columns as float64 and everything else as Arrow strings (so category ids like ``007`` keep their
spelling). Each part gets ``__row__``, the 0-based position of the row in the input: split
assignment and the published row order depend on it, never on partitioning.

The dataset fingerprint hashes the file's bytes (``tasks.dataset.fingerprint``: a large file in blocks, on Dask
tasks), so a moved or copied file keeps its cache entries and a one-byte edit invalidates them.

CSV/TSV is read by Dask tasks, a large file by byte ranges (``tasks.ingest.csv_ranges``), Parquet by row
groups (``tasks.ingest.parquet``); the other formats in this process. A folder or glob is ingested file by
file, each file a cache entry of its own (``tasks.ingest.files``): adding a file to the dataset reads that
file only.

When pyarrow's fast reader rejects the file, a slow pure-Python pass locates the problem and
the error names the file, line and column.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.feather as feather
import pyarrow.parquet as pq

from core.errors import DataError
from core.lazy import pandas as pd
from storage.fs import open_input
from tasks.dataset import csv_dialect
from tasks.dataset.file_stamps import FileStamps
from tasks.dataset.files import is_multi
from tasks.dataset.fingerprint import fingerprint
from tasks.ingest import csv_ranges as ingest_csv
from tasks.ingest import dask_frame
from tasks.ingest import dataframe as ingest_frame
from tasks.ingest import parquet as ingest_parts
from tasks.ingest.common import check_columns as _check_columns
from tasks.ingest.files import entries_intact, ingest_files
from tasks.ingest.spec import PART_ROWS, IngestSpec, ingest_spec, write_parts
from tasks.runtime.node import Node, Prepared
from tasks.runtime.outputs import Ingested
from tasks.runtime.statistics import Statistics

# Local CSVs up to this size are read whole by pyarrow's multi-threaded reader (faster than its streaming
# reader, which parses one block at a time); larger ones are streamed in 16 MB blocks so memory stays bounded.
WHOLE_READ_BYTES = 128 << 20
FORMATS = ("csv", "tsv", "json", "jsonl", "parquet", "feather", "excel")



# ---- readers: each yields pyarrow RecordBatches with exactly the requested columns -------------

def _read_csv(path: str, spec: IngestSpec, delimiter: str | None = None):
    """CSV/TSV through pyarrow's reader, in the dialect ``tasks.dataset.csv_dialect`` finds in the file (``delimiter``:
    the config's override): the delimiter, the row terminator (a CR inside an LF file is data), compression."""
    available, dialect = csv_dialect.header(path, spec.format, delimiter, limit=spec.header_bytes)
    _check_columns(path, available, spec.columns)
    parse, convert = ingest_csv.read_options(spec, dialect)
    try:
        if csv_dialect.needs_escape(path, dialect):  # pyarrow would end a row at a CR (LF) that is data
            data, escape = csv_dialect.escaped_bytes(path, dialect)
            table = ingest_csv.read_csv_whole(lambda: pa.BufferReader(data), len(data),
                                              line_limit=spec.line_bytes, parse_options=parse,
                                              convert_options=convert)
            yield csv_dialect.unescape(table, escape, dialect.data_char)
            return
        with _native_input(path) as fh:
            if isinstance(fh, pa.OSFile) and fh.size() <= WHOLE_READ_BYTES:  # a local file: every core parses
                yield ingest_csv.read_csv_whole(lambda: _native_input(path), fh.size(), line_limit=spec.line_bytes,
                                                parse_options=parse, convert_options=convert)  # each try a fresh input
                return
            reader = pacsv.open_csv(fh, read_options=pacsv.ReadOptions(block_size=min(1 << 24, spec.line_bytes)),
                                    parse_options=parse,
                                    convert_options=convert)
            for batch in reader:
                yield batch
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise _locate_csv_problem(path, dialect, spec, str(exc)) from None


def _native_input(path: str):
    """The file's decompressed bytes; a plain local file as an Arrow native file: the CSV reader's threads
    read it without taking the GIL (through a Python file object every read does, and Prefect's threads
    hold it now and then)."""
    return csv_dialect.open_stream(path)


def _locate_csv_problem(path: str, dialect, spec: IngestSpec, arrow_message: str) -> DataError:
    """Slow path: find the line and column pyarrow choked on (the file streamed, a line at a time); the
    message says how the file was read."""
    return ingest_csv.locate_problem(path, lambda: csv_dialect.open_stream(path), dialect, spec, arrow_message,
                                     limit=spec.line_bytes)


def _read_jsonl(path: str, spec: IngestSpec):
    with open_input(path) as fh:
        lines = fh.read().decode("utf-8", errors="strict").splitlines()
    records = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: line {i}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(records[-1], dict):
            raise DataError(f"{path}: line {i}: expected a JSON object per line, got {type(records[-1]).__name__}")
    yield from _records_to_batches(path, records, spec)


def _read_json(path: str, spec: IngestSpec):
    with open_input(path) as fh:
        data = fh.read()
    try:
        records = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}: line {line}: not UTF-8 (byte at offset {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply to read") from None
    if isinstance(records, dict):  # pandas 'columns' orient: {col: {idx: value}} or {col: [values]}
        try:
            records = pd.DataFrame(records).to_dict("records")
        except ValueError as exc:
            raise DataError(f"{path}: expected a list of records or a column mapping: {exc}") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise DataError(f"{path}: expected a JSON array of objects (one per row)")
    yield from _records_to_batches(path, records, spec)


def _records_to_batches(path: str, records: list[dict], spec: IngestSpec):
    available = list(dict.fromkeys(k for r in records[:1000] for k in r))
    if not records:
        raise DataError(f"{path}: the file has no rows")
    _check_columns(path, available, spec.columns)
    arrays = []
    for col, kind in spec.columns.items():
        values = [r.get(col) for r in records]
        if kind == "float64":
            arrays.append(_json_numbers(path, col, values))
        else:
            arrays.append(pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v))
                                    for v in values], type=pa.string()))
    table = pa.Table.from_arrays(arrays, names=list(spec.columns))
    yield from table.to_batches(max_chunksize=PART_ROWS)


def _json_numbers(path: str, col: str, values: list) -> pa.Array:
    out = []
    for i, v in enumerate(values):
        if v is None or isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(None if v is None else float(v))
            continue
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            raise DataError(f"{path}: row {i}, column '{col}': expected a number, got {v!r}") from None
    return pa.array(out, type=pa.float64())


def _read_parquet(path: str, spec: IngestSpec):
    with open_input(path) as fh:
        try:
            pf = pq.ParquetFile(fh)
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataError(f"{path}: not a readable Parquet file ({exc})") from None
        _check_columns(path, pf.schema_arrow.names, spec.columns)
        yield from pf.iter_batches(batch_size=PART_ROWS, columns=list(spec.columns))


def _read_feather(path: str, spec: IngestSpec):
    with open_input(path) as fh:
        try:
            table = feather.read_table(fh)
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataError(f"{path}: not a readable Feather/Arrow file ({exc})") from None
    _check_columns(path, table.column_names, spec.columns)
    yield from table.select(list(spec.columns)).to_batches(max_chunksize=PART_ROWS)


def _read_excel(path: str, spec: IngestSpec):
    with open_input(path) as fh:
        try:
            df = pd.read_excel(fh, dtype=object)
        except ImportError as exc:
            raise DataError(f"{path}: reading Excel needs openpyxl ({exc})") from None
        except Exception as exc:
            raise DataError(f"{path}: not a readable Excel file ({exc})") from None
    _check_columns(path, [str(c) for c in df.columns], spec.columns)
    yield from _records_to_batches(path, df.where(df.notna(), None).to_dict("records"), spec)


def read_batches(path: str, spec: IngestSpec):
    fmt = spec.format
    if fmt in ("csv", "tsv"):
        return _read_csv(path, spec, spec.delimiter)
    return {"json": _read_json, "jsonl": _read_jsonl, "parquet": _read_parquet, "feather": _read_feather,
            "excel": _read_excel}[fmt](path, spec)


def config_slice(ctx) -> dict:
    """What ingest reads of the config: the columns and how (``IngestSpec.slice``)."""
    return ingest_spec(ctx).slice()


def prepare(ctx) -> Prepared:
    """The dataset's fingerprint, which keys the entry (a Dask DataFrame's partitions are converted and
    staged to find it: a miss moves them into the entry, a hit drops them)."""
    spec = ingest_spec(ctx)
    if ingest_frame.is_dask_frame(ctx.dataset) and "://" not in str(ctx.cache.root):
        media = {f.column: f for f in ctx.media_features()}
        convert = functools.partial(ingest_frame.convert_partition, columns=dict(spec.columns), media=media,
                                    cache_dir=os.path.abspath(ctx.media_cache_root))
        staged = dask_frame.stage(ctx.dataset, spec, convert, Path(ctx.cache.root) / "ingest", ingest_frame.SOURCE)
        return Prepared(parents=(staged.fingerprint,), value=(spec, staged, staged.fingerprint), close=staged.close)
    if ingest_frame.is_frame(ctx.dataset):  # a pandas DataFrame passed in Python
        table = ingest_frame.frame_table(ctx, spec)
        fp = dask_frame.table_fingerprint(table, spec)  # a Dask DataFrame's, for the same rows
        return Prepared(parents=(fp,), value=(spec, table, fp))
    fp = ctx.fingerprint or fingerprint(ctx.dataset, FileStamps.at(ctx.cache.root))
    return Prepared(parents=(fp,), value=(spec, None, fp))


def compute(ctx, out: Path, prepared: tuple) -> Statistics:
    """The dataset's rows as Arrow IPC parts (``Ingested``): a file, a folder's files one by one, or a frame."""
    spec, source, fp = prepared
    stats = Statistics()
    info = {"fingerprint": fp, "spec": spec.slice()}
    if isinstance(source, dask_frame.Staged):  # a Dask DataFrame, partition by partition on the workers
        source.move_into(Ingested.data(out))
        info["rows"] = source.rows
    elif source is not None:  # a pandas DataFrame
        rows = write_parts(source.to_batches(max_chunksize=PART_ROWS), spec, Ingested.data(out), ingest_frame.SOURCE)
        info["rows"] = rows
    elif is_multi(ctx.dataset):  # a folder, glob or list: file by file (tasks.ingest.files)
        listed, counts = ingest_files(ctx, spec, _write_file)
        # "read": what the run that wrote the entry read (not a statistic: the manifest's must not depend on
        # the cache's history)
        info.update(rows=sum(f["rows"] for f in listed), files=listed,
                    schema_drift=counts["schema_drift"], read=counts["read"])
        for d in counts["schema_drift"]:
            stats.counter(f"ingest.schema_drift.{d['column']}", 1)
    else:
        info["rows"] = _write_file(ctx.dataset, spec, Ingested.data(out))
    Ingested.write_info(out, info)
    stats.counter("ingest.rows_out", info["rows"])
    return stats


def intact(ctx, result: Ingested) -> bool:
    """A folder's entry is usable while its files' entries are there (a cleaned cache: computed again)."""
    return entries_intact(ctx.cache, result.files)


def _write_file(path: str, spec: IngestSpec, out: Path) -> int:
    """One file of a folder or glob as Arrow IPC parts in ``out``, its rows numbered from 0; its row count."""
    if ingest_parts.handles(spec):  # row groups read by Dask tasks
        return ingest_parts.write_parts(path, spec, out, PART_ROWS)
    if ingest_csv.handles(spec):  # byte ranges read by Dask tasks
        return ingest_csv.write_parts(path, spec, out, read_batches)
    return write_parts(read_batches(path, spec), spec, out, path)


NODE = Node("ingest", compute, output=Ingested, reads=config_slice, prepare=prepare, intact=intact,
            per_file=True)
