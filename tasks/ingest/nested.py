"""Nested columns (Parquet/Feather structs and maps, lists of them): prepflow reads flat columns. Left
alone, a struct typed ``category`` would fail deep in the vocab stage (``KeyError: b'nested'``) and an
untyped one would be inferred as ``text`` of its printed form; so ingest refuses such a column named in
the config with one line saying how to flatten it, and ``prepflow infer`` excludes it with that reason."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from core.errors import DataError
from storage.fs import open_input


def is_nested(t: pa.DataType) -> bool:
    """A struct or a map, or a list whose items are (any depth)."""
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return is_nested(t.value_type)
    if pa.types.is_dictionary(t):
        return is_nested(t.value_type)
    return False


def why(name: str, t: pa.DataType) -> str:
    shown = str(t) if len(str(t)) <= 80 else str(t)[:77] + "..."
    fields = (f" (fields {', '.join(f.name for f in t)})" if pa.types.is_struct(t) else "")
    return (f"column '{name}' is nested, {shown}{fields}: prepflow reads flat columns; flatten it into one "
            f"column per field (pyarrow: Table.flatten(), giving '{name}.<field>'; pandas: json_normalize) or "
            "leave it out of the config")


def nested_fields(schema: pa.Schema, columns) -> dict[str, pa.DataType]:
    """The nested ones of ``columns`` (those the schema has), with their types."""
    return {c: schema.field(c).type for c in columns if c in schema.names and is_nested(schema.field(c).type)}


def check_flat(path: str, schema: pa.Schema, columns) -> None:
    """``DataError`` naming the file and the first nested column of ``columns``."""
    for name, t in nested_fields(schema, columns).items():
        raise DataError(f"{path}: {why(name, t)}")


def file_schema(path: str, fmt: str) -> pa.Schema | None:
    """A Parquet or Feather file's schema (footer or IPC header only), else None."""
    try:
        with open_input(path) as fh:
            if fmt == "parquet":
                return pq.ParquetFile(fh).schema_arrow
            if fmt == "feather":
                return pa.ipc.open_file(fh).schema
    except (pa.ArrowInvalid, OSError):  # the reader names a file it cannot read
        return None
    return None
