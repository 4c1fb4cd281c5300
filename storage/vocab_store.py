"""Vocabularies too large for ``training_set_metadata.json``, stored as Parquet beside it.

File layout: ``vocab/<feature>.parquet`` with columns ``value`` (string) and ``count`` (int64);
row ``i`` is id ``i`` (so ``value`` is Ludwig's ``idx2str`` and ``count`` its ``str2freq``). The
metadata references it as ``{"vocab_file": {"path": ..., "sha256": ..., "rows": ...}}``, relative
to the folder of the metadata file, so an artifact can be moved; ``resolve`` adds the absolute
``vocab_path`` that encoding reads (never written back into an artifact).

Encoding joins partitions against the file without a Python dict: ``lookup`` loads the values once
per process (checking the sha256) and ``VocabLookup.positions`` finds a partition's distinct values, exact
by construction, in one of two ways:

- a query of at least 1/``SCAN_RATIO`` of the vocabulary's size: pyarrow's ``index_in``, probing every
  vocabulary value into a hash table of the query's values. Its cost grows with the vocabulary, per
  partition: 2M rows against a 2M-value vocabulary cost 0.9 CPU s in 8 partitions and 3.2-3.9 s in 80
  (1.1 s with the index below);
- a smaller query: a hash index built once per process on the first such query (the values' 64-bit
  ``string_hash``, sorted), each query value hashed, binary-searched and confirmed by comparing the
  strings; values of the vocabulary that share a hash are resolved exactly among themselves. A partition
  then costs what its own distinct values cost, whatever the vocabulary's size: at Criteo 1TB (up to ~4e7
  values per column, ~16,800 partitions of 262k rows) the scan would probe ~7e11 values per column.
  ``benchmarks/vocab_lookup.py`` (10.5M rows in 40 partitions, CPU s per column, the index's build
  included): 2.1M values 2.8 vs 3.6 s for the scan alone, 8M values 6.5 vs 10.9 s; 1M values in 8
  partitions 0.56 vs 0.55 s (``benchmarks/RESULTS.md``). The index holds 16 bytes per value.

``index_in(query, value_set=vocabulary)`` would rebuild the vocabulary's table for every partition.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from core.errors import IntegrityError
from storage import string_hash

ROW_GROUP_ROWS = 1 << 20
SCAN_RATIO = 16  # a query of fewer than 1/16 of the vocabulary's values is looked up by hash (VocabLookup)


def write(path: Path, values: pa.Array, counts: np.ndarray) -> dict:
    """Write ``values``/``counts`` (in id order) and return ``{"sha256", "rows"}`` (deterministic bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"value": values.cast(pa.string()), "count": pa.array(np.asarray(counts, dtype=np.int64))})
    pq.write_table(table, path, compression="zstd", row_group_size=ROW_GROUP_ROWS, write_statistics=False)
    return {"sha256": sha256_of(path), "rows": table.num_rows}


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def files(metadata: dict) -> list[str]:
    """The vocabulary files (relative paths) that a metadata dict references."""
    return sorted(m["vocab_file"]["path"] for m in metadata.values() if isinstance(m, dict) and "vocab_file" in m)


def resolve(metadata: dict, folder: str | Path) -> dict:
    """A copy of ``metadata`` whose external vocabularies carry ``vocab_path`` (absolute, under ``folder``)."""
    out = dict(metadata)
    for name, meta in metadata.items():
        if isinstance(meta, dict) and "vocab_file" in meta:
            out[name] = {**meta, "vocab_path": str(Path(folder).resolve() / meta["vocab_file"]["path"])}
    return out


def read(path: str | Path, sha256: str | None = None) -> pa.Table:
    """The whole vocabulary table; with ``sha256`` the file must match it."""
    if sha256 is not None and sha256_of(Path(path)) != sha256:
        raise IntegrityError(f"{path}: vocabulary file does not match the sha256 recorded in the metadata")
    return pq.read_table(path)


class VocabLookup:
    """value -> row of a vocabulary (``values``, distinct); ``first`` skips reserved rows."""

    def __init__(self, values: pa.Array, first: int = 0):
        self.first = first
        self.values = values.slice(first).combine_chunks() if isinstance(values, pa.ChunkedArray) \
            else values.slice(first)
        self._index: _HashIndex | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.values)

    def positions(self, query: pa.Array) -> np.ndarray:
        """Row (counting from ``first``) of each ``query`` value, -1 where it is absent. ``query`` holds
        distinct values (a dictionary's)."""
        if len(self.values) == 0 or len(query) == 0:
            return np.full(len(query), -1, dtype=np.int64)
        if len(query) * SCAN_RATIO >= len(self.values):
            return self._scan(query)
        with self._lock:  # built once, on the first small query (a worker may run tasks in threads)
            if self._index is None:
                self._index = _HashIndex(self.values)
        return self._index.positions(self.values, query)

    def _scan(self, query: pa.Array) -> np.ndarray:
        """pyarrow's ``index_in`` of every vocabulary row into a hash table of the query's values."""
        out = np.full(len(query), -1, dtype=np.int64)
        at = pc.index_in(self.values, value_set=query)  # per vocabulary row: its position in query, or null
        rows = pc.indices_nonzero(at.is_valid())
        out[pc.take(at, rows).to_numpy(zero_copy_only=False)] = rows.to_numpy(zero_copy_only=False)
        return out


class _HashIndex:
    """The vocabulary's 64-bit string hashes (``string_hash``), sorted, with each one's row: a query is
    hashed and binary-searched, and every hit confirmed by comparing the strings. Hashes that two or more
    vocabulary values share (about V^2 / 2^65 pairs: ~4e-5 at 4e7 values) are resolved exactly among
    those values."""

    def __init__(self, values: pa.Array):
        hashes = string_hash.hash_strings(values)
        order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[order]
        self.rows = order
        repeated = self.hashes[1:] == self.hashes[:-1]
        self.shared = np.unique(self.hashes[1:][repeated])
        in_group = np.isin(self.hashes, self.shared)  # the rows of the values that share a hash (rarely any)
        self.shared_rows = self.rows[in_group]

    def positions(self, values: pa.Array, query: pa.Array) -> np.ndarray:
        if query.type != values.type:
            query = query.cast(values.type)
        out = np.full(len(query), -1, dtype=np.int64)
        qh = string_hash.hash_strings(query)
        order = np.argsort(qh)  # sorted keys: searchsorted walks the table in order (~3x fewer cache misses)
        at = np.empty(len(qh), dtype=np.int64)
        at[order] = np.minimum(np.searchsorted(self.hashes, qh[order]), len(self.hashes) - 1)
        hit = np.flatnonzero(self.hashes[at] == qh)
        rows = self.rows[at[hit]]
        same = pc.equal(values.take(pa.array(rows)), query.take(pa.array(hit))).to_numpy(zero_copy_only=False)
        out[hit[same]] = rows[same]
        if len(self.shared):
            ambiguous = np.flatnonzero(np.isin(qh, self.shared))
            if len(ambiguous):
                group = self.shared_rows
                at_group = pc.index_in(query.take(pa.array(ambiguous)), value_set=values.take(pa.array(group)))
                found = at_group.is_valid().to_numpy(zero_copy_only=False)
                out[ambiguous] = np.where(found, group[at_group.fill_null(0).to_numpy(zero_copy_only=False)], -1)
        return out


_CACHE: dict[tuple[str, str, int], VocabLookup] = {}
_LOCK = threading.Lock()


def lookup(path: str, sha256: str, first: int) -> VocabLookup:
    """The lookup for a vocabulary file, built once per process (and per ``first``)."""
    key = (str(path), sha256, first)
    with _LOCK:
        found = _CACHE.get(key)
        if found is None:
            found = VocabLookup(read(path, sha256).column("value"), first)
            if len(_CACHE) >= 64:
                _CACHE.clear()
            _CACHE[key] = found
        return found
