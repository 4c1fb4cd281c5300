"""Vocabularies too large for ``training_set_metadata.json``, stored as Parquet beside it.

File layout: ``vocab/<feature>.parquet`` with columns ``value`` (string) and ``count`` (int64);
row ``i`` is id ``i`` (so ``value`` is Ludwig's ``idx2str`` and ``count`` its ``str2freq``). The
metadata references it as ``{"vocab_file": {"path": ..., "sha256": ..., "rows": ...}}``, relative
to the folder of the metadata file, so an artifact can be moved; ``resolve`` adds the absolute
``vocab_path`` that encoding reads (never written back into an artifact).

Encoding joins partitions against the file without a Python dict: ``lookup`` loads the values once
per process (checking the sha256) and ``VocabLookup.positions`` finds a partition's distinct values
with pyarrow's ``index_in``, probing the vocabulary into a hash table of the (fewer) distinct query
values, exact by construction. Cost, 2M rows in 8 partitions (zipf 1.1), CPU s per column, against
the hand-written join it replaced (sorted 64-bit string hashes, ``searchsorted``, string
confirmation, a collision loop; hashes built once per process): about equal once that join hashes
with the library hash (XXH3: 1M-value vocabulary 0.72-0.93 vs 0.79-0.92 s, 300k 0.29-0.54 vs
0.38-0.52 s), 10-20% slower than it was with the former vectorized FNV hash. ``index_in(query,
value_set=vocabulary)`` would rebuild the vocabulary's table for every partition: 2.6-3.2 s at 1M
(``benchmarks/vocab_lookup.py``, ``benchmarks/RESULTS.md``).
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

ROW_GROUP_ROWS = 1 << 20


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

    def __len__(self) -> int:
        return len(self.values)

    def positions(self, query: pa.Array) -> np.ndarray:
        """Row (counting from ``first``) of each ``query`` value, -1 where it is absent. ``query`` holds
        distinct values (a dictionary's): each vocabulary row is looked up among them."""
        out = np.full(len(query), -1, dtype=np.int64)
        if len(self.values) == 0 or len(query) == 0:
            return out
        at = pc.index_in(self.values, value_set=query)  # per vocabulary row: its position in query, or null
        rows = pc.indices_nonzero(at.is_valid())
        out[pc.take(at, rows).to_numpy(zero_copy_only=False)] = rows.to_numpy(zero_copy_only=False)
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
