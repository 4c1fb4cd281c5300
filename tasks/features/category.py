"""category: one int32 id per row.

Vocabulary convention (DESIGN section 3): id 0 is ``<UNK>``, always; ids 1.. are the fitted
values by frequency descending, ties broken by the value's string ascending. ``most_common``
keeps the first N values, ``min_frequency`` drops values seen fewer times; both, and values
unseen at fit time, encode as 0. Values are compared as strings (``1`` and ``"1"`` are the same
category, as in Ludwig).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from tasks.features.base import BasePreprocessing, ColumnSpec, FeatureType, merge_counts, order_vocab

UNK = "<UNK>"


class CategoryPreprocessing(BasePreprocessing):
    most_common: int = Field(default=10000, gt=0)
    min_frequency: int = Field(default=1, ge=1)


class CategoryFeature(FeatureType):
    type_name = "category"
    Preprocessing = CategoryPreprocessing
    default_missing_strategy = "fill_with_const"
    default_fill_value = UNK

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        if pd.api.types.is_float_dtype(values.dtype):
            x = values.to_numpy(dtype="float64", na_value=np.nan)
            whole = np.isfinite(x) & (x == np.round(x))
            text = pd.Series(np.where(whole, np.nan_to_num(x).astype(np.int64).astype(str), x.astype(str)),
                             index=values.index, dtype="string")
            return text.mask(np.isnan(x))
        return values.astype("string")

    def fill_value_from_config(self, value: Any) -> str:
        return str(value)

    def fit_partial(self, values: pd.Series) -> dict:
        vc = values.dropna().value_counts(sort=False)
        return {str(k): int(v) for k, v in vc.items()}

    def merge(self, a: dict, b: dict) -> dict:
        return merge_counts(a, b)

    def finalize(self, counts: dict, missing_state: dict) -> dict:
        kept = [t for t in order_vocab(counts) if counts[t] >= self.options.min_frequency and t != UNK]
        kept = kept[: self.options.most_common]
        idx2str = [UNK, *kept]
        kept_set = set(kept)
        unk_freq = sum(n for t, n in counts.items() if t not in kept_set)
        return {
            "idx2str": idx2str,
            "str2idx": {t: i for i, t in enumerate(idx2str)},
            "str2freq": {UNK: unk_freq, **{t: counts[t] for t in kept}},
            "vocab_size": len(idx2str),
            "preprocessing": {"most_common": self.options.most_common,
                              "min_frequency": self.options.min_frequency},
        }

    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        vocab = pa.array(metadata["idx2str"][1:], type=pa.string())
        arr = pa.array(values.astype("string"), type=pa.string()) if len(values) else pa.array([], pa.string())
        idx = pc.index_in(arr, value_set=vocab)
        ids = pc.fill_null(pc.add(idx, 1), 0)
        return {self.name: ids.to_numpy(zero_copy_only=False).astype(np.int32)}

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        return [ColumnSpec(self.name, "int32")]
