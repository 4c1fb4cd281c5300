"""What ingest reads (``IngestSpec``: the columns and how, from the config, the custom stages and the raw
user suites) and how it writes what it read (``write_parts``: fixed-size Arrow IPC parts numbered by
``__row__``). Shared by the file ingest (``tasks.ingest.stage``) and the DataFrame ingest (``tasks.ingest.dataframe``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from core.errors import DataError
from storage.arrow_blocks import fixed_blocks
from tasks.config.constants import ROW
from tasks.config.suites import extra_raw_columns
from tasks.custom import plan as custom_plan
from tasks.dataset import csv_limits
from tasks.dataset.info import dataset_columns, detect_format
from tasks.ingest.common import dictionary_encoded, normalize_batch, reject_infinities, reject_text_in_numbers
from tasks.runtime import frame
from tasks.runtime.frame import write_ipc
from tasks.runtime.outputs import Ingested

PART_ROWS = 1 << 18  # rows per cached Arrow IPC part


@dataclass(frozen=True)
class IngestSpec:
    """What ingest needs: the columns to read and how to read them from text formats."""

    columns: dict[str, str]  # column -> "string" | "float64"
    format: str
    delimiter: str | None = None  # CSV/TSV: the config's preprocessing.csv.delimiter (None: sniffed)
    # string columns stored dictionary-encoded in the parts (``category_columns``, written by
    # ``tasks.ingest.common.dictionary_encoded``); every reader but vocab, encode and fill_missing gets strings
    dictionary: tuple[str, ...] = ()
    # CSV/TSV: the longest header line and line read (``tasks.dataset.csv_limits``: set where the spec is made,
    # from the environment of the process that plans; no part of the cache key)
    header_bytes: int = field(default_factory=csv_limits.header_bytes, compare=False)
    line_bytes: int = field(default_factory=csv_limits.line_bytes, compare=False)

    def slice(self) -> dict:
        out = {"columns": dict(sorted(self.columns.items())), "format": self.format}
        if self.dictionary:
            out["dictionary"] = sorted(self.dictionary)
        return out if self.delimiter is None else {**out, "delimiter": self.delimiter}


def write_parts(batches, spec: IngestSpec, out_dir: Path, path: str) -> int:
    """Write batches as fixed-size Arrow IPC parts with ``__row__``; returns the row count."""
    out_dir.mkdir(parents=True, exist_ok=True)

    def checked_tables():
        seen = 0
        for batch in batches:
            table = normalize_batch(batch, spec)
            reject_text_in_numbers(table, spec, seen, path)
            reject_infinities(table, spec, seen, path)
            seen += table.num_rows
            yield table

    total = 0
    # The parts keep the reader's chunks (as IPC record batches): copying them into one chunk each would touch
    # as much fresh memory again, and every later read concatenates the batches anyway.
    for part, table in enumerate(fixed_blocks(checked_tables(), PART_ROWS, combine=False)):
        table = dictionary_encoded(table, spec).append_column(
            ROW, pa.array(np.arange(total, total + table.num_rows, dtype=np.int64)))
        write_ipc(table, Ingested.part_file(out_dir, part))
        total += table.num_rows
    if total == 0:
        raise DataError(f"{path}: the dataset has a header but no data rows")
    return total


def ingest_spec(ctx) -> IngestSpec:
    """Columns to read: every feature's column plus the split column, if any."""
    columns: dict[str, str] = {}
    for f in ctx.features:
        kind = f.read_as()
        columns[f.column] = kind if columns.get(f.column, kind) == kind else "string"
    for f in ctx.config.features:  # untyped: read as strings, typed by infer_types
        if f.type is None:
            columns[f.source_column] = "string"
    split_col = ctx.config.preprocessing.split.column
    if split_col and split_col not in columns:
        columns[split_col] = "string"
    if ctx.config.stages:  # columns custom stages make are not read; the dataset columns they read are
        columns = custom_plan.ingest_columns(ctx.config, columns)
    in_memory = not isinstance(ctx.dataset, (str, os.PathLike, list))  # a DataFrame (tasks.ingest.dataframe)
    if ctx.config.validation.raw:  # columns only a raw user suite names (tasks.config.suites)
        available = [str(c) for c in ctx.dataset.columns] if in_memory else dataset_columns(
            ctx.dataset, ctx.config.preprocessing.csv.delimiter if ctx.config.preprocessing.csv else None)
        for column, kind in extra_raw_columns(ctx.config, available).items():
            columns.setdefault(column, kind)
    csv_options = ctx.config.preprocessing.csv
    return IngestSpec(columns=columns, format="dataframe" if in_memory else detect_format(ctx.dataset),
                      delimiter=csv_options.delimiter if csv_options else None,
                      dictionary=category_columns(ctx.features, columns, bool(ctx.config.stages)))


def category_columns(features, columns: dict[str, str], custom_stages: bool = False) -> tuple[str, ...]:
    """The string columns of ``tasks.runtime.frame.dictionary_columns`` (every reader keeps a dictionary:
    ``<UNK>``-filled category inputs; none with custom stages, which read the columns as strings): their
    values repeat, so the parts store each once per part, and the vocab and encode stages count and look up
    the distinct values instead of every row."""
    return tuple(c for c in frame.dictionary_columns(features, custom_stages) if columns.get(c) == "string")
