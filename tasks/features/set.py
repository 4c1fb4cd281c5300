"""set: multi-hot ``n x vocab_size`` (int8): column i is 1 when the row holds token ``idx2str[i]``.

Vocabulary as for sequence (``tasks.features.tokens``): ``<PAD>`` = 0 (its column is always 0),
``<UNK>`` = 1 (set when the row holds any token outside the vocabulary), then the tokens by
frequency descending, ties by string ascending. Tokens are split by ``tokenizer`` (default
``space``, Ludwig's set default; no lower-casing unless ``lowercase``). ``max_set_size`` is the
largest number of tokens in a fitted row.

``symbols: ludwig`` (set by ``compatibility: ludwig``) is Ludwig's set vocabulary (``create_vocabulary``
with ``add_special_symbols=False``): the ``most_common`` tokens by count, equal counts in first-occurrence
order (data tokens spelled like a symbol, such as a missing value filled with ``<UNK>``, take part), no
``<PAD>``, and ``<UNK>`` moved or inserted at id 3 (at the end when fewer tokens are kept); ``str2freq``
each entry's count in the data; ``max_set_size`` is Ludwig's: the largest row + 2 (its start/stop
allowance; rows are not wrapped). A token outside the vocabulary sets the ``<UNK>`` column.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa

from core.lazy import pandas as pd
from tasks.features.base import ColumnSpec
from tasks.features.token_ids import UNK, bag_matrix, lookup
from tasks.features.tokens import TokenFeature, TokenPreprocessing, counts_of

LUDWIG_UNK_ID = 3  # ludwig/utils/strings_utils.py SpecialSymbol.UNKNOWN
LUDWIG_START_STOP = 2  # Ludwig's max_set_size counts a start and a stop symbol


class SetPreprocessing(TokenPreprocessing):
    # ``ludwig``: Ludwig's vocabulary and max_set_size (see the module docstring); set by ``compatibility: ludwig``
    symbols: Literal["prepflow", "ludwig"] = "prepflow"


class SetFeature(TokenFeature):
    type_name = "set"
    Preprocessing = SetPreprocessing
    out_dtype = "int8"
    binary = True
    fitted_keys = ("idx2str", "vocab_size")

    @property
    def uses_start_stop(self) -> bool:
        return False  # a set's (or bag's) rows are never wrapped in start/stop symbols

    @property
    def ludwig(self) -> bool:
        return self.symbols == "ludwig"

    @property
    def specials(self) -> list[str]:
        if self.ludwig:
            return self.ludwig_specials()
        return super().specials

    def ludwig_specials(self) -> list[str]:
        """The symbols at fixed ids under ``symbols: ludwig``: none for set (``<UNK>`` is inserted at id 3)."""
        return []

    def extract(self, acc: dict, missing_state: dict) -> dict:
        meta = self.vocabulary(acc["counts"])
        if self.ludwig and not self.specials:
            meta = ludwig_insert_unk(meta, acc["counts"])
        meta["max_set_size"] = int(max(acc["lengths"], default=0)) + (LUDWIG_START_STOP if self.ludwig else 0)
        return meta

    def token_ids(self, tokens, metadata: dict) -> np.ndarray:
        if self.ludwig:  # Ludwig's str2idx.get(token, str2idx['<UNK>']) over every entry
            return lookup(tokens.flat, metadata["idx2str"], 0, metadata["str2idx"][UNK])
        return super().token_ids(tokens, metadata)

    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        self.check_fitted(metadata)
        tokens = self.tokens(values)
        ids = self.token_ids(tokens, metadata)
        return {self.name: bag_matrix(ids, tokens.offsets, metadata["vocab_size"], np.dtype(self.out_dtype),
                                      binary=self.binary)}

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        return [ColumnSpec(self.name, self.out_dtype, (metadata["vocab_size"],))]


def ludwig_insert_unk(meta: dict, counts: pa.Table) -> dict:
    """Ludwig's ``add_or_move_symbol(vocab, ..., '<UNK>', 3)`` on a vocabulary without special symbols."""
    idx2str = [t for t in meta["idx2str"] if t != UNK]
    idx2str.insert(LUDWIG_UNK_ID, UNK)  # list.insert: at the end when shorter
    freq = {t: meta["str2freq"].get(t, 0) for t in idx2str}
    freq[UNK] = int(counts_of(counts, [UNK])[0]) if counts is not None and len(counts) else 0
    return {**meta, "idx2str": idx2str, "str2idx": {t: i for i, t in enumerate(idx2str)}, "str2freq": freq,
            "vocab_size": len(idx2str)}
