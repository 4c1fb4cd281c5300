"""set: multi-hot ``n x vocab_size`` (int8): column i is 1 when the row holds token ``idx2str[i]``.

Vocabulary as for sequence (``tasks.features.tokens``): ``<PAD>`` = 0 (its column is always 0),
``<UNK>`` = 1 (set when the row holds any token outside the vocabulary), then the tokens by
frequency descending, ties by string ascending. Tokens are split by ``tokenizer`` (default
``space``, Ludwig's set default; no lower-casing unless ``lowercase``). ``max_set_size`` is the
largest number of tokens in a fitted row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.features.base import ColumnSpec
from tasks.features.tokens import TokenFeature, TokenPreprocessing, bag_matrix


class SetPreprocessing(TokenPreprocessing):
    pass


class SetFeature(TokenFeature):
    type_name = "set"
    Preprocessing = SetPreprocessing
    out_dtype = "int8"
    binary = True
    fitted_keys = ("idx2str", "vocab_size")

    def extract(self, acc: dict, missing_state: dict) -> dict:
        meta = self.vocabulary(acc["counts"])
        meta["max_set_size"] = int(max(acc["lengths"], default=0))
        return meta

    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        self.check_fitted(metadata)
        tokens = self.tokens(values)
        ids = self.token_ids(tokens, metadata)
        return {self.name: bag_matrix(ids, tokens.offsets, metadata["vocab_size"], np.dtype(self.out_dtype),
                                      binary=self.binary)}

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        return [ColumnSpec(self.name, self.out_dtype, (metadata["vocab_size"],))]
