"""A stable 64-bit hash of strings, vectorized over Arrow string arrays.

Used where a category value must map to the same number in every process, on every machine and
for any partitioning: OOV buckets, ``hash_buckets`` and the vocabulary join of the encode stage.
Python's ``hash()`` is salted per process, so it is never used for this.

Definition (``HASH_NAME``, recorded in the metadata): FNV-1a (64-bit) over the value's UTF-8 bytes,
starting from FNV's offset basis XOR a fixed key, then murmur3's ``fmix64`` finalizer so that
``hash mod N`` depends on all bits. ``reference_hash`` is the same thing byte by byte in plain
Python; golden values are pinned in ``tests/unit/test_category_buckets.py``. Changing anything here
changes published ids: bump the category metadata's ``hash`` name and the stage code versions.

Vectorization: strings are sorted by length (descending) and cut into blocks; a block's bytes are
gathered once into a k x width matrix and step ``j`` updates the prefix of strings longer than
``j`` with column ``j`` (blocks holding strings longer than 64 bytes gather byte by byte instead),
so the work is about proportional to the total number of bytes. Callers hash each *distinct* value once (``pc.dictionary_encode``) and take.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HASH_NAME = "fnv1a64-fmix64-prepflow1"
_MASK = (1 << 64) - 1
_PRIME = 0x100000001B3
_BASIS = 0xCBF29CE484222325 ^ 0x70726570666C6F77  # FNV offset basis XOR b"prepflow"
_C1, _C2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53
_BLOCK = 1 << 16  # strings per block
_WIDE = 64  # blocks whose longest string is longer are hashed byte by byte


def reference_hash(value: str) -> int:
    """The hash of one string, one byte at a time (the specification ``hash_strings`` must match)."""
    h = _BASIS
    for byte in value.encode("utf-8"):
        h = ((h ^ byte) * _PRIME) & _MASK
    for c in (_C1, _C2, None):
        h ^= h >> 33
        if c is not None:
            h = (h * c) & _MASK
    return h


def _string_array(values) -> pa.Array:
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else pa.array(values, type=pa.string()) \
        if not isinstance(values, pa.Array) else values
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.string())
    if arr.null_count:
        raise ValueError("hash_strings: null values have no hash; fill or filter them first")
    return arr


def hash_strings(values) -> np.ndarray:
    """uint64 hash of every string in ``values`` (a pyarrow string array, or a sequence of str)."""
    arr = _string_array(values)
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offset_type = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], dtype=offset_type)[arr.offset: arr.offset + n + 1].astype(np.int64)
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    lengths = np.diff(offsets)
    uniform = lengths.min() == lengths.max()
    order = np.arange(n) if uniform else np.argsort(-lengths, kind="stable")
    starts = offsets[:-1][order]
    sorted_len = lengths[order]
    h = np.full(n, _BASIS, dtype=np.uint64)
    for a in range(0, n, _BLOCK):
        b = min(a + _BLOCK, n)
        width = int(sorted_len[a])
        if width == 0:
            break  # the rest are empty strings
        _fnv_block(h[a:b], data, starts[a:b], sorted_len[a:b], width)
    for c in (_C1, _C2, None):
        np.bitwise_xor(h, h >> np.uint64(33), out=h)
        if c is not None:
            np.multiply(h, np.uint64(c), out=h)
    out = np.empty(n, dtype=np.uint64)
    out[order] = h
    return out


def _fnv_block(h: np.ndarray, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int) -> None:
    """FNV-1a steps for one block of strings sorted by length (descending), updating ``h`` in place."""
    prime = np.uint64(_PRIME)
    # active[j]: how many strings are longer than j (a prefix, as the lengths are sorted descending)
    active = np.searchsorted(-lengths, -np.arange(width), side="left")
    if width <= _WIDE:  # one gather of a k x width byte matrix (rows contiguous), then column steps
        mat = data[np.minimum(starts[:, None] + np.arange(width), len(data) - 1)]
        for j in range(width):
            k = int(active[j])
            head = h[:k]
            np.bitwise_xor(head, mat[:k, j], out=head)
            np.multiply(head, prime, out=head)
        return
    for j in range(width):  # long strings: one byte of each active string per step
        k = int(active[j])
        head = h[:k]
        np.bitwise_xor(head, data[starts[:k] + j], out=head)
        np.multiply(head, prime, out=head)


def hash_column(values) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, hashes)`` for a column with repeated values: each distinct value is hashed once.

    ``codes`` (int64, -1 for null) index ``hashes`` (uint64, one per distinct non-null value).
    """
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    encoded = pc.dictionary_encode(arr)
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    codes = np.where(encoded.indices.is_valid().to_numpy(zero_copy_only=False), codes, -1).astype(np.int64)
    return codes, hash_strings(encoded.dictionary)


def buckets(hashes: np.ndarray, n: int) -> np.ndarray:
    """``hash mod n`` as int64 (0 <= bucket < n)."""
    return (hashes % np.uint64(n)).astype(np.int64)
