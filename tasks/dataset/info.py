"""What can be known of a dataset without reading its rows: its format, from the file name(s)
(``detect_format``), and its column names where a header or schema alone tells them (``dataset_columns``:
checks made before any data is read use them)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq

from core.errors import DataError
from core.lazy import pandas as pd
from storage.fs import open_input
from tasks.dataset import csv_dialect
from tasks.dataset.files import dataset_files, is_multi, label


def detect_format(path) -> str:
    if is_multi(path):  # a folder, glob or list: the one format of its files
        formats = {detect_format(f) for f in dataset_files(path)}
        if len(formats) > 1:
            raise DataError(f"{label(path)}: the files have different formats ({', '.join(sorted(formats))}); "
                            "a folder, pattern or list must hold one format")
        return formats.pop()
    name = str(path).lower().split("?")[0]
    for suffix in (".gz", ".gzip", ".bz2", ".zst", ".zstd", ".xz"):
        name = name.removesuffix(suffix)
    ext = os.path.splitext(name)[1].lstrip(".")
    mapping = {"csv": "csv", "tsv": "tsv", "tab": "tsv", "json": "json", "jsonl": "jsonl", "ndjson": "jsonl",
               "parquet": "parquet", "pq": "parquet", "feather": "feather", "arrow": "feather", "ipc": "feather",
               "xlsx": "excel", "xls": "excel"}
    if ext not in mapping:
        raise DataError(f"{path}: cannot tell the format from the extension {ext!r}; expected one of "
                        ".csv .tsv .json .jsonl .parquet .feather .xlsx")
    return mapping[ext]


def dataset_columns(path, delimiter: str | None = None) -> list[str] | None:
    """The dataset's column names where the header or schema alone tells them, else None. A CSV's header
    is read in the dialect ingest will use (``tasks.dataset.csv_dialect``: sniffed, or the config's ``delimiter``;
    compressed files decompressed)."""
    fmt = detect_format(path)
    try:
        if fmt in ("csv", "tsv"):
            return csv_dialect.header(path, fmt, delimiter)[0]
        if fmt == "parquet":
            with open_input(path) as fh:
                return pq.read_schema(fh).names
        if fmt == "feather":
            with open_input(path) as fh:
                return feather.read_table(fh).column_names
    except Exception:  # unreadable here: ingest reports the problem with its own message
        return None
    return None


def column_names(path: str, fmt: str, delimiter: str | None = None) -> list[str]:
    """Every column name of a dataset of format ``fmt``, in file order, reading what it must (a JSON file
    whole, the first 1,000 records of a JSON Lines file); CSV/TSV in the dialect sniffed from the file
    (``delimiter``: the config's override)."""
    if fmt in ("csv", "tsv"):
        return csv_dialect.header(path, fmt, delimiter)[0]
    if fmt == "parquet":
        with open_input(path) as fh:
            return list(pq.ParquetFile(fh).schema_arrow.names)
    if fmt == "feather":
        with open_input(path) as fh:
            return list(feather.read_table(fh).column_names)
    if fmt == "excel":
        with open_input(path) as fh:
            return [str(c) for c in pd.read_excel(fh, nrows=0).columns]
    with open_input(path) as fh:
        data = fh.read().decode("utf-8", errors="replace")
    if fmt == "jsonl":
        records = [json.loads(line) for line in data.splitlines()[:1000] if line.strip()]
    else:
        loaded = json.loads(data)
        records = loaded[:1000] if isinstance(loaded, list) else [dict.fromkeys(loaded)]
    return list(dict.fromkeys(k for r in records if isinstance(r, dict) for k in r))


def column_types(path: str, fmt: str, delimiter: str | None = None) -> dict[str, str | None]:
    """One file's columns and, where its schema says them without reading rows (Parquet, Feather), their
    Arrow types (dictionary-encoded and large strings as ``string``); text formats: the names only (None:
    their values are converted to what the config declares when read)."""
    if fmt not in ("parquet", "feather"):
        return dict.fromkeys(column_names(path, fmt, delimiter))
    try:
        with open_input(path) as fh:
            schema = pq.read_schema(fh) if fmt == "parquet" else feather.read_table(fh).schema
    except (pa.ArrowInvalid, OSError) as exc:
        what = "Parquet" if fmt == "parquet" else "Feather/Arrow"
        raise DataError(f"{path}: not a readable {what} file (truncated or not {what}: {exc})") from None
    return {f.name: _comparable(f.type) for f in schema}


def _comparable(t) -> str:
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    return str(t)
