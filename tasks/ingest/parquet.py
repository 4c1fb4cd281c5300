"""Partition-parallel ingest of Parquet datasets: one file, a folder of files or a glob (``day_*.parquet``).

The flow process only plans: it reads every file's footer (schema, row groups and their row counts),
checks that the files agree on the columns the config reads, and cuts the dataset into units of
consecutive row groups of one file (up to ``part_rows`` rows, at least one row group). One
Dask task per unit (on the workers of a cluster) reads its row groups, checks them like the
single-file reader does, and writes them as an Arrow IPC part whose ``__row__`` starts at the unit's
offset: the sum of the row counts before it. So the row numbers, and the artifact, do not depend on
how the files are cut, on the number of tasks or on the workers.

The fingerprint of a folder or glob (``tasks.dataset.fingerprint``) hashes each file's blocks on Dask tasks.

A file whose schema differs from the first file's, a file that is not a readable Parquet file
(truncated: no footer) and a row group that cannot be read are each one ``DataError`` naming the
file (and row group); the stage's cache entry is then never written, so nothing is published.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from dask import delayed

from core.errors import DataError
from storage.fs import open_input
from tasks.config.constants import ROW
from tasks.dataset.files import dataset_files, readable
from tasks.ingest.common import (
    check_columns,
    dictionary_encoded,
    normalize_batch,
    reject_infinities,
    reject_text_in_numbers,
)
from tasks.ingest.nested import check_flat
from tasks.runtime.dask_run import compute, shared
from tasks.runtime.frame import write_part
from tasks.runtime.outputs import Ingested

# ---- plan ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Unit:
    """Consecutive row groups of one file, and where their rows start (in the file, in the dataset)."""

    path: str  # as the dataset names it (for messages)
    source: str  # where a task reads it (``readable``)
    row_groups: tuple[int, ...]
    file_row: int
    first_row: int
    rows: int


def _comparable(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    return t


def _footer(path: str) -> pq.FileMetaData:
    try:
        with open_input(path) as fh:
            meta = pq.ParquetFile(fh).metadata
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path}: not a readable Parquet file (truncated or not Parquet: {exc})") from None
    return meta


def plan(files: list[str], spec, part_rows: int) -> list[Unit]:
    """Units of about ``part_rows`` rows over every file's row groups, in dataset order; reads footers only."""
    units: list[Unit] = []
    first_types: dict[str, pa.DataType] | None = None
    total = 0
    for path in files:
        meta = _footer(path)
        schema = meta.schema.to_arrow_schema()
        check_columns(path, schema.names, spec.columns)
        check_flat(path, schema, spec.columns)
        types = {c: _comparable(schema.field(c).type) for c in spec.columns}
        if first_types is None:
            first_types = types
        else:
            for c, t in types.items():
                if t != first_types[c]:
                    raise DataError(f"{path}: column '{c}' is {t}, but in {files[0]} it is {first_types[c]}; "
                                    "every file of the dataset needs the same schema")
        groups: list[int] = []
        rows = file_row = 0
        for rg in range(meta.num_row_groups):
            n = meta.row_group(rg).num_rows
            if groups and rows + n > part_rows:
                units.append(Unit(path, readable(path), tuple(groups), file_row, total, rows))
                total, file_row, groups, rows = total + rows, file_row + rows, [], 0
            groups.append(rg)
            rows += n
        if groups:
            units.append(Unit(path, readable(path), tuple(groups), file_row, total, rows))
            total += rows
    return units


# ---- the tasks -------------------------------------------------------------------------------------------

def read_unit(unit: Unit, spec) -> pa.Table:
    """A unit's rows with exactly the spec's columns, checked (infinities named by file and row)."""
    try:
        with open_input(unit.source) as fh:
            # category strings straight from the file's dictionary pages (pyarrow skips non-string columns)
            pf = pq.ParquetFile(fh, read_dictionary=list(spec.dictionary) or None)
            table = pf.read_row_groups(list(unit.row_groups), columns=list(spec.columns))
    except (pa.ArrowInvalid, OSError) as exc:
        groups = ", ".join(map(str, unit.row_groups))
        raise DataError(f"{unit.path}: row group {groups}: cannot read ({exc})") from None
    if table.num_rows != unit.rows:
        raise DataError(f"{unit.path}: row group {unit.row_groups[0]}: {table.num_rows} rows, its footer says "
                        f"{unit.rows}")
    table = normalize_batch(table, spec, read_dictionaries=True)
    reject_text_in_numbers(table, spec, unit.file_row, unit.path)
    reject_infinities(table, spec, unit.file_row, unit.path)
    return table


def write_unit(unit: Unit, spec, part: str) -> int:
    table = read_unit(unit, spec)
    rows = pa.array(np.arange(unit.first_row, unit.first_row + unit.rows, dtype=np.int64))
    write_part(dictionary_encoded(table, spec).append_column(ROW, rows), Path(part))
    return table.num_rows


def write_parts(dataset: str, spec, out_dir: Path, part_rows: int) -> int:
    """Every unit of a Parquet dataset written as ``out_dir/part-NNNNN.arrow`` by its own task; the row count."""

    units = plan(dataset_files(dataset), spec, part_rows)
    total = sum(u.rows for u in units)
    if total == 0:
        raise DataError(f"{dataset}: the dataset has no data rows")
    out_dir.mkdir(parents=True, exist_ok=True)
    units = [u for u in units if u.rows]
    # the spec once for all tasks, each unit as an opaque value: Dask walks a dataclass argument field by field,
    # and rebuilds it, in every call
    s = shared(spec)
    compute([delayed(write_unit, pure=False)(shared(u), s, str(Ingested.part_file(out_dir, i)))
             for i, u in enumerate(units)])
    return total


def handles(spec) -> bool:
    """Whether this module ingests the dataset: Parquet (one file, a folder or a glob)."""
    return spec.format == "parquet"
