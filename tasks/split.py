"""split: assign each input row to train (0), validation (1) or test (2); -1 = not sampled.

The assignment is a function of the data, the seed and each row's position (``__row__``), never
of partitioning or the scheduler. Output: ``split.npy`` (int8, one entry per input row).

* ``random``: rows are ranked by a counter-based hash of (seed, row) and cut at exact counts,
  so proportions are exact to within one row and the same seed always gives the same rows.
* ``fixed``: a column of 0/1/2 or train/validation(val)/test.

``sample_ratio``/``sample_size`` drop a seeded subset of rows first (marked -1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tasks.errors import DataError

CODE_VERSION = "split-1"
SPLIT_NAMES = ("train", "validation", "test")
FIXED_VALUES = {"0": 0, "1": 1, "2": 2, "train": 0, "training": 0, "validation": 1, "val": 1, "valid": 1,
                "vali": 1, "dev": 1, "test": 2, "testing": 2}


def mix64(seed: int, rows: np.ndarray) -> np.ndarray:
    """splitmix64 of (seed, row): a stable, platform-independent uint64 per row."""
    with np.errstate(over="ignore"):
        z = rows.astype(np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


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


def sample_mask(n: int, ratio: float, size: int | None, seed: int) -> np.ndarray:
    """Rows kept by sampling (seeded, exact count)."""
    keep = n if size is None else min(size, n)
    keep = min(keep, int(round(n * ratio))) if ratio < 1.0 else keep
    if keep >= n:
        return np.ones(n, dtype=bool)
    order = np.argsort(mix64(seed ^ 0x5A5A, np.arange(n)), kind="stable")
    mask = np.zeros(n, dtype=bool)
    mask[order[:keep]] = True
    return mask


def random_split(active: np.ndarray, probabilities: list[float], seed: int) -> np.ndarray:
    """``active``: sorted row numbers taking part. Returns their split ids (int8)."""
    n = len(active)
    counts = split_counts(n, probabilities)
    ranks = np.empty(n, dtype=np.int64)
    ranks[np.argsort(mix64(seed, active), kind="stable")] = np.arange(n)
    return np.where(ranks < counts[0], 0, np.where(ranks < counts[0] + counts[1], 1, 2)).astype(np.int8)


def fixed_split(values: pd.Series, rows: np.ndarray, column: str) -> np.ndarray:
    text = values.astype("string").str.strip().str.lower()
    text = text.str.replace(r"\.0$", "", regex=True)
    mapped = text.map(FIXED_VALUES)
    bad = mapped.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"row {int(rows[i]) + 1}, column '{column}': fixed split expects 0/1/2 or "
                        f"train/validation/test, got {values.iloc[i]!r}")
    return mapped.to_numpy(dtype=np.int8)


def check_nonempty(assign: np.ndarray, probabilities: list[float]) -> None:
    active = int((assign >= 0).sum())
    if active < 3 and sum(1 for p in probabilities if p > 0) > active:
        raise DataError(f"the dataset has {active} row(s) after sampling; a split with probabilities "
                        f"{probabilities} needs at least 3 rows")


def run(ctx, ingest):
    """Stage entry point: writes ``split.npy``."""
    from dask import delayed

    from tasks import frame
    from tasks import ingest as ingest_mod
    from tasks.context import run_cached
    from tasks.statistics import Statistics

    pre = ctx.config.preprocessing
    split = pre.split
    config_slice = {"split": split.model_dump(), "sample_ratio": pre.sample_ratio, "sample_size": pre.sample_size,
                    "sample_seed": pre.sample_seed}

    def compute(out: Path) -> Statistics:
        n = ingest_mod.num_rows(ingest.path)
        keep = sample_mask(n, pre.sample_ratio, pre.sample_size, pre.sample_seed)
        assign = np.full(n, -1, dtype=np.int8)
        active = np.flatnonzero(keep)
        if split.type == "random":
            assign[active] = random_split(active, split.probabilities, split.seed)
        else:
            parts = frame.partitions(ingest_mod.data_dir(ingest.path), ctx.npartitions)
            fn = SPLITTERS.get(split.type)
            if fn is None:
                raise DataError(f"preprocessing.split.type: '{split.type}' is not implemented yet")
            results = frame.compute([delayed(_column_of)(p, split.column) for p in parts])
            rows = np.concatenate([r[0] for r in results])
            values = pd.concat([r[1] for r in results], ignore_index=True)
            values_assign = fn(values, rows, split)
            assign[rows] = values_assign
            assign[~keep] = -1
        check_nonempty(assign, split.probabilities)
        np.save(out / "split.npy", assign)
        stats = Statistics()
        for i, name in enumerate(SPLIT_NAMES):
            stats.counter(f"split.rows.{name}", int((assign == i).sum()))
        stats.counter("split.rows_not_sampled", int((assign < 0).sum()))
        return stats

    return run_cached(ctx, "split", CODE_VERSION, [ingest.key], config_slice, compute)


def _column_of(pdf: pd.DataFrame, column: str):
    from tasks.ingest import ROW

    return pdf[ROW].to_numpy(dtype=np.int64), pdf[column].reset_index(drop=True)


def load(split_result) -> np.ndarray:
    return np.load(Path(split_result.path) / "split.npy", mmap_mode="r")


SPLITTERS = {"fixed": lambda values, rows, cfg: fixed_split(values, rows, cfg.column)}
