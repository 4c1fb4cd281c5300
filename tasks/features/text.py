"""text: word ids and character ids (Ludwig), or Keras TextVectorization vectors.

``output_mode: int`` (default) publishes two columns, each encoded like a sequence
(``tasks.features.sequence``: ``<PAD>`` = 0, ``<UNK>`` = 1, optional ``<START>``/``<STOP>`` = 2/3,
right-padded ids):

* ``<name>``: word ids ``n x L`` (int32), ``L`` = metadata ``max_sequence_length``;
* ``<name>_char``: character ids ``n x Lc`` (int32), ``Lc`` = ``char_max_sequence_length`` (the
  longest row in characters, capped by the option of that name); whitespace counts as a character.

``output_mode: count | binary | tfidf`` (Keras' ``multi_hot`` and ``tf_idf`` are the same) publishes ``<name>`` only: ``n x vocab_size`` float32 with,
per vocabulary entry, its count in the row, 1.0 when present, or count x idf. As in Keras,
``idf = log(1 + num_documents / (1 + document_frequency))`` over the fitted rows, and ``<UNK>``
gets the mean idf of the kept tokens; ``str2idf`` is stored in the metadata (``<PAD>``: 0).

Two sets of options choose how text becomes words:

* Ludwig's (the default): ``lowercase`` (default true: Unicode lower case), then ``tokenizer``
  (default ``space_punct``; see ``tasks.features.tokenizers``).
* Keras TextVectorization's, used as soon as any of ``standardize``, ``split``, ``max_tokens`` is set
  or ``output_mode`` is ``count``/``binary``/``tfidf``: ``standardize`` (default
  ``lower_and_strip_punctuation``; ``lower``, ``strip_punctuation`` or ``none``; lower-casing is
  ASCII-only, as ``tf.strings.lower``; the punctuation stripped is Keras' ``DEFAULT_STRIP_REGEX``,
  ASCII only), then ``split`` (default ``whitespace``: ASCII whitespace, as ``tf.strings.split``;
  ``character``: one token per Unicode character; or the name of a prepflow tokenizer). Ludwig's
  ``lowercase`` and ``tokenizer`` are not used then.

In both, ``ngrams: N`` adds every row's 2..N-grams (tokens joined by a space) after its words, as
Keras does. ``max_tokens`` caps ``vocab_size`` including the special symbols (Keras counts only its
OOV token in count/binary/tfidf modes, where prepflow's column 0 is ``<PAD>``, always 0).

Metadata: word vocabulary under Ludwig's ``idx2str``, ``str2idx``, ``str2freq``, ``vocab_size``,
``max_sequence_length``; character vocabulary under ``char_idx2str``, ``char_str2idx``,
``char_str2freq``, ``char_vocab_size``, ``char_max_sequence_length`` (int mode only); ``str2idf``
(tfidf; null otherwise, as Ludwig's); and Ludwig's ``max_sequence_length_99ptile``, ``padding_symbol``,
``unknown_symbol``, ``pad_idx``, ``unk_idx``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow.compute as pc
from pydantic import Field, field_validator, model_validator

from core.lazy import pandas as pd
from tasks.features.base import ColumnSpec
from tasks.features.sequence import SequenceFeature, SequencePreprocessing, ludwig_readable, ludwig_symbols
from tasks.features.token_ids import PAD, UNK, bag_matrix, lookup_code_points
from tasks.features.tokenizers import Tokens, as_strings, code_points, ngrams, standardize, tokenize
from tasks.features.tokens import build_vocab, counts_of, document_counts, length_histogram, length_percentile


class TextPreprocessing(SequencePreprocessing):
    tokenizer: Literal["space", "space_punct", "characters", "comma", "regex"] = "space_punct"
    lowercase: bool = True
    # Keras TextVectorization (see the module docstring): standardize, then split
    standardize: Literal["lower_and_strip_punctuation", "lower", "strip_punctuation", "none"] | None = None
    split: Literal["whitespace", "character", "space", "space_punct", "characters", "comma", "regex"] | None = None
    ngrams: int = Field(default=1, ge=1, le=3)
    output_mode: Literal["int", "count", "binary", "tfidf", "multi_hot", "tf_idf"] = "int"  # (Keras' spellings too)
    max_tokens: int | None = Field(default=None, ge=3)
    char_most_common: int = Field(default=70, gt=0)
    char_max_sequence_length: int = Field(default=1024, gt=0)
    # Keys Ludwig reads from the metadata's preprocessing (``--training_set_metadata``), at Ludwig's defaults:
    # tasks.config.ludwig drops them from a config (and refuses other values), so they hold these values
    pretrained_model_name_or_path: None = None
    compute_idf: bool = False

    @field_validator("output_mode")
    @classmethod
    def _keras_names(cls, value: str) -> str:
        return {"multi_hot": "binary", "tf_idf": "tfidf"}.get(value, value)

    @model_validator(mode="after")
    def _modes(self):
        if self.start_stop and self.output_mode != "int":
            raise ValueError(f"start_stop only applies to output_mode 'int', not {self.output_mode!r}")
        if self.split == "regex" and not self.pattern:
            raise ValueError("split 'regex' needs 'pattern' (the separator regex, RE2 syntax)")
        return self


class TextFeature(SequenceFeature):
    type_name = "text"
    Preprocessing = TextPreprocessing

    def required_metadata(self, metadata: dict) -> tuple[str, ...]:
        mode = self.options.output_mode
        if mode == "int":
            return "idx2str", "vocab_size", "max_sequence_length", "char_idx2str", "char_max_sequence_length"
        return ("idx2str", "vocab_size", "str2idf") if mode == "tfidf" else ("idx2str", "vocab_size")

    @property
    def char_column(self) -> str:
        return f"{self.name}_char"

    @property
    def int_mode(self) -> bool:
        return self.options.output_mode == "int"

    @property
    def keras(self) -> bool:
        """Keras TextVectorization's standardize/split instead of Ludwig's lowercase/tokenizer."""
        o = self.options
        return o.output_mode != "int" or any(v is not None for v in (o.standardize, o.split, o.max_tokens))

    def standardized(self, values):
        text = as_strings(values)
        if not self.keras:
            return standardize(text, lowercase=self.options.lowercase)
        mode = self.options.standardize or "lower_and_strip_punctuation"
        if mode in ("lower", "lower_and_strip_punctuation"):
            text = pc.ascii_lower(text)  # tf.strings.lower: ASCII letters only
        return standardize(text, strip_punctuation=mode in ("strip_punctuation", "lower_and_strip_punctuation"))

    @property
    def tokenizer(self) -> str:
        if not self.keras:
            return self.options.tokenizer
        split = self.options.split or "whitespace"
        return {"whitespace": "ascii_whitespace", "character": "characters"}.get(split, split)

    def word_tokens(self, text) -> Tokens:
        tokens = tokenize(text, self.tokenizer, self.options.pattern)
        return ngrams(tokens, self.options.ngrams)

    def tokens(self, values) -> Tokens:
        return self.word_tokens(self.standardized(values))

    # ---- fit -----------------------------------------------------------------------------------
    def add(self, acc: dict, values: pd.Series) -> dict:
        text = self.standardized(values)
        words = self.word_tokens(text)
        batch = {"counts": self.counts(words, values), "lengths": length_histogram(words.lengths)}
        if self.int_mode:
            cps, offsets = code_points(text)
            uniq, counts = np.unique(cps, return_counts=True)
            batch["char_counts"] = dict(zip(map(chr, uniq.tolist()), counts.tolist(), strict=True))
            batch["char_lengths"] = length_histogram(np.diff(offsets))
        if self.options.output_mode == "tfidf":
            batch["doc_counts"] = document_counts(words)
            batch["documents"] = int(words.n)
        return self.merge(acc, batch)

    def extract(self, acc: dict, missing_state: dict) -> dict:
        most_common = self.options.most_common
        if self.options.max_tokens is not None:
            most_common = min(most_common, max(self.options.max_tokens - len(self.specials), 1))
        meta = self.vocabulary(acc["counts"], most_common)
        meta.update(ludwig_symbols(self))
        meta["str2idf"] = None  # Ludwig's key (its compute_idf: false); tfidf fills it below
        meta["max_sequence_length_99ptile"] = length_percentile(acc["lengths"], 99) + (2 if self.uses_start_stop
                                                                                        else 0)
        if self.int_mode:
            meta["max_sequence_length"] = self.sequence_length(acc["lengths"], self.options.max_sequence_length,
                                                               self.options.sequence_length)
            chars = build_vocab(acc["char_counts"], self.specials, self.options.char_most_common)
            meta.update({f"char_{k}": v for k, v in chars.items()})
            meta["char_max_sequence_length"] = self.sequence_length(acc["char_lengths"],
                                                                    self.options.char_max_sequence_length)
        if self.options.output_mode == "tfidf":
            meta["str2idf"] = self.idf(meta["idx2str"], acc["doc_counts"], acc["documents"])
        return ludwig_readable(meta, self)

    def idf(self, idx2str: list[str], doc_counts, documents: int) -> dict[str, float]:
        words = idx2str[len(self.specials):]
        df = counts_of(doc_counts, words).astype(np.float64)
        idf = np.log(1.0 + documents / (1.0 + df))
        out = {PAD: 0.0, UNK: float(idf.mean()) if len(idf) else 0.0}
        out.update(zip(words, idf.tolist(), strict=True))
        return out

    # ---- encode --------------------------------------------------------------------------------
    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        self.check_fitted(metadata)
        text = self.standardized(values)
        words = self.word_tokens(text)
        ids = self.token_ids(words, metadata)
        if not self.int_mode:
            mode, idf = self.options.output_mode, None
            if mode == "tfidf":
                idf = np.array([metadata["str2idf"].get(t, 0.0) for t in metadata["idx2str"]], dtype=np.float32)
            out = bag_matrix(ids, words.offsets, metadata["vocab_size"], np.float32, binary=mode == "binary",
                             weights=idf)
            return {self.name: out}
        cps, char_offsets = code_points(text)
        char_ids = lookup_code_points(cps, metadata["char_idx2str"], len(self.specials), self.unk_id)
        return {self.name: self.pad_ids(ids, words.offsets, metadata["max_sequence_length"]),
                self.char_column: self.pad_ids(char_ids, char_offsets, metadata["char_max_sequence_length"])}

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        if not self.int_mode:
            return [ColumnSpec(self.name, "float32", (metadata["vocab_size"],))]
        return [ColumnSpec(self.name, "int32", (metadata["max_sequence_length"],)),
                ColumnSpec(self.char_column, "int32", (metadata["char_max_sequence_length"],))]
