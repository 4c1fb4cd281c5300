"""A stable 64-bit hash of strings: XXH3-64 (the ``xxhash`` library) over the UTF-8 bytes, seeded.

Used where a category value must map to the same number in every process, on every machine and
for any partitioning: OOV buckets, ``hash_buckets``, the uniqueness check of the data-quality gates, and
(publishing nothing) the vocabulary's hash index and the counts' exchange. Python's ``hash()`` is salted per
process, so it is never used for this.

Definition (``HASH_NAME``, recorded in the category metadata as ``hash``): ``XXH3_64bits_withSeed``
of the value's UTF-8 bytes with seed ``SEED`` (the bytes ``b"prepflow"`` read big-endian); a bucket
is ``hash mod N``. XXH3 is specified and implemented outside Python too (C, Rust, Java, Go), so a
serving system in another language can give the same ids. Artifacts written before this hash
(``hash: fnv1a64-fmix64-prepflow1``, a hand-written FNV-1a) are recognised by that name and refused
with a message to rebuild them (``check_hash_name``). Changing anything here changes published
ids: give it a new ``HASH_NAME``.

Cost: one C call per value (``map`` over the values as bytes, no Python bytecode per value) plus the
conversion to bytes; callers hash each *distinct* value once
(``pc.dictionary_encode``, ``hash_column``) and take.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from core.errors import DataError

SEED = 0x70726570666C6F77  # b"prepflow"
HASH_NAME = "xxh3_64-seed-70726570666c6f77"
OLD_HASH_NAMES = {"fnv1a64-fmix64-prepflow1": "prepflow's FNV-1a string hash (before xxh3_64)"}


def reference_hash(value: str) -> int:
    """The hash of one string (what ``hash_strings`` computes for each value)."""
    return xxhash.xxh3_64_intdigest(value.encode("utf-8"), SEED)


def string_array(values) -> pa.Array:
    """``values`` as one string or large_string array without nulls (what the hashes read)."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else pa.array(values, type=pa.string()) \
        if not isinstance(values, pa.Array) else values
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.string())
    if arr.null_count:
        raise ValueError("string hashes: null values have no hash; fill or filter them first")
    return arr


def hash_strings(values) -> np.ndarray:
    """uint64 hash of every string in ``values`` (a pyarrow string array, or a sequence of str)."""
    arr = string_array(values)
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    binary = pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary()
    data = arr.cast(binary).to_numpy(zero_copy_only=False)  # bytes objects: what xxhash hashes
    return np.fromiter(map(xxhash.xxh3_64_intdigest, data, itertools.repeat(SEED, n)), dtype=np.uint64, count=n)


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


def check_hash_name(name: str | None, where: str) -> None:
    """Refuse metadata whose ids were made by another string hash (``where`` names the feature)."""
    if name is None or name == HASH_NAME:
        return
    known = OLD_HASH_NAMES.get(name)
    what = f"{name!r} ({known})" if known else repr(name)
    raise DataError(f"{where}: its hash bucket ids were made with the string hash {what}; this prepflow hashes "
                    f"with {HASH_NAME!r}, which gives other ids: rebuild the artifact (prepflow run) to encode it")
