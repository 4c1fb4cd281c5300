"""vector: floats ``n x d`` (float32), ``d`` = metadata ``vector_size``.

A raw value is a string of whitespace-separated numbers (Ludwig) or a list of numbers. Every row
must hold exactly ``vector_size`` values (the option, or inferred from the fitted rows, which must
then agree); a row of another length, or a value that is not a finite number, is a ``DataError``
naming the row. A missing row is filled by default with ``""``, which encodes as a zero vector.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from core.errors import DataError
from core.lazy import pandas as pd
from tasks.features.base import BasePreprocessing, ColumnSpec, FeatureType
from tasks.features.timeseries import number_strings, numbers_fill_value, parse_numbers
from tasks.features.tokens import length_histogram, merge_partials


class VectorPreprocessing(BasePreprocessing):
    vector_size: int | None = Field(default=None, gt=0)
    fill_value: Any = ""
    fill_value_list: ClassVar[bool] = True


class VectorFeature(FeatureType):
    type_name = "vector"
    Preprocessing = VectorPreprocessing
    default_missing_strategy = "fill_with_const"
    default_fill_value = ""
    fitted_keys = ("vector_size",)

    def _check_lengths(self, lengths: np.ndarray, size: int | None, values: pd.Series,
                       rows: np.ndarray | None) -> None:
        """Every non-empty row must have ``size`` values (or, when None, as many as the first one)."""
        filled = lengths > 0
        if not filled.any():
            return
        if size is None:
            size = int(lengths[np.argmax(filled)])
        bad = filled & (lengths != size)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            row = int(rows[i]) if rows is not None else int(values.index[i])
            raise DataError(f"row {row}, column '{self.column}': {self.describe()} expects {size} values "
                            f"per row, got {int(lengths[i])}")

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        text = number_strings(values)
        _, tokens = parse_numbers(self, text, "space", rows)
        self._check_lengths(tokens.lengths, self.options.vector_size, text, rows)
        return text

    def fill_value_from_config(self, value: Any) -> str:
        text = numbers_fill_value(self, value, "space")
        size = self.options.vector_size
        if text and size is not None and len(text.split()) != size:
            raise DataError(f"{self.describe()}: fill_value must have {size} values, got {value!r}")
        return text

    def create(self) -> dict:
        return {"lengths": {}}

    def add(self, acc: dict, values: pd.Series) -> dict:
        _, tokens = parse_numbers(self, values, "space")
        lengths = tokens.lengths
        return self.merge(acc, {"lengths": length_histogram(lengths[lengths > 0])})

    def merge(self, a: dict, b: dict) -> dict:
        return merge_partials(a, b)

    def extract(self, acc: dict, missing_state: dict) -> dict:
        seen = acc["lengths"]
        size = self.options.vector_size
        if size is None:
            if not seen:
                raise DataError(f"{self.describe()}: no values to infer vector_size from; set vector_size")
            if len(seen) > 1:
                found = ", ".join(f"{n} values in {c} rows" for n, c in sorted(seen.items()))
                raise DataError(f"{self.describe()}: rows have different lengths ({found}); every row must have "
                                "the same number of values (set vector_size to find the offending rows)")
            size = int(next(iter(seen)))
        return {"vector_size": size}

    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        self.check_fitted(metadata)
        size = metadata["vector_size"]
        numbers, tokens = parse_numbers(self, values, "space")
        lengths = tokens.lengths
        self._check_lengths(lengths, size, values, None)
        out = np.zeros((tokens.n, size), dtype=np.float32)
        out[lengths > 0] = numbers.reshape(-1, size)
        return {self.name: out}

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        return [ColumnSpec(self.name, "float32", (metadata["vector_size"],))]
