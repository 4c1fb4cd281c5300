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
  vocabulary value into a hash table of the query's values. Its cost grows with the vocabulary's size,
  per partition;
- a smaller query: a hash index built once per process on the first such query (the values' 64-bit
  ``string_hash``, sorted), each query value hashed, binary-searched and confirmed by comparing the
  strings; values of the vocabulary that share a hash are resolved exactly among themselves. A partition
  then costs what its own distinct values cost, whatever the vocabulary's size: at Criteo 1TB (up to ~4e7
  values per column, ~16,800 partitions of 262k rows) the scan would probe ~7e11 values per column.
  Building the index costs about two scans (``benchmarks/lookup_paths.py``); the index holds 16 bytes per
  value. For a vocabulary that a partition's query is expected to be small against (``index_pays``: more
  than ``SCAN_RATIO`` times the distinct values a partition of random rows would hold, from the vocabulary's
  counts), the vocab stage stores the index beside the file once (``write_index``,
  ``<file>.hash-index-<first>.<hash name>.npy``) and ``lookup`` memory-maps it: no process builds it again,
  and the processes of one machine share its pages.

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
from storage.safe_paths import listed_file, under

ROW_GROUP_ROWS = 1 << 20
SCAN_RATIO = 2  # a query of fewer than half the vocabulary's values is looked up by hash (VocabLookup)
# ... unless the process makes at most this many lookups and no stored index is there to map: building the index
# costs about as much as several scans (``benchmarks/lookup_paths.py``), so an apply of one day's file (a few
# partitions) scans
SCAN_QUERIES = 8


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


def resolve(metadata: dict, folder: str | Path, files: dict | None = None) -> dict:
    """A copy of ``metadata`` whose external vocabularies carry ``vocab_path`` (absolute, under ``folder``).
    ``files`` (a published artifact's manifest listing): each vocabulary must also be listed there, of its
    listed size (``storage.safe_paths.listed_file``)."""
    out = dict(metadata)
    for name, meta in metadata.items():
        if isinstance(meta, dict) and "vocab_file" in meta:
            rel = (meta["vocab_file"] or {}).get("path") if isinstance(meta["vocab_file"], dict) else None
            path = under(Path(folder).resolve(), rel, f"{Path(folder) / 'training_set_metadata.json'}: "
                                                       f"feature '{name}' vocab_file")
            if files is not None:
                path = listed_file(Path(folder).resolve(), files, rel)
            out[name] = {**meta, "vocab_path": str(path)}
    return out


def read(path: str | Path, sha256: str | None = None) -> pa.Table:
    """The whole vocabulary table; with ``sha256`` the file must match it."""
    if sha256 is not None and sha256_of(Path(path)) != sha256:
        raise IntegrityError(f"{path}: vocabulary file does not match the sha256 recorded in the metadata")
    return pq.read_table(path)


class VocabLookup:
    """value -> row of a vocabulary (``values``, distinct); ``first`` skips reserved rows; ``index_file``: the
    hash index ``write_index`` stored for these values and ``first`` (mapped instead of built); ``queries``: how
    many lookups the process is expected to make (None: many), so that a few scan rather than build an index."""

    def __init__(self, values: pa.Array, first: int = 0, index_file: Path | None = None, queries: int | None = None):
        self.first = first
        self.queries = queries
        self.values = values.slice(first).combine_chunks() if isinstance(values, pa.ChunkedArray) \
            else values.slice(first)
        self._index: _HashIndex | None = None
        self._index_file = index_file
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.values)

    def positions(self, query: pa.Array) -> np.ndarray:
        """Row (counting from ``first``) of each ``query`` value, -1 where it is absent. ``query`` holds
        distinct values (a dictionary's)."""
        if len(self.values) == 0 or len(query) == 0:
            return np.full(len(query), -1, dtype=np.int64)
        if len(query) * SCAN_RATIO >= len(self.values) or self._few_queries():
            return self._scan(query)
        with self._lock:  # built (or mapped) once, on the first small query (a worker may run tasks in threads)
            if self._index is None:
                self._index = _HashIndex.load(self._index_file, len(self.values)) if self._index_file \
                    else _HashIndex.build(self.values)
        return self._index.positions(self.values, query)

    def _few_queries(self) -> bool:
        """Whether scanning costs less than building an index: few lookups expected, none built or stored."""
        return (self.queries is not None and self.queries <= SCAN_QUERIES and self._index is None
                and self._index_file is None)

    def _scan(self, query: pa.Array) -> np.ndarray:
        """pyarrow's ``index_in`` of every vocabulary row into a hash table of the query's values."""
        out = np.full(len(query), -1, dtype=np.int64)
        at = pc.index_in(self.values, value_set=query)  # per vocabulary row: its position in query, or null
        rows = pc.indices_nonzero(at.is_valid())
        out[pc.take(at, rows).to_numpy(zero_copy_only=False)] = rows.to_numpy(zero_copy_only=False)
        return out


class _HashIndex:
    """The vocabulary's 64-bit string hashes (``string_hash``), sorted, with each one's row: a query is hashed and
    binary-searched, and every hit confirmed by comparing the strings. Hashes that two or more vocabulary values
    share (about V^2 / 2^65 pairs: ~4e-5 at 4e7 values) are resolved exactly among those values."""

    def __init__(self, hashes: np.ndarray, rows: np.ndarray):
        self.hashes = hashes
        self.rows = rows
        repeated = hashes[1:] == hashes[:-1]
        self.shared = np.unique(hashes[1:][repeated])
        # the rows of the values that share a hash (rarely any)
        self.shared_rows = rows[np.isin(hashes, self.shared)] if len(self.shared) else rows[:0]

    @classmethod
    def build(cls, values: pa.Array) -> _HashIndex:
        hashes = string_hash.hash_strings(values)
        order = np.argsort(hashes, kind="stable")
        return cls(hashes[order], order)

    def save(self, path: Path) -> None:
        """One ``(2, V)`` uint64 ``.npy``: the sorted hashes, then their rows."""
        np.save(path, np.stack([self.hashes, self.rows.astype(np.uint64)]))

    @classmethod
    def load(cls, path: Path, n: int) -> _HashIndex:
        """The index ``save`` wrote for ``n`` values, memory-mapped (the pages are shared by the processes of
        one machine); an index whose shape, order or rows do not fit them is refused, naming the file."""
        try:
            stored = np.load(path, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise IntegrityError(f"{path}: unreadable vocabulary hash index ({exc})") from exc
        if stored.dtype != np.uint64 or stored.shape != (2, n):
            raise IntegrityError(f"{path}: vocabulary hash index of shape {stored.shape} ({stored.dtype}), "
                                 f"expected (2, {n}) uint64 for its vocabulary")
        hashes, rows = stored[0], stored[1].view(np.int64)
        if n and (not bool(np.all(hashes[1:] >= hashes[:-1])) or int(rows.min()) < 0 or int(rows.max()) >= n):
            raise IntegrityError(f"{path}: vocabulary hash index is damaged (hashes out of order or rows out of "
                                 f"range for {n} values)")
        return cls(hashes, rows)

    def positions(self, values: pa.Array, query: pa.Array) -> np.ndarray:
        if query.type != values.type:
            query = query.cast(values.type)
        out = np.full(len(query), -1, dtype=np.int64)
        qh = string_hash.hash_strings(query)
        order = np.argsort(qh)  # sorted keys: searchsorted walks the table in order (far fewer cache misses)
        at = np.empty(len(qh), dtype=np.int64)
        at[order] = np.minimum(np.searchsorted(self.hashes, qh[order]), len(self.hashes) - 1)
        hit = np.flatnonzero(self.hashes[at] == qh)
        rows = np.asarray(self.rows[at[hit]])
        same = pc.equal(values.take(pa.array(rows)), query.take(pa.array(hit))).to_numpy(zero_copy_only=False)
        out[hit[same]] = rows[same]
        if len(self.shared):
            ambiguous = np.flatnonzero(np.isin(qh, self.shared))
            if len(ambiguous):
                group = np.asarray(self.shared_rows)
                at_group = pc.index_in(query.take(pa.array(ambiguous)), value_set=values.take(pa.array(group)))
                found = at_group.is_valid().to_numpy(zero_copy_only=False)
                out[ambiguous] = np.where(found, group[at_group.fill_null(0).to_numpy(zero_copy_only=False)], -1)
        return out


def index_path(path: str | Path, first: int) -> Path:
    """Where ``write_index`` stores the hash index of a vocabulary file's rows from ``first`` on. The name carries
    the hash's (``string_hash.HASH_NAME``): an index that another hash built, in a cache entry written by an
    earlier version, is never read (its hashes would find nothing); the lookup then builds its own."""
    path = Path(path)
    return path.with_name(f"{path.name}.hash-index-{first}.{string_hash.HASH_NAME}.npy")


def expected_distinct(counts: np.ndarray, rows: int) -> float:
    """The expected number of distinct values in ``rows`` rows drawn at random from a table in which value ``i``
    has frequency ``counts[i] / counts.sum()``: the sum over values of ``1 - (1 - f) ** rows``, as
    ``1 - exp(-rows * f)`` (at most ``rows`` and at most the number of values)."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total <= 0 or rows <= 0:
        return 0.0
    return float(-np.expm1(-rows * (counts / total)).sum())


def index_pays(counts: np.ndarray, first: int, partition_rows: int) -> bool:
    """Whether encoding looks a partition of ``partition_rows`` rows up in a vocabulary's hash index rather than
    scanning it (``VocabLookup.positions``), for a vocabulary whose rows have these fit ``counts`` (rows from
    ``first`` on are looked up): when the vocabulary holds more than ``SCAN_RATIO`` times the distinct values
    such a partition is expected to hold, drawn at random (``expected_distinct``). The vocab stage stores the
    index of such a vocabulary (``write_index``). Rows in another order change only where the lookup's cost
    goes, never its result."""
    values = len(counts) - first
    return values > SCAN_RATIO * expected_distinct(counts, partition_rows)  # (never with no values: E >= 0)


def write_index(path: str | Path, values: pa.Array, first: int) -> Path:
    """Store the hash index of ``values[first:]`` (the rows of the vocabulary file at ``path``) beside it, so
    that every process that looks values up in it maps the index instead of building it (each worker process would
    otherwise build it again, which costs seconds per worker for one of Criteo 1TB's largest columns).
    16 bytes per value. Not part of an artifact: ``files`` lists only the vocabulary files."""
    out = index_path(path, first)
    _HashIndex.build(values.slice(first)).save(out)  # (hash_strings combines a chunked array's chunks)
    return out


_CACHE: dict[tuple[str, str, int], VocabLookup] = {}
_LOCK = threading.Lock()


def lookup(path: str, sha256: str, first: int, queries: int | None = None) -> VocabLookup:
    """The lookup for a vocabulary file, built once per process (and per ``first``); ``queries``: how many
    lookups the caller expects (``VocabLookup``), as the first caller said."""
    key = (str(path), sha256, first)
    with _LOCK:
        found = _CACHE.get(key)
        if found is None:
            stored = index_path(path, first)  # written by the vocab stage for the largest vocabularies
            usable = stored.is_file() and not stored.is_symlink()  # a link could name a file outside the artifact
            found = VocabLookup(read(path, sha256).column("value"), first, stored if usable else None, queries)
            if len(_CACHE) >= 64:
                _CACHE.clear()
            _CACHE[key] = found
        return found
