"""Bring-your-own FeatureSpec: read a dataset described by an NVIDIA DeepLearningExamples
FeatureSpec (``prepflow transcode``).

The format (``feature_spec.yaml``; see DeepLearningExamples' DLRM ``FeatureSpec``):

* ``feature_spec``: ``{feature: {dtype, cardinality?}}``; ``cardinality`` is an int or ``auto``;
* ``source_spec``: ``{split: [{type: csv, features: [...], files: [...]}, ...]}``; paths are
  relative to the YAML's folder; CSV files have no header (a first line equal to the chunk's
  feature names is taken as one); the files of a chunk follow each other, the chunks of a split
  sit side by side (row ``i`` of every chunk is row ``i`` of the split);
* ``channel_spec``: ``{channel: [feature, ...]}`` (DLRM: ``numerical``, ``categorical``, ``label``);
* ``metadata``: free-form (ignored).

``prepare`` joins the chunks into one Parquet dataset with a fixed split column and derives a
prepflow config from the spec, which the pipeline then runs like any other:

* ``categorical`` channel -> ``category`` (``most_common`` = the cardinality; ``auto`` -> the
  number of distinct values seen; integer ids must be below a declared cardinality);
* ``numerical`` -> ``number`` (``normalization`` given by the caller, ``none`` by default: the
  values are kept as they are, as float32);
* ``label`` -> ``binary`` (dtype bool, or at most two classes), ``number`` (a float dtype) or
  ``category``; label features are the config's output features;
* features of any other channel by dtype (float -> number, bool -> binary, int/str -> category);
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
import yaml

from storage.tmpdirs import TempFile, sweep
from core.errors import ConfigError, DataError

DATASET_TEMP = ".dataset-"  # prefix of prepare()'s temporary file, ``.dataset-<hex>.parquet``
SPLIT_COLUMN = "__featurespec_split__"
SPLIT_IDS = {"train": 0, "training": 0, "validation": 1, "val": 1, "valid": 1, "eval": 1, "test": 2}
NUMBER_DTYPES = ("float16", "float32", "float64", "half", "float", "double", "bfloat16")
NULLS = ["", "NA", "N/A", "NaN", "nan", "null", "NULL", "None"]


def _dtype_name(dtype) -> str:
    return str(dtype or "").removeprefix("torch.").removeprefix("np.").removeprefix("numpy.")


def _is_float(dtype) -> bool:
    return _dtype_name(dtype) in NUMBER_DTYPES


def _is_bool(dtype) -> bool:
    return _dtype_name(dtype) in ("bool", "bool_")


class FeatureSpecInput:
    """A FeatureSpec YAML and the CSV chunks it names."""

    def __init__(self, path: Path, spec: dict):
        self.path = path
        self.base = path.parent
        self.spec = spec
        self.features: dict[str, dict] = spec["feature_spec"]
        self.channels: dict[str, list[str]] = {k: list(v or []) for k, v in (spec.get("channel_spec") or {}).items()}
        self.sources: dict[str, list[dict]] = spec["source_spec"]
        self._check()

    @classmethod
    def load(cls, path: str | Path) -> "FeatureSpecInput":
        path = Path(path)
        try:
            spec = yaml.safe_load(path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"{path}: FeatureSpec file not found") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})") from None
        if not isinstance(spec, dict):
            raise ConfigError(f"{path}: expected a mapping with feature_spec, source_spec, channel_spec")
        for key in ("feature_spec", "source_spec"):
            if not isinstance(spec.get(key), dict) or not spec[key]:
                raise ConfigError(f"{path}: '{key}' is missing or empty")
        return cls(path, spec)

    def _check(self) -> None:
        where = str(self.path)
        for split, chunks in self.sources.items():
            if split not in SPLIT_IDS:
                raise ConfigError(f"{where}: source_spec.{split}: unknown split name; expected one of "
                                  f"train, validation (val, valid), test")
            seen: set[str] = set()
            for i, chunk in enumerate(chunks or []):
                at = f"{where}: source_spec.{split}[{i}]"
                if chunk.get("type") != "csv":
                    raise ConfigError(f"{at}.type: only 'csv' chunks can be transcoded, got {chunk.get('type')!r}")
                if not chunk.get("features") or not chunk.get("files"):
                    raise ConfigError(f"{at}: a chunk needs 'features' and 'files'")
                for name in chunk["features"]:
                    if name not in self.features:
                        raise ConfigError(f"{at}.features: '{name}' is not in feature_spec")
                    if name in seen:
                        raise ConfigError(f"{at}.features: '{name}' appears in two chunks of split '{split}'")
                    seen.add(name)
            absent = [f for f in self.features if f not in seen]
            if absent:
                raise ConfigError(f"{where}: source_spec.{split}: feature(s) {absent} are in no chunk")
        for channel, names in self.channels.items():
            for name in names:
                if name not in self.features:
                    raise ConfigError(f"{where}: channel_spec.{channel}: '{name}' is not in feature_spec")
        for name, info in self.features.items():
            card = (info or {}).get("cardinality")
            if card is not None and card != "auto" and not (isinstance(card, int) and card > 0):
                raise ConfigError(f"{where}: feature_spec.{name}.cardinality: expected a positive int or 'auto', "
                                  f"got {card!r}")

    def channel_of(self, name: str) -> str | None:
        return next((c for c, names in self.channels.items() if name in names), None)

    # ---- data ------------------------------------------------------------------------------------
    def _column_type(self, name: str) -> pa.DataType:
        info = self.features[name] or {}
        channel = self.channel_of(name)
        if channel == "numerical" or (channel != "categorical" and _is_float(info.get("dtype"))):
            return pa.float64()
        return pa.string()

    def _read_file(self, file: Path, names: list[str]) -> pa.Table:
        try:
            with open(file, "rb") as fh:
                first = fh.readline().decode("utf-8", errors="replace").strip()
        except FileNotFoundError:
            raise DataError(f"{file}: file named in the FeatureSpec not found") from None
        header = [c.strip() for c in first.split(",")] == names
        read = pacsv.ReadOptions(column_names=names, skip_rows=1 if header else 0, block_size=1 << 24)
        convert = pacsv.ConvertOptions(column_types={n: self._column_type(n) for n in names},
                                       strings_can_be_null=True, null_values=NULLS)
        try:
            return pacsv.read_csv(file, read_options=read, convert_options=convert)
        except pa.ArrowInvalid as exc:
            raise DataError(f"{file}: cannot read as a headerless CSV of {names}: {exc}") from None

    def read_split(self, split: str) -> pa.Table:
        columns: dict[str, pa.ChunkedArray] = {}
        n_rows = None
        for chunk in self.sources[split]:
            tables = [self._read_file(self.base / f, list(chunk["features"])) for f in chunk["files"]]
            table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
            if n_rows is not None and table.num_rows != n_rows:
                raise DataError(f"{self.path}: source_spec.{split}: chunk {chunk['files']} has {table.num_rows} rows, "
                                f"the split's other chunks have {n_rows}; chunks must be row-aligned")
            n_rows = table.num_rows
            for name in chunk["features"]:
                columns[name] = table.column(name)
        names = list(self.features)
        split_col = pa.array(np.full(n_rows or 0, SPLIT_IDS[split], dtype=np.int8))
        return pa.table([columns[n] for n in names] + [split_col], names=[*names, SPLIT_COLUMN])

    def prepare(self, workdir: str | Path, normalization: str = "none",
                formats: tuple[str, ...] = ("npy", "parquet")) -> tuple[Path, dict]:
        """Write ``workdir/dataset.parquet`` (every split, a fixed split column) and return it with
        the derived prepflow config."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        order = sorted(self.sources, key=lambda s: SPLIT_IDS[s])
        table = pa.concat_tables([self.read_split(s) for s in order])
        if table.num_rows == 0:
            raise DataError(f"{self.path}: the FeatureSpec's files hold no rows")
        config = self.config(table, normalization, list(formats))
        target = workdir / "dataset.parquet"
        sweep(workdir, DATASET_TEMP)  # a killed transcode's temporary file
        with TempFile(workdir, DATASET_TEMP, ".parquet") as tmp:  # locked while it exists
            pq.write_table(table, tmp, compression="zstd")
            os.replace(tmp, target)
        return target, config

    # ---- config ----------------------------------------------------------------------------------
    def _categorical(self, name: str, column: pa.ChunkedArray) -> dict:
        card = (self.features[name] or {}).get("cardinality", "auto")
        distinct = max(1, pc.count_distinct(column).as_py())
        if card == "auto":
            return {"name": name, "type": "category", "preprocessing": {"most_common": distinct}}
        ids = pc.cast(column, pa.int64(), safe=False) if _all_ints(column) else None
        if ids is not None and ids.null_count < len(ids):
            top = pc.max(ids).as_py()
            if top is not None and top >= card:
                raise DataError(f"{self.path}: feature '{name}' has id {top}, outside its declared cardinality {card}")
        return {"name": name, "type": "category", "preprocessing": {"most_common": card}}

    def _feature(self, name: str, column: pa.ChunkedArray, normalization: str) -> dict:
        info = self.features[name] or {}
        channel = self.channel_of(name)
        dtype = info.get("dtype")
        if channel == "categorical":
            return self._categorical(name, column)
        if channel == "numerical":
            return {"name": name, "type": "number", "preprocessing": {"normalization": normalization}}
        if channel == "label":
            card = info.get("cardinality")
            if _is_bool(dtype) or (isinstance(card, int) and card <= 2):
                return {"name": name, "type": "binary"}
            if _is_float(dtype):
                return {"name": name, "type": "number", "preprocessing": {"normalization": "none"}}
            return {"name": name, "type": "category"}
        if _is_float(dtype):
            return {"name": name, "type": "number", "preprocessing": {"normalization": normalization}}
        if _is_bool(dtype):
            return {"name": name, "type": "binary"}
        return self._categorical(name, column)

    def config(self, table: pa.Table, normalization: str = "none", formats: list[str] | None = None) -> dict:
        inputs, outputs = [], []
        for name in self.features:
            feature = self._feature(name, table.column(name), normalization)
            (outputs if self.channel_of(name) == "label" else inputs).append(feature)
        if not inputs:
            raise ConfigError(f"{self.path}: no input features (every feature is in the label channel)")
        config: dict = {
            "input_features": inputs,
            "output_features": outputs,
            "preprocessing": {"split": {"type": "fixed", "column": SPLIT_COLUMN}},
            "publish": {"formats": formats or ["npy", "parquet"]},
        }
        channels = {c: names for c, names in self.channels.items() if names}
        if channels:
            config["publish"]["channels"] = channels
        return config


def _all_ints(column: pa.ChunkedArray) -> bool:
    if pa.types.is_integer(column.type):
        return True
    if not pa.types.is_string(column.type):
        return False
    valid = pc.drop_null(column)
    return bool(pc.all(pc.match_substring_regex(valid, r"^-?\d+$")).as_py()) if len(valid) else False
