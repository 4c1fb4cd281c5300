"""The artifact's row files, written by Dask tasks (on the workers of a cluster) from encode's parts.

The flow process only plans: it reads each encoded part's row count (the IPC footer, no data),
cuts every split into the same fixed shards and row groups as a single writer would (shard
``k`` holds rows ``[k * shard_rows, (k + 1) * shard_rows)``, row groups start at multiples of
``min(row_group_rows, shard_rows)``), and hands each task the pieces of the parts it needs. Each
task returns the small description of what it wrote (``{relative path: {"sha256", "bytes"}}``), from
which publish assembles the manifest. So the flow process never holds a row, and the bytes depend
only on data + config, never on the number of encode partitions, tasks or workers.

* Parquet: one task per shard (``write_parquet_shard``): zstd, one row group per planned range;
  dictionary-encoded columns, except those whose distinct values cannot fit one dictionary page
  (``dictionary_columns``).
* ``.npy``: the flow process creates each column's file with its header at full size (sparse);
  one task per encoded part writes that part's rows of every column at their offset
  (``write_npy_rows``), then one task per file hashes it (``hash_file``).

* The Parquet vocabularies of the vocab stage's entry: one task per file hard-links it into the artifact (or
  copies it, ``copy_file``), so a large vocabulary (Criteo's ~40M-id columns) is not copied by the flow process.

Each writer is a function of one shard's pieces (or one part), so another output format can add
its own per-shard writer beside these.

Remote outputs (an fsspec URL such as ``s3://bucket/prefix``): the same tasks write the objects
straight to the store from the worker (``storage.fs.open_output``), hashing the bytes as they
stream, so no data byte goes through the flow process. A Parquet shard is one object written by
its task. An object store has no offset writes, so a ``.npy`` file is written by one task of its
own (``stream_npy``) that writes the header, then every encoded part's rows of its column in
split order (the parts are memory-mapped Arrow IPC, so a task reads only its column's pages);
the parallelism of a remote ``.npy`` publish is one task per column rather than one per part.
The bytes equal a local run's: the same header and the same rows in the same order.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from core.pause import pause_point
from storage.fs import HashingWriter, is_url, open_output, write_at
from tasks.config.constants import ROW
from tasks.publish.rows import read_part, with_row
from tasks.runtime.frame import ipc_num_rows

Piece = tuple[str, int, int]  # (encoded part path, first row, stop row) inside that part


def part_sizes(parts: list[Path]) -> list[int]:
    return [ipc_num_rows(str(p)) for p in parts]


def pieces(parts: list[Path], sizes: list[int], lo: int, hi: int) -> list[Piece]:
    """Rows ``[lo, hi)`` of the concatenated parts as (part, start, stop) pieces in row order."""
    out: list[Piece] = []
    offset = 0
    for part, size in zip(parts, sizes, strict=True):
        a, b = max(lo, offset), min(hi, offset + size)
        if a < b:
            out.append((str(part), a - offset, b - offset))
        offset += size
    return out


def shard_plan(n_rows: int, shard_rows: int, row_group_rows: int) -> list[list[tuple[int, int]]]:
    """Per shard, its row groups as global ``(lo, hi)`` row ranges: shards of ``shard_rows`` rows, row
    groups cut at multiples of ``min(row_group_rows, shard_rows)`` and at shard ends."""
    block = min(row_group_rows, shard_rows)
    plan = []
    for s_lo in range(0, n_rows, shard_rows):
        s_hi = min(s_lo + shard_rows, n_rows)
        cuts = sorted({s_lo, s_hi, *range((s_lo // block + 1) * block, s_hi, block)})
        plan.append(list(zip(cuts[:-1], cuts[1:], strict=True)))
    return plan


def read_pieces(group: list[Piece]) -> pa.Table:
    """The rows of ``group`` as one table with one chunk per column (what a row group is written from)."""
    tables = [read_part(path).slice(a, b - a) for path, a, b in group]  # with __row__ (tasks.publish.rows)
    return pa.concat_tables(tables).combine_chunks()


def describe(path: Path, rel: str) -> dict[str, dict]:
    with open(path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    return {rel: {"sha256": digest, "bytes": path.stat().st_size}}


# Arrow's Parquet writer dictionary-encodes a column chunk until its dictionary passes this many bytes (its
# ``dictionary_pagesize_limit``), then falls back to plain encoding: a column with more distinct values than
# that builds a dictionary and drops it, in every row group.
DICTIONARY_PAGE_BYTES = 1 << 20
COPY_CHUNK = 1 << 20  # read and write size of ``copy_file``


def dictionary_columns(columns: dict[str, dict]) -> list[str]:
    """The published columns (``tasks.publish.stage.column_specs``) written with Parquet's dictionary encoding: all
    but ``__row__`` (a distinct value per row) and the ids whose ``cardinality`` times their width exceeds
    ``DICTIONARY_PAGE_BYTES``, which are written plain from the start: the writer would build their dictionary
    only to drop it, so skipping it saves CPU and bytes (``benchmarks/parquet_dictionary.py``)."""

    def wide(name: str, spec: dict) -> bool:
        if name == ROW:
            return True
        cardinality = spec.get("cardinality")
        return cardinality is not None and cardinality * npy_dtype(spec).itemsize > DICTIONARY_PAGE_BYTES

    return [name for name, spec in columns.items() if not wide(name, spec)]


def copy_file(source: str, path: str, rel: str) -> dict[str, dict]:
    """Put ``source`` (a file of a cache entry: a Parquet vocabulary) at ``path``, a local path or a store URL;
    its description. A local output hard-links it where the file system allows (a cache entry is never changed
    in place, and its hashes are checked on every hit), else copies it, hashing the bytes as they are written."""
    if not is_url(path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, path)
            return describe(Path(path), rel)
        except OSError:  # another file system, or no hard links there: copy
            pass
    with open(source, "rb") as src:
        if is_url(path):
            with open_output(path) as sink:
                shutil.copyfileobj(src, sink, COPY_CHUNK)
        else:
            with open(path, "wb") as dst:
                sink = HashingWriter(dst)
                shutil.copyfileobj(src, sink, COPY_CHUNK)
    return {rel: sink.description()}


def write_parquet_shard(groups: list[list[Piece]], path: str, rel: str,
                        dictionary: list[str] | None = None) -> dict[str, dict]:
    """One Parquet shard (zstd) with one row group per entry of ``groups``; its description. ``path``
    may be a store URL: the shard is then streamed to the store as one object. ``dictionary``: the
    columns written with dictionary encoding (``dictionary_columns``); None: every column."""

    if is_url(path):
        with open_output(path) as sink:
            _write_shard(groups, sink, dictionary)
        return {rel: sink.description()}
    _write_shard(groups, path, dictionary)
    return describe(Path(path), rel)


def _write_shard(groups: list[list[Piece]], where: str | HashingWriter, dictionary: list[str] | None) -> None:
    writer = None
    try:
        for group in groups:
            table = read_pieces(group)
            if writer is None:
                writer = pq.ParquetWriter(where, table.schema, compression="zstd",
                                          use_dictionary=True if dictionary is None else dictionary)
            writer.write_table(table, row_group_size=max(table.num_rows, 1))
            pause_point("publish_shard")  # crash tests: a shard half-written, on a Dask worker thread
    finally:
        if writer is not None:
            writer.close()


def write_empty_shard(schema_part: str, path: str, rel: str) -> dict[str, dict]:
    """An empty split's one shard: no rows, the encoded parts' schema."""

    with ipc.open_file(schema_part) as reader:
        schema = with_row(reader.schema)
    if is_url(path):
        with open_output(path) as sink:
            pq.write_table(schema.empty_table(), sink, compression="zstd")
        return {rel: sink.description()}
    pq.write_table(schema.empty_table(), path, compression="zstd")
    return describe(Path(path), rel)


def npy_dtype(spec: dict) -> np.dtype:
    return np.dtype(spec["dtype"].removeprefix("torch."))


def npy_header(fh, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    np.lib.format.write_array_header_1_0(
        fh, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape})


def create_npy(path: Path, dtype: np.dtype, shape: tuple[int, ...]) -> int:
    """The file with its ``.npy`` header (format 1.0) and room for every row (sparse until written);
    returns the header's length (where row 0 starts)."""
    with open(path, "wb") as fh:
        npy_header(fh, dtype, shape)
        start = fh.tell()
        fh.truncate(start + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
    return start


def write_npy_rows(part: str, first_row: int, targets: dict[str, tuple[str, str, int, int]]) -> int:
    """Write every column of one encoded part at row ``first_row`` of its ``.npy`` file. ``targets``:
    column -> (file, dtype, header length, bytes per row). Returns the rows written."""
    table = read_part(part)
    for name, (path, dtype, start, row_bytes) in targets.items():
        write_at(path, column_values(table, name, np.dtype(dtype)), start + first_row * row_bytes)
    return table.num_rows


def column_values(table: pa.Table, name: str, dtype: np.dtype) -> np.ndarray:
    """A column's values, matrices flattened row-major, as a C-contiguous array of ``dtype``."""
    flat = table.column(name).combine_chunks()
    while pa.types.is_fixed_size_list(flat.type):
        flat = flat.flatten()
    return np.ascontiguousarray(flat.to_numpy(zero_copy_only=False).astype(dtype, copy=False))


def read_columns(part: str, names: tuple[str, ...] | list[str]) -> pa.Table:
    """Only ``names`` of an encoded part (memory-mapped); the input rows file is read only for ``__row__``."""
    if ROW in names:
        return read_part(part)
    return feather.read_table(part, columns=list(names), memory_map=True)


def stream_npy(parts: list[str], name: str, dtype: str, shape: tuple[int, ...], url: str,
               rel: str) -> dict[str, dict]:
    """One column's whole ``.npy`` file as one object at ``url`` (a remote output): the header, then
    each part's rows in split order; its description."""
    with open_output(url) as sink:
        npy_header(sink, np.dtype(dtype), tuple(shape))
        for part in parts:
            sink.write(column_values(read_columns(part, [name]), name, np.dtype(dtype)))
    return {rel: sink.description()}


def hash_file(path: str, rel: str, after=None) -> dict[str, dict]:
    """A file's description, once ``after`` (the tasks that write it) is done."""
    return describe(Path(path), rel)
