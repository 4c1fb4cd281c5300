"""timeseries: floats ``n x L`` (float32), padded with ``padding_value``.

A raw value is a string of numbers separated by whitespace (``tokenizer: space``, Ludwig's default)
or commas (``comma``), or a list of numbers (Parquet/JSON list columns, turned into the same
string form by ``cast``). A token that is not a finite number is a ``DataError`` naming the row.

``L`` (metadata ``max_timeseries_length``) is the smaller of the longest fitted row and
``timeseries_length_limit``. Longer rows lose their tail (``truncation: right``) or head
(``left``); shorter rows are padded after (``padding: right``) or before (``left``) the values.
A missing row is filled by default with ``""``: no values, i.e. all padding.

Forecasting (Ludwig's options for a column with one number per row): ``window_size: w`` (an input
feature) makes each row's series the column's values of the ``w - 1`` rows before it and its own,
``horizon: h`` (an output feature) the values of the ``h`` rows after it (its own excluded), in input
row order, positions before the first or after the last row holding ``padding_value``. Then ``L`` is
``w`` (or ``h``): ``timeseries_length_limit``, ``padding`` and ``truncation`` do not apply, as in
Ludwig. The windows are built over the whole table by ``tasks.runtime.timeseries_windows``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, ValidationInfo, field_validator, model_validator

from core.errors import DataError
from core.lazy import pandas as pd
from tasks.features.base import BasePreprocessing, ColumnSpec, FeatureType
from tasks.features.token_ids import pad
from tasks.features.tokenizers import Tokens, as_strings, tokenize
from tasks.features.tokens import length_histogram, merge_partials

FLOAT_RE = r"^[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[Nn]a[Nn]|[Ii]nf(inity)?)$"


# ---- lists of numbers (shared with vector) ---------------------------------------------------------

def number_strings(values: pd.Series) -> pd.Series:
    """Strings as they are; list values (``[1.0, 2.5]``) as ``"1 2.5"``. Nulls stay null."""
    if isinstance(values.dtype, pd.StringDtype):
        return values.astype("string")
    try:
        arr = pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return values.astype("string")
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) or pa.types.is_fixed_size_list(arr.type):
        text = pc.binary_join(pc.cast(arr, pa.list_(pa.string())), " ")
        return pd.Series(text.to_pandas(), index=values.index, dtype="string")
    return values.astype("string")


def parse_numbers(feature, values: pd.Series, tokenizer: str, rows: np.ndarray | None = None) -> tuple[np.ndarray,
                                                                                                      Tokens]:
    """(float64 of every value, the ``Tokens`` giving the rows); a bad value names its row.

    ``rows`` are the input rows (0-based) of ``values``; without them the row named is
    ``values.index`` (the encode stage indexes values by input row).
    """
    tokens = tokenize(as_strings(values), "comma" if tokenizer == "comma" else "space")
    try:
        numbers = np.asarray(pc.cast(tokens.flat, pa.float64()), dtype=np.float64)
        bad = ~np.isfinite(numbers)
    except pa.ArrowInvalid:
        bad = ~np.asarray(pc.match_substring_regex(tokens.flat, FLOAT_RE), dtype=bool)
        numbers = None
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        r = int(np.searchsorted(tokens.offsets, i, side="right") - 1)
        row = int(rows[r]) if rows is not None else int(values.index[r])
        token = tokens.flat[i].as_py()
        raise DataError(f"row {row}, column '{feature.column}': {feature.describe()} expects finite numbers "
                        f"separated by {'commas' if tokenizer == 'comma' else 'whitespace'}, got {token!r} in "
                        f"{values.iloc[r]!r}")
    if numbers is None:  # the regex accepted what Arrow refused: report without guessing a row
        raise DataError(f"column '{feature.column}': {feature.describe()}: cannot parse the numbers")
    return numbers, tokens


def numbers_fill_value(feature, value: Any, tokenizer: str) -> str:
    """A configured fill value (``""``, ``"1 2"``, ``[1, 2]`` or a number) as a checked string."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        value = (", " if tokenizer == "comma" else " ").join(str(v) for v in value)
    text = str(value)
    tokens = tokenize(as_strings([text]), "comma" if tokenizer == "comma" else "space")
    try:
        ok = np.isfinite(np.asarray(pc.cast(tokens.flat, pa.float64()))).all()
    except pa.ArrowInvalid:
        ok = False
    if not ok:
        raise DataError(f"{feature.describe()}: fill_value must be finite numbers, got {value!r}")
    return text


# ---- the feature -------------------------------------------------------------------------------------

class TimeseriesPreprocessing(BasePreprocessing):
    tokenizer: Literal["space", "comma"] = "space"
    timeseries_length_limit: int = Field(default=256, gt=0)
    padding_value: float = 0.0
    padding: Literal["right", "left"] = "right"
    truncation: Literal["right", "left"] = "right"
    fill_value: Any = ""
    fill_value_list: ClassVar[bool] = True
    window_size: int = Field(default=0, ge=0, description=(
        "forecasting input: each row's series is the column's value in the window_size - 1 rows before it and its "
        "own, in input row order (one number per row; Ludwig's window_size); 0: rows hold whole series"))
    horizon: int = Field(default=0, ge=0, description=(
        "forecasting output: each row's series is the column's value in the horizon rows after it, its own "
        "excluded (one number per row; Ludwig's horizon); 0: rows hold whole series"))

    @field_validator("horizon")
    @classmethod
    def _one_direction(cls, horizon: int, info: ValidationInfo) -> int:
        window_size = info.data.get("window_size") or 0
        if horizon and window_size:
            raise ValueError(f"window_size ({window_size}, an input feature's option) and horizon (an output "
                             "feature's option) exclude each other")
        if (horizon or window_size) and not _one_number_or_none(info.data.get("fill_value")):
            raise ValueError(f"with window_size or horizon each row holds one number, so fill_value must be one "
                             f"number or '' (padding), got {info.data.get('fill_value')!r}")
        return horizon

    @property
    def window_width(self) -> int:
        """The length of a forecasting window (0: not windowed)."""
        return self.window_size or self.horizon

    @model_validator(mode="after")
    def _window_is_the_length(self) -> "TimeseriesPreprocessing":
        # Ludwig ignores timeseries_length_limit for windows: the series is exactly the window
        if self.window_width and self.timeseries_length_limit < self.window_width:
            self.timeseries_length_limit = self.window_width
        return self


def _one_number_or_none(value: Any) -> bool:
    if value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
        return True
    if isinstance(value, (list, tuple)):
        return len(value) <= 1
    return isinstance(value, str) and len(value.replace(",", " ").split()) <= 1


class TimeseriesFeature(FeatureType):
    type_name = "timeseries"
    Preprocessing = TimeseriesPreprocessing
    default_missing_strategy = "fill_with_const"
    default_fill_value = ""
    fitted_keys = ("max_timeseries_length",)

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        text = number_strings(values)
        if not self.options.window_width:  # windows: tasks.runtime.timeseries_windows checks the column once per stage
            parse_numbers(self, text, self.options.tokenizer, rows)  # validate: a bad value names its row
        return text

    def fill_value_from_config(self, value: Any) -> str:
        return numbers_fill_value(self, value, self.options.tokenizer)

    def create(self) -> dict:
        return {"lengths": {}}

    def add(self, acc: dict, values: pd.Series) -> dict:
        _, tokens = parse_numbers(self, values, self.options.tokenizer)
        return self.merge(acc, {"lengths": length_histogram(tokens.lengths)})

    def merge(self, a: dict, b: dict) -> dict:
        return merge_partials(a, b)

    def extract(self, acc: dict, missing_state: dict) -> dict:
        longest = max(acc["lengths"], default=0)
        return {"max_timeseries_length": max(1, min(int(longest), self.options.timeseries_length_limit))}

    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        self.check_fitted(metadata)
        numbers, tokens = parse_numbers(self, values, self.options.tokenizer)
        width = self.options.window_width
        if width and (short := np.flatnonzero(tokens.lengths != width)).size:
            option = "window_size" if self.options.window_size else "horizon"
            raise DataError(f"row {int(values.index[short[0]])}, column '{self.column}': {self.describe()} "
                            f"({option} {width}) encodes series of {width} values, which the pipeline builds from "
                            f"the whole column; got {values.iloc[short[0]]!r} (to serve, pass each row's series)")
        out = pad(numbers, tokens.offsets, metadata["max_timeseries_length"], fill=self.options.padding_value,
                  dtype=np.float32, padding=self.options.padding, truncation=self.options.truncation)
        return {self.name: out}

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        return [ColumnSpec(self.name, "float32", (metadata["max_timeseries_length"],))]
