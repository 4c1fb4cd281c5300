"""The ``__row__`` column every published split carries: each row's 0-based position in the input.

Ingest numbers the rows (``tasks.ingest.common.ROW``; for several files, their concatenation), and
encode (and media_cache, which rewrites its parts) saves each encoded part's input rows beside it as
``rows-NNNNN.npy`` (``part-NNNNN.arrow`` -> ``rows-NNNNN.npy``); an oversampled copy repeats its
source row's number. Publish's writers read a part with ``read_part``, which appends those numbers
as the int64 column ``__row__``, so every format (Parquet, ``.npy``, split_binary's ``col___row__.bin``)
holds it, row-aligned, and its bytes depend only on the data, never on the partitioning.

``__row__`` is described in the FeatureSpec (``COLUMN_SPEC``, no feature of the config) and in
``training_set_metadata.json`` (``METADATA_ENTRY``). It is in no training channel unless
``publish.channels`` names it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

from storage import npy
from tasks.config.constants import ROW
from tasks.runtime.outputs import Encoded

COLUMN_SPEC = {"dtype": "torch.int64", "shape": [], "feature": ROW}  # publish's column spec (tasks.publish.stage)
DESCRIPTION = ("the row's 0-based position in the input (for several files, in their concatenation); "
               "an oversampled copy repeats its source row's")
METADATA_ENTRY = {"type": "row_id", "column": ROW, "dtype": "int64", "description": DESCRIPTION}


def rows_path(part: str | Path) -> Path:
    """The input rows saved beside an encoded part (``part-X.arrow`` -> ``rows-X.npy``)."""
    return Encoded.rows_file(part)


def read_part(part: str | Path) -> pa.Table:
    """An encoded part (Arrow IPC, memory-mapped) with its input rows appended as ``__row__`` (int64)."""
    table = feather.read_table(str(part), memory_map=True)
    rows = npy.load(rows_path(part)).astype(np.int64, copy=False)
    if len(rows) != table.num_rows:
        raise ValueError(f"{rows_path(part)}: {len(rows)} input rows for the {table.num_rows} rows of {part}")
    return table.append_column(pa.field(ROW, pa.int64(), nullable=False), pa.array(rows, type=pa.int64()))


def with_row(schema: pa.Schema) -> pa.Schema:
    """An encoded part's schema as ``read_part`` gives it (an empty split's shard)."""
    return schema.append(pa.field(ROW, pa.int64(), nullable=False))


def add_to_metadata(path: Path) -> None:
    """Describe ``__row__`` in a ``training_set_metadata.json`` written by ``json.dumps(..., sort_keys=True,
    ensure_ascii=False)``: its entry is spliced in first, without parsing and dumping the file again
    (inline vocabularies can make it ~10 MB)."""
    text = path.read_text(encoding="utf-8")
    if not text.startswith("{"):
        raise ValueError(f"{path}: not a JSON object")
    entry = json.dumps({ROW: METADATA_ENTRY}, sort_keys=True, ensure_ascii=False)[:-1]  # '{"__row__": {...}'
    rest = text[1:].lstrip()
    path.write_text(entry + ("}" if rest.startswith("}") else ", " + rest), encoding="utf-8")
