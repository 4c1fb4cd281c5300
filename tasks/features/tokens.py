"""Vectorized tokenizing, vocabularies and padding shared by set, bag, sequence, text and timeseries.

Everything here works on whole columns with pyarrow.compute string kernels and numpy; Python
loops run only per distinct token (at fit time) or per n-gram order, never per row.

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

Vocabulary convention (DESIGN section 3): ``idx2str`` starts with the special symbols ``<PAD>`` = 0,
``<UNK>`` = 1 and, when enabled, ``<START>`` = 2, ``<STOP>`` = 3; the fitted tokens follow by
frequency descending, ties broken by the token's string ascending. Data tokens spelled like a
special symbol are counted as ``<UNK>``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator, model_validator

from core.lazy import pandas as pd
from tasks.features.base import BasePreprocessing, FeatureType, by_count_then, merge_counts

PAD, UNK, START, STOP = "<PAD>", "<UNK>", "<START>", "<STOP>"
PAD_ID, UNK_ID, START_ID, STOP_ID = 0, 1, 2, 3
# Ludwig's special symbols and ids (ludwig/utils/strings_utils.py SpecialSymbol), for ``symbols: ludwig``
EOS, SOS = "<EOS>", "<SOS>"
LUDWIG_SPECIALS = [EOS, SOS, PAD, UNK]  # ids 0, 1, 2, 3

Tokenizer = Literal["space", "space_punct", "characters", "comma", "regex"]
TOKENIZERS = ("space", "space_punct", "characters", "comma", "regex")

# Exactly the characters for which Python's str.isspace() is true (checked over all of Unicode).
WHITESPACE_RE = r"[\t\n\x{0b}\f\r\x{1c}-\x{1f}\x{85}\p{Z}]"
# A character that is neither a word character (letter, number, _) nor whitespace.
PUNCT_RE = r"([^\p{L}\p{N}_\s\p{Z}])"
# Keras TextVectorization's DEFAULT_STRIP_REGEX.
KERAS_STRIP_RE = r"[!\"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~']"


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


# ---- encoding ----------------------------------------------------------------------------------------

def lookup(flat: pa.Array, idx2str: list[str], first_id: int, unk_id: int = UNK_ID) -> np.ndarray:
    """Token ids (int32): the position in ``idx2str`` of tokens from ``first_id`` on, else ``unk_id``."""
    if not len(flat):
        return np.zeros(0, np.int32)
    vocab = pa.array(idx2str[first_id:], type=flat.type)
    idx = np.asarray(pc.fill_null(pc.index_in(flat, value_set=vocab), -1), dtype=np.int32)
    return np.where(idx >= 0, idx + first_id, unk_id).astype(np.int32)


def lookup_code_points(cps: np.ndarray, idx2str: list[str], first_id: int, unk_id: int = UNK_ID) -> np.ndarray:
    """Character ids (int32) for code points, against a vocabulary of single characters."""
    if not len(cps):
        return np.zeros(0, np.int32)
    vocab = np.array([ord(c) for c in idx2str[first_id:]], dtype=np.int64)
    top = int(max(cps.max(), vocab.max(initial=0)))
    table = np.full(top + 1, unk_id, dtype=np.int32)  # at most 0x110000 entries (4.4 MB)
    table[vocab] = np.arange(first_id, first_id + len(vocab), dtype=np.int32)
    return table[cps]


def pad(ids: np.ndarray, offsets: np.ndarray, width: int, fill: Any = PAD_ID, dtype: Any = np.int32,
        padding: str = "right", truncation: str = "right", start: Any = None, stop: Any = None) -> np.ndarray:
    """Scatter ragged rows into an ``n x width`` array.

    Row i is ``[start] + ids[offsets[i]:offsets[i+1]] + [stop]`` (start/stop when not None); rows
    longer than ``width`` lose their tail (``truncation: right``) or head (``left``); shorter rows
    are padded with ``fill`` after (``padding: right``) or before (``left``) the values.

    The values land with one boolean-mask assignment: the mask's True cells, in row-major order,
    are exactly the kept values in row order.
    """
    n = len(offsets) - 1
    out = np.full((n, width), fill, dtype=dtype)
    if n == 0 or width == 0:
        return out
    lengths = np.diff(offsets)
    values = np.asarray(ids)
    if start is not None or stop is not None:  # insert the start/stop symbols into every row
        head, extra = int(start is not None), int(start is not None) + int(stop is not None)
        full_offsets = offsets + np.arange(n + 1, dtype=np.int64) * extra
        full = np.empty(len(values) + n * extra, dtype=values.dtype)
        full[np.arange(len(values), dtype=np.int64) + np.repeat(np.arange(n, dtype=np.int64) * extra + head,
                                                                  lengths)] = values
        if start is not None:
            full[full_offsets[:-1]] = start
        if stop is not None:
            full[full_offsets[1:] - 1] = stop
        values, offsets, lengths = full, full_offsets, lengths + extra
    kept = np.minimum(lengths, width)
    if (lengths > width).any():
        pos = np.arange(len(values), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
        if truncation == "left":
            pos -= np.repeat(lengths - kept, lengths)
            values = values[pos >= 0]
        else:
            values = values[pos < width]
    cols = np.arange(width, dtype=np.int64)
    mask = cols >= (width - kept)[:, None] if padding == "left" else cols < kept[:, None]
    out[mask] = values
    return out


def bag_matrix(ids: np.ndarray, offsets: np.ndarray, width: int, dtype: Any, binary: bool,
               weights: np.ndarray | None = None) -> np.ndarray:
    """``n x width``: per row, how often each id occurs (1 when ``binary``), times ``weights[id]`` if given.

    Only the non-zero cells are written (sort + run lengths; ``np.add.at`` is slow on large outputs).
    """
    n = len(offsets) - 1
    out = np.zeros((n, width), dtype=dtype)
    if not len(ids):
        return out
    parents = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    keys = np.sort(parents * width + ids)
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    cells = keys[starts]
    values = np.ones(len(cells), dtype=dtype) if binary else np.diff(np.append(starts, len(keys))).astype(dtype)
    if weights is not None:
        values = values * np.asarray(weights, dtype=dtype)[cells % width]
    out.reshape(-1)[cells] = values
    return out


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
