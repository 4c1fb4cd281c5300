"""ingest from a Dask DataFrame passed in Python: its partitions read on the Dask workers, as files are,
so the flow process never holds the whole frame (``tasks.ingest.dataframe`` would compute it there).

Two passes of one task per partition, on the active scheduler (a cluster's workers when a Client is set):

1. each task computes its partition, converts it as the pandas ingest does
   (``tasks.ingest.dataframe.partition_table``: number columns to float64, others to strings, in-memory
   media written to the media cache), and writes it as an Arrow IPC file into a staging folder beside the
   stage's cache entries; it returns its row count (and, instead of raising, the first bad value's
   position in the partition, so the flow names the row of the whole frame, 0-based);
2. once the counts give every partition's first row, each task appends ``__row__`` and returns its rows'
   contribution to the fingerprint.

The flow process holds row counts and four 64-bit sums only, never a row. The ingest stage
(``tasks.ingest.stage``) hands in the partition conversion and the spec, and stores the staged parts as
its cache entry.

**Fingerprint** (the stage's cache key, and so the artifact id): independent of the partitioning. Every
row is hashed by pandas' own ``hash_pandas_object`` (its values, column by column, not its index) and
mixed with its 0-based position by splitmix64, in four lanes with different seeds; each lane is summed
modulo 2**64 over all rows (a sum: any partitioning gives the same total), and the fingerprint is the
sha256 of the four sums, the row count and the columns' names and Arrow types as stored. A pandas
DataFrame (or a Dask one computed whole, for a remote stage cache) gets the same fingerprint from its
converted table (``table_fingerprint``), so the same rows as pandas and as Dask, in any partitioning, give
one artifact id.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
from dask import delayed

from core.errors import DataError
from core.lazy import pandas as pd
from storage.tmpdirs import TempFolder
from tasks.config.constants import ROW
from tasks.ingest.common import check_columns, dictionary_encoded
from tasks.runtime import dask_run
from tasks.runtime.outputs import Ingested

LANE_SEEDS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x27D4EB2F165667C5)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _splitmix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def lane_sums(table: pa.Table, first_row: int) -> list[int]:
    """The rows' fingerprint contributions: per lane, the sum (mod 2**64) of splitmix64(row hash ^
    splitmix64(position + seed)). Vectorized: pandas' row hash, numpy's wrapping uint64 arithmetic."""
    columns = [c for c in table.column_names if c != ROW]
    frame = table.select(columns).to_pandas()
    hashes = pd.util.hash_pandas_object(frame, index=False).to_numpy(dtype=np.uint64)
    positions = np.arange(first_row, first_row + len(hashes), dtype=np.uint64)
    sums = []
    with np.errstate(over="ignore"):
        for seed in LANE_SEEDS:
            mixed = _splitmix(hashes ^ _splitmix(positions + np.uint64(seed)))
            sums.append(int(mixed.sum(dtype=np.uint64)))
    return sums


def _write_ipc(table: pa.Table, path: Path) -> None:
    feather.write_feather(table, str(path), compression="uncompressed")  # as every ingest part (runtime.frame)


def _convert(pdf, convert: Callable, path: str) -> dict:
    """Pass 1 on a worker: one partition converted and written (no ``__row__`` yet). ``convert(pdf)`` is
    the pandas ingest's conversion; a bad value comes back with its row in the partition (``problem``:
    an exception with ``message(first_row)``), so the flow names its row in the whole frame."""
    try:
        table = convert(pdf)
    except Exception as exc:
        if not hasattr(exc, "message"):
            raise
        return {"rows": len(pdf), "problem": exc}
    _write_ipc(table, Path(path))
    return {"rows": table.num_rows, "problem": None}


def _number(path: str, first_row: int, spec) -> list[int]:
    """Pass 2 on a worker: the part's ``__row__`` appended (category columns dictionary-encoded, as every
    ingest stores them); its fingerprint lane sums."""
    with pa.memory_map(path) as source:
        table = pa.ipc.open_file(source).read_all()
    sums = lane_sums(table, first_row)
    rows = pa.array(np.arange(first_row, first_row + table.num_rows, dtype=np.int64))
    tmp = Path(path).with_suffix(".numbered")
    _write_ipc(dictionary_encoded(table, spec).append_column(ROW, rows), tmp)
    os.replace(tmp, path)
    return sums


# rows hashed at a time by ``table_fingerprint`` (its pandas copy of them is what it holds beyond the table)
FINGERPRINT_CHUNK_ROWS = 1 << 18


def table_fingerprint(table: pa.Table, spec) -> str:
    """A whole converted table's fingerprint, equal to ``stage``'s for any partitioning of the same rows:
    the lane sums add over chunks (each hashed with its rows' positions), and the schema is the stored
    one (category columns dictionary-encoded)."""
    sums = [lane_sums(table.slice(start, FINGERPRINT_CHUNK_ROWS), start)
            for start in range(0, table.num_rows, FINGERPRINT_CHUNK_ROWS)]
    return fingerprint(sums, table.num_rows, dictionary_encoded(table.slice(0, 0), spec).schema)


def fingerprint(sums: list[list[int]], rows: int, schema: pa.Schema) -> str:
    total = [sum(lane) % (1 << 64) for lane in zip(*sums, strict=True)] if sums else [0] * len(LANE_SEEDS)
    described = [(f.name, str(f.type)) for f in schema if f.name != ROW]
    return hashlib.sha256(json.dumps({"lanes": total, "rows": rows, "schema": described}).encode()).hexdigest()


@dataclass
class Staged:
    """A Dask DataFrame's parts, numbered, in a locked staging folder (``close`` removes what is left)."""

    folder: TempFolder
    parts: list[str]
    rows: int
    fingerprint: str

    def move_into(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True)
        for k, path in enumerate(self.parts):
            shutil.move(path, Ingested.part_file(data_dir, k))

    def close(self) -> None:
        self.folder.close()


def stage(ddf, spec, convert: Callable, stage_dir: Path, source: str) -> Staged:
    """Both passes over ``ddf``'s partitions into a staging folder under ``stage_dir`` (the ingest stage's
    cache folder, so a killed run's leftovers are swept as its entries' are)."""
    check_columns(source, [str(c) for c in ddf.columns], spec.columns)
    stage_dir.mkdir(parents=True, exist_ok=True)
    staging = TempFolder(stage_dir, ".tmp-frame-")
    try:
        paths = [str(Ingested.part_file(staging.path, i)) for i in range(ddf.npartitions)]
        parts = ddf[list(spec.columns)].to_delayed()
        fn = dask_run.shared(convert)
        done = dask_run.compute([delayed(_convert, pure=False)(part, fn, path)
                                 for part, path in zip(parts, paths, strict=True)])
        firsts = np.concatenate([[0], np.cumsum([d["rows"] for d in done], dtype=np.int64)]).tolist()
        for i, d in enumerate(done):
            if d["problem"] is not None:
                raise DataError(d["problem"].message(firsts[i]))
        rows = int(firsts[-1])
        if rows == 0:
            raise DataError(f"{source}: the DataFrame has no rows")
        kept = [(p, f) for p, f, d in zip(paths, firsts, done, strict=False) if d["rows"]]
        sums = dask_run.compute([delayed(_number, pure=False)(p, f, dask_run.shared(spec)) for p, f in kept])
        with pa.memory_map(kept[0][0]) as source_file:
            schema = pa.ipc.open_file(source_file).schema
        return Staged(staging, [p for p, _f in kept], rows, fingerprint(sums, rows, schema))
    except BaseException:
        staging.close()
        raise
