"""The vocabulary-based token features' common part (set, bag, sequence and text): their shared options,
the fit, and ``TokenFeature``. A column is tokenized by ``tasks.features.tokenizers`` and encoded by
``tasks.features.token_ids``; what is fitted lives here: exact token counts, document counts and row-length
histograms that merge in any order to the same result (so the vocabulary does not depend on the
partitioning), and the vocabulary built from them. Python loops run only per distinct token, never per row.

Vocabulary convention (DESIGN section 3): ``idx2str`` starts with the special symbols ``<PAD>`` = 0,
``<UNK>`` = 1 and, when enabled, ``<START>`` = 2, ``<STOP>`` = 3; the fitted tokens follow by
frequency descending, ties broken by the token's string ascending. Data tokens spelled like a
special symbol are counted as ``<UNK>``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator, model_validator

from core.lazy import pandas as pd
from tasks.features.base import BasePreprocessing, FeatureType, by_count_then, merge_counts
from tasks.features.token_ids import LUDWIG_SPECIALS, PAD, START, STOP, UNK, lookup
from tasks.features.tokenizers import Tokenizer, Tokens, as_strings, standardize, tokenize

# ---- options shared by token features ---------------------------------------------------------------

class TokenPreprocessing(BasePreprocessing):
    """Options of every vocabulary-based token feature (set, bag, sequence, text)."""

    tokenizer: Tokenizer = "space"
    pattern: str | None = None  # the separator regex of tokenizer: regex
    lowercase: bool = False
    most_common: int = Field(default=10000, gt=0)
    min_frequency: int = Field(default=1, ge=1)
    vocab_file: str | None = None
    # sha256 of vocab_file's bytes, filled in when the config is validated, so that editing the file
    # changes the cache keys and the artifact id (set by prepflow; a configured value is overwritten).
    vocab_file_sha256: str | None = None
    fill_value: Any = ""

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                pc.split_pattern_regex(pa.array(["x"]), value)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise ValueError(f"is not a valid RE2 regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _tokenizer_and_vocab_file(self):
        if self.tokenizer == "regex" and not self.pattern:
            raise ValueError("tokenizer 'regex' needs 'pattern' (the separator regex, RE2 syntax)")
        if self.vocab_file is not None:
            self.vocab_file_sha256 = file_sha256(self.vocab_file)
        return self


def file_sha256(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        raise ValueError(f"cannot read vocab_file {path!r}: {exc.strerror}") from None


def read_vocab_file(path: str) -> list[str]:
    """One token per line (UTF-8); blank lines and repeated tokens are skipped."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return list(dict.fromkeys(line for line in lines if line))


# ---- fitting -----------------------------------------------------------------------------------------

def counts_table(tokens: list[str] | pa.Array, counts: list[int] | np.ndarray,
                 first: np.ndarray | None = None) -> pa.Table:
    columns = {"token": pa.array(tokens, type=pa.large_string()),
               "count": pa.array(np.asarray(counts, dtype=np.int64), type=pa.int64())}
    if first is not None:
        columns["first"] = pa.array(np.asarray(first, dtype=np.int64), type=pa.int64())
    return pa.table(columns)


# ``first``: where a token first occurs in the input, as ``row * PLACES_PER_ROW + place in the row``
PLACES_PER_ROW = 1 << 24


def _first_by(idx: np.ndarray, keys: np.ndarray, size: int) -> np.ndarray:
    """The smallest of ``keys`` per value of ``idx`` (0 <= idx < size; every value present)."""
    if not len(idx):
        return np.zeros(size, dtype=np.int64)
    order = np.lexsort((keys, idx))
    starts = np.flatnonzero(np.concatenate([[True], idx[order][1:] != idx[order][:-1]]))
    first = np.empty(size, dtype=np.int64)
    first[idx[order][starts]] = keys[order][starts]
    return first


def count_tokens_first_seen(tokens: Tokens, rows: np.ndarray) -> pa.Table:
    """``count_tokens`` plus each token's first occurrence (column ``first``), ``rows`` being the input row
    position of every row: Ludwig orders tokens of equal count by first occurrence (``value_counts(sort=False)``
    then ``Counter.most_common``), which the minimum over partitions gives for any partitioning."""
    if not len(tokens.flat):
        return counts_table([], [], np.zeros(0, np.int64))
    enc = pc.dictionary_encode(tokens.flat)
    idx = np.asarray(enc.indices, dtype=np.int64)
    parents = tokens.parents()
    place = np.arange(len(idx), dtype=np.int64) - tokens.offsets[:-1][parents]
    keys = np.asarray(rows, dtype=np.int64)[parents] * PLACES_PER_ROW + place
    size = len(enc.dictionary)
    return counts_table(enc.dictionary.cast(pa.large_string()), np.bincount(idx, minlength=size),
                        _first_by(idx, keys, size))


def count_tokens(flat: pa.Array) -> pa.Table:
    """Token -> occurrences as a table (``token``, ``count``): exact integer counts, merged by
    ``merge_counts_tables`` in any order to the same result."""
    if not len(flat):
        return counts_table([], [])
    vc = pc.value_counts(flat)
    return counts_table(vc.field("values").cast(pa.large_string()), vc.field("counts").to_numpy())


def merge_counts_tables(a: pa.Table, b: pa.Table) -> pa.Table:
    """Sum the counts of equal tokens (hash the tokens once, then a numpy bincount)."""
    tokens = pa.concat_arrays([a["token"].combine_chunks(), b["token"].combine_chunks()])
    counts = np.concatenate([np.asarray(a["count"], dtype=np.int64), np.asarray(b["count"], dtype=np.int64)])
    enc = pc.dictionary_encode(tokens)
    idx = np.asarray(enc.indices, dtype=np.int64)
    summed = np.bincount(idx, weights=counts, minlength=len(enc.dictionary))
    first = None
    if "first" in a.column_names and "first" in b.column_names:
        keys = np.concatenate([np.asarray(a["first"], dtype=np.int64), np.asarray(b["first"], dtype=np.int64)])
        first = _first_by(idx, keys, len(enc.dictionary))
    return counts_table(enc.dictionary, summed.astype(np.int64), first)  # float64 sums are exact below 2**53


def counts_of(counts: pa.Table, tokens: list[str]) -> np.ndarray:
    """The counts (int64) of ``tokens`` in a counts table, 0 for absent tokens."""
    idx = pc.index_in(pa.array(tokens, pa.large_string()), value_set=counts["token"])
    idx = np.asarray(pc.fill_null(idx, -1), dtype=np.int64)
    table = np.append(np.asarray(counts["count"], dtype=np.int64), 0)  # index -1 -> the appended 0
    return table[idx]


def document_counts(tokens: Tokens) -> pa.Table:
    """Token -> number of rows that contain it."""
    if not len(tokens.flat):
        return counts_table([], [])
    enc = pc.dictionary_encode(tokens.flat)
    idx = np.asarray(enc.indices, dtype=np.int64)
    width = len(enc.dictionary)
    keys = np.sort(tokens.parents() * width + idx)  # sort + run boundaries: faster than np.unique here
    distinct = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    return counts_table(enc.dictionary.cast(pa.large_string()), np.bincount(distinct % width, minlength=width))


def length_histogram(lengths: np.ndarray) -> dict[int, int]:
    """Row length -> rows (exact; JSON-friendly keys are made by ``extract``)."""
    if not len(lengths):
        return {}
    values, counts = np.unique(lengths, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist(), strict=True))


def length_percentile(hist: dict[int, int], percentile: float) -> int:
    """The smallest length that at least ``percentile`` % of the rows do not exceed (nearest rank)."""
    if not hist:
        return 0
    lengths = np.array(sorted(hist), dtype=np.int64)
    cum = np.cumsum([hist[k] for k in lengths])
    rank = int(np.ceil(percentile / 100.0 * cum[-1]))
    return int(lengths[np.searchsorted(cum, max(rank, 1))])


def merge_partials(a: dict, b: dict) -> dict:
    """Merge dict partials field by field: count tables and dicts of counts add, ints add."""
    out = {}
    for key in a.keys() | b.keys():
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            out[key] = y if x is None else x
        elif isinstance(x, pa.Table):
            out[key] = merge_counts_tables(x, y)
        elif isinstance(x, dict):
            out[key] = merge_counts(x, y)
        elif isinstance(x, int):
            out[key] = x + y
        else:
            raise TypeError(f"cannot merge partial field {key!r} of type {type(x).__name__}")
    return out


def build_vocab(counts: pa.Table | dict[str, int], specials: list[str], most_common: int,
                min_frequency: int = 1, fixed: list[str] | None = None, ludwig: bool = False) -> dict:
    """``idx2str``/``str2idx``/``str2freq``/``vocab_size`` from token counts (or a fixed token list).

    Kept tokens: frequency descending, ties by first occurrence when ``counts`` has a ``first`` column
    (``count_tokens_first_seen``), else by the token's string ascending (Arrow compares UTF-8 bytes,
    which orders like Python's ``str``), at least ``min_frequency``, the first ``most_common``.

    ``ludwig`` (Ludwig's ``create_vocabulary``): data tokens spelled like a special symbol (a missing
    value filled with ``<UNK>``) take part in the ``most_common`` cut, are then moved to their special
    id, and ``str2freq`` is each kept token's count as seen in the data (specials included).
    """
    if isinstance(counts, dict):
        counts = counts_table(list(counts), list(counts.values()))
    is_special = pc.is_in(counts["token"], pa.array(specials, pa.large_string()))
    all_counts, counts = counts, counts.filter(pc.invert(is_special))
    if fixed is not None:
        kept = [t for t in fixed if t not in set(specials)]
        kept_freq = counts_of(counts, kept).tolist()
    else:
        candidates = all_counts if ludwig else counts
        frequent = candidates.filter(pc.greater_equal(candidates["count"], min_frequency))
        tie = "first" if "first" in frequent.column_names else "token"
        top = frequent.take(pa.array(by_count_then(frequent, tie)[:most_common]))
        if ludwig:
            top = top.filter(pc.invert(pc.is_in(top["token"], pa.array(specials, pa.large_string()))))
        kept, kept_freq = top["token"].to_pylist(), top["count"].to_pylist()
    total = int(pc.sum(counts["count"]).as_py() or 0)
    idx2str = [*specials, *kept]
    freq = dict.fromkeys(specials, 0)
    if ludwig:
        freq.update(zip(specials, counts_of(all_counts, specials).tolist(), strict=True))
    else:
        freq[UNK] = total - int(sum(kept_freq))
    freq.update(zip(kept, kept_freq, strict=True))
    return {"idx2str": idx2str, "str2idx": {t: i for i, t in enumerate(idx2str)}, "str2freq": freq,
            "vocab_size": len(idx2str)}


def specials(start_stop: bool, symbols: str = "prepflow") -> list[str]:
    """The special symbols at the head of ``idx2str``: prepflow's (``<PAD>``, ``<UNK>``, optionally
    ``<START>``, ``<STOP>``) or Ludwig's (``<EOS>``, ``<SOS>``, ``<PAD>``, ``<UNK>``)."""
    if symbols == "ludwig":
        return list(LUDWIG_SPECIALS)
    return [PAD, UNK, START, STOP] if start_stop else [PAD, UNK]


# ---- the base of set, bag, sequence and text ------------------------------------------------------------

class TokenFeature(FeatureType):
    """A string column split into tokens and mapped through a fitted vocabulary.

    The fit accumulates exact integer counts (tokens, row lengths), so accumulators merge in any
    order to the same result and the vocabulary does not depend on the partitioning.
    """

    Preprocessing = TokenPreprocessing
    default_missing_strategy = "fill_with_const"
    default_fill_value = ""  # a missing value has no tokens (Ludwig fills '<UNK>', a spurious token)
    start_stop: ClassVar[bool] = False

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        return values.astype("string")

    def fill_value_from_config(self, value: Any) -> str:
        return "" if value is None else str(value)

    @property
    def specials(self) -> list[str]:
        return specials(self.uses_start_stop, self.symbols)

    @property
    def symbols(self) -> str:
        return getattr(self.options, "symbols", "prepflow")

    @property
    def uses_start_stop(self) -> bool:
        """Rows wrapped in start/stop symbols: ``start_stop: true``, and always with Ludwig's symbols."""
        return self.symbols == "ludwig" or bool(getattr(self.options, "start_stop", False))

    @property
    def pad_id(self) -> int:
        return self.specials.index(PAD)

    @property
    def unk_id(self) -> int:
        return self.specials.index(UNK)

    def standardized(self, values: pd.Series | pa.Array) -> pa.Array:
        return standardize(as_strings(values), lowercase=self.options.lowercase)

    def tokens(self, values: pd.Series | pa.Array) -> Tokens:
        return tokenize(self.standardized(values), self.options.tokenizer, self.options.pattern)

    def counts(self, tokens: Tokens, values: pd.Series) -> pa.Table:
        """Token counts of a fit partition; with Ludwig's symbols also each token's first occurrence, for
        Ludwig's order of equal counts (the vocab stage indexes ``values`` by input row position)."""
        if self.symbols == "ludwig":
            return count_tokens_first_seen(tokens, values.index.to_numpy())
        return count_tokens(tokens.flat)

    def create(self) -> dict:
        return {}  # merge_partials takes a field one side lacks from the other

    def add(self, acc: dict, values: pd.Series) -> dict:
        tokens = self.tokens(values)
        return self.merge(acc, {"counts": self.counts(tokens, values), "lengths": length_histogram(tokens.lengths)})

    def merge(self, a: dict, b: dict) -> dict:
        return merge_partials(a, b)

    def vocabulary(self, counts: pa.Table, most_common: int | None = None) -> dict:
        fixed = read_vocab_file(self.options.vocab_file) if self.options.vocab_file else None
        return build_vocab(counts, self.specials, most_common or self.options.most_common,
                           self.options.min_frequency, fixed, ludwig=self.symbols == "ludwig")

    def token_ids(self, tokens: Tokens, metadata: dict) -> np.ndarray:
        return lookup(tokens.flat, metadata["idx2str"], len(self.specials), self.unk_id)
