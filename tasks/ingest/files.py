"""A dataset of several files (a folder, a glob), ingested file by file: each file one cache entry.

A file's entry (``<cache>/ingest_file/<key>``) holds its rows as Arrow IPC parts numbered from 0 in the
file, keyed by the file's fingerprint (its bytes), the columns read and ingest's code version: never by
its name, its place among the files or the other files. So adding a file reads only that file, a changed
file is read again alone, and removing or inserting a file (in name order) reads nothing: the stage's
entry lists the files with the rows before each (``offset``), and readers number a part's rows in the
dataset by adding its file's offset (``tasks.runtime.outputs.Ingested.parts``). The rows are the same, in
the same order and with the same numbers, as one reader of the concatenated files.

Before any file is read, every file's columns are checked against the dataset's first file (a Parquet or
Feather schema, a CSV header): a column the config reads that is missing from a file, or of another type,
is one error naming the file and the column, unless ``preprocessing.schema_drift: allow``; then a missing
column is read as nulls, a retyped one is converted as the config declares it (a value that does not
convert is the usual error naming its row), and each difference is a schema-drift entry of the run
(``Ingested.schema_drift``, the statistics ``ingest.schema_drift.<column>``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.feather as feather

from core.errors import DataError
from storage.cache import cache_key
from tasks.dataset import fingerprint as dataset_fingerprint
from tasks.dataset.file_stamps import FileStamps
from tasks.dataset.files import label
from tasks.dataset.info import column_types
from tasks.ingest.common import DICTIONARY
from tasks.runtime import file_fits
from tasks.runtime.frame import write_ipc
from tasks.runtime.outputs import FILE_ENTRIES, Ingested
from tasks.runtime.part_files import parts_in


def schema_drift(files: list[tuple[str, str, str]], spec, allow: bool) -> list[dict]:
    """Each file's differences from the first file in the columns ``spec`` reads, as ``{file, column,
    change}`` (``missing``, or ``A -> B`` for a type); raises DataError for the first one unless ``allow``."""
    if len(files) < 2:
        return []
    first_name, first_path, _fp = files[0]
    reference = column_types(first_path, spec.format, spec.delimiter)
    found = []
    for name, path, _fp in files[1:]:
        types = column_types(path, spec.format, spec.delimiter)
        for column in spec.columns:
            if column not in reference:
                continue  # the first file's own problem: ingest names it when it reads that file
            if column not in types:
                found.append({"file": name, "column": column, "change": "missing"})
            elif types[column] is not None and reference[column] is not None and types[column] != reference[column]:
                found.append({"file": name, "column": column, "change": f"{reference[column]} -> {types[column]}"})
    if found and not allow:
        d = found[0]
        what = (f"has no column '{d['column']}'" if d["change"] == "missing"
                else f"column '{d['column']}' is {d['change'].split(' -> ')[1]}, not {d['change'].split(' -> ')[0]}")
        raise DataError(f"{d['file']}: {what} as in {first_name}; every file of the dataset needs the first "
                        "file's columns (or set preprocessing.schema_drift: allow)")
    return found


def ingest_files(ctx, spec, write_file: Callable[[str, object, Path], int]
                 ) -> tuple[list[dict], dict]:
    """Every file of the dataset in its cache entry, the missing ones read by ``write_file(path, spec,
    out_dir) -> rows``. Returns the stage's file list (``name``, ``fingerprint``, ``key``, ``rows``,
    ``offset``) and ``{"read", "reused", "schema_drift"}``."""
    folder, code_version = file_fits.entries()  # the ingest node's per-file entries (Node.per_file)
    files = dataset_fingerprint.files(ctx.dataset, FileStamps.at(ctx.cache.root))
    drift = schema_drift(files, spec, ctx.config.preprocessing.schema_drift == "allow")
    missing = {(d["file"], d["column"]) for d in drift if d["change"] == "missing"}
    listed, offset, read = [], 0, 0
    for name, path, fp in files:
        absent = [c for c in spec.columns if (name, c) in missing]
        file_spec = replace(spec, columns={c: k for c, k in spec.columns.items() if c not in absent},
                            dictionary=tuple(c for c in spec.dictionary if c not in absent))
        key = cache_key(folder, code_version, [fp], {**spec.slice(), "absent": absent})
        entry = ctx.cache.get(folder, key)
        if entry is None:
            with ctx.cache.writer(folder, key) as tmp:
                rows = write_file(path, file_spec, Ingested.data(tmp))
                if absent:
                    _add_null_columns(Ingested.data(tmp), spec, absent)
                Ingested.write_file_info(tmp, {"fingerprint": fp, "rows": rows})
            read += 1
        else:
            rows = Ingested.file_info(entry)["rows"]
        listed.append({"name": name, "fingerprint": fp, "key": key, "rows": rows, "offset": offset})
        offset += rows
    if offset == 0:
        raise DataError(f"{label(ctx.dataset)}: the dataset has no data rows")
    return listed, {"read": read, "reused": len(files) - read, "schema_drift": drift}


def _add_null_columns(folder: Path, spec, absent: list[str]) -> None:
    """Each part in ``folder`` with the ``absent`` columns added as nulls, in the spec's column order."""
    for path, _offset in parts_in(folder):
        table = feather.read_table(path)
        for column in absent:
            kind = (DICTIONARY if column in spec.dictionary else
                    pa.float64() if spec.columns[column] == "float64" else pa.string())
            table = table.append_column(column, pa.nulls(table.num_rows, kind))
        order = [c for c in spec.columns if c in table.column_names]
        write_ipc(table.select([*order, *(c for c in table.column_names if c not in order)]), Path(path))


def entries_intact(cache, files: list[dict]) -> bool:
    """Whether every file entry an ingest entry lists is still in the cache (its hit is only a hit then)."""
    return all(Ingested.file_info(cache.path(FILE_ENTRIES, f["key"])) is not None for f in files)
