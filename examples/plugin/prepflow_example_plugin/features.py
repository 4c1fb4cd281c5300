"""A custom feature type: hashed token ids with a domain tokenizer (hashtags and mentions kept whole).

It follows the contract of the built-in types (``tasks.features.base.FeatureType``): ``cast``,
missing-value hooks, a fit with prepflow's one fit protocol (``tasks.runtime.combine``: ``create``/``add``/
``merge``/``extract`` -> JSON metadata),
``encode`` and ``output_columns``. So prepflow publishes it, the encoded gate checks its ids
(``id_ranges``) and the serving-time ``Preprocessor`` rebuilds it from the metadata.

Encoding: tokens are ``pattern`` matches (default ``[#@]?\\w+``: ``#ml`` and ``@ana`` stay one token,
punctuation goes), optionally lowercased; a token's id is ``crc32(utf-8 bytes) % num_buckets + 1``, so
0 is padding and no vocabulary is fitted (the hashing trick: unseen tokens get ids too). Each row
gives ``L`` ids, right-padded or truncated, where ``L`` (metadata ``max_sequence_length``) is the
smaller of the longest row seen in the fit rows and the configured ``max_sequence_length``.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field, field_validator

from tasks.features.base import BasePreprocessing, ColumnSpec, FeatureType


class HashedTokensPreprocessing(BasePreprocessing):
    num_buckets: int = Field(default=1024, gt=1, le=1 << 24)
    max_sequence_length: int = Field(default=32, gt=0)
    pattern: str = r"[#@]?\w+"
    lowercase: bool = True
    fill_value: Any = ""

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"is not a valid regular expression: {exc}") from None
        return value


class HashedTokens(FeatureType):
    type_name = "hashed_tokens"
    Preprocessing = HashedTokensPreprocessing
    default_missing_strategy = "fill_with_const"
    allowed_missing_strategies = ("fill_with_const", "fill_with_mode", "bfill", "ffill", "drop_row")
    default_fill_value = ""
    fitted_keys = ("max_sequence_length", "num_buckets")  # encode raises NotFittedError without them

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        return values.astype("string")

    def fill_value_from_config(self, value: Any) -> str:
        return "" if value is None else str(value)

    def tokens(self, values: pd.Series) -> list[list[str]]:
        pattern = re.compile(self.options.pattern)
        texts = values.fillna("").astype(str)
        if self.options.lowercase:
            texts = texts.str.lower()
        return [pattern.findall(text) for text in texts]

    # ---- fit: only the longest row, so the width of the id matrix is known --------------------------
    def create(self) -> dict:
        return {"max_length": 0, "tokens": 0}

    def add(self, acc: dict, values: pd.Series) -> dict:
        lengths = [len(t) for t in self.tokens(values)]
        return self.merge(acc, {"max_length": max(lengths, default=0), "tokens": sum(lengths)})

    def merge(self, a: dict, b: dict) -> dict:
        return {"max_length": max(a["max_length"], b["max_length"]), "tokens": a["tokens"] + b["tokens"]}

    def extract(self, acc: dict, missing_state: dict) -> dict:
        o = self.options
        return {"num_buckets": o.num_buckets, "pattern": o.pattern, "lowercase": o.lowercase,
                "max_sequence_length": max(1, min(acc["max_length"], o.max_sequence_length)),
                "tokens_in_fit_rows": acc["tokens"]}

    # ---- encode ----------------------------------------------------------------------------------------
    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        self.check_fitted(metadata)
        width, buckets = metadata["max_sequence_length"], metadata["num_buckets"]
        out = np.zeros((len(values), width), dtype=np.int32)
        for i, tokens in enumerate(self.tokens(values)):
            ids = [zlib.crc32(t.encode("utf-8")) % buckets + 1 for t in tokens[:width]]
            out[i, : len(ids)] = ids
        return {self.name: out}

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        return [ColumnSpec(self.name, "int32", (metadata["max_sequence_length"],))]

    def id_ranges(self, metadata: dict) -> dict[str, tuple[int, int]]:
        """Ids lie in ``[0, num_buckets]`` (the encoded gate checks them)."""
        return {self.name: (0, metadata["num_buckets"] + 1)}
