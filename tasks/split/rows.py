"""Row-level helpers of the split stage: a stable uint64 hash per (seed, input row), the rows a sample
keeps, the largest-remainder split counts, and the errors that name a row.

The hashes and the sample are functions of the seed and the row's position only, so any process,
partition or worker computes the same values (``tasks.split.stage``, ``tasks.split.stratify``, ``tasks.split.dates``)."""

from __future__ import annotations

import numpy as np

from core.errors import DataError
from core.lazy import pandas as pd


def mix64(seed: int, rows: np.ndarray) -> np.ndarray:
    """splitmix64 of (seed, row): a stable, platform-independent uint64 per row."""
    with np.errstate(over="ignore"):
        z = rows.astype(np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def kept_mask(rows: np.ndarray, sample: tuple[int, int] | None) -> np.ndarray | slice:
    """Which of ``rows`` a sample keeps: ``sample`` = (sample seed, the threshold hash), None: every row."""
    if sample is None:
        return slice(None)
    return mix64(sample[0] ^ 0x5A5A, rows) < np.uint64(sample[1])


def kept_rows(rows: np.ndarray, sample: tuple[int, int] | None) -> np.ndarray:
    """The rows a sample keeps (``kept_mask``)."""
    return rows[kept_mask(rows, sample)]


def split_counts(n: int, probabilities: list[float]) -> list[int]:
    """Exact row counts per split; every split with p > 0 gets a row when n >= 3."""
    counts = [int(np.floor(p * n)) for p in probabilities]
    rest = n - sum(counts)
    remainders = sorted(range(3), key=lambda i: (-(probabilities[i] * n - counts[i]), i))
    for i in remainders[:rest]:
        counts[i] += 1
    for i, p in enumerate(probabilities):
        if p > 0 and counts[i] == 0 and n >= 3:
            donor = int(np.argmax(counts))
            counts[donor] -= 1
            counts[i] += 1
    return counts


def row_error(rows: np.ndarray, i: int, column: str, message: str) -> DataError:
    return DataError(f"row {int(rows[i])}, column '{column}': {message}")


def require_present(values: pd.Series, rows: np.ndarray, column: str, kind: str) -> None:
    missing = values.isna().to_numpy()
    if missing.any():
        raise row_error(rows, int(np.flatnonzero(missing)[0]), column,
                         f"the {kind} split needs a value in every row, got a missing value")


def new_split_file(path, n: int) -> int:
    """``split.npy`` for ``n`` rows with ``np.save``'s header and its rows not yet written (sparse); returns
    the byte offset of row 0, where Dask tasks write their rows (``storage.fs.write_at``)."""
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.int8, shape=(n,))
    offset = array.offset
    del array
    return offset


def partition_start(rows: np.ndarray) -> int:
    """The first input row of a partition, whose rows must be consecutive input rows (as ingest's are)."""
    lo = int(rows[0])
    if rows[-1] - lo + 1 != len(rows) or (len(rows) > 1 and (np.diff(rows) != 1).any()):
        raise ValueError(f"a partition's rows are not consecutive ({lo}..{int(rows[-1])}, {len(rows)} rows)")
    return lo
