"""Token ids: the special symbols at the head of every token vocabulary and their ids, and encoding
tokens against a fitted vocabulary: token and character ids by lookup, ragged rows padded or truncated
into a fixed-width matrix, and bag-of-ids count matrices; whole columns at a time."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PAD, UNK, START, STOP = "<PAD>", "<UNK>", "<START>", "<STOP>"
PAD_ID, UNK_ID, START_ID, STOP_ID = 0, 1, 2, 3
# Ludwig's special symbols and ids (ludwig/utils/strings_utils.py SpecialSymbol), for ``symbols: ludwig``
EOS, SOS = "<EOS>", "<SOS>"
LUDWIG_SPECIALS = [EOS, SOS, PAD, UNK]  # ids 0, 1, 2, 3


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
