"""The prepflow config derived from a FeatureSpec and its data: each feature's type and preprocessing by
its channel and dtype (the rules in ``storage.featurespec``'s docstring)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.errors import ConfigError
from storage.featurespec_spec import BINARY_VALUES, SPLIT_COLUMN, FeatureSpec, numpy_dtype


class DerivedConfig(FeatureSpec):
    """A FeatureSpec that derives a prepflow config from the table its chunks hold."""

    def cardinality(self, name: str, column: pa.ChunkedArray) -> int:
        """The declared cardinality, or for ``auto`` the largest id seen + 1."""
        card = self.features[name].get("cardinality")
        if isinstance(card, int):
            return card
        if self.kind(name) == "multihot":
            flat = pc.list_flatten(pc.split_pattern(pc.fill_null(column, ""), " "))
            flat = flat.filter(pc.not_equal(flat, ""))
            top = pc.max(flat.cast(pa.int64())).as_py() if len(flat) else None
        else:
            top = pc.max(column).as_py()
        return int(top) + 1 if top is not None else 1

    def _ids_feature(self, name: str, column: pa.ChunkedArray) -> dict:
        return {"name": name, "type": "category",
                "preprocessing": encoded_category_options(self.cardinality(name, column))}

    def _multihot_feature(self, name: str, column: pa.ChunkedArray) -> dict:
        card = self.cardinality(name, column)
        if self.workdir is None:
            raise ConfigError(f"{self.path}: multi-hot feature '{name}' needs a work folder for its vocabulary")
        vocab = self.workdir / f"vocab-{_safe(name)}.txt"
        vocab.write_text("".join(f"{i}\n" for i in range(card)))
        return {"name": name, "type": "set",
                "preprocessing": {"tokenizer": "space", "vocab_file": str(vocab.resolve()), "most_common": card}}

    def _label_feature(self, name: str, column: pa.ChunkedArray) -> dict:
        info = self.features[name]
        dtype = numpy_dtype(info.get("dtype"))
        if dtype == np.bool_ or _binary_values(column):
            return {"name": name, "type": "binary"}
        if dtype is not None and dtype.kind == "f":
            return {"name": name, "type": "number", "preprocessing": {"normalization": "none"}}
        if "cardinality" in info and (dtype is None or dtype.kind in "iu") and _integer_column(column):
            return self._ids_feature(name, column.cast(pa.float64()).cast(pa.int64()))
        return {"name": name, "type": "category"}

    def _feature(self, name: str, column: pa.ChunkedArray, normalization: str) -> dict:
        kind = self.kind(name)
        if kind == "ids":
            return self._ids_feature(name, column)
        if kind == "multihot":
            return self._multihot_feature(name, column)
        if kind == "number":
            return {"name": name, "type": "number", "preprocessing": {"normalization": normalization}}
        if kind == "label":
            return self._label_feature(name, column)
        dtype = numpy_dtype(self.features[name].get("dtype"))
        if dtype == np.bool_:
            return {"name": name, "type": "binary"}
        return {"name": name, "type": "category"}

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


def encoded_category_options(cardinality: int) -> dict:
    """The category preprocessing that keeps already-encoded integer ids and their cardinality
    (``tasks/features/category.py``: ``encoded: true``; no ``out_of_range_id``, since transcode has
    already refused an id outside ``[0, cardinality)`` naming its file and row)."""
    return {"encoded": True, "cardinality": int(cardinality)}


def _binary_values(column: pa.ChunkedArray) -> bool:
    values = pc.unique(pc.drop_null(column))
    if pa.types.is_boolean(values.type):
        return True
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type):
        return set(values.to_pylist()) <= {0, 1}
    return set(values.cast(pa.string()).to_pylist()) <= BINARY_VALUES


def _integer_column(column: pa.ChunkedArray) -> bool:
    try:
        x = column.cast(pa.float64()).to_numpy() if not pa.types.is_integer(column.type) else None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return x is None or bool(np.all(np.isnan(x) | (x == np.floor(x))))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
