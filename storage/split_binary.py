"""NVIDIA's ``split_binary`` layout (DeepLearningExamples DLRM / DLRM_and_DCNv2 data loaders).

What NVIDIA's ``FeatureSpec.check_feature_spec`` and ``ParametricDataset`` /
``TfRawBinaryDataset`` read, per split (``<split>/...`` under the artifact):

* ``numerical.bin``: every column of the ``numerical`` channel, row-major, float16, in channel
  order (row ``i`` is ``k`` consecutive float16 values). **Lossy**: float16 keeps ~3 significant
  digits and holds at most 65,504 in magnitude (a larger finite value is an error here, not inf);
* ``label.bin``: the one column of the ``label`` channel, one byte per row (numpy ``bool``);
* ``cat_<column>.bin``: one file per column of the ``categorical`` channel, its ids in the smallest
  of int8/int16/int32 whose maximum is above the cardinality (NVIDIA's own rule,
  ``get_categorical_feature_type``: cardinality < 127 -> int8, < 32,767 -> int16, else int32);
* ``col_<column>.bin``: every other published column (other channels, matrices: row-major, its
  own dtype), so that a ``split_binary``-only artifact holds every column. NVIDIA's loaders never
  see these files: they are listed only in prepflow's own view of the artifact.

No header, no padding: a file is the concatenation of its rows in split order, so its bytes depend
only on the data, never on how the rows were partitioned. ``plan`` checks the channels before any
row is written; ``create`` makes a split's files at full size and ``write_rows`` (``write_table``)
fills the rows of one encoded part at their offset (one call per part, e.g. one Dask task each); ``read_chunk``
maps a chunk back to numpy arrays.

The FeatureSpec files (``artifact_specs``). Without ``split_binary`` the artifact's
``feature_spec.yaml`` is prepflow's own spec (every column, split and format). With it,
``feature_spec.yaml`` is the spec NVIDIA's loaders accept unchanged (``check_feature_spec``): the
three channels' features only, numpy dtype names, ``train`` and ``test`` mappings of these files;
prepflow's own spec (every split, column and format, the split_binary chunks with their stored
``dtype``) moves under its ``metadata.prepflow``, which NVIDIA's code never reads and
``prepflow_view`` returns. NVIDIA's loaders read only ``train`` and ``test``: when the validation
split has rows its files are written too, and ``feature_spec_validation.yaml`` is the same spec
with the validation split as the ``test`` mapping, so NVIDIA's ``--feature_spec`` flag chooses
what a training run evaluates on (``feature_spec.yaml``: the test split).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

from core.errors import ConfigError, DataError, IntegrityError
from storage.fs import write_at

NUMERICAL, CATEGORICAL, LABEL, OTHER = "numerical", "categorical", "label", "other"
FLOAT16_MAX = float(np.finfo(np.float16).max)  # 65504
INT_TYPES = (np.int8, np.int16, np.int32)


def categorical_dtype(cardinality: int) -> np.dtype:
    """NVIDIA's choice of id dtype: the first of int8/int16/int32 whose maximum exceeds ``cardinality``."""
    for dtype in INT_TYPES:
        if cardinality < np.iinfo(dtype).max:
            return np.dtype(dtype)
    raise ConfigError(f"a categorical cardinality of {cardinality} does not fit int32 ids (split_binary)")


def prepflow_dtype(spec: dict) -> np.dtype:
    """The numpy dtype of a prepflow column spec (``torch.float32`` or ``float32``)."""
    return np.dtype(str(spec["dtype"]).removeprefix("torch."))


@dataclass(frozen=True)
class Target:
    """One file of a split: ``columns`` side by side, ``width`` values per row, stored as ``dtype``."""

    file: str  # name inside the split's folder
    columns: tuple[str, ...]
    dtype: str  # numpy name of the stored values
    role: str  # NUMERICAL, LABEL, CATEGORICAL (NVIDIA's channels) or OTHER
    shape: tuple[int, ...] = ()  # one column's row shape (matrices), () for scalars

    @property
    def width(self) -> int:
        return len(self.columns) * int(np.prod(self.shape, dtype=np.int64))

    @property
    def row_bytes(self) -> int:
        return self.width * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Layout:
    """Where every published column goes (``plan``): NVIDIA's three channels, then the rest."""

    numerical: tuple[str, ...]
    categorical: tuple[tuple[str, int], ...]  # (column, cardinality), channel order
    label: str
    targets: tuple[Target, ...]

    @property
    def nvidia_targets(self) -> tuple[Target, ...]:
        return tuple(t for t in self.targets if t.role != OTHER)


def plan(columns: dict[str, dict], channels: dict[str, list[str]]) -> Layout:
    """The layout of ``columns`` (prepflow column specs: dtype, shape, cardinality) by ``channels``
    (channel -> columns). ``ConfigError`` when NVIDIA's loaders could not read it."""
    where = "publish.formats: split_binary (NVIDIA DLRM layout)"
    labels = list(channels.get(LABEL) or [])
    if len(labels) != 1:
        raise ConfigError(f"{where} needs exactly one column in the 'label' channel (the output feature), "
                          f"got {labels}; set publish.channels.label")
    label = labels[0]
    if prepflow_dtype(columns[label]) != np.bool_ or columns[label].get("shape"):
        raise ConfigError(f"{where}: the label '{label}' must be one bool per row (NVIDIA reads label.bin as "
                          f"bool); it is {columns[label]['dtype']} {list(columns[label].get('shape') or [])}: "
                          f"declare it `type: binary`")
    numerical = list(channels.get(NUMERICAL) or [])
    if not numerical:
        raise ConfigError(f"{where} needs at least one column in the 'numerical' channel (NVIDIA's loaders index "
                          f"its first feature); set publish.channels.numerical")
    for name in numerical:
        spec = columns[name]
        if spec.get("shape") or prepflow_dtype(spec).kind not in "biuf":
            raise ConfigError(f"{where}: numerical column '{name}' must be one number per row, got "
                              f"{spec['dtype']} {list(spec.get('shape') or [])}")
    categorical = []
    for name in channels.get(CATEGORICAL) or []:
        spec = columns[name]
        card = spec.get("cardinality")
        if spec.get("shape") or prepflow_dtype(spec).kind not in "iu" or not isinstance(card, int):
            raise ConfigError(f"{where}: categorical column '{name}' must be one integer id per row with a "
                              f"cardinality (a category feature), got {spec['dtype']} "
                              f"{list(spec.get('shape') or [])}")
        categorical.append((name, card))
    seen = {label, *numerical, *(n for n, _ in categorical)}
    if len(seen) != 1 + len(numerical) + len(categorical):
        raise ConfigError(f"{where}: a column is in two of the label/numerical/categorical channels")
    targets = [Target("numerical.bin", tuple(numerical), "float16", NUMERICAL),
               Target("label.bin", (label,), "bool", LABEL)]
    targets += [Target(f"cat_{n}.bin", (n,), categorical_dtype(c).name, CATEGORICAL) for n, c in categorical]
    targets += [Target(f"col_{n}.bin", (n,), prepflow_dtype(s).name, OTHER, tuple(s.get("shape") or ()))
                for n, s in columns.items() if n not in seen]
    return Layout(tuple(numerical), tuple(categorical), label, tuple(targets))


# ---- writing -------------------------------------------------------------------------------------

def create(folder: Path, layout: Layout, n_rows: int) -> dict[str, Target]:
    """Create a split's files at their full size (sparse until written); ``{path: target}``."""
    out = {}
    for target in layout.targets:
        path = Path(folder) / target.file
        with open(path, "wb") as fh:
            fh.truncate(n_rows * target.row_bytes)
        out[str(path)] = target
    return out


def target_values(table: pa.Table, target: Target, split: str, first_row: int) -> np.ndarray:
    """The part's rows of ``target`` as a C-contiguous array of the stored dtype."""
    dtype = np.dtype(target.dtype)
    cols = []
    for name in target.columns:
        flat = table.column(name).combine_chunks()
        while pa.types.is_fixed_size_list(flat.type):
            flat = flat.flatten()
        cols.append(flat.to_numpy(zero_copy_only=False))
    if target.role == NUMERICAL:
        block = np.empty((len(cols[0]), len(cols)), dtype=np.float16)  # row-major, filled column by column
        for i, col in enumerate(cols):
            block[:, i] = col
        overflow = np.isinf(block)
        if overflow.any():  # inf from a finite value beyond float16's range (an inf in the data stays inf)
            for i, col in enumerate(cols):
                rows = np.flatnonzero(overflow[:, i] & np.isfinite(col))
                if rows.size:
                    raise DataError(f"{split} row {first_row + rows[0]}, column '{target.columns[i]}': "
                                    f"{float(col[rows[0]])!r} does not fit float16 (|x| <= {FLOAT16_MAX:g}), "
                                    f"which split_binary stores numerical features as; normalize it (zscore, log1p)")
        return block
    values = cols[0]
    if target.role == CATEGORICAL and values.size and (values.min() < 0 or values.max() > np.iinfo(dtype).max):
        raise DataError(f"{split}: column '{target.columns[0]}' has ids outside {dtype.name} "
                        f"({values.min()}..{values.max()})")
    return np.ascontiguousarray(values.astype(dtype, copy=False))


def write_rows(part: str, first_row: int, targets: dict[str, Target], split: str = "") -> int:
    """Write one encoded part (an Arrow IPC file) at row ``first_row`` of every file in ``targets``
    (``create``'s result). Returns the rows written."""

    return write_table(feather.read_table(part, memory_map=True), first_row, targets, split)


def write_table(table: pa.Table, first_row: int, targets: dict[str, Target], split: str = "") -> int:
    """Write ``table``'s rows at row ``first_row`` of every file in ``targets``. Returns the rows written."""
    for path, target in targets.items():
        values = target_values(table, target, split, first_row)
        if not values.size:
            continue
        write_at(path, values, first_row * target.row_bytes)
    return table.num_rows


# ---- chunks and reading --------------------------------------------------------------------------

def chunks(split: str, layout: Layout, nvidia: bool = False) -> list[dict]:
    """``source_spec`` chunks of a split: NVIDIA's own (``nvidia``: no dtype, channel files only) or
    prepflow's (every file, with the stored ``dtype`` and row ``shape``)."""
    out = []
    for t in (layout.nvidia_targets if nvidia else layout.targets):
        if not t.columns:
            continue
        chunk = {"type": "split_binary", "features": list(t.columns), "files": [f"{split}/{t.file}"]}
        if not nvidia:
            chunk |= {"dtype": t.dtype, "shape": list(t.shape)}
        out.append(chunk)
    return out


def read_chunk(root: Path, chunk: dict, n_rows: int | None, columns: list[str] | None = None,
               mmap: bool = True) -> dict[str, np.ndarray]:
    """A prepflow ``split_binary`` chunk (``chunks(..., nvidia=False)``) as ``{column: array}``:
    ``n_rows`` rows each (None: as many as the file holds), memory-mapped views unless ``mmap`` is false."""
    dtype, shape = np.dtype(chunk["dtype"]), tuple(chunk.get("shape") or ())
    names = list(chunk["features"])
    path = Path(root) / chunk["files"][0]
    n_rows = checked_rows(root, chunk, n_rows)
    if n_rows == 0:
        arr = np.empty((n_rows, len(names), *shape), dtype=dtype)
    elif mmap:
        arr = np.memmap(path, dtype=dtype, mode="r", shape=(n_rows, len(names), *shape))
        arr = np.asarray(arr)
    else:
        arr = np.fromfile(path, dtype=dtype).reshape(n_rows, len(names), *shape)
    return {name: arr[:, i] for i, name in enumerate(names) if columns is None or name in columns}


def checked_rows(root: Path, chunk: dict, n_rows: int | None) -> int:
    """The rows a ``split_binary`` chunk's file holds by its size: ``n_rows`` (None: as many as it holds);
    a size that is not ``n_rows`` whole rows, or a row of no bytes, is an error naming the file."""
    dtype, shape = np.dtype(chunk["dtype"]), tuple(chunk.get("shape") or ())
    names = list(chunk["features"])
    path = Path(root) / chunk["files"][0]
    row_bytes = len(names) * int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if row_bytes <= 0:  # rows of no bytes: any row count would match an empty file
        raise IntegrityError(f"{path}: rows of {len(names)} x {dtype.name}{list(shape) if shape else ''} hold no "
                             f"bytes; the artifact is damaged or was edited")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from exc
    if n_rows is None:
        n_rows = size // row_bytes
    expected = n_rows * row_bytes
    if size != expected:
        raise DataError(f"{path}: {size} bytes, expected {expected} ({n_rows} rows of {len(names)} x "
                        f"{dtype.name}{list(shape) if shape else ''})")
    return n_rows


# ---- the artifact's FeatureSpec file(s) ------------------------------------------------------------

def artifact_specs(spec: dict, layout: Layout | None, rows: dict[str, int]) -> dict[str, dict]:
    """``{file name: content}`` of the FeatureSpec file(s) an artifact publishes. ``spec`` is
    prepflow's own (feature_spec, source_spec, channel_spec, metadata); ``layout`` the split_binary
    layout when that format is published (``split_binary.plan``)."""
    if layout is None:
        return {"feature_spec.yaml": spec}
    view = {k: spec[k] for k in ("feature_spec", "source_spec", "channel_spec")}
    files = {"feature_spec.yaml": nvidia_spec(layout, "test", {**spec.get("metadata", {}), "prepflow": view})}
    if rows.get("validation"):
        files["feature_spec_validation.yaml"] = nvidia_spec(
            layout, "validation", {**spec.get("metadata", {}), "test_mapping_is_split": "validation"})
    return files


def nvidia_spec(layout: Layout, test_split: str, metadata: dict) -> dict:
    """The spec NVIDIA's DLRM loaders read: ``train`` and, as ``test``, the files of ``test_split``."""
    features: dict[str, dict] = {n: {"dtype": "float16"} for n in layout.numerical}
    features |= {n: {"dtype": categorical_dtype(c).name, "cardinality": int(c)}
                 for n, c in layout.categorical}
    features[layout.label] = {"dtype": "bool"}
    return {
        "feature_spec": features,
        "source_spec": {"train": chunks("train", layout, nvidia=True),
                        "test": chunks(test_split, layout, nvidia=True)},
        "channel_spec": {"categorical": [n for n, _ in layout.categorical], "numerical": list(layout.numerical),
                         "label": [layout.label]},
        "metadata": metadata,
    }


def prepflow_view(spec: dict) -> dict:
    """prepflow's own spec of an artifact from its ``feature_spec.yaml``: the file itself, or, for a
    split_binary artifact (NVIDIA's spec), the one kept under ``metadata.prepflow``."""
    metadata = spec.get("metadata") or {}
    view = metadata.get("prepflow")
    if not isinstance(view, dict):
        return spec
    return {**view, "metadata": {k: v for k, v in metadata.items() if k != "prepflow"}}
