"""sequence: token ids ``n x L`` (int32), right-padded with ``<PAD>`` = 0.

Vocabulary (``idx2str``): ``<PAD>`` = 0, ``<UNK>`` = 1, then ``<START>`` = 2 and ``<STOP>`` = 3 when
``start_stop`` is on, then the tokens by frequency descending, ties by string ascending
(``tasks.features.tokens``). ``most_common`` keeps the first N tokens, ``min_frequency`` drops rarer
ones; ``vocab_file`` (one token per line) fixes the tokens and their order instead.

``L`` (metadata ``max_sequence_length``) is Ludwig's ``sequence_length`` when set, else the smaller of
the longest tokenized row (counting ``<START>``/``<STOP>``) and ``max_sequence_length``; ``length_percentile`` (e.g. 99) caps it further at
that percentile of the row lengths. Longer rows lose their tail (``truncation: right``, Ludwig) or
head (``left``); shorter rows are padded after (``padding: right``) or before (``left``) the ids.

Metadata: ``idx2str``, ``str2idx``, ``str2freq``, ``vocab_size``, ``max_sequence_length`` and the keys
Ludwig reads for its symbols: ``padding_symbol``/``unknown_symbol`` (also in ``preprocessing``),
``pad_idx``, ``unk_idx``.

Ludwig's worked example holds: rows ``"token3 token4 token2"`` and ``"token3 token1"`` give
``idx2str[:3] = [<PAD>, <UNK>, token3]`` and encode as ``[token3, token4, token2]`` and
``[token3, token1, <PAD>]``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from core.lazy import pandas as pd
from tasks.features.base import ColumnSpec
from tasks.features.token_ids import EOS, LUDWIG_SPECIALS, PAD, SOS, START_ID, STOP_ID, UNK, pad
from tasks.features.tokens import TokenFeature, TokenPreprocessing, length_percentile


def ludwig_symbols(feature: TokenFeature) -> dict:
    """The special-symbol keys Ludwig reads from a sequence or text feature's metadata."""
    return {"padding_symbol": PAD, "unknown_symbol": UNK, "pad_idx": feature.pad_id, "unk_idx": feature.unk_id}


def ludwig_readable(meta: dict, feature: TokenFeature) -> dict:
    """``str2idx`` that Ludwig can encode with: Ludwig wraps every row in ``<SOS>`` ...
    ``<EOS>`` (its ``build_sequence_matrix`` looks both up in ``str2idx``, so prepflow's own vocabulary
    failed with ``KeyError: '<EOS>'``). With prepflow's symbols they name ids the vocabulary has:
    ``<START>``/``<STOP>`` when ``start_stop`` is on, else ``<PAD>`` (Ludwig's rows are then prepflow's
    behind one padding slot). ``idx2str``, ``vocab_size`` and prepflow's own ids do not change; a data token
    spelled ``<SOS>``/``<EOS>`` keeps its id."""
    if feature.symbols == "ludwig" or "str2idx" not in meta:
        return meta
    start = meta["str2idx"].get("<START>", feature.pad_id) if feature.uses_start_stop else feature.pad_id
    stop = meta["str2idx"].get("<STOP>", feature.pad_id) if feature.uses_start_stop else feature.pad_id
    return {**meta, "str2idx": {**{SOS: start, EOS: stop}, **meta["str2idx"]}}


class SequencePreprocessing(TokenPreprocessing):
    most_common: int = Field(default=20000, gt=0)
    max_sequence_length: int = Field(default=256, gt=0)
    sequence_length: int | None = Field(default=None, gt=0)  # Ludwig: L exactly (else from the data, capped)
    length_percentile: float | None = Field(default=None, gt=0, le=100)
    padding: Literal["right", "left"] = "right"
    truncation: Literal["right", "left"] = "right"
    start_stop: bool = False
    # Ludwig's symbol names, recorded in the metadata's preprocessing (Ludwig reads them from there); only its
    # defaults, prepflow's names, are accepted
    padding_symbol: Literal["<PAD>"] = "<PAD>"
    unknown_symbol: Literal["<UNK>"] = "<UNK>"
    # special symbol ids: prepflow's (<PAD>=0, <UNK>=1, optional <START>/<STOP>) or Ludwig's (<EOS>=0, <SOS>=1,
    # <PAD>=2, <UNK>=3, every row wrapped in <SOS> ... <EOS>); ``compatibility: ludwig`` sets ludwig
    symbols: Literal["prepflow", "ludwig"] = "prepflow"
    # Keys Ludwig reads from the metadata's preprocessing (``--training_set_metadata``), at Ludwig's defaults:
    # tasks.config.ludwig drops them from a config (and refuses other values), so they hold these values
    ngram_size: int = 2
    cache_encoder_embeddings: bool = False


class SequenceFeature(TokenFeature):
    type_name = "sequence"
    Preprocessing = SequencePreprocessing
    fitted_keys = ("idx2str", "max_sequence_length")

    def sequence_length(self, hist: dict, limit: int, fixed: int | None = None) -> int:
        """``L``: ``fixed`` (Ludwig's ``sequence_length``) when set, else min(longest row, ``limit``, the
        ``length_percentile`` length), at least 1."""
        if fixed is not None:
            return int(fixed)
        extra = 2 if self.uses_start_stop else 0
        length = min(max(hist, default=0) + extra, limit)
        if self.options.length_percentile is not None:
            length = min(length, length_percentile(hist, self.options.length_percentile) + extra)
        return max(int(length), 1)

    def extract(self, acc: dict, missing_state: dict) -> dict:
        meta = self.vocabulary(acc["counts"])
        meta["max_sequence_length"] = self.sequence_length(acc["lengths"], self.options.max_sequence_length,
                                                           self.options.sequence_length)
        meta.update(ludwig_symbols(self))
        return ludwig_readable(meta, self)

    def pad_ids(self, ids: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
        if not self.uses_start_stop:
            start = stop = None
        elif self.symbols == "ludwig":
            start, stop = LUDWIG_SPECIALS.index(SOS), LUDWIG_SPECIALS.index(EOS)
        else:
            start, stop = START_ID, STOP_ID
        return pad(ids, offsets, width, fill=self.pad_id, padding=self.options.padding,
                   truncation=self.options.truncation, start=start, stop=stop)

    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        self.check_fitted(metadata)
        tokens = self.tokens(values)
        ids = self.token_ids(tokens, metadata)
        return {self.name: self.pad_ids(ids, tokens.offsets, metadata["max_sequence_length"])}

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        return [ColumnSpec(self.name, "int32", (metadata["max_sequence_length"],))]
