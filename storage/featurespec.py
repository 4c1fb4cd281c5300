"""Bring-your-own FeatureSpec: read a dataset described by an NVIDIA DeepLearningExamples
FeatureSpec (``prepflow transcode``). The artifact's own FeatureSpec files: ``storage.split_binary``.

The format (``feature_spec.yaml``; DeepLearningExamples' DLRM, DLRM_and_DCNv2 and WideAndDeep):

* ``feature_spec``: ``{feature: {dtype?, cardinality?, max_hotness?}}``; ``cardinality`` is an int
  or ``auto``; dtypes are numpy names (``float16``, ``int32``, ``bool``; ``torch.*`` names are read too);
* ``source_spec``: ``{split: [{type, features: [...], files: [...]}, ...]}``; paths are relative
  to the YAML's folder; the files of a chunk follow each other, the chunks of a split sit side by
  side (row ``i`` of every chunk is row ``i`` of the split);
* ``channel_spec``: ``{channel: [feature, ...]}`` (DLRM: ``numerical``, ``categorical``, ``label``;
  WideAndDeep: ``onehot_categorical``, ``multihot_categorical``, ``numerical``, ``label``, ``map``);
* ``metadata``: free-form.

Chunk types read (``FeatureSpecInput``; the YAML is parsed and checked in ``storage.featurespec_spec``, the
config derived in ``storage.featurespec_config``): ``csv`` (headerless; a first line equal to the
chunk's feature names is taken as a header), ``split_binary`` (raw row-major values of the
features' dtype, no header; every feature of a chunk has the same dtype), ``npy`` and ``parquet``
(what prepflow publishes). Before any value is read every binary chunk's row count is derived from
its size: a missing file, a size that is not a whole number of rows, or a row count unlike the
split's other chunks (a file cut short, or written with another dtype) is a ``DataError`` naming
the chunk and the file. ``prepare`` joins the chunks into one Parquet dataset with a fixed split
column and derives a prepflow config, which the pipeline then runs like any other:

* categorical (``categorical``, ``onehot_categorical`` channels): already-encoded integer ids, kept
  as they are with the declared cardinality (``auto`` or none: the largest id + 1); an id that is not an
  integer in ``[0, cardinality)`` is an error naming the file, row and feature;
* multi-hot (``multihot_categorical`` channel or ``max_hotness``): lists of ids (``[3, 17]`` in CSV)
  become a ``set`` feature whose vocabulary is the ids ``0..cardinality-1`` in order, so column
  ``id + 2`` of its multi-hot row is id ``id`` (0 and 1 are prepflow's ``<PAD>``, ``<UNK>``); a row
  with more than ``max_hotness`` ids is an error;
* ``numerical`` -> ``number`` (``normalization`` given by the caller, ``none`` by default: the
  values kept, as float32);
* ``label`` -> ``binary`` (dtype bool, or values in {0, 1} whatever the dtype), ``number`` (another
  float dtype) or ``category``; label features are the config's output features;
* features of any other channel by dtype (float -> number, bool -> binary, int with a cardinality ->
  ids as above, other -> category);
* split ``fixed`` on the source splits (``train``, ``validation``/``val``/``valid``, ``test``);
  ``publish.channels`` repeats the source ``channel_spec``, so the published artifact keeps its
  channel names.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from core.errors import DataError
from storage import npy
from storage.featurespec_config import DerivedConfig
from storage.featurespec_spec import NULLS, SPLIT_COLUMN, SPLIT_IDS, numpy_dtype
from storage.tmpdirs import TempFile, sweep

DATASET_TEMP = ".dataset-"  # prefix of prepare()'s temporary file, ``.dataset-<hex>.parquet``


# ---- reading: a FeatureSpec dataset --------------------------------------------------------------

class FeatureSpecInput(DerivedConfig):
    """A FeatureSpec YAML and the chunks it names, read into one table and the config derived from it."""

    def _size_up(self, split: str) -> None:
        """Every file of the split exists, and every split_binary/npy/parquet file's row count (from its
        size, header or footer) agrees, before any value is read: one ``DataError`` naming the chunk and
        the file for a missing file, a partial row or a row count unlike the split's other chunks."""
        counts: list[tuple[int, int]] = []  # (rows, chunk index)
        for i, chunk in enumerate(self.sources[split]):
            label = self.chunk_label(split, i)
            total = 0
            for file in chunk["files"]:
                path = self.base / file
                if not path.is_file():
                    raise DataError(f"{label}: file {file} not found")
                if chunk["type"] == "npy":
                    total += _npy_rows(path, label)
                elif chunk["type"] == "parquet":
                    try:
                        total += pq.ParquetFile(path).metadata.num_rows
                    except (pa.ArrowInvalid, OSError) as exc:
                        raise DataError(f"{label}: {file} is not a Parquet file ({exc})") from None
                elif chunk["type"] == "split_binary":
                    dtype = numpy_dtype(self.features[chunk["features"][0]]["dtype"])
                    row_bytes = dtype.itemsize * len(chunk["features"])
                    size = path.stat().st_size
                    if size % row_bytes:
                        raise DataError(f"{label}: {file} has {size} bytes, not a whole number of rows of "
                                        f"{len(chunk['features'])} x {dtype.name} ({row_bytes} bytes per row): "
                                        f"a file cut short, or of another dtype")
                    total += size // row_bytes
            if chunk["type"] != "csv":
                counts.append((total, i))
        values = [c[0] for c in counts]
        if not values:
            return
        expected = max(set(values), key=lambda v: (values.count(v), -values.index(v)))
        for rows, i in counts:
            if rows != expected:
                self._misaligned(split, i, rows, expected)

    def _misaligned(self, split: str, i: int, rows: int, expected: int) -> None:
        chunk = self.sources[split][i]
        hint = ""
        if chunk["type"] == "split_binary" and rows and expected:
            dtype = numpy_dtype(self.features[chunk["features"][0]]["dtype"])
            size = round(dtype.itemsize * rows / expected, 3)
            if size in (1, 2, 4, 8) and size != dtype.itemsize:
                hint = f"; it holds {size:g} bytes per value where the spec says {dtype.name} ({dtype.itemsize})"
        raise DataError(f"{self.chunk_label(split, i)}: {', '.join(chunk['files'])} holds {rows} rows, the split's "
                        f"other chunks {expected}: a file cut short, or of another dtype than the spec says{hint}")

    # ---- data ------------------------------------------------------------------------------------
    def _read_csv(self, file: Path, names: list[str]) -> pa.Table:
        try:
            with open(file, "rb") as fh:
                first = fh.readline().decode("utf-8", errors="replace").strip()
        except FileNotFoundError:
            raise DataError(f"{file}: file named in the FeatureSpec not found") from None
        header = [c.strip() for c in first.split(",")] == names
        types = {}
        for n in names:
            kind = self.kind(n)
            dtype = numpy_dtype(self.features[n].get("dtype"))
            if kind in ("number", "ids") or (kind != "multihot" and dtype is not None and dtype.kind == "f"):
                types[n] = pa.float64()
            else:
                types[n] = pa.string()
        read = pacsv.ReadOptions(column_names=names, skip_rows=1 if header else 0, block_size=1 << 24)
        convert = pacsv.ConvertOptions(column_types=types, strings_can_be_null=True, null_values=NULLS)
        try:
            table = pacsv.read_csv(file, read_options=read, convert_options=convert)
        except pa.ArrowInvalid as exc:
            raise DataError(f"{file}: cannot read as a headerless CSV of {names}: {exc}") from None
        return table

    def _read_chunk_file(self, chunk: dict, file: str) -> pa.Table:
        path = self.base / file
        names = list(chunk["features"])
        if chunk["type"] == "csv":
            return self._read_csv(path, names)
        if chunk["type"] == "parquet":
            try:
                return pq.read_table(path, columns=names)
            except FileNotFoundError:
                raise DataError(f"{path}: file named in the FeatureSpec not found") from None
            except (pa.ArrowInvalid, KeyError) as exc:
                raise DataError(f"{path}: cannot read columns {names} from this Parquet file: {exc}") from None
        if chunk["type"] == "npy":
            arr = npy.load(path, mmap_mode="r")
            if arr.ndim != 1:
                raise DataError(f"{path}: feature '{names[0]}' has {arr.ndim - 1}-d rows {list(arr.shape[1:])}; "
                                f"only one value per row can be transcoded")
            return pa.table({names[0]: np.asarray(arr)})
        dtype = numpy_dtype(self.features[names[0]]["dtype"])
        arr = np.fromfile(path, dtype=dtype).reshape(-1, len(names))
        if dtype == np.float16:
            arr = arr.astype(np.float32)  # exact; Parquet and the number feature read float32
        return pa.table({n: arr[:, i] for i, n in enumerate(names)})

    def _typed(self, name: str, column: pa.ChunkedArray, file: Path) -> pa.ChunkedArray:
        """One file's column as the pipeline reads it, its ids and lists checked (naming the file)."""
        kind = self.kind(name)
        if kind == "ids":
            return pa.chunked_array([self._ids(name, column, file)])
        if kind == "multihot":
            return pa.chunked_array([self._multihot(name, column, file)])
        if kind == "number":
            return column.cast(pa.float64()) if not pa.types.is_floating(column.type) else column
        return column

    def _ids(self, name: str, column: pa.ChunkedArray, file: Path) -> pa.Array:
        values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if values.null_count:
            row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
            raise DataError(f"{file}: row {row}, feature '{name}': missing id (expected an integer id)")
        x = values.to_numpy(zero_copy_only=False)
        if x.dtype.kind == "f":
            bad = x != np.floor(x)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise DataError(f"{file}: row {row}, feature '{name}': id {x[row]!r} is not an integer")
        elif x.dtype.kind not in "iub":
            raise DataError(f"{file}: feature '{name}': expected integer ids, got {values.type}")
        ids = x.astype(np.int64)
        self._check_range(name, ids, np.arange(len(ids)), file)
        return pa.array(ids)

    def _check_range(self, name: str, ids: np.ndarray, rows: np.ndarray, file: Path) -> None:
        card = self.features[name].get("cardinality")
        top = card if isinstance(card, int) else None
        bad = (ids < 0) | (ids >= top) if top is not None else ids < 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            allowed = f"its cardinality {top} (ids 0..{top - 1})" if top is not None else "ids from 0"
            raise DataError(f"{file}: row {int(rows[i])}, feature '{name}': id {int(ids[i])} is outside {allowed}")

    def _multihot(self, name: str, column: pa.ChunkedArray, file: Path) -> pa.Array:
        """Lists of ids (a list column, or ``[1, 2]`` / ``1 2`` strings) as space-separated id strings."""
        values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            text = pc.replace_substring_regex(pc.fill_null(values, ""), r"^\s*\[|\]\s*$", "")
            tokens = pc.split_pattern_regex(pc.utf8_trim_whitespace(text), r"[\s,]+")
            flat = pc.list_flatten(tokens)
            keep = pc.not_equal(flat, "")
            parents = pc.list_parent_indices(tokens).filter(keep).to_numpy()
            flat = flat.filter(keep)
            try:
                numbers = flat.cast(pa.float64()).to_numpy(zero_copy_only=False)
            except pa.ArrowInvalid as exc:
                raise DataError(f"{file}: feature '{name}': expected lists of integer ids ({exc})") from None
        elif pa.types.is_list(values.type) or pa.types.is_large_list(values.type) \
                or pa.types.is_fixed_size_list(values.type):
            parents = pc.list_parent_indices(values).to_numpy()
            numbers = pc.list_flatten(values).to_numpy(zero_copy_only=False)
        else:
            raise DataError(f"{file}: feature '{name}': expected lists of ids, got {values.type}")
        bad = numbers != np.floor(numbers) if numbers.dtype.kind == "f" else np.zeros(len(numbers), bool)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"{file}: row {int(parents[i])}, feature '{name}': id {numbers[i]!r} is not an integer")
        ids = numbers.astype(np.int64)
        self._check_range(name, ids, parents, file)
        hot = self.features[name].get("max_hotness")
        lengths = np.bincount(parents, minlength=len(values))
        if hot is not None and (lengths > hot).any():
            row = int(np.flatnonzero(lengths > hot)[0])
            raise DataError(f"{file}: row {row}, feature '{name}': {int(lengths[row])} ids, more than its "
                            f"max_hotness {hot}")
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids.astype(str)))
        return pc.binary_join(lists, " ")

    def read_split(self, split: str) -> pa.Table:
        self._size_up(split)
        columns: dict[str, pa.ChunkedArray] = {}
        n_rows = None
        for i, chunk in enumerate(self.sources[split]):
            names = list(chunk["features"])
            parts: dict[str, list] = {n: [] for n in names}
            count = 0
            for file in chunk["files"]:
                table = self._read_chunk_file(chunk, file)
                for n in names:
                    parts[n].extend(self._typed(n, table.column(n), self.base / file).chunks)
                count += table.num_rows
            if n_rows is not None and count != n_rows:  # a CSV chunk (binary ones were sized up front)
                self._misaligned(split, i, count, n_rows)
            n_rows = count
            for n in names:
                columns[n] = pa.chunked_array(parts[n]) if parts[n] else pa.chunked_array([], pa.null())
        names = list(self.features)
        split_col = pa.array(np.full(n_rows or 0, SPLIT_IDS[split], dtype=np.int8))
        return pa.table([columns[n] for n in names] + [split_col], names=[*names, SPLIT_COLUMN])

    def prepare(self, workdir: str | Path, normalization: str = "none",
                formats: tuple[str, ...] = ("npy", "parquet")) -> tuple[Path, dict]:
        """Write ``workdir/dataset.parquet`` (every split, a fixed split column) and return it with
        the derived prepflow config. Every file is read and checked before anything is written."""
        workdir = Path(workdir)
        order = sorted(self.sources, key=lambda s: SPLIT_IDS[s])
        tables = [self.read_split(s) for s in order]
        table = _concat(tables)
        if table.num_rows == 0:
            raise DataError(f"{self.path}: the FeatureSpec's files hold no rows")
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        config = self.config(table, normalization, list(formats))
        target = workdir / "dataset.parquet"
        sweep(workdir, DATASET_TEMP)  # a killed transcode's temporary file
        with TempFile(workdir, DATASET_TEMP, ".parquet") as tmp:  # locked while it exists
            pq.write_table(table, tmp, compression="zstd")
            os.replace(tmp, target)
        return target, config
def _npy_rows(path: Path, label: str) -> int:
    """The row count in a ``.npy`` file's header (no data read)."""
    fmt = np.lib.format
    try:
        with open(path, "rb") as fh:
            version = fmt.read_magic(fh)
            read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape = read_header(fh)[0]
    except ValueError as exc:
        raise DataError(f"{label}: {path.name} is not a .npy file ({exc})") from None
    return int(shape[0]) if shape else 1


def _concat(tables: list[pa.Table]) -> pa.Table:
    """The splits' tables as one; a column typed differently in two splits (a CSV split and a binary
    one) is read as strings in all."""
    if len({t.schema for t in tables}) <= 1:
        return pa.concat_tables(tables)
    names = tables[0].column_names
    fixed = []
    for t in tables:
        cols = []
        for n in names:
            types = {x.schema.field(n).type for x in tables}
            col = t.column(n)
            if len(types) > 1:
                if all(pa.types.is_integer(x) or pa.types.is_floating(x) or pa.types.is_null(x) for x in types):
                    col = col.cast(pa.float64())
                else:
                    col = col.cast(pa.string())
            cols.append(col)
        fixed.append(pa.table(cols, names=names))
    return pa.concat_tables(fixed)
