"""A FeatureSpec YAML (NVIDIA DeepLearningExamples' ``feature_spec.yaml``, described in ``storage.featurespec``)
parsed and checked before any data is read: its features, channels and chunks, each feature's dtype and how
it is read and configured (``kind``)."""

from __future__ import annotations

from pathlib import Path
from typing import Self

import numpy as np
import yaml

from core.errors import ConfigError
from core.yaml_load import load_yaml

SPLIT_COLUMN = "__featurespec_split__"
SPLIT_IDS = {"train": 0, "training": 0, "validation": 1, "val": 1, "valid": 1, "eval": 1, "test": 2}
CHUNK_TYPES = ("csv", "split_binary", "npy", "parquet")
CATEGORICAL_CHANNELS = ("categorical", "onehot_categorical")
MULTIHOT_CHANNELS = ("multihot_categorical",)
NULLS = ["", "NA", "N/A", "NaN", "nan", "null", "NULL", "None"]
TORCH_NAMES = {"half": "float16", "float": "float32", "double": "float64", "long": "int64", "int": "int32",
               "short": "int16"}
BINARY_VALUES = {"0", "1", "0.0", "1.0", "true", "false", "True", "False"}



def numpy_dtype(name) -> np.dtype | None:
    """A FeatureSpec dtype (numpy or ``torch.*`` name) as numpy; None when absent."""
    if name is None:
        return None
    text = str(name)
    if text.startswith("torch."):
        text = TORCH_NAMES.get(text[6:], text[6:])
    try:
        return np.dtype(text.removeprefix("numpy.").removeprefix("np."))
    except TypeError:
        return None


class FeatureSpec:
    """A FeatureSpec YAML and the chunks it names."""

    def __init__(self, path: Path, spec: dict):
        self.path = Path(path)
        self.base = self.path.parent
        self.spec = spec
        self.features: dict[str, dict] = {k: dict(v or {}) for k, v in spec["feature_spec"].items()}
        self.channels: dict[str, list[str]] = {k: list(v or []) for k, v in (spec.get("channel_spec") or {}).items()}
        self.sources: dict[str, list[dict]] = spec["source_spec"]
        self.workdir: Path | None = None
        self._check()

    @classmethod
    def load(cls, path: str | Path) -> Self:
        path = Path(path)
        try:
            spec = load_yaml(path.read_text())
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

    # ---- checks (no data read) -------------------------------------------------------------------
    def _check(self) -> None:
        where = str(self.path)
        for name, info in self.features.items():
            card = info.get("cardinality")
            if card is not None and card != "auto" and not (isinstance(card, int) and card > 0):
                raise ConfigError(f"{where}: feature_spec.{name}.cardinality: expected a positive int or 'auto', "
                                  f"got {card!r}")
            if "dtype" in info and numpy_dtype(info["dtype"]) is None:
                raise ConfigError(f"{where}: feature_spec.{name}.dtype: {info['dtype']!r} is not a numpy dtype name")
            hot = info.get("max_hotness")
            if hot is not None and not (isinstance(hot, int) and hot > 0):
                raise ConfigError(f"{where}: feature_spec.{name}.max_hotness: expected a positive int, got {hot!r}")
        for channel, names in self.channels.items():
            for name in names:
                if name not in self.features:
                    raise ConfigError(f"{where}: channel_spec.{channel}: '{name}' is not in feature_spec")
        for split, chunks in self.sources.items():
            if split not in SPLIT_IDS:
                raise ConfigError(f"{where}: source_spec.{split}: unknown split name; expected one of "
                                  f"train, validation (val, valid), test")
            seen: set[str] = set()
            for i, chunk in enumerate(chunks or []):
                at = f"{where}: source_spec.{split}[{i}]"
                if chunk.get("type") not in CHUNK_TYPES:
                    raise ConfigError(f"{at}.type: {chunk.get('type')!r} cannot be transcoded; expected one of "
                                      f"{', '.join(CHUNK_TYPES)}")
                if not chunk.get("features") or not chunk.get("files"):
                    raise ConfigError(f"{at}: a chunk needs 'features' and 'files'")
                for name in chunk["features"]:
                    if name not in self.features:
                        raise ConfigError(f"{at}.features: '{name}' is not in feature_spec")
                    if name in seen:
                        raise ConfigError(f"{at}.features: '{name}' appears in two chunks of split '{split}'")
                    seen.add(name)
                if chunk["type"] in ("split_binary", "npy"):
                    self._check_binary_chunk(chunk, at)
            absent = [f for f in self.features if f not in seen]
            if absent:
                raise ConfigError(f"{where}: source_spec.{split}: feature(s) {absent} are in no chunk")

    def _check_binary_chunk(self, chunk: dict, at: str) -> None:
        dtypes = {numpy_dtype(self.features[n].get("dtype")) for n in chunk["features"]}
        if chunk["type"] == "split_binary":
            if None in dtypes:
                missing = [n for n in chunk["features"] if "dtype" not in self.features[n]]
                raise ConfigError(f"{at}: a split_binary chunk needs the dtype of its features; "
                                  f"feature_spec.{missing[0]}.dtype is missing")
            if len(dtypes) > 1:
                raise ConfigError(f"{at}: the features of one split_binary chunk share one dtype, got "
                                  f"{sorted(d.name for d in dtypes)}")
            if any(self.kind(n) == "multihot" for n in chunk["features"]):
                raise ConfigError(f"{at}: multi-hot features cannot be read from split_binary chunks")
        elif len(chunk["features"]) != 1 or len(chunk["files"]) != 1:
            raise ConfigError(f"{at}: an npy chunk holds one feature in one file")

    def channel_of(self, name: str) -> str | None:
        return next((c for c, names in self.channels.items() if name in names), None)

    def kind(self, name: str) -> str:
        """How a feature is read and configured: ids, multihot, number, label or other."""
        info, channel = self.features[name], self.channel_of(name)
        dtype = numpy_dtype(info.get("dtype"))
        if channel in MULTIHOT_CHANNELS or "max_hotness" in info:
            return "multihot"
        if channel in CATEGORICAL_CHANNELS:
            return "ids"
        if channel == "numerical":
            return "number"
        if channel == "label":
            return "label"
        if dtype is not None and dtype.kind == "f":
            return "number"
        if dtype is not None and dtype.kind in "iu" and "cardinality" in info:
            return "ids"
        return "other"

    def chunk_label(self, split: str, i: int) -> str:
        names = self.sources[split][i]["features"]
        return f"{self.path}: source_spec.{split}[{i}] ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
