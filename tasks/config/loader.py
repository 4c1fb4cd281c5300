"""Loading a config: ``load_config(path)`` and ``parse_config(mapping)``, the one place to call.

Three steps, all before any data is read:

1. Ludwig's legacy and resolved forms are brought to the current one (``tasks.config.ludwig``:
   keys Ludwig upgrades are upgraded, keys Ludwig's model side reads are dropped);
2. the mapping is validated against the schema (``tasks.config.schema``: unknown keys and bad values raise
   ``ConfigError`` naming the key path and the closest valid spelling);
3. each feature's ``preprocessing`` is resolved by its feature type (``tasks.config.loader.
   resolve_preprocessing``: the type's defaults, then ``defaults.<type>.preprocessing``, then the
   feature's own block).

The schema (``tasks.config.schema``) imports no feature type; this module sits above both.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from core.errors import ConfigError
from core.options import format_errors, format_validation_error
from core.plugins import allow_root
from core.yaml_load import load_yaml
from tasks.config.constants import RESERVED_COLUMNS, RESERVED_PREFIXES, reserved_column
from tasks.config.ludwig import LUDWIG_DEFAULTS, upgrade
from tasks.config.schema import Config, FeatureConfig
from tasks.features import REGISTRY, load_feature_class
from tasks.features.base import FeatureType

__all__ = ["load_config", "parse_config", "resolve_preprocessing"]


def parse_config(data: Any, source: str = "config") -> Config:
    """A parsed, validated and resolved config from a mapping (YAML/JSON already decoded)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with 'input_features', got {type(data).__name__}")
    data = upgrade(copy.deepcopy(data), source)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        # one line: each wrong key with what is expected, "; " between several
        raise ConfigError(f"{source}: " + "; ".join(format_validation_error(exc, Config).splitlines())) from None
    _check_reserved(config, source)
    resolve_preprocessing(config, source)
    return config


def _check_reserved(config: Config, source: str) -> None:
    """No feature is named, or reads a column named, as a column prepflow adds (``constants.RESERVED_COLUMNS``)."""
    for section in ("input_features", "output_features"):
        for i, feature in enumerate(getattr(config, section) or []):
            for key, name in (("name", feature.name), ("column", feature.source_column)):
                if reserved_column(name):
                    raise ConfigError(f"{source}: {section}[{i}].{key}: {name!r} is a column name prepflow reserves "
                                      f"for the rows it adds ({', '.join(RESERVED_COLUMNS)}, "
                                      f"{', '.join(p + '*' for p in RESERVED_PREFIXES)}); rename the column")


def load_config(path: str | Path) -> Config:
    """Parse and validate a config file (a fresh copy; parsing is cached by file content)."""
    path = Path(path)
    allow_root(path.resolve().parent)  # plugin modules under the config's folder may be imported (core.plugins)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return _parse_text(text, str(path)).model_copy(deep=True)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's multi-line message as one line: ``not valid YAML at line L, column C: <problem> (<context>)``."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    hint = " (YAML indents with spaces, not tabs)" if "\\t" in problem else ""  # PyYAML shows a tab as \\t
    return f"not valid YAML{where}: {problem}{f' ({context})' if context else ''}{hint}"


@functools.lru_cache(maxsize=32)
def _parse_text(text: str, source: str) -> Config:
    try:
        data = load_yaml(text)  # safe: tags like !!python/object are rejected; aliases bounded
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: {yaml_problem(exc)}") from None
    return parse_config(data, source)


# ---- each feature's options, resolved against its type ---------------------------------------------

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
