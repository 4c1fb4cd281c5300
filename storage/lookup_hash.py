"""A 64-bit hash of strings for prepflow's own lookups, computed by NumPy over a whole Arrow array at once.

Two places need each distinct category value of a partition to map to a number. Neither publishes it:

- the vocabulary's hash index (``storage.vocab_store``): binary-searched, each hit confirmed by comparing
  the strings;
- the reducer of the counts' exchange (``tasks.vocab.category.bucket_of``): the vocabulary's order is
  global (count, then value), so it does not depend on which reducer merged a value.

So the hash decides only where the work goes, never a result, and it can be faster than the published one.
``storage.string_hash`` is XXH3, the contract for OOV and hash buckets; there ``xxhash`` is called once per
value, ~160-210 ns a value with the conversion to Python ``bytes``. Here the Arrow buffers are read as
NumPy arrays, ~46 ns a value for 8-byte strings (Criteo's ids) and ~27 ns for shorter ones
(``benchmarks/RESULTS.md``, issue 19, eighteenth pass).

Definition (``NAME``; a stored index carries it in its file name, so an index built by another definition is
never read). All arithmetic is on unsigned 64-bit integers, modulo 2^64:

- ``h = (len(value) * M) ^ SEED``, the length in UTF-8 bytes; ``M = 0x9E3779B97F4A7C15``, ``SEED`` the bytes
  ``b"prepflow"`` read big-endian (as ``storage.string_hash``'s).
- For each 8-byte word of the value's UTF-8 bytes, read little-endian, with the bytes past the value's end
  as zeros: ``h = fmix64((h ^ word) * M)``.
- The hash is ``fmix64(h)``. ``fmix64`` is MurmurHash3's finalizer.

``reference`` computes it for one string in plain Python.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from storage.string_hash import SEED, string_array

NAME = "words64-fmix64-v1"

_M = 0x9E3779B97F4A7C15
_F1, _F2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53
_MASK64 = (1 << 64) - 1
# the low ``i`` bytes of a word (i = 0..8): a value's last word keeps only its own bytes
_KEEP = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [_MASK64], dtype=np.uint64)


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * _F1) & _MASK64
    h ^= h >> 33
    h = (h * _F2) & _MASK64
    return h ^ (h >> 33)


def reference(value: str) -> int:
    """The hash of one string, computed word by word (what ``hashes`` computes for each value)."""
    data = value.encode("utf-8")
    h = ((len(data) * _M) & _MASK64) ^ SEED
    for at in range(0, len(data), 8):
        word = int.from_bytes(data[at:at + 8], "little")
        h = _fmix(((h ^ word) * _M) & _MASK64)
    return _fmix(h)


def _fmix_array(h: np.ndarray) -> np.ndarray:
    """``fmix64`` of every element, in place."""
    h ^= h >> np.uint64(33)
    h *= np.uint64(_F1)
    h ^= h >> np.uint64(33)
    h *= np.uint64(_F2)
    h ^= h >> np.uint64(33)
    return h


def _mix_word(h: np.ndarray, word: np.ndarray) -> np.ndarray:
    """``h = fmix64((h ^ word) * M)`` of every element, in place."""
    h ^= word
    h *= np.uint64(_M)
    return _fmix_array(h)


def hashes(values) -> np.ndarray:
    """uint64 hash of every string in ``values``: a pyarrow string or large_string array (chunked or not, sliced
    or not), or a sequence of str. Null values have no hash (``ValueError``)."""
    arr = string_array(values)
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offset_type = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], dtype=offset_type, count=arr.offset + n + 1)[arr.offset:]
    first = int(offsets[0])
    offsets = offsets.astype(np.int64) - first  # from the first value's first byte
    starts, lengths, size = offsets[:-1], np.diff(offsets), int(offsets[-1])
    # the values' bytes, then 8 zero bytes, so that an 8-byte read at any value's start stays inside
    padded = np.zeros(size + 8, dtype=np.uint8)
    if size:
        padded[:size] = np.frombuffer(arr.buffers()[2], dtype=np.uint8, count=first + size)[first:]
    # an unaligned little-endian 8-byte word at every byte offset (a view: no copy)
    words = np.ndarray(shape=(size + 1,), dtype="<u8", buffer=padded, strides=(1,))
    shortest, longest = int(lengths.min()), int(lengths.max())
    with np.errstate(over="ignore"):
        h = lengths.astype(np.uint64) * np.uint64(_M)
        h ^= np.uint64(SEED)
        for at in range(0, longest, 8):  # word by word, for the values that have a word there
            if at < shortest:  # every value has one: in place, no gather of rows
                word = words[starts + at]
                if at + 8 > shortest:  # some value ends inside this word: keep only its own bytes
                    word &= _KEEP[np.minimum(lengths - at, 8)]
                _mix_word(h, word)
            else:
                rows = np.flatnonzero(lengths > at)
                h[rows] = _mix_word(h[rows], words[starts[rows] + at] & _KEEP[np.minimum(lengths[rows] - at, 8)])
        return _fmix_array(h)
