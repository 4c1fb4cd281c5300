"""Feature-type registry and config resolution.

``REGISTRY`` maps a config ``type`` to its ``FeatureType`` class. Custom types are named by
``"pkg.module:Class"`` or a ``prepflow.features`` entry point (see ``load_feature_class``).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from tasks.config import Config, FeatureConfig, format_validation_error
from core.errors import ConfigError
from tasks.features.audio import AudioFeature
from tasks.features.bag import BagFeature
from tasks.features.base import FeatureType
from tasks.features.binary import BinaryFeature
from tasks.features.category import CategoryFeature
from tasks.features.date import DateFeature
from tasks.features.image import ImageFeature
from tasks.features.number import NumberFeature
from tasks.features.sequence import SequenceFeature
from tasks.features.set import SetFeature
from tasks.features.text import TextFeature
from tasks.features.timeseries import TimeseriesFeature
from tasks.features.vector import VectorFeature

REGISTRY: dict[str, type[FeatureType]] = {
    "binary": BinaryFeature,
    "number": NumberFeature,
    "numerical": NumberFeature,  # Ludwig < 0.5 spelling
    "category": CategoryFeature,
    "set": SetFeature,
    "bag": BagFeature,
    "sequence": SequenceFeature,
    "text": TextFeature,
    "timeseries": TimeseriesFeature,
    "vector": VectorFeature,
    "date": DateFeature,
    "image": ImageFeature,
    "audio": AudioFeature,
}


def load_feature_class(type_name: str, where: str) -> type[FeatureType]:
    if type_name in REGISTRY:
        return REGISTRY[type_name]
    from tasks.plugins import FEATURES_GROUP, entry_points, load_subclass

    if ":" in type_name or type_name in entry_points(FEATURES_GROUP):  # "pkg.module:Class" or an entry point
        return load_subclass(type_name, FEATURES_GROUP, FeatureType, where=f"{where}.type",
                             what="custom feature type", base_name="tasks.features.FeatureType", error=ConfigError)
    from tasks.config import suggest

    raise ConfigError(f"{where}.type: unknown feature type {type_name!r}{suggest(type_name, sorted(REGISTRY))}")


def _resolve_one(feature: FeatureConfig, where: str, config: Config) -> None:
    if feature.type is None:
        return  # filled in by infer_types once the data is read
    cls = load_feature_class(feature.type, where)
    merged: dict[str, Any] = {}
    for key in (feature.type, cls.type_name):
        if key in config.defaults:
            merged.update(config.defaults[key].preprocessing)
    merged.update(feature.preprocessing)
    try:
        options = cls.Preprocessing.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, cls.Preprocessing, prefix=f"{where}.preprocessing.",
                                                  owner=f"{cls.type_name} feature '{feature.name}'")) from None
    strategy = options.missing_value_strategy
    if strategy is not None and strategy not in cls.allowed_missing_strategies:
        valid = ", ".join(cls.allowed_missing_strategies)
        raise ConfigError(f"{where}.preprocessing.missing_value_strategy: the 'missing_value_strategy' parameter "
                          f"of {cls.type_name} feature '{feature.name}' must be one of {valid}. "
                          f"Got {strategy!r} instead.")
    feature.preprocessing = options.model_dump()


def resolve_preprocessing(config: Config, source: str = "config") -> None:
    """Validate every feature's preprocessing against its type; store the merged options."""
    for section in ("input_features", "output_features"):
        for i, feature in enumerate(getattr(config, section)):
            _resolve_one(feature, f"{source}: {section}[{i}]", config)


def build(feature: FeatureConfig, is_output: bool) -> FeatureType:
    cls = load_feature_class(feature.type or "", feature.name)
    options = cls.Preprocessing.model_validate(feature.preprocessing)
    return cls(feature.name, feature.source_column, options, is_output=is_output)


def build_all(config: Config) -> list[FeatureType]:
    return [build(f, config.is_output(f.name)) for f in config.features]
