"""Vectorized string standardization and tokenizing, shared by set, bag, sequence, text and timeseries.

Everything here works on whole columns with pyarrow.compute string kernels and numpy; Python
loops run only per n-gram order, never per row.

A tokenized column is a ``Tokens``: ``flat`` (a pyarrow string array holding every token, row
after row) and ``offsets`` (int64, n + 1): the tokens of row i are ``flat[offsets[i]:offsets[i+1]]``.
Empty tokens are dropped and a null row has no tokens.

Tokenizers (the ``tokenizer`` option):

=============  ==================================================================================
space          split on whitespace, exactly like Python's ``str.split()``: ``"a  b\\tc"`` -> a, b, c
space_punct    words and single punctuation characters, like Ludwig's ``space_punct`` and
               Python's ``re.findall(r"\\w+|[^\\w\\s]", s)``: ``"hi, you!"`` -> hi , you !
               (a word character is a Unicode letter, number or ``_``)
characters     one token per character, whitespace included (Ludwig's ``characters``)
comma          split on ``,``; whitespace around each token is stripped
regex          split on every match of ``pattern`` (RE2 syntax, e.g. ``"[;|]"``)
=============  ==================================================================================

Standardization runs before tokenizing: ``lowercase`` (Unicode lower case) and, for text,
Keras' ``lower_and_strip_punctuation`` (removes the ASCII punctuation of Keras' default regex).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.lazy import pandas as pd

Tokenizer = Literal["space", "space_punct", "characters", "comma", "regex"]
TOKENIZERS = ("space", "space_punct", "characters", "comma", "regex")

# Exactly the characters for which Python's str.isspace() is true (checked over all of Unicode).
WHITESPACE_RE = r"[\t\n\x{0b}\f\r\x{1c}-\x{1f}\x{85}\p{Z}]"
# A character that is neither a word character (letter, number, _) nor whitespace.
PUNCT_RE = r"([^\p{L}\p{N}_\s\p{Z}])"
# Keras TextVectorization's DEFAULT_STRIP_REGEX.
KERAS_STRIP_RE = r"[!\"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~']"


# ---- string columns ---------------------------------------------------------------------------------

def as_strings(values: pd.Series | pa.Array | list) -> pa.Array:
    """A column as one pyarrow (large) string array with nulls replaced by ``""``."""
    if isinstance(values, pa.ChunkedArray):
        arr = values.combine_chunks()
    elif isinstance(values, pa.Array):
        arr = values
    elif isinstance(values, pd.Series):
        arr = pa.array(values.astype("string"), from_pandas=True) if len(values) else pa.array([], pa.string())
    else:
        arr = pa.array(values, type=pa.string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pc.cast(arr, pa.string())
    if arr.null_count:
        arr = pc.fill_null(arr, "")
    return arr


def string_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets as int64 numpy, n + 1, starting at 0; the UTF-8 bytes) of a null-free string array."""
    n = len(arr)
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=width)[arr.offset: arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    data = data[offsets[0]: offsets[-1]] if n else data[:0]
    return offsets - offsets[0] if n else np.zeros(1, np.int64), data


def standardize(arr: pa.Array, lowercase: bool = False, strip_punctuation: bool = False) -> pa.Array:
    if lowercase:
        arr = pc.utf8_lower(arr)
    if strip_punctuation:
        arr = pc.replace_substring_regex(arr, KERAS_STRIP_RE, "")
    return arr


# ---- tokens ------------------------------------------------------------------------------------------

@dataclass
class Tokens:
    flat: pa.Array  # every token, row after row
    offsets: np.ndarray  # int64, n + 1

    @property
    def n(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def parents(self) -> np.ndarray:
        """The row of every token (int64)."""
        return np.repeat(np.arange(self.n, dtype=np.int64), self.lengths)

    def row(self, i: int) -> list[str]:
        return self.flat[int(self.offsets[i]): int(self.offsets[i + 1])].to_pylist()


def _from_lists(lists: pa.Array) -> Tokens:
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    offsets = np.asarray(lists.offsets, dtype=np.int64)
    flat = lists.flatten()
    return Tokens(flat, offsets - offsets[0])


def drop_empty(tokens: Tokens) -> Tokens:
    tok_offsets, _ = string_buffers(tokens.flat)
    keep = np.diff(tok_offsets) > 0
    if keep.all():
        return tokens
    kept_before = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    return Tokens(tokens.flat.filter(pa.array(keep)), kept_before[tokens.offsets])


def characters(arr: pa.Array) -> Tokens:
    """One token per Unicode character; the tokens share ``arr``'s data buffer (no copy)."""
    offsets, data = string_buffers(arr)
    starts = np.flatnonzero((data & 0xC0) != 0x80)  # bytes that begin a UTF-8 character
    row_offsets = np.searchsorted(starts, offsets)
    ends = np.append(starts, len(data)).astype(np.int64)
    flat = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(ends), pa.py_buffer(data))
    return Tokens(flat, row_offsets.astype(np.int64))


def code_points(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(Unicode code point of every character as int64, offsets n + 1): UTF-8 decoded with numpy."""
    offsets, data = string_buffers(arr)
    if not len(data):
        return np.zeros(0, np.int64), np.zeros(len(offsets), np.int64)
    lead_mask = (data & 0xC0) != 0x80
    if lead_mask.all():  # ASCII
        return data.astype(np.int64), offsets
    starts = np.flatnonzero(lead_mask)
    padded = np.concatenate([data, np.zeros(3, np.uint8)]).astype(np.int64)
    lead = padded[starts]
    b1, b2, b3 = (padded[starts + k] & 0x3F for k in (1, 2, 3))
    cp = np.where(lead < 0x80, lead,
                  np.where(lead < 0xE0, ((lead & 0x1F) << 6) | b1,
                           np.where(lead < 0xF0, ((lead & 0x0F) << 12) | (b1 << 6) | b2,
                                    ((lead & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3)))
    return cp, np.searchsorted(starts, offsets).astype(np.int64)


def split_whitespace(arr: pa.Array) -> pa.Array:
    """Split on Python's ``str.split()`` separators (every character that ``str.isspace()``).

    ``pc.ascii_split_whitespace`` splits on ``\t\n\v\f\r`` and space; any other whitespace is first
    replaced by a space. (``pc.utf8_split_whitespace`` is not used: in pyarrow 26 it sometimes keeps
    a trailing multi-byte space such as U+00A0 in the token when the input came from
    ``utf8_lower``; the property tests found it.)
    """
    _, data = string_buffers(arr)
    if len(data) and (data.max() >= 0x80 or ((data - np.uint8(0x1C)) < 4).any()):
        arr = pc.replace_substring_regex(arr, WHITESPACE_RE, " ")
    return pc.ascii_split_whitespace(arr)


def tokenize(arr: pa.Array, tokenizer: str, pattern: str | None = None) -> Tokens:
    """Split a null-free string array into tokens (see the module docstring)."""
    if tokenizer == "characters":
        return characters(arr)
    if tokenizer == "space":
        lists = split_whitespace(arr)
    elif tokenizer == "ascii_whitespace":  # Keras TextVectorization's split="whitespace" (tf.strings.split)
        lists = pc.ascii_split_whitespace(arr)
    elif tokenizer == "space_punct":
        lists = split_whitespace(pc.replace_substring_regex(arr, PUNCT_RE, r" \1 "))
    elif tokenizer == "comma":
        tokens = _from_lists(pc.split_pattern(arr, ","))
        trimmed = pc.replace_substring_regex(tokens.flat, f"^{WHITESPACE_RE}+|{WHITESPACE_RE}+$", "")
        return drop_empty(Tokens(trimmed, tokens.offsets))
    elif tokenizer == "regex":
        lists = pc.split_pattern_regex(arr, pattern)
    else:
        raise ValueError(f"unknown tokenizer {tokenizer!r}; expected one of {', '.join(TOKENIZERS)}")
    return drop_empty(_from_lists(lists))


def ngrams(tokens: Tokens, n_max: int, separator: str = " ") -> Tokens:
    """Every row's 1-grams, then its 2-grams, ... up to ``n_max``-grams (Keras' order)."""
    if n_max <= 1:
        return tokens
    lengths = tokens.lengths
    parents = tokens.parents()
    pos = np.arange(len(tokens.flat), dtype=np.int64) - tokens.offsets[:-1][parents]
    pieces, dest = [tokens.flat], []
    per_row = [lengths]
    for k in range(2, n_max + 1):
        per_row.append(np.maximum(lengths - k + 1, 0))
    new_offsets = np.concatenate([[0], np.cumsum(np.sum(per_row, axis=0), dtype=np.int64)])
    base = np.zeros(tokens.n, dtype=np.int64)
    dest.append(new_offsets[:-1][parents] + pos)
    for k in range(2, n_max + 1):
        base += per_row[k - 2]
        first = np.flatnonzero(pos <= lengths[parents] - k)
        grams = tokens.flat.take(pa.array(first))
        sep = pa.scalar(separator, type=tokens.flat.type)
        for j in range(1, k):
            grams = pc.binary_join_element_wise(grams, tokens.flat.take(pa.array(first + j)), sep)
        pieces.append(grams)
        dest.append(new_offsets[:-1][parents[first]] + base[parents[first]] + pos[first])
    combined = pa.concat_arrays([p.cast(pa.large_string()) for p in pieces])
    order = np.empty(len(combined), dtype=np.int64)
    order[np.concatenate(dest)] = np.arange(len(combined), dtype=np.int64)
    return Tokens(combined.take(pa.array(order)), new_offsets)
