"""Row hashes of the split stage: a stable uint64 per (seed, input row), and the rows a sample keeps.

Both are functions of the seed and the row's position only, so any process, partition or worker
computes the same values (``tasks.split``, ``tasks.stratify``)."""

from __future__ import annotations

import numpy as np


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
