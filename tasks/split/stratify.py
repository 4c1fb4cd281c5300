"""The stratified split (``split: {type: stratify, column: ...}``), in one process and on the workers.

Per class (the column's values as strings, compared as a category compares them; missing values form
one class of their own) the rows are ranked by the row hash (``tasks.split.rows.mix64``) and cut at the
class's counts (largest remainder: within one row of ``p * class_rows``, an empty split with p > 0 given
one row where that costs least, every class of a target kept in train).

``stratify_split`` is the definition, over one process's arrays. ``stratify_on_workers`` gives the same
``split.npy`` by Dask tasks, with nothing per row in the flow process: the partitions count their classes;
the flow fixes each class's counts; each class's cut ranks become hash thresholds by a selection (a
histogram of the hashes' top bits per class, summed on the workers, then the hashes of the few buckets
holding a cut); each partition writes its rows' splits at their place. Hashes of distinct rows are
distinct (splitmix64 is a bijection), so "rank below the cut" and "hash below the cut's hash" agree.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from dask import delayed

from core.errors import DataError
from core.lazy import pandas as pd
from storage.fs import write_at
from tasks.config.constants import ROW
from tasks.runtime.dask_run import compute as dask_compute
from tasks.runtime.dask_run import summed
from tasks.split.rows import kept_mask, mix64, new_split_file, partition_start

MISSING_CLASS = "\x00<missing>"
HISTOGRAM_CELLS = 1 << 20  # classes x buckets of the selection's histogram (8 MB of int64)


def class_keys(values: pd.Series) -> pd.Series:
    """Values as strings, compared the way a category compares them (``1.0`` and ``"1"`` are one
    class); missing values stay missing."""
    if pd.api.types.is_bool_dtype(values.dtype):
        return values.map({True: "true", False: "false"}).astype("string")
    if pd.api.types.is_float_dtype(values.dtype):
        x = values.to_numpy(dtype="float64", na_value=np.nan)
        whole = np.isfinite(x) & (x == np.round(x)) & (np.abs(x) < 2**62)
        text = np.where(whole, np.nan_to_num(x).astype(np.int64).astype(str), x.astype(str))
        return pd.Series(text, dtype="string").mask(np.isnan(x))
    return values.astype("string")


# ---- stratify ------------------------------------------------------------------------------------

def class_counts(n: int, probabilities: list[float]) -> np.ndarray:
    """Largest-remainder counts of one class: each within one row of ``p * n`` (ties: earlier split).
    A single-row class goes to train (to the largest split if train's probability is 0)."""
    if n == 1:
        out = np.zeros(3, dtype=np.int64)
        out[0 if probabilities[0] > 0 else int(np.argmax(probabilities))] = 1
        return out
    exact = np.array(probabilities, dtype=np.float64) * n
    out = np.floor(exact).astype(np.int64)
    order = sorted(range(3), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: n - int(out.sum())]:
        out[i] += 1
    return out


def _fill_empty_splits(counts: np.ndarray, sizes: np.ndarray, probabilities: list[float]) -> None:
    """Give each empty split with p > 0 one row, moved from the (class, split) where that costs the
    least deviation from ``p * class_rows``; multi-row classes first, a class's last training row last
    (``check_classes_in_train``). In place. Called with at least 3 rows, so one of the other two splits
    holds 2 or more and a row to move always exists."""
    for s in range(3):
        if probabilities[s] <= 0 or counts[:, s].sum() > 0:
            continue
        best = None
        totals = counts.sum(axis=0)
        for c in range(len(sizes)):
            for d in range(3):
                if d == s or counts[c, d] == 0 or totals[d] < 2:
                    continue
                dev = max(abs(counts[c, d] - 1 - probabilities[d] * sizes[c]), abs(1 - probabilities[s] * sizes[c]))
                key = (d == 0 and counts[c, 0] == 1, sizes[c] == 1, dev, -probabilities[s] * sizes[c], c, d)
                if best is None or key < best[0]:
                    best = (key, c, d)
        _key, c, d = best
        counts[c, d] -= 1
        counts[c, s] += 1


def check_classes_in_train(counts: np.ndarray, sizes: np.ndarray, uniques, probabilities: list[float],
                           target: str | None, column: str) -> None:
    """A stratified split on a target must leave every class of it in train (a model never sees a class
    it is not trained on): ``DataError`` naming the feature and the class otherwise."""
    if target is None or probabilities[0] <= 0:
        return
    absent = [i for i in range(len(sizes)) if counts[i, 0] == 0 and uniques[i] != MISSING_CLASS]
    if absent:
        i = absent[0]
        raise DataError(f"output feature '{target}' (column '{column}'): class {uniques[i]!r} ({sizes[i]} row(s)) "
                        f"gets no training row in the stratified split {probabilities} (validation "
                        f"{counts[i, 1]}, test {counts[i, 2]}); add rows of it, merge it into another class, or "
                        "drop its rows")


def stratify_split(values: pd.Series, rows: np.ndarray, probabilities: list[float], seed: int,
                   target: str | None = None, column: str = "") -> np.ndarray:
    """Per class (the column's values as strings; missing values form one class of their own), rows
    are ranked by the row hash and cut at the class's counts (``class_counts``). ``target``: the output
    feature on ``column``, whose every class must reach train."""
    keys = class_keys(values).fillna(MISSING_CLASS).to_numpy(dtype=object)
    codes, uniques = pd.factorize(keys, sort=True)
    sizes = np.bincount(codes, minlength=len(uniques))
    counts = np.stack([class_counts(int(n), probabilities) for n in sizes]) if len(sizes) else np.zeros((0, 3), int)
    if len(rows) >= 3:
        _fill_empty_splits(counts, sizes, probabilities)
    check_classes_in_train(counts, sizes, uniques, probabilities, target, column)
    order = np.lexsort((mix64(seed, rows), codes))  # by class, then by row hash
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    position = np.arange(len(rows)) - starts[codes[order]]  # rank within the class
    cut1 = counts[:, 0][codes[order]]
    cut2 = cut1 + counts[:, 1][codes[order]]
    out = np.empty(len(rows), dtype=np.int8)
    out[order] = np.where(position < cut1, 0, np.where(position < cut2, 1, 2))
    return out


# ---- on the workers ------------------------------------------------------------------------------

def _classes(pdf: pd.DataFrame, column: str, sample) -> tuple[np.ndarray, np.ndarray]:
    """A partition's kept rows and their class keys (strings, the missing class included)."""
    rows = pdf[ROW].to_numpy(dtype=np.int64)
    kept = kept_mask(rows, sample)
    keys = class_keys(pdf[column].reset_index(drop=True)[kept]).fillna(MISSING_CLASS).to_numpy(dtype=object)
    return rows[kept], keys


def _class_sizes(pdf: pd.DataFrame, column: str, sample) -> dict[str, int]:
    _rows, keys = _classes(pdf, column, sample)
    return {str(c): int(k) for c, k in pd.Series(keys, dtype=object).value_counts(sort=False).items()}


def _coded(pdf, column, sample, classes: list[str], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A partition's kept rows, their class codes (positions in the sorted ``classes``) and row hashes."""
    rows, keys = _classes(pdf, column, sample)
    codes = pd.Index(classes).get_indexer(keys)
    return rows, codes.astype(np.int64), mix64(seed, rows)


def _histogram(pdf, column, sample, classes, seed: int, bits: int) -> np.ndarray:
    _rows, codes, hashes = _coded(pdf, column, sample, classes, seed)
    cells = (codes << bits) + (hashes >> np.uint64(64 - bits)).astype(np.int64)
    return np.bincount(cells, minlength=len(classes) << bits).astype(np.int64)


def _in_cells(pdf, column, sample, classes, seed: int, bits: int, cells: tuple[int, ...]) -> list[np.ndarray]:
    _rows, codes, hashes = _coded(pdf, column, sample, classes, seed)
    own = (codes << bits) + (hashes >> np.uint64(64 - bits)).astype(np.int64)
    return [hashes[own == c] for c in cells]


def _write(pdf, column, sample, classes, seed: int, bounds: tuple[np.ndarray, ...], path: str,
           offset: int) -> np.ndarray:
    """A partition's split ids (-1: not sampled) written into ``split.npy`` at its rows' place (a
    partition's rows are consecutive input rows); rows per split. ``bounds``: per class, whether every
    row is below each cut and the cut's hash."""
    all_rows = pdf[ROW].to_numpy(dtype=np.int64)
    out = np.full(len(all_rows), -1, dtype=np.int8)
    if len(all_rows):
        lo = partition_start(all_rows)
        rows, codes, hashes = _coded(pdf, column, sample, classes, seed)
        all1, cut1, all2, cut2 = bounds
        split = np.full(len(rows), 2, dtype=np.int8)
        split[all2[codes] | (hashes < cut2[codes])] = 1
        split[all1[codes] | (hashes < cut1[codes])] = 0
        out[rows - lo] = split
        write_at(path, out, offset + lo)
    return np.bincount(out[out >= 0], minlength=3).astype(np.int64)


def stratify_on_workers(parts: list, n: int, cfg, sample, path: Path, target: str | None) -> list[int]:
    """``split.npy`` of the stratified split of the kept rows (``sample`` as ``tasks.split.stage`` keeps them),
    written by Dask tasks: the same bytes as ``stratify_split`` in one process. Returns rows per split."""
    found = dask_compute([delayed(_class_sizes)(p, cfg.column, sample) for p in parts])
    totals: dict[str, int] = {}
    for part in found:
        for c, k in part.items():
            totals[c] = totals.get(c, 0) + k
    classes = sorted(totals)
    sizes = np.array([totals[c] for c in classes], dtype=np.int64)
    probabilities = cfg.probabilities
    counts = np.stack([class_counts(int(k), probabilities) for k in sizes]) if len(sizes) else np.zeros((0, 3), int)
    if sizes.sum() >= 3:
        _fill_empty_splits(counts, sizes, probabilities)
    check_classes_in_train(counts, sizes, classes, probabilities, target, cfg.column)
    cuts = np.stack([counts[:, 0], counts[:, 0] + counts[:, 1]], axis=1) if len(sizes) else np.zeros((0, 2), int)
    wanted = [(c, r) for c in range(len(classes)) for r in sorted(set(cuts[c].tolist())) if 0 < r < sizes[c]]
    bits = max(1, min(16, int(math.log2(HISTOGRAM_CELLS / max(len(classes), 1)))))
    hashes_at = _select(parts, cfg.column, sample, classes, cfg.seed, bits, wanted)
    bounds = []
    for j in range(2):
        every = cuts[:, j] >= sizes
        at = np.array([hashes_at.get((c, int(cuts[c, j])), 0) for c in range(len(classes))], dtype=np.uint64)
        bounds += [every, at]
    offset = new_split_file(path, n)
    written = dask_compute([delayed(_write)(p, cfg.column, sample, classes, cfg.seed, tuple(bounds), str(path), offset)
                            for p in parts])
    return [int(c) for c in np.sum(written, axis=0)] if written else [0, 0, 0]


def _select(parts, column, sample, classes, seed: int, bits: int, wanted: list[tuple[int, int]]) -> dict:
    """``(class, rank) -> the rank-th smallest (0-based) row hash of that class`` for each of ``wanted``."""
    if not wanted:
        return {}
    histogram = summed([delayed(_histogram)(p, column, sample, classes, seed, bits) for p in parts])
    histogram = histogram.reshape(len(classes), 1 << bits)
    ends = np.cumsum(histogram, axis=1)
    cell_of = {}
    for c, r in wanted:
        bucket = int(np.searchsorted(ends[c], r, side="right"))
        cell_of[(c, r)] = (c << bits) + bucket, int(ends[c, bucket] - histogram[c, bucket])
    cells = tuple(sorted({cell for cell, _before in cell_of.values()}))
    pieces = dask_compute([delayed(_in_cells)(p, column, sample, classes, seed, bits, cells) for p in parts])
    out = {}
    for (c, r), (cell, before) in cell_of.items():
        j = cells.index(cell)
        hashes = np.sort(np.concatenate([p[j] for p in pieces]))
        out[(c, r)] = int(hashes[r - before])
    return out
