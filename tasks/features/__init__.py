"""Feature-type registry and per-type preprocessing resolution.

``REGISTRY`` maps a config ``type`` to its ``FeatureType`` class. Custom types are named by
``"pkg.module:Class"`` or a ``prepflow.features`` entry point (see ``load_feature_class``).
``build``/``build_all`` make the feature objects; ``tasks.config.loader`` validates every feature's
options against its type.
"""

from __future__ import annotations

from core.errors import ConfigError
from core.options import suggest
from core.plugins import FEATURES_GROUP, code_version, entry_points, load_subclass
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


def build(feature, is_output: bool) -> FeatureType:
    """The feature object of a typed ``FeatureConfig``."""
    cls = load_feature_class(feature.type or "", feature.name)
    options = cls.Preprocessing.model_validate(feature.preprocessing)
    return cls(feature.name, feature.source_column, options, is_output=is_output)


def build_all(config) -> list[FeatureType]:
    """The feature objects of every feature of a ``Config`` (all typed)."""
    return [build(f, config.is_output(f.name)) for f in config.features]
