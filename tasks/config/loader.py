"""Loading a config: ``load_config(path)`` and ``parse_config(mapping)``, the one place to call.

Three steps, all before any data is read:

1. Ludwig's legacy and resolved forms are brought to the current one (``tasks.config.ludwig``:
   keys Ludwig upgrades are upgraded, keys Ludwig's model side reads are dropped);
2. the mapping is validated against the schema (``tasks.config.schema``: unknown keys and bad values raise
   ``ConfigError`` naming the key path and the closest valid spelling);
3. each feature's ``preprocessing`` is resolved by its feature type (``tasks.features.
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
from tasks.config.ludwig import upgrade
from tasks.config.schema import Config, format_validation_error
from tasks.features import resolve_preprocessing

__all__ = ["load_config", "parse_config"]


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
    resolve_preprocessing(config, source)
    return config


def load_config(path: str | Path) -> Config:
    """Parse and validate a config file (a fresh copy; parsing is cached by file content)."""
    path = Path(path)
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
        data = yaml.safe_load(text)  # safe: tags like !!python/object are rejected
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: {yaml_problem(exc)}") from None
    return parse_config(data, source)
