"""The sizes an artifact states, compared with its files' own headers and footers before anything is allocated.

A reader allocates by numbers an artifact gives: the manifest's row count of a split (the loader's order
is a permutation of that many rows, ``torch_dataset``'s ``len``), a Parquet footer's row count (a shard
decodes to that many rows however small it is on disk: a column of one repeated value compresses a
thousandfold), ``feature_spec.yaml``'s row shapes (every batch is ``n x shape``). Each is compared here
with the others, reading ``.npy`` headers, Parquet footers and file sizes only (no row is read, no file
hashed), and a disagreement is one ``IntegrityError`` naming the file:

* ``check_split``: every file of a split (or of the formats a reader reads) holds the manifest's rows:
  each ``.npy`` header (``storage.npy.check_file``: a dtype with a size, the shape the file's bytes hold,
  the spec's row shape), the sum of the Parquet footers (``parquet_rows``: each footer's count equal to its
  row groups', no shard past the manifest's count, fixed-size list columns of the spec's row shape),
  each ``split_binary`` file's size (``storage.split_binary.checked_rows``).
* ``check_row_items``: a column's row holds at most ``MAX_ROW_ITEMS`` values, the ceiling docs/security.md
  documents (a text feature's ``max_sequence_length``, a vector's size, an image's pixels).
"""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from core.errors import IntegrityError
from storage import npy
from storage.split_binary import checked_rows

MAX_ROW_ITEMS = 1 << 24  # values in one row of one column (64 MiB of int32/float32): docs/security.md, "Sizes"
FORMATS = ("npy", "parquet", "split_binary")


def check_row_items(shape, where: str) -> None:
    """``shape`` (one row of a column) is a list of counts >= 0 holding at most ``MAX_ROW_ITEMS`` values."""
    dims = list(shape) if isinstance(shape, (list, tuple)) else None
    if dims is None or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise IntegrityError(f"{where}: row shape {shape!r} is not a list of counts >= 0")
    if math.prod(dims) > MAX_ROW_ITEMS:
        raise IntegrityError(f"{where}: row shape {dims} holds {math.prod(dims)} values per row, more than prepflow "
                             f"reads ({MAX_ROW_ITEMS}, docs/security.md); the artifact is damaged or was edited")


def list_shape(arrow_type: pa.DataType) -> list[int]:
    """The row shape a column of ``arrow_type`` reads as (``storage.artifact_files.arrow_to_numpy``)."""
    shape = []
    while pa.types.is_fixed_size_list(arrow_type):
        shape.append(arrow_type.list_size)
        arrow_type = arrow_type.value_type
    return shape


def parquet_rows(path: Path, most: int | None = None, row_shapes: dict | None = None) -> int:
    """A Parquet shard's row count as its footer gives it, checked against the footer's row groups, ``most``
    (no more rows than that) and ``row_shapes`` (``{column: row shape}``: a fixed-size list column's)."""
    try:
        meta = pq.read_metadata(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise IntegrityError(f"{path}: unreadable Parquet footer ({str(exc).splitlines()[0]}); the artifact is "
                             "damaged (prepflow inspect --verify checks every file against its manifest)") from None
    return check_footer(meta, str(path), most, row_shapes)


def check_footer(meta: pq.FileMetaData, path: str, most: int | None = None, row_shapes: dict | None = None) -> int:
    """``parquet_rows`` of a footer already read (``path`` names its file in errors)."""
    try:
        schema = meta.schema.to_arrow_schema()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise IntegrityError(f"{path}: unreadable Parquet schema ({str(exc).splitlines()[0]})") from None
    rows = meta.num_rows
    groups = sum(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
    if rows != groups or rows < 0:
        raise IntegrityError(f"{path}: the footer declares {rows} rows, its row groups {groups}; the artifact is "
                             f"damaged or was edited")
    if most is not None and rows > most:
        raise IntegrityError(f"{path}: the footer declares {rows} rows, more than the manifest's {most} for its "
                             f"split; the artifact is damaged or was edited")
    for field in schema:
        shape = list_shape(field.type)
        check_row_items(shape, f"{path}: column '{field.name}'")
        want = (row_shapes or {}).get(field.name)
        if want is not None and shape != list(want):
            raise IntegrityError(f"{path}: column '{field.name}' has rows of shape {shape}, feature_spec.yaml "
                                 f"{list(want)}; the artifact is damaged or was edited")
    return rows


def check_parquet(root: Path, files: list[str], rows: int | None, row_shapes: dict | None = None) -> int:
    """The shards ``files`` hold ``rows`` rows in all (None: whatever their footers say); their row count."""
    total = 0
    for name in files:
        total += parquet_rows(Path(root) / name, None if rows is None else rows - total, row_shapes)
    if rows is not None and total != rows:
        raise IntegrityError(f"{Path(root) / files[-1] if files else root}: the split's Parquet shards hold {total} "
                             f"rows in all, the manifest {rows}; the artifact is damaged or was edited")
    return total


def stored_shapes(feature_spec: dict, chunks: list[dict]) -> dict[str, list]:
    """``{column: row shape}`` as ``feature_spec.yaml`` gives it for columns stored as they are read (a lazy
    media column's int64 slots are not)."""
    media = {name for c in chunks if c.get("type") == "media" for name in c.get("features", [])}
    out = {}
    for name, info in (feature_spec.get("feature_spec") or {}).items():
        shape = info.get("shape") if isinstance(info, dict) else None
        if name not in media and isinstance(shape, list):
            out[name] = shape
    return out


def check_split(root: Path, feature_spec: dict, split: str, rows: int, formats=FORMATS) -> None:
    """Every file of ``split`` in ``formats`` holds the manifest's ``rows`` rows of the spec's row shapes."""
    chunks = (feature_spec.get("source_spec") or {}).get(split) or []
    shapes = stored_shapes(feature_spec, chunks)
    for chunk in chunks:
        kind = chunk.get("type")
        if kind not in formats:
            continue
        if kind == "npy":
            for name, file in zip(chunk["features"], chunk["files"], strict=False):
                npy.check_file(Path(root) / file, rows, shapes.get(name), feature=name)
        elif kind == "parquet":
            check_parquet(root, chunk["files"], rows, shapes)
        elif kind == "split_binary":
            checked_rows(root, chunk, rows)
