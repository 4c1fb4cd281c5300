"""Fingerprints and content keys.

Two kinds of hashing live here:

* ``fingerprint_*``: the hash of data bytes (a file streamed in chunks, never its path or mtime).
* ``stable_hash``: the hash of a JSON-like value. The encoding is typed, so ``1``, ``1.0``,
  ``"1"`` and ``True`` all hash differently, and dict key order does not matter.

A third, ``file_digest``, checks files: sha256 where the digest is published (the artifact's manifest),
XXH3-128 where it only guards prepflow's own stage cache against a file changed on disk (several times
sha256's speed, and a run writes far more cache bytes than artifact bytes).

Golden values for both are pinned in ``tests/unit/features/test_hashing.py``: changing this module
changes every cache key and artifact id, which must be a deliberate, versioned decision.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
from typing import Any, BinaryIO, Iterable

import xxhash

CHUNK = 1 << 20


def _encode(value: Any) -> Any:
    """Turn a value into a JSON structure that carries each scalar's type."""
    if value is None:
        return ["none"]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", str(value)]
    if isinstance(value, float):
        if math.isnan(value):
            return ["float", "nan"]
        return ["float", value.hex()]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, bytes):
        return ["bytes", value.hex()]
    if isinstance(value, (list, tuple)):
        return ["list", [_encode(v) for v in value]]
    if isinstance(value, dict):
        items = []
        for k in sorted(value, key=lambda k: (type(k).__name__, str(k))):
            items.append([_encode(k), _encode(value[k])])
        return ["dict", items]
    # numpy scalars and the like: hash by their Python value, typed.
    item = getattr(value, "item", None)
    if callable(item):
        return _encode(item())
    raise TypeError(f"cannot hash a value of type {type(value).__name__}: {value!r}")


def stable_hash(value: Any, length: int = 32) -> str:
    """Hex sha256 of a typed canonical encoding of ``value`` (first ``length`` hex digits)."""
    payload = json.dumps(_encode(value), separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(payload.encode("ascii")).hexdigest()[:length]


def hash_stream(stream: BinaryIO) -> str:
    """sha256 of everything read from a binary stream, in 1 MiB chunks."""
    digest = hashlib.sha256()
    while chunk := stream.read(CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def sha256_file(path: str) -> str:
    with open(path, "rb") as fh:
        return hash_stream(fh)


DIGESTS = ("sha256", "xxh3_128")  # what file_digest computes; the name is the key a listing records it under


def file_digest(path: str, algorithm: str) -> str:
    """Hex digest of a file's bytes: ``sha256`` or ``xxh3_128`` (XXH3's 128-bit hash, over the mapped
    file: no copy of its bytes)."""
    if algorithm == "sha256":
        return sha256_file(path)
    if algorithm != "xxh3_128":
        raise ValueError(f"unknown file digest {algorithm!r}; expected one of {DIGESTS}")
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return xxhash.xxh3_128_hexdigest(b"")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return xxhash.xxh3_128_hexdigest(mapped)


def combine(parts: Iterable[str]) -> str:
    """Hash an ordered list of hex digests into one."""
    return stable_hash(list(parts))
