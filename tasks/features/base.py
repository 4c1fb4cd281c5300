"""The feature-type contract shared by built-in and custom feature types.

A feature type turns one raw column into fixed-dtype tensors. Like an NVTabular op it is fitted
in two steps (a partial per Dask partition, then a ``merge`` and a ``finalize`` into JSON
metadata) and encodes partition by partition with vectorized pyarrow/numpy code. It knows:

* ``cast``: raw column -> typed values (nulls kept); a bad value raises ``DataError`` naming
  the row and column;
* ``missing_partial``/``missing_state``: what a missing-value strategy needs (mode, mean, ...);
* ``fit_partial``/``merge``/``finalize``: the fitted metadata (training_set_metadata.json);
* ``encode``: typed, filled values + metadata -> ``{column name: numpy array}``; metadata without
  the fitted keys it needs (``fitted_keys``/``required_metadata``) raises ``NotFittedError``
  (``check_fitted``, the first thing every built-in ``encode`` does);
* ``output_columns``: name, dtype and per-row shape of every published column.

Instances are built by ``tasks.features.build`` from a resolved ``FeatureConfig``; the constructor
only stores settings (scikit-learn style).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pydantic import Field

from core.errors import DataError, NotFittedError
from tasks.config import StrictModel

MISSING_STRATEGIES = ("fill_with_const", "fill_with_mode", "fill_with_mean", "fill_with_false",
                      "fill_with_true", "bfill", "ffill", "drop_row")


class BasePreprocessing(StrictModel):
    missing_value_strategy: str | None = None  # None: the type's default (drop_row for outputs)
    fill_value: Any = None


@dataclass(frozen=True)
class ColumnSpec:
    """One published column: numpy dtype name and the shape of one row (``()`` for scalars)."""

    name: str
    dtype: str
    shape: tuple[int, ...] = ()


class FeatureType:
    type_name: ClassVar[str] = ""
    Preprocessing: ClassVar[type[BasePreprocessing]] = BasePreprocessing
    default_missing_strategy: ClassVar[str] = "fill_with_const"
    allowed_missing_strategies: ClassVar[tuple[str, ...]] = ("fill_with_const", "fill_with_mode", "bfill",
                                                              "ffill", "drop_row")
    default_fill_value: ClassVar[Any] = None
    # metadata keys ``encode`` needs (what ``finalize`` always writes); see ``required_metadata``
    fitted_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str, column: str, options: BasePreprocessing, is_output: bool = False):
        self.name = name
        self.column = column
        self.options = options
        self.is_output = is_output

    # ---- reading -------------------------------------------------------------------
    def read_as(self) -> str:
        """How text formats should read the column: 'string' or 'float64'."""
        return "string"

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        """Raw column -> typed values, nulls kept. ``rows`` are the input row numbers (0-based)."""
        return values

    def normalize(self, values: pd.Series, missing_state: dict, rows: np.ndarray) -> pd.Series:
        """Typed values -> the domain fill values live in (binary: strings -> bool)."""
        return values

    # ---- missing values ----------------------------------------------------------------
    @property
    def missing_strategy(self) -> str:
        return self.options.missing_value_strategy or ("drop_row" if self.is_output else self.default_missing_strategy)

    def missing_partial(self, values: pd.Series) -> dict:
        """Partial statistics (over fit rows) needed by the missing-value strategy."""
        partial: dict[str, Any] = {"nulls": int(values.isna().sum()), "count": int(values.size)}
        if self.missing_strategy == "fill_with_mode" or self.needs_value_counts_for_missing():
            partial["value_counts"] = value_counts(values)
        return partial

    def needs_value_counts_for_missing(self) -> bool:
        return False

    def missing_merge(self, a: dict, b: dict) -> dict:
        out = {"nulls": a["nulls"] + b["nulls"], "count": a["count"] + b["count"]}
        if "value_counts" in a:
            out["value_counts"] = merge_counts(a["value_counts"], b["value_counts"])
        return out

    def missing_state(self, partial: dict) -> dict:
        """JSON state: strategy and ``computed_fill_value`` (None for bfill/ffill/drop_row)."""
        strategy = self.missing_strategy
        state: dict[str, Any] = {"missing_value_strategy": strategy, "computed_fill_value": None}
        if strategy == "fill_with_const":
            fill = self.options.fill_value if self.options.fill_value is not None else self.default_fill_value
            state["computed_fill_value"] = self.fill_value_from_config(fill)
        elif strategy == "fill_with_mode":
            state["computed_fill_value"] = self.mode_value(partial)
        return state

    def fill_value_from_config(self, value: Any) -> Any:
        return value

    def mode_value(self, partial: dict) -> Any:
        return mode_of(partial.get("value_counts", {}), self.name)

    # ---- fit / encode --------------------------------------------------------------------
    def fit_partial(self, values: pd.Series) -> Any:
        return None

    def merge(self, a: Any, b: Any) -> Any:
        return None

    def finalize(self, partial: Any, missing_state: dict) -> dict:
        return {}

    def required_metadata(self, metadata: dict) -> tuple[str, ...]:
        """The metadata keys ``encode`` needs (may depend on the options, e.g. a number's normalization)."""
        return self.fitted_keys

    def check_fitted(self, metadata: Any, *keys: str) -> None:
        """``NotFittedError`` unless ``metadata`` holds ``keys`` (default: ``required_metadata``)."""
        if not isinstance(metadata, dict):
            raise NotFittedError(f"{self.describe()}: encode needs the fitted metadata (a dict from finalize), "
                                 f"got {type(metadata).__name__}")
        missing = [k for k in (keys or self.required_metadata(metadata)) if k not in metadata]
        if missing:
            raise NotFittedError(f"{self.describe()}: encode needs fitted metadata (missing {missing}); run the "
                                 "vocab stage (fit) first, or pass the artifact's training_set_metadata.json entry")

    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.type_name} feature '{self.name}'"


# ---- shared helpers ------------------------------------------------------------------------

def value_counts(values: pd.Series) -> dict:
    """Non-null value -> count, as a plain dict (keys keep their Python type)."""
    vc = values.dropna().value_counts(sort=False)
    return {k.item() if hasattr(k, "item") else k: int(v) for k, v in vc.items()}


def merge_counts(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def order_vocab(counts: dict) -> list:
    """Tokens by frequency descending, ties by the token's string ascending (DESIGN section 3)."""
    return sorted(counts, key=lambda t: (-counts[t], str(t)))


def mode_of(counts: dict, feature: str) -> Any:
    if not counts:
        raise DataError(f"feature '{feature}': fill_with_mode needs at least one non-missing value "
                        "in the rows the fill is fitted on")
    return order_vocab(counts)[0]


def first_bad(mask: np.ndarray, values: pd.Series, rows: np.ndarray) -> tuple[int, Any]:
    i = int(np.flatnonzero(mask)[0])
    return int(rows[i]), values.iloc[i]


def options_field(default: Any, **kwargs: Any) -> Any:
    return Field(default=default, **kwargs)
