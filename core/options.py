"""Option models and the one format of their errors, for every layer that validates options.

``StrictModel``: a pydantic model that refuses unknown keys and validates its defaults (the config's
sections, every feature type's ``Preprocessing``). ``format_errors`` turns pydantic's errors into lines
``<key path>: <what is wrong>`` with the closest valid spelling (``suggest``), scikit-learn's wording
for a value outside a declared set: "The 'normalization' parameter of number feature 'age' must be one
of zscore, minmax, iq, log1p, none. Got 'z-score' instead." A model's ``hidden_keys`` (a class attribute)
are accepted but never suggested.
"""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


def _loc_to_path(loc: tuple) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path


def _known_fields(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names valid at the parent of ``loc`` (for 'did you mean')."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            if field is None:
                return []
            current = _model_of(field.annotation)
        else:
            return []
    if isinstance(current, type) and issubclass(current, BaseModel):
        hidden = getattr(current, "hidden_keys", ())
        return [n for n in current.model_fields if n not in hidden]
    return []


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def suggest(word: str, choices: list[str]) -> str:
    match = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean '{match[0]}'?" if match else (
        f"; valid keys: {', '.join(choices)}" if choices else "")


def format_validation_error(exc: ValidationError, model: type[BaseModel], prefix: str = "",
                            owner: str | None = None) -> str:
    return format_errors(exc.errors(), model, prefix, owner)


def format_errors(errors: list, model: type[BaseModel], prefix: str = "", owner: str | None = None) -> str:
    """pydantic error dicts as lines ``<prefix><key path>: <what is wrong>``."""
    lines = []
    for err in errors:
        loc = tuple(err["loc"])
        path = prefix + _loc_to_path(loc)
        if err["type"] == "extra_forbidden":
            lines.append(f"{path}: unknown key{suggest(str(loc[-1]), _known_fields(model, loc))}")
        elif err["type"] == "literal_error":
            expected = err["ctx"]["expected"].replace("'", "").replace(" or ", ", ")
            subject = f"the '{loc[-1]}' parameter of {owner}" if owner else "the value"
            lines.append(f"{path}: {subject} must be one of {expected}. Got {err['input']!r} instead.")
        elif err["type"] == "missing":
            lines.append(f"{path}: required key is missing")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{path}: {msg} (got {err.get('input')!r})" if loc else msg)
    return "\n".join(lines)
