"""ingest from a pandas or Dask DataFrame passed in Python (DESIGN section 4), narrowly.

``tasks.ingest.stage.run`` hands a context whose ``dataset`` is a DataFrame here. Columns are converted
the way the JSON reader converts records: number features' columns to float64 (a value that is not
a number is a DataError naming the row and column), other columns to strings (non-string scalars
JSON-encoded). Media columns (image/audio features) may also hold in-memory values: encoded
bytes, numpy arrays (HWC or CHW images; audio samples), PIL images, ``{"bytes", "path"}`` dicts
(Hugging Face datasets), audio ``{"array", "sampling_rate"}`` dicts. Each is first written to the
media cache, ``<cache_dir>/media/<feature>/<hash>.png|wav`` (or the bytes' own format), named by a
hash of its type and content and written only if absent, and replaced by the reference
``media-cache:<feature>/<file>``; strings stay paths (relative ones: to the working directory).

The fingerprint is a Dask DataFrame's (``tasks.ingest.dask_frame.table_fingerprint``: row hashes summed with
their positions), so the same rows as pandas or as Dask, in any partitioning, give equal cache keys and one
artifact id, and the cache folder's location does not enter it. A Dask DataFrame's partitions are read on the
workers by ``tasks.ingest.dask_frame`` (with ``partition_table``, this module's conversion).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa

from core.errors import DataError, quoted
from core.lazy import pandas as pd
from storage import media_audio, media_image
from storage.media import store_batch
from tasks.features.media import MediaFeature
from tasks.ingest.common import check_columns

SOURCE = "<DataFrame>"


def is_frame(dataset) -> bool:
    return hasattr(dataset, "columns") and hasattr(dataset, "dtypes") and not isinstance(dataset, (str, Path))


def is_dask_frame(dataset) -> bool:
    """A Dask DataFrame (without importing dask.dataframe: one that exists has imported it)."""
    return type(dataset).__module__.startswith("dask.") and hasattr(dataset, "to_delayed") and hasattr(
        dataset, "npartitions")


def _pandas(dataset):
    """A Dask DataFrame computed (``prepflow infer``'s profile, a remote stage cache); anything else as it is."""
    return dataset.compute() if is_dask_frame(dataset) else dataset



def _missing(v) -> bool:
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v))


def _scalar_text(v, row: int, column: str) -> str | None:
    if _missing(v):
        return None
    if isinstance(v, str):
        return v
    if hasattr(v, "item") and not isinstance(v, np.ndarray):
        v = v.item()
    if isinstance(v, np.ndarray):
        v = v.tolist()
    try:
        return json.dumps(v)
    except TypeError:
        raise PartitionProblem(row, f"column '{column}': cannot read a {type(v).__name__} as text") from None


def _numbers(values, column: str) -> pa.Array:
    numeric = pd.to_numeric(values, errors="coerce").astype("float64")
    bad = numeric.isna().to_numpy() & ~values.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PartitionProblem(i, f"column {quoted(column)}: expected a number, got {quoted(values.iloc[i])}")
    return pa.array(numeric.to_numpy(), type=pa.float64(), from_pandas=True)


def _media_value(feature, cache_dir: str, v, row: int) -> str | None:
    """A media column's value -> a path string or a ``media-cache:`` reference."""
    if isinstance(v, str):
        return v
    if _missing(v):
        return None
    if isinstance(v, dict) and ("bytes" in v or "path" in v) and "array" not in v:
        if v.get("bytes") is not None:
            v = v["bytes"]
        elif v.get("path") is not None:
            return str(v["path"])
        else:
            return None
    if hasattr(v, "numpy") and callable(v.numpy) and not isinstance(v, np.ndarray):  # a torch tensor
        v = v.detach().cpu().numpy() if hasattr(v, "detach") else v.numpy()
    try:
        if feature.media_kind == "image":
            return media_image.store_value(cache_dir, feature.name, v)
        return media_audio.store_value(cache_dir, feature.name, v, feature.options.sampling_rate)
    except (ValueError, TypeError, KeyError) as exc:
        raise PartitionProblem(row, f"column '{feature.column}': {feature.describe()} cannot store "
                                    f"this {type(v).__name__} value: {exc}") from None


def frame_table(ctx, spec) -> pa.Table:
    """The DataFrame's configured columns as an Arrow table, media values stored in the media cache."""

    df = _pandas(ctx.dataset)  # a Dask DataFrame here: a remote stage cache (tasks.ingest.dask_frame reads the rest)
    check_columns(SOURCE, [str(c) for c in df.columns], spec.columns)
    media = {}
    for f in ctx.features:
        if isinstance(f, MediaFeature):
            media.setdefault(f.column, f)
    try:
        return partition_table(df, spec.columns, media, ctx.media_cache_root)
    except PartitionProblem as problem:
        raise DataError(problem.message(0)) from None


class PartitionProblem(Exception):
    """A value a partition cannot hold: its row in the partition and the message without the row (the
    caller knows where the partition starts: ``message(first_row)``)."""

    def __init__(self, row: int, detail: str):
        super().__init__(detail)
        self.row, self.detail = row, detail

    def message(self, first_row: int) -> str:
        return f"{SOURCE}: row {first_row + self.row}, {self.detail}"

    def __reduce__(self):  # through Dask's pickling of a worker's exception
        return (type(self), (self.row, self.detail))


def convert_partition(df, columns: dict, media: dict, cache_dir: str) -> pa.Table:
    """``partition_table`` for one Dask partition (a picklable callable for ``tasks.ingest.dask_frame``)."""
    return partition_table(df, columns, media, cache_dir)


def partition_table(df, columns: dict, media: dict, cache_dir: str) -> pa.Table:
    """One pandas frame's ``columns`` (name -> kind) as an Arrow table: numbers as float64, media values
    (``media``: column -> its feature) stored in the media cache under ``cache_dir``, the rest as text.
    ``PartitionProblem`` names the first bad value's row in this frame."""
    arrays = []
    for column, kind in columns.items():
        values = df[column].reset_index(drop=True)
        if column in media:
            f = media[column]
            with store_batch():  # one locked staging folder for the column's files, not a lock per file
                texts = [_media_value(f, cache_dir, v, i) for i, v in enumerate(values.tolist())]
            arrays.append(pa.array(texts, type=pa.string()))
        elif kind == "float64":
            arrays.append(_numbers(values, column))
        else:
            arrays.append(pa.array([_scalar_text(v, i, column) for i, v in enumerate(values.tolist())],
                                   type=pa.string()))
    return pa.Table.from_arrays(arrays, names=list(columns))
