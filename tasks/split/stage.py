"""split: assign each input row to train (0), validation (1) or test (2); -1 = not sampled.

The assignment is a function of the data, the seed and each row's position (``__row__``), never
of partitioning or the scheduler. Output: ``split.npy`` (int8, one entry per input row).

* ``random``: rows are ranked by a counter-based hash of (seed, row) and cut at exact counts,
  so proportions are exact to within one row and the same seed always gives the same rows.
* ``fixed``: a column of 0/1/2 or train/validation(val)/test.
* ``stratify``: by a binary/category column. Each class is cut like ``random`` (rows ranked by
  the same row hash), with per-class counts from the largest-remainder rule, so every class's
  split counts are within one row of ``p * class_rows``. A class with one row goes to train.
* ``datetime``: by a date column: rows ordered by (date, row); train is the oldest rows, test
  the newest; rows with the same date never straddle a boundary (they go to the earlier split,
  unless that would leave a split empty).
* ``hash``: by a key column: ``blake2b(str(key), key=seed)`` as a uint64 picks the split, so a
  row's split depends only on its own key and never changes when rows are added or removed
  (rows sharing a key share a split).

``sample_ratio``/``sample_size`` drop a seeded subset of rows first (marked -1); the split is
computed over the kept rows only. Every split with a non-zero probability gets at least one
row when at least 3 rows are kept; where a split type cannot promise that (too few distinct
dates for ``datetime``, too few keys for ``hash``, whose assignment must not depend on other
rows) the stage raises ``DataError`` rather than publish an empty split.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from dask import delayed

from core.errors import ConfigError, DataError
from core.lazy import pandas as pd
from storage.fs import write_at
from storage.npy import MappedArray
from tasks.config.constants import ROW, SPLIT_NAMES
from tasks.runtime import dask_run, frame
from tasks.runtime.dask_run import compute as dask_compute
from tasks.runtime.dask_run import row_chunks, summed
from tasks.runtime.node import Node
from tasks.runtime.outputs import Ingested, SplitAssignment
from tasks.runtime.statistics import Statistics
from tasks.split import degenerate
from tasks.split.dates import NotOnWorkers, datetime_on_workers, datetime_split
from tasks.split.rows import kept_rows, mix64, new_split_file, partition_start, require_present, split_counts
from tasks.split.stratify import (
    class_keys,
    stratify_on_workers,
    stratify_split,
)

FIXED_VALUES = {"0": 0, "1": 1, "2": 2, "train": 0, "training": 0, "validation": 1, "val": 1, "valid": 1,
                "vali": 1, "dev": 1, "test": 2, "testing": 2}


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
    # A row's split is its hash's rank: the first counts[0] hashes in order are train, the next
    # counts[1] validation. splitmix64 is a bijection, so distinct rows have distinct hashes and the
    # two rank thresholds are found by selection (np.partition, linear) instead of a full sort.
    keys = mix64(seed, active)
    ends = [counts[0], counts[0] + counts[1]]  # train ranks end at ends[0], validation at ends[1]
    inside = [e for e in ends if e < n]
    chosen = np.partition(keys, inside) if inside else keys
    split = np.full(n, 2, dtype=np.int8)
    for split_id, end in ((1, ends[1]), (0, ends[0])):
        split[keys < chosen[end] if end < n else slice(None)] = split_id
    return split


# ---- random (and sampling) on the workers ---------------------------------------------------------------
# The random split and the sampling are functions of the row numbers alone: a row is kept when its sampling
# hash is below the ``keep``-th smallest of all rows' (``sample_mask``), and its split is fixed by where its
# split hash falls among the kept rows' (``random_split``). Those order statistics are found without any
# per-row array in the flow process: Dask tasks over ranges of row numbers histogram the hashes' top
# ``BUCKET_BITS`` bits (summed in a tree of tasks), the flow picks the bucket holding each wanted rank, the
# tasks return the few hashes in those buckets, and the flow selects the exact value. Then each task writes
# its rows' split ids into ``split.npy`` at their offset (preallocated with ``np.save``'s header), so the
# file's bytes equal those of the in-process ``random_split``.

BUCKET_BITS = 16


def _hashes(seed: int, lo: int, hi: int, sample: tuple[int, int] | None) -> np.ndarray:
    return mix64(seed, kept_rows(np.arange(lo, hi, dtype=np.int64), sample))


def _histogram(seed: int, lo: int, hi: int, sample) -> np.ndarray:
    top = (_hashes(seed, lo, hi, sample) >> np.uint64(64 - BUCKET_BITS)).astype(np.intp)
    return np.bincount(top, minlength=1 << BUCKET_BITS).astype(np.int64)


def _in_buckets(seed: int, lo: int, hi: int, sample, buckets: tuple[int, ...]) -> list[np.ndarray]:
    keys = _hashes(seed, lo, hi, sample)
    top = keys >> np.uint64(64 - BUCKET_BITS)
    return [keys[top == np.uint64(b)] for b in buckets]


def select_hashes(seed: int, n: int, sample, ranks: list[int]) -> list[int]:
    """The ``ranks``-th smallest (0-based) of ``mix64(seed, row)`` over the rows ``_kept`` of ``range(n)``,
    by Dask tasks; the flow holds one histogram and the hashes of the buckets it needs."""

    if not ranks:
        return []
    chunks = row_chunks(n)
    histogram = summed([delayed(_histogram)(seed, lo, hi, sample) for lo, hi in chunks])
    ends = np.cumsum(histogram)
    buckets = [int(np.searchsorted(ends, r, side="right")) for r in ranks]
    wanted = tuple(sorted(set(buckets)))
    pieces = dask_compute([delayed(_in_buckets)(seed, lo, hi, sample, wanted) for lo, hi in chunks])
    out = []
    for r, b in zip(ranks, buckets, strict=True):
        j = wanted.index(b)
        keys = np.sort(np.concatenate([p[j] for p in pieces]))
        out.append(int(keys[r - int(ends[b] - histogram[b])]))
    return out


def _write_random(path: str, offset: int, lo: int, hi: int, seed: int, sample, thresholds) -> np.ndarray:
    """Rows ``[lo, hi)``'s split ids (-1: not sampled) written into ``split.npy`` at their place; their rows
    per split. ``thresholds``: the (train, validation) hash bounds, None for "every row"."""
    rows = np.arange(lo, hi, dtype=np.int64)
    out = np.full(hi - lo, -1, dtype=np.int8)
    kept = kept_rows(rows, sample)
    keys = mix64(seed, kept)
    split = np.full(len(keys), 2, dtype=np.int8)
    for split_id, bound in ((1, thresholds[1]), (0, thresholds[0])):
        split[keys < np.uint64(bound) if bound is not None else slice(None)] = split_id
    out[kept - lo] = split
    write_at(path, out, offset + lo)
    return np.bincount(split, minlength=3).astype(np.int64)


def random_on_workers(n: int, probabilities: list[float], seed: int, ratio: float, size: int | None,
                      sample_seed: int, path: Path, exact: bool = True) -> tuple[int, list[int]]:
    """``split.npy`` of the sampling and random split of ``n`` rows, written by Dask tasks: the same bytes as
    ``np.save`` of ``sample_mask`` + ``random_split``. Returns (kept rows, rows per split). ``exact=False``:
    a row's split from its own hash alone (``mix64(seed, row)`` against the probabilities' fractions of
    2**64), so rows added later never move it."""

    # kept: a sampling hash below the keep-th smallest (sample_mask's argsort, distinct hashes)
    keep, sample = _sample_on_workers(n, ratio, size, sample_seed)
    if not exact:
        cuts = (_threshold(probabilities[0]), _threshold(probabilities[0] + probabilities[1]))
        thresholds = tuple(c if c < 1 << 64 else None for c in cuts)
        offset = new_split_file(path, n)
        counts = summed([delayed(_write_random)(str(path), offset, lo, hi, seed, sample, thresholds)
                         for lo, hi in row_chunks(n)]) if n else np.zeros(3, dtype=np.int64)
        counts = [int(c) for c in counts]
        if keep >= 3 and any(p > 0 and not c for p, c in zip(probabilities, counts, strict=True)):
            empty = SPLIT_NAMES[next(i for i, (p, c) in enumerate(zip(probabilities, counts, strict=True))
                                     if p > 0 and not c)]
            raise DataError(f"preprocessing.split: with exact: false no row fell in {empty} ({keep} rows); a row's "
                            "split depends only on its own hash, so small data can leave a split empty; use more "
                            "rows or exact: true")
        return keep, counts
    counts = split_counts(keep, probabilities)
    ends = [counts[0], counts[0] + counts[1]]
    inside = [e for e in ends if e < keep]
    bounds = dict(zip(inside, select_hashes(seed, n, sample, inside), strict=True))
    thresholds = (bounds.get(ends[0]), bounds.get(ends[1]))
    offset = new_split_file(path, n)
    dask_compute([delayed(_write_random)(str(path), offset, lo, hi, seed, sample, thresholds)
                  for lo, hi in row_chunks(n)])
    return keep, counts


def fixed_split(values: pd.Series, rows: np.ndarray, column: str) -> np.ndarray:
    text = values.astype("string").str.strip().str.lower()
    text = text.str.replace(r"\.0$", "", regex=True)
    mapped = text.map(FIXED_VALUES)
    bad = mapped.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"row {int(rows[i])}, column '{column}': fixed split expects 0/1/2 or "
                        f"train/validation/test, got {values.iloc[i]!r}")
    return mapped.to_numpy(dtype=np.int8)


# ---- hash ----------------------------------------------------------------------------------------

def key_hash(key: str, seed: int) -> int:
    """Stable uint64 of a key's string (blake2b keyed by the seed; never Python's ``hash``)."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8, key=str(seed).encode("ascii")).digest()
    return int.from_bytes(digest, "big")


def key_hashes(keys, seed: int) -> np.ndarray:
    """``key_hash`` of each key, as uint64. The keyed hash's state is built once and copied per key (its
    key block is compressed once), which saves most of the per-key setup. What is left per key is
    ``hashlib``'s own call: no library hashes strings with keyed BLAKE2b in bulk, and another hash would
    move keys between splits."""
    copy = hashlib.blake2b(digest_size=8, key=str(seed).encode("ascii")).copy

    def digest(key: str) -> bytes:
        h = copy()
        h.update(key.encode("utf-8"))
        return h.digest()

    return np.frombuffer(b"".join(map(digest, keys)), dtype=">u8").astype(np.uint64)


def _threshold(cumulative: float) -> int:
    return 1 << 64 if cumulative >= 1.0 - 1e-12 else int(cumulative * float(1 << 64))


def _at_or_above(hashes: np.ndarray, threshold: int) -> np.ndarray:
    """``hashes >= threshold`` for a threshold up to 2**64 (no uint64 reaches it)."""
    return hashes >= np.uint64(threshold) if threshold < 1 << 64 else np.zeros(len(hashes), dtype=bool)


def hash_ids(values: pd.Series, rows: np.ndarray, probabilities: list[float], column: str, seed: int) -> np.ndarray:
    """Each row's split from its key alone (``hash_split`` without its check that every split got a key)."""
    require_present(values, rows, column, "hash")
    keys = class_keys(values).to_numpy(dtype=object)
    codes, uniques = pd.factorize(keys)
    t1, t2 = _threshold(probabilities[0]), _threshold(probabilities[0] + probabilities[1])
    hashes = key_hashes(uniques, seed)
    per_key = _at_or_above(hashes, t1).astype(np.int8) + _at_or_above(hashes, t2)
    return per_key[codes] if len(uniques) else np.zeros(0, dtype=np.int8)


def check_hash_counts(counts, rows: int, probabilities: list[float], column: str, keys: int | None = None) -> None:
    """Every split with a non-zero probability got a key (``counts``: rows per split), when >= 3 rows."""
    if rows < 3:
        return
    for i, name in enumerate(SPLIT_NAMES):
        if probabilities[i] > 0 and not counts[i]:
            distinct = f", {keys} distinct keys" if keys is not None else ""
            raise DataError(f"column '{column}': the hash split puts no key in {name} ({rows} rows{distinct}); "
                            "a row's split depends only on its key, so small data can leave a split empty; use "
                            "more keys or split type 'random'")


def hash_split(values: pd.Series, rows: np.ndarray, probabilities: list[float], column: str,
               seed: int) -> np.ndarray:
    """Split of each row from its key alone: ``key_hash < p_train * 2**64`` -> train, below
    ``(p_train + p_validation) * 2**64`` -> validation, else test."""
    out = hash_ids(values, rows, probabilities, column, seed)
    counts = np.bincount(out, minlength=3) if len(out) else np.zeros(3, dtype=np.int64)
    check_hash_counts(counts, len(rows), probabilities, column, int(class_keys(values).nunique()))
    return out


def _rowwise_part(pdf: pd.DataFrame, cfg, sample, path: str, offset: int) -> np.ndarray:
    """A partition's split ids (fixed or hash: a row's split is a function of its own value) written into
    ``split.npy`` at its rows' place (a partition's rows are consecutive input rows); rows per split."""
    rows = pdf[ROW].to_numpy(dtype=np.int64)
    if not len(rows):
        return np.zeros(3, dtype=np.int64)
    lo = partition_start(rows)
    out = np.full(len(rows), -1, dtype=np.int8)
    kept = kept_rows(rows, sample) - lo
    values = pdf[cfg.column].reset_index(drop=True).iloc[kept].reset_index(drop=True)
    if cfg.type == "fixed":
        out[kept] = fixed_split(values, rows[kept], cfg.column)
    else:
        out[kept] = hash_ids(values, rows[kept], cfg.probabilities, cfg.column, cfg.seed)
    write_at(path, out, offset + lo)
    return np.bincount(out[out >= 0], minlength=3).astype(np.int64)


def _sample_on_workers(n: int, ratio: float, size: int | None, sample_seed: int) -> tuple[int, tuple | None]:
    """(rows kept, the sample as ``kept_rows`` takes it): ``sample_mask``'s rows, by a selection on the workers."""
    keep = n if size is None else min(size, n)
    keep = min(keep, int(round(n * ratio))) if ratio < 1.0 else keep
    return keep, (sample_seed, select_hashes(sample_seed ^ 0x5A5A, n, None, [keep])[0]) if keep < n else None


def rowwise_on_workers(parts: list, n: int, cfg, ratio: float, size: int | None, sample_seed: int,
                       path: Path) -> tuple[int, list[int]]:
    """``split.npy`` of a fixed or hash split (after the sampling) written by one Dask task per partition:
    the same bytes as the in-process split. Returns (kept rows, rows per split)."""

    keep, sample = _sample_on_workers(n, ratio, size, sample_seed)
    offset = new_split_file(path, n)
    counts = np.sum(dask_compute([delayed(_rowwise_part)(p, cfg, sample, str(path), offset) for p in parts]),
                    axis=0)
    if cfg.type == "hash":
        check_hash_counts(counts, keep, cfg.probabilities, cfg.column)
    return keep, [int(c) for c in counts]


def check_nonempty(assign: np.ndarray, probabilities: list[float]) -> None:
    check_active(int((assign >= 0).sum()), probabilities)


def check_active(active: int, probabilities: list[float]) -> None:
    if active < 3 and sum(1 for p in probabilities if p > 0) > active:
        raise DataError(f"the dataset has {active} row(s) after sampling; a split with probabilities "
                        f"{probabilities} needs at least 3 rows")


def config_slice(ctx) -> dict:
    """What the split reads of the config: the split and sampling options, and the split column's hints."""
    pre = ctx.config.preprocessing
    hints = split_hints(ctx)
    return {"split": pre.split.model_dump(), "sample_ratio": pre.sample_ratio, "sample_size": pre.sample_size,
            "sample_seed": pre.sample_seed, **({"hints": hints} if hints else {})}


def check_config(ctx) -> None:
    """On a miss and on a hit (the feature types are not in the split's key): the split type exists and a
    stratify split's column is a binary or category feature."""
    split = ctx.config.preprocessing.split
    if split.type != "random" and split.type not in SPLITTERS:
        raise DataError(f"preprocessing.split.type: '{split.type}' is not implemented yet")
    if split.type == "stratify":
        for f in ctx.config.features:
            if f.source_column == split.column and f.type not in ("binary", "category"):
                raise ConfigError(f"preprocessing.split.column: a stratify split needs a binary or category column; "
                                  f"'{split.column}' is the {f.type} feature '{f.name}'")


def compute(ctx, out: Path, ingest: Ingested) -> Statistics:
    """The assignment of every input row, written through ``SplitAssignment``."""
    check_config(ctx)
    pre = ctx.config.preprocessing
    split = pre.split
    hints = split_hints(ctx)
    n = ingest.num_rows
    stats = Statistics()
    written = _split_on_workers(ctx, ingest, n, SplitAssignment.file(out), hints)
    if written is not None:  # on the workers: no per-row array in this process
        kept, counts = written
        check_active(kept, split.probabilities)
        degenerate.check(ctx, ingest.parts, MappedArray(SplitAssignment.file(out)))  # warns or raises
        for i, name in enumerate(SPLIT_NAMES):
            stats.counter(f"split.rows.{name}", counts[i])
        stats.counter("split.rows_not_sampled", n - kept)
        return stats
    keep = sample_mask(n, pre.sample_ratio, pre.sample_size, pre.sample_seed)
    assign = np.full(n, -1, dtype=np.int8)
    parts = frame.partitions(ingest.parts, ctx.npartitions)
    results = dask_run.compute([delayed(_column_of)(p, split.column) for p in parts])
    rows = np.concatenate([r[0] for r in results])
    values = pd.concat([r[1] for r in results], ignore_index=True)
    kept = keep[rows]
    rows, values = rows[kept], values[kept].reset_index(drop=True)
    assign[rows] = SPLITTERS[split.type](values, rows, split, hints)
    check_nonempty(assign, split.probabilities)
    degenerate.check(ctx, ingest.parts, assign)  # before the entry is written: warns or raises
    SplitAssignment.write(out, assign)
    for i, name in enumerate(SPLIT_NAMES):
        stats.counter(f"split.rows.{name}", int((assign == i).sum()))
    stats.counter("split.rows_not_sampled", int((assign < 0).sum()))
    return stats


def check_hit(ctx, result: SplitAssignment, ingest: Ingested) -> None:
    """A cache hit: features are not in the split's key, so the checks run for this run's."""
    check_config(ctx)
    degenerate.check(ctx, ingest.parts, result.assignment())


def _split_on_workers(ctx, ingest, n: int, path: Path, hints: dict) -> tuple[int, list[int]] | None:
    """``split.npy`` written by Dask tasks: (rows kept, rows per split); None where the column must go to one
    process (a datetime split of strings whose format would be guessed, or whose forward cuts leave a split
    with p > 0 empty: ``tasks.split.dates``)."""
    pre = ctx.config.preprocessing
    split = pre.split
    if split.type == "random":
        return random_on_workers(n, split.probabilities, split.seed, pre.sample_ratio, pre.sample_size,
                                 pre.sample_seed, path, split.exact is not False)
    parts = frame.partitions(ingest.parts, ctx.npartitions)
    if split.type in ("fixed", "hash"):  # a row's split is its own value's: per partition
        return rowwise_on_workers(parts, n, split, pre.sample_ratio, pre.sample_size, pre.sample_seed, path)
    kept, sample = _sample_on_workers(n, pre.sample_ratio, pre.sample_size, pre.sample_seed)
    check_active(kept, split.probabilities)
    if split.type == "stratify":
        return kept, stratify_on_workers(parts, n, split, sample, path, hints.get("target"))
    try:
        return kept, datetime_on_workers(parts, n, split, sample, path, hints.get("datetime_format"))
    except NotOnWorkers:
        return None


def split_hints(ctx) -> dict:
    """Options the split reads from a feature on its column (a date feature's ``datetime_format``)."""
    split = ctx.config.preprocessing.split
    if split.type == "stratify":  # the output feature on the column: its classes must all reach train
        target = next((f.name for f in ctx.config.output_features if f.source_column == split.column), None)
        return {"target": target} if target else {}
    if split.type != "datetime":
        return {}
    for f in ctx.config.features:
        fmt = (f.preprocessing or {}).get("datetime_format")
        if f.source_column == split.column and fmt:
            return {"datetime_format": fmt}
    return {}


def _column_of(pdf: pd.DataFrame, column: str):
    return pdf[ROW].to_numpy(dtype=np.int64), pdf[column].reset_index(drop=True)




# split type -> fn(values of the split column for the kept rows, their row numbers, SplitConfig, hints)
SPLITTERS = {
    "fixed": lambda values, rows, cfg, hints: fixed_split(values, rows, cfg.column),
    "stratify": lambda values, rows, cfg, hints: stratify_split(values, rows, cfg.probabilities, cfg.seed,
                                                                hints.get("target"), cfg.column),
    "datetime": lambda values, rows, cfg, hints: datetime_split(values, rows, cfg.probabilities, cfg.column,
                                                                hints.get("datetime_format")),
    "hash": lambda values, rows, cfg, hints: hash_split(values, rows, cfg.probabilities, cfg.column, cfg.seed),
}


NODE = Node("split", compute, inputs=("ingest",), output=SplitAssignment, reads=config_slice,
            on_hit=check_hit)
