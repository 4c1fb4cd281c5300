"""Feature-type registry and per-type preprocessing resolution.

``REGISTRY`` maps a config ``type`` to its ``FeatureType`` class. Custom types are named by
``"pkg.module:Class"`` or a ``prepflow.features`` entry point (see ``load_feature_class``).
``resolve_preprocessing`` validates every feature's options against its type (called by
``tasks.config.loader.parse_config``); ``build``/``build_all`` make the feature objects.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from core.errors import ConfigError
from core.plugins import FEATURES_GROUP, code_version, entry_points, load_subclass
from tasks.config.ludwig import LUDWIG_DEFAULTS
from tasks.config.schema import Config, FeatureConfig, format_errors, format_validation_error, suggest
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
    if ":" in type_name or type_name in entry_points(FEATURES_GROUP):  # "pkg.module:Class" or an entry point
        return load_subclass(type_name, FEATURES_GROUP, FeatureType, where=f"{where}.type",
                             what="custom feature type", base_name="tasks.features.FeatureType", error=ConfigError)
    raise ConfigError(f"{where}.type: unknown feature type {type_name!r}{suggest(type_name, sorted(REGISTRY))}")


def is_builtin_feature(type_name: str | None) -> bool:
    return type_name is None or type_name in REGISTRY


def feature_code(type_name: str | None) -> str | None:
    """The code version of a custom feature type (None for built-in and untyped features)."""
    if is_builtin_feature(type_name):
        return None
    return code_version(load_feature_class(type_name, f"feature type {type_name!r}"))


def _check_defaults(cls: type[FeatureType], type_name: str, options: dict, source: str) -> None:
    """``defaults.<type>.preprocessing`` alone: a bad key or value is named under that path (checks that
    need the feature's own options too, such as image height with width, run on the merged options)."""
    try:
        cls.Preprocessing.model_validate(options)
    except ValidationError as exc:
        errors = [e for e in exc.errors() if e["loc"]]
        if errors:
            raise ConfigError(format_errors(errors, cls.Preprocessing,
                                            prefix=f"{source}: defaults.{type_name}.preprocessing.",
                                            owner=f"defaults.{type_name}")) from None


def _resolve_one(feature: FeatureConfig, where: str, config: Config, source: str) -> None:
    if feature.type is None:
        return  # filled in by infer_types once the data is read
    cls = load_feature_class(feature.type, where)
    merged: dict[str, Any] = {}
    if config.compatibility == "ludwig" and REGISTRY.get(cls.type_name) is cls and not config.is_output(feature.name):
        merged.update(LUDWIG_DEFAULTS.get(cls.type_name, {}))  # (Ludwig's outputs default to drop_row, as here)
    for key in dict.fromkeys((feature.type, cls.type_name)):
        if key in config.defaults:
            if key not in REGISTRY:  # a custom type's defaults (built-in ones are checked up front)
                _check_defaults(cls, key, config.defaults[key].preprocessing, source)
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
    """Validate ``defaults`` and every feature's preprocessing against its type; store the merged options.

    Defaults for a type no feature of prepflow knows (Ludwig's ``h3`` in a saved config) are ignored."""
    for type_name, block in config.defaults.items():
        if type_name in REGISTRY:
            _check_defaults(REGISTRY[type_name], type_name, block.preprocessing, source)
    for section in ("input_features", "output_features"):
        for i, feature in enumerate(getattr(config, section)):
            _resolve_one(feature, f"{source}: {section}[{i}]", config, source)


def build(feature: FeatureConfig, is_output: bool) -> FeatureType:
    cls = load_feature_class(feature.type or "", feature.name)
    options = cls.Preprocessing.model_validate(feature.preprocessing)
    return cls(feature.name, feature.source_column, options, is_output=is_output)


def build_all(config: Config) -> list[FeatureType]:
    return [build(f, config.is_output(f.name)) for f in config.features]
