"""What every ingest reader shares: the row-number column, the column check, the normalization and
checks of a read table, and the Arrow IPC part writer (``tasks.ingest.stage`` for single files,
``tasks.ingest.parquet`` for Parquet datasets read on the workers). ``spec`` is a ``tasks.ingest.stage.IngestSpec``."""

from __future__ import annotations

import difflib

import pyarrow as pa
import pyarrow.compute as pc

from core.errors import DataError, quoted
from tasks.config.constants import RESERVED_COLUMNS, RESERVED_PREFIXES, reserved_column


def check_columns(path: str, available: list[str], wanted: dict[str, str]) -> None:
    reserved = [c for c in available if reserved_column(c)]
    if reserved:
        raise DataError(f"{path}: column {reserved[0]!r} has a name prepflow reserves for the rows it adds "
                        f"({', '.join(RESERVED_COLUMNS)}, {', '.join(p + '*' for p in RESERVED_PREFIXES)}); rename it")
    dupes = sorted({c for c in available if available.count(c) > 1})
    if dupes:
        raise DataError(f"{path}: duplicate column names {dupes}; every column needs a unique name")
    missing = [c for c in wanted if c not in available]
    if missing:
        hints = []
        for c in missing:
            close = difflib.get_close_matches(c, available, n=1)
            hints.append(f"'{c}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        raise DataError(f"{path}: column(s) {', '.join(hints)} named in the config are not in the dataset; "
                        f"its columns are {available}")


DICTIONARY = pa.dictionary(pa.int32(), pa.string())


def normalize_batch(batch: pa.RecordBatch | pa.Table, spec, read_dictionaries: bool = False) -> pa.Table:
    """Strings stay strings; everything else keeps the type its format gave it (cast later).

    ``read_dictionaries``: the table's dictionary columns are as pyarrow's Parquet reader made them
    (``read_dictionary``), which builds each dictionary in a hash table of the values (each value once):
    those of the spec's ``dictionary`` columns stay ``DICTIONARY`` arrays. Other dictionaries (a Feather
    file's, a DataFrame's categoricals) are decoded."""
    table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
    dictionary = set(spec.dictionary) if read_dictionaries else set()
    cols = []
    for name in spec.columns:
        col = table.column(name)
        if pa.types.is_dictionary(col.type):
            if name in dictionary and _is_string(col.type.value_type):
                col = col.cast(DICTIONARY) if col.type != DICTIONARY else col
            else:
                col = col.cast(col.type.value_type)
        if _is_string(col.type) and col.type != pa.string():
            col = col.cast(pa.string())
        cols.append(col)
    return pa.Table.from_arrays(cols, names=list(spec.columns))


def dictionary_encoded(table: pa.Table, spec) -> pa.Table:
    """A part as ingest stores it: each of the spec's ``dictionary`` columns of strings one ``DICTIONARY``
    array of one chunk (the IPC file format holds one dictionary per column), its dictionary holding each
    value once (what the vocab stage's counts rely on). Encoded per part, not per read batch: a CSV
    reader's ~1 MB batches would each repeat most of a large column's values."""
    for name in spec.dictionary:
        i = table.schema.get_field_index(name)
        if i < 0:
            continue
        col = table.column(i)
        if col.type == pa.string():
            col = pc.dictionary_encode(col.combine_chunks())
        elif col.type == DICTIONARY and col.num_chunks > 1:  # the reader's per row group dictionaries, merged
            col = col.combine_chunks()
        else:
            continue
        table = table.set_column(i, name, col)
    return table


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def first_infinity(table: pa.Table, spec) -> tuple[int, str, float] | None:
    """(row in the table, column, value) of the first infinity in a number column, else None. ``any`` and
    ``index`` skip the nulls of ``is_inf``'s result (a null row is no infinity): filling them first
    (``fill_null``) would cost many times ``is_inf`` itself."""
    for name, kind in spec.columns.items():
        col = table.column(name)
        if kind == "float64" and pa.types.is_floating(col.type):
            bad = pc.is_inf(col)
            if pc.any(bad).as_py():
                i = pc.index(bad, True).as_py()
                return i, name, col[i].as_py()
    return None


# what a number column may hold as text (the raw gate's generated regex, expectations.kernels.NUMBER_PATTERN,
# on RE2) and the spellings of a missing value every reader takes (tasks.ingest.csv_ranges.NULL_VALUES)
NUMBER_TEXT = r"^\s*(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?i:inf|infinity)|(?i:nan|null|none|n/a|na))?\s*$"


def reject_text_in_numbers(table: pa.Table, spec, first_row: int, path: str) -> None:
    """A column declared ``number`` that the file stores as strings (Parquet, Feather): the first value
    that is not a number is one ``DataError`` naming the file, the 0-based row and the column, as a
    CSV's is. Vectorized: one RE2 match per column."""
    for name, kind in spec.columns.items():
        col = table.column(name)
        if kind != "float64" or not _is_string(col.type):
            continue
        ok = pc.match_substring_regex(col, NUMBER_TEXT)
        if pc.all(ok).as_py() is False:
            i = pc.index(ok, False).as_py()
            raise DataError(f"{path}: row {first_row + i}, column {quoted(name)}: expected a number, got "
                            f"{quoted(col[i].as_py())} (the file stores the column as text)")


def reject_infinities(table: pa.Table, spec, first_row: int, path: str) -> None:
    found = first_infinity(table, spec)
    if found is not None:
        i, name, value = found
        raise DataError(f"{path}: row {first_row + i}, column '{name}': got {value}; "
                        "infinities are not allowed in number columns")
