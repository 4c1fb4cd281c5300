"""validate: what each gate validates, as Dask delayed frames (``VIEWS``): the raw gate's table as ingested,
indexed by input row, and the encoded gate's rows of every split with their input row, split and, for a
matrix column, each row's size, min and max."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
from dask import delayed

from core.lazy import pandas as pd
from storage import npy
from tasks.config.constants import ROW, SPLIT_NAMES
from tasks.runtime import dask_run, frame
from tasks.runtime.frame import ipc_num_rows
from tasks.runtime.outputs import Encoded, Ingested

# a part of the validate stage: the gates are versioned with what this module imports too (core.code_version)
CODE_VERSION_FOLLOWS_IMPORTS = True

# Rows per validation partition when --npartitions is not given: GX's fixed cost per partition and
# expectation (user suites) is ~10-30 ms, so partitions much smaller than this cost more than they
# parallelize.
VALIDATION_ROWS = 1 << 19


def raw_frame(pdf: pd.DataFrame) -> pd.DataFrame:
    """An ingest partition as the raw gate sees it: indexed by input row, without the row column."""
    rows = pdf[ROW].to_numpy()
    out = pdf.drop(columns=[ROW])
    if len(rows) and rows[-1] - rows[0] == len(rows) - 1 and bool((np.diff(rows) == 1).all()):
        out.index = pd.RangeIndex(int(rows[0]), int(rows[-1]) + 1)  # ingest parts hold consecutive rows
    else:
        out.index = pd.Index(rows)
    return out


def _read_table(path: Path):
    if path.suffix == ".parquet":
        return pq.read_table(path)

    return feather.read_table(str(path), memory_map=True)


def _matrix_stats(col) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(col)
    flat = col
    while pa.types.is_fixed_size_list(flat.type):
        flat = flat.flatten()
    values = flat.to_numpy(zero_copy_only=False)
    width = len(values) // n if n else 0
    values = values.reshape(n, width)
    sizes = np.full(n, width, dtype=np.int64)
    if width == 0:
        empty = np.full(n, np.nan)
        return sizes, empty, empty
    if values.dtype.kind == "f":  # NaN anywhere in a row -> NaN (a null to GX)
        return sizes, values.min(axis=1), values.max(axis=1)
    return sizes, values.min(axis=1), values.max(axis=1)


def _encoded_columns(path: str, rows_path: str, split_id: int, shaped: dict[str, bool]) -> dict[str, np.ndarray]:
    """One encoded part as columns: scalar outputs as they are, each matrix output as its rows' size,
    min and max; ``__row__`` (input row; oversampled copies after the first are flagged in
    ``__first__``) and ``__split__``."""
    table = _read_table(Path(path))
    data: dict[str, np.ndarray] = {}
    for name, matrix in shaped.items():
        col = table.column(name).combine_chunks()
        if matrix:
            data[f"{name}__size"], data[f"{name}__min"], data[f"{name}__max"] = _matrix_stats(col)
        else:
            data[name] = col.to_numpy(zero_copy_only=False)
    rows = npy.load(rows_path)
    first = np.ones(len(rows), dtype=bool)
    first[1:] = rows[1:] != rows[:-1]  # copies made by oversampling are adjacent
    data["__row__"], data["__first__"] = rows, first
    data["__split__"] = np.full(len(rows), split_id, dtype=np.int8)
    return data


def _encoded_chunk(pieces: list, shaped: dict[str, bool]) -> pd.DataFrame:
    """Consecutive encoded parts as one frame indexed by position in the encoded output (the pieces'
    offsets are consecutive). Columns are concatenated as numpy arrays: a pandas concat of the parts'
    frames costs ~10x more."""

    parts = [_encoded_columns(path, rows, split_id, shaped) for path, rows, split_id, _offset, _n in pieces]
    data = {k: parts[0][k] if len(parts) == 1 else np.concatenate([p[k] for p in parts]) for k in parts[0]}
    first = data.pop("__first__")
    row = pd.array(np.where(first, data["__row__"], 0), dtype="Int64")
    row[~first] = pd.NA
    data["__row__"] = row
    data["__split__"] = data.pop("__split__")  # last, as the view's columns list it
    offset = pieces[0][3]
    # copy=False: one block per column, not a copy of every column into 2-D blocks (the kernels read column
    # by column)
    return pd.DataFrame(data, index=pd.RangeIndex(offset, offset + len(first)), copy=False)


def raw_view(ingest_path: str, npartitions: int | None, read=None) -> tuple[list, list[str], int]:
    """The raw gate's partitions (delayed, indexed by input row; ``VALIDATION_ROWS`` rows each by
    default), columns and row count. ``read(columns)``: the columns whose values the suites read
    (``expectations.runner.columns_read``; None: all); the partitions hold only those."""

    ingested = Ingested.at(ingest_path)
    rows, ingested_parts = ingested.num_rows, ingested.parts
    columns = [c for c in frame.column_names(ingested_parts) if c != ROW]
    wanted = read(columns) if read is not None else None
    parts = frame.partitions(ingested_parts, npartitions or -(-rows // VALIDATION_ROWS),
                             columns=None if wanted is None else [*wanted, ROW])
    return [delayed(raw_frame)(p) for p in parts], columns, rows


def encoded_view(chunks: list[list], shaped: dict[str, bool], read=None) -> tuple[list, list[str], int]:
    """The encoded gate's partitions (one per chunk of ``encoded_chunks``), columns and row count;
    ``shaped``: output column -> whether it is a matrix."""

    s = dask_run.shared(shaped)
    parts = [delayed(_encoded_chunk)(chunk, s) for chunk in chunks]
    columns = [n for name, matrix in shaped.items()
               for n in ([f"{name}__size", f"{name}__min", f"{name}__max"] if matrix else [name])]
    return parts, [*columns, "__row__", "__split__"], sum(p[-1] for chunk in chunks for p in chunk)


def encoded_order(chunks: list[list], _shaped=None) -> list[int]:
    """The encoded gate's chunks in the order the runner's gathering tree takes them: by the first input
    partition they hold rows of (the number in ``part-NNNNN``), so that the training, validation and test
    chunks of the same input rows meet early and their ``__row__`` bitmaps complete each other's blocks
    (``expectations.unique_kernel.BitBlocks``). The chunks themselves stay in encoded order."""

    def first_part(chunk: list) -> int:
        return min(int(Path(path).stem.rsplit("-", 1)[1]) for path, *_rest in chunk)

    return sorted(range(len(chunks)), key=lambda i: (first_part(chunks[i]), i))


# What each gate validates, by name: arguments -> (partitions, columns, rows); and, for a view whose
# partitions' keys interleave, the order in which the runner's tree gathers them (same arguments).
VIEWS = {"raw": raw_view, "encoded": encoded_view}
ORDERS = {"encoded": encoded_order}


def encoded_chunks(encoded: Encoded, npartitions: int | None) -> list[list]:
    """The encoded parts as ``[path, rows path, split id, offset, rows]`` (absolute paths), grouped in
    consecutive chunks of ~VALIDATION_ROWS rows each (or ``npartitions`` chunks)."""

    pieces, offset = [], 0
    for split_id, split_name in enumerate(SPLIT_NAMES):
        for path in encoded.split_parts(split_name):
            rows_path = Encoded.rows_file(path)
            n = _num_rows(path)
            pieces.append([os.path.abspath(path), os.path.abspath(rows_path), split_id, offset, n])
            offset += n
    chunks: list[list] = []
    target = -(-offset // npartitions) if npartitions else VALIDATION_ROWS
    for piece in pieces:
        if not chunks or sum(p[-1] for p in chunks[-1]) + piece[-1] > target:
            chunks.append([])
        chunks[-1].append(piece)
    return chunks


def _num_rows(path: Path) -> int:
    if path.suffix == ".parquet":
        return pq.ParquetFile(path).metadata.num_rows

    return ipc_num_rows(path)
