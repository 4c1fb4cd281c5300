"""The datetime split (``split: {type: datetime, column: ...}``): date keys, the definition over one
process's arrays (``datetime_split``), and the same split by Dask tasks (``datetime_on_workers``).

Oldest rows go to train, newest to test, cut at the ``split_counts`` boundaries of the rows ordered by
(date, row); a boundary inside a run of equal dates moves forward past the run. So each boundary falls
between two distinct dates, and a row's split is decided by its date alone: dates up to the train
bound are train, up to the validation bound validation, the rest test.

On the workers: each partition parses its dates once into a keys file beside ``split.npy`` (a missing
or unparseable date is reported for the first such row of the whole column, as in one process: a missing
value anywhere before any parse error); the bounds are found by a selection of the rank-th smallest
key (histograms of the keys' order-preserving bits over a narrowing range, summed on the workers, until
a bin is small or holds one key) and by counting keys up to a bound; one task per partition writes its
rows' splits. Strings are parsed on the workers only where that cannot depend on the partitioning: with a
``datetime_format``, or when every value reads as ISO 8601; otherwise (the format would be guessed from
the column's first failing value), and when the forward cuts leave a split with p > 0 empty (the
definition then picks cuts among run starts), the column goes to one process as before.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
from dask import delayed

from core.errors import DataError
from core.lazy import pandas as pd
from storage import npy
from storage.fs import write_at
from tasks.config.constants import ROW
from tasks.runtime.dask_run import compute as dask_compute
from tasks.runtime.dask_run import summed
from tasks.split.rows import (
    kept_mask,
    new_split_file,
    partition_start,
    require_present,
    row_error,
    split_counts,
)

BINS = 1 << 16  # histogram bins per narrowing round of the selection
SMALL = 1 << 12  # keys gathered into the flow process once a bin holds at most this many


def date_keys(values: pd.Series, rows: np.ndarray, column: str, datetime_format: str | None = None) -> np.ndarray:
    """An orderable key per row: int64 UTC nanoseconds (naive times taken as UTC), or the numbers
    themselves for a numeric column. A missing or unparseable date raises ``DataError``."""
    require_present(values, rows, column, "datetime")
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        parsed = pd.to_datetime(values, utc=True)
        return parsed.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
        return values.to_numpy(dtype=np.float64)
    text = values.astype("string").str.strip().to_numpy(dtype=object)
    codes, uniques = pd.factorize(text)
    uniques = np.asarray(uniques, dtype=object)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if datetime_format:
            parsed = pd.to_datetime(pd.Series(uniques), format=datetime_format, errors="coerce", utc=True)
        else:
            parsed = parse_dates(uniques)
    bad_unique = parsed.isna().to_numpy()
    if bad_unique.any():
        i = int(np.flatnonzero(bad_unique[codes])[0])
        how = f" with datetime_format {datetime_format!r}" if datetime_format else ""
        raise row_error(rows, i, column, f"the datetime split cannot parse {values.iloc[i]!r} as a date{how}")
    ns = parsed.dt.tz_localize(None).to_numpy(dtype="datetime64[ns]").astype(np.int64)
    return ns[codes]


def parse_dates(texts: np.ndarray) -> pd.Series:
    """Strings -> UTC datetimes (NaT where unparseable): ISO 8601 first, then the format pandas
    guesses from the first value that failed (vectorized; up to 3 formats), then per-value parsing
    (dateutil, month-first) for what is left."""

    parsed = pd.to_datetime(pd.Series(texts), format="ISO8601", errors="coerce", utc=True)
    for _ in range(3):
        retry = parsed.isna().to_numpy()
        fmt = pd.tseries.api.guess_datetime_format(str(texts[np.flatnonzero(retry)[0]])) if retry.any() else None
        if fmt is None:
            break
        parsed[retry] = pd.to_datetime(pd.Series(texts[retry]), format=fmt, errors="coerce", utc=True).to_numpy()
    retry = parsed.isna().to_numpy()
    if retry.any():
        parsed[retry] = pd.to_datetime(pd.Series(texts[retry]), format="mixed", errors="coerce", utc=True).to_numpy()
    return parsed


def datetime_split(values: pd.Series, rows: np.ndarray, probabilities: list[float], column: str,
                   datetime_format: str | None = None) -> np.ndarray:
    """Oldest rows to train, newest to test, cut at the ``split_counts`` boundaries of the rows
    ordered by (date, row). Rows with the same date never straddle a boundary: a boundary inside a
    run of equal dates moves forward past the run (the ties go to the earlier split). Only when
    that would leave a split with p > 0 empty are the boundaries moved to the run starts nearest
    the exact counts that give every such split a row."""
    keys = date_keys(values, rows, column, datetime_format)
    n = len(rows)
    order = np.lexsort((rows, keys))
    ordered = keys[order]
    counts = split_counts(n, probabilities)
    targets = (counts[0], counts[0] + counts[1])
    runs = np.append(np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]), n)  # run starts, then n

    def forward(cut: int) -> int:
        if 0 < cut < n and ordered[cut] == ordered[cut - 1]:
            return int(np.searchsorted(ordered, ordered[cut], side="right"))
        return cut

    def ok(c1: int, c2: int) -> bool:
        sizes = (c1, c2 - c1, n - c2)
        return c1 <= c2 and (n < 3 or all(size > 0 or p <= 0 for size, p in zip(sizes, probabilities, strict=True)))

    c1 = forward(targets[0])
    c2 = forward(max(targets[1], c1))
    if not ok(c1, c2):
        c1, c2 = _cuts_at_runs(runs, targets, probabilities, ok)
        if c1 < 0:
            raise DataError(f"column '{column}': the datetime split cannot give every split with a non-zero "
                            f"probability a row without splitting rows of the same date: the column has only "
                            f"{len(runs) - 1} distinct date(s) in {n} rows; use more distinct dates or split "
                            "type 'random'")
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    return np.where(position < c1, 0, np.where(position < c2, 1, 2)).astype(np.int8)


def _cuts_at_runs(runs: np.ndarray, targets: tuple[int, int], probabilities: list[float], ok) -> tuple[int, int]:
    """Cut positions among run starts, nearest the targets, satisfying ``ok``; (-1, -1) if none."""
    def near(target: int, lo: int, hi: int) -> list[int]:
        inside = runs[(runs >= lo) & (runs <= hi)]
        j = int(np.searchsorted(inside, target))
        return [int(inside[k]) for k in (j - 1, j) if 0 <= k < len(inside)]

    n = int(runs[-1])
    later_needed = int(probabilities[1] > 0) + int(probabilities[2] > 0)
    lo1 = int(runs[1]) if probabilities[0] > 0 and len(runs) > 1 else 0
    hi1 = int(runs[-1 - later_needed]) if len(runs) > later_needed else -1
    best = None
    for c1 in near(targets[0], lo1, hi1):
        after = runs[runs > c1]
        lo2 = int(after[0]) if probabilities[1] > 0 and len(after) else c1
        hi2 = int(runs[-2]) if probabilities[2] > 0 and len(runs) > 1 else n
        for c2 in near(targets[1], lo2, hi2):
            key = (abs(c1 - targets[0]) + abs(c2 - targets[1]), -c1, -c2)
            if ok(c1, c2) and (best is None or key < best[0]):
                best = (key, c1, c2)
    return (best[1], best[2]) if best else (-1, -1)


# ---- on the workers ------------------------------------------------------------------------------

class NotOnWorkers(Exception):
    """This column's split must be computed in one process (see the module docstring)."""


def _parse_part(pdf: pd.DataFrame, column: str, sample, datetime_format: str | None, folder: str, index: int):
    """A partition's kept rows and their date keys, saved as ``keys-<index>.npy`` / ``rows-<index>.npy`` in
    ``folder``. Returns ``(rows kept, first missing (row, message) or None, first unparseable (row, message)
    or None, whether string dates would need a guessed format, (first row, rows) of the partition)``."""
    all_rows = pdf[ROW].to_numpy(dtype=np.int64)
    span = (partition_start(all_rows) if len(all_rows) else 0, len(all_rows))
    kept = kept_mask(all_rows, sample)
    rows = all_rows[kept]
    values = pdf[column].reset_index(drop=True)[kept].reset_index(drop=True)
    missing = values.isna().to_numpy()
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        message = str(row_error(rows, i, column, "the datetime split needs a value in every row, got a missing value"))
        return len(rows), (int(rows[i]), message), None, False, span
    typed = pd.api.types.is_datetime64_any_dtype(values.dtype) or (
        pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype))
    if not typed and not datetime_format:
        iso = pd.to_datetime(values.astype("string").str.strip(), format="ISO8601", errors="coerce", utc=True)
        if iso.isna().to_numpy().any():
            return len(rows), None, None, True, span  # a guessed format would depend on the whole column
    try:
        keys = date_keys(values, rows, column, datetime_format)
    except DataError as exc:
        return len(rows), None, (_row_of(str(exc)), str(exc)), False, span
    np.save(Path(folder) / f"keys-{index:05d}.npy", _ordered(keys))
    np.save(Path(folder) / f"rows-{index:05d}.npy", rows)
    return len(rows), None, None, False, span


def _row_of(message: str) -> int:
    return int(message.split(",", 1)[0].removeprefix("row "))


def _ordered(keys: np.ndarray) -> np.ndarray:
    """Keys (int64 nanoseconds or float64 numbers) as uint64 in the same order."""
    if keys.dtype == np.float64:
        bits = (keys + 0.0).view(np.uint64)  # -0.0 is 0.0: one date, as the definition compares them
        return np.where(bits >> np.uint64(63), ~bits, bits | np.uint64(1 << 63))
    return keys.astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63)


def _keys(folder: str, index: int) -> np.ndarray:
    return npy.load(Path(folder) / f"keys-{index:05d}.npy")


def _histogram(folder: str, index: int, lo: int, hi: int) -> np.ndarray:
    keys = _keys(folder, index)
    inside = keys[(keys >= np.uint64(lo)) & (keys <= np.uint64(hi))]
    width = (hi - lo) // BINS + 1
    return np.bincount(((inside - np.uint64(lo)) // np.uint64(width)).astype(np.int64), minlength=BINS)


def _between(folder: str, index: int, lo: int, hi: int) -> np.ndarray:
    keys = _keys(folder, index)
    return keys[(keys >= np.uint64(lo)) & (keys <= np.uint64(hi))]


def _count_up_to(folder: str, index: int, bound: int) -> int:
    return int((_keys(folder, index) <= np.uint64(bound)).sum())


def _select(folder: str, parts: int, rank: int) -> int:
    """The ``rank``-th smallest (0-based) key of every partition's keys file."""
    lo, hi, before = 0, (1 << 64) - 1, 0
    while True:
        histogram = summed([delayed(_histogram)(folder, i, lo, hi) for i in range(parts)])
        ends = np.cumsum(histogram)
        b = int(np.searchsorted(ends, rank - before, side="right"))
        width = (hi - lo) // BINS + 1
        before += int(ends[b] - histogram[b])
        lo, hi = lo + b * width, min(hi, lo + (b + 1) * width - 1)
        if histogram[b] <= SMALL or lo == hi:
            found = np.sort(np.concatenate(dask_compute([delayed(_between)(folder, i, lo, hi) for i in range(parts)])))
            return int(found[rank - before])


def _write(folder: str, index: int, bounds: tuple, path: str, offset: int, n_rows: tuple[int, int]) -> np.ndarray:
    """A partition's split ids written into ``split.npy`` at its rows' place: keys up to ``bounds[0]`` are
    train, up to ``bounds[1]`` validation (None: no key), the rest test; -1 for rows not sampled."""
    lo, count = n_rows
    out = np.full(count, -1, dtype=np.int8)
    if count:
        keys, rows = _keys(folder, index), npy.load(Path(folder) / f"rows-{index:05d}.npy")
        split = np.full(len(keys), 2, dtype=np.int8)
        for split_id, bound in ((1, bounds[1]), (0, bounds[0])):
            if bound is not None:
                split[keys <= np.uint64(bound)] = split_id
        out[rows - lo] = split
        write_at(path, out, offset + lo)
    return np.bincount(out[out >= 0], minlength=3).astype(np.int64)


def datetime_on_workers(parts: list, n: int, cfg, sample, path: Path, datetime_format: str | None) -> list[int]:
    """``split.npy`` of the datetime split of the kept rows, by Dask tasks: the bytes ``datetime_split`` gives
    in one process. Raises ``NotOnWorkers`` where the column must go to one process."""
    folder = path.parent / "_dates"
    folder.mkdir(exist_ok=True)
    try:
        return _on_workers(parts, n, cfg, sample, path, datetime_format, str(folder))
    finally:
        for file in folder.glob("*.npy"):
            file.unlink()
        folder.rmdir()


def _on_workers(parts, n, cfg, sample, path: Path, datetime_format, folder: str) -> list[int]:
    parsed = dask_compute([delayed(_parse_part)(p, cfg.column, sample, datetime_format, folder, i)
                           for i, p in enumerate(parts)])
    missing = [m for _k, m, _e, _g, _s in parsed if m is not None]
    if missing:  # a missing value anywhere comes first, as in one process
        raise DataError(min(missing)[1])
    if any(guessed for _k, _m, _e, guessed, _s in parsed):
        raise NotOnWorkers("string dates whose format a parse would guess from the whole column")
    errors = [e for _k, _m, e, _g, _s in parsed if e is not None]
    if errors:
        raise DataError(min(errors)[1])
    total = sum(k for k, *_rest in parsed)
    counts = split_counts(total, cfg.probabilities)
    bounds, cuts, c = [], [], 0
    for target in (counts[0], counts[0] + counts[1]):
        cut = max(target, c)
        if total == 0 or cut <= 0:
            bound, c = None, 0
        elif cut >= total:
            bound, c = (1 << 64) - 1, total
        else:  # the cut's key and the one before it: equal, the cut moves past their run
            at, before = _select(folder, len(parts), cut), _select(folder, len(parts), cut - 1)
            bound = at if at == before else before
            c = sum(dask_compute([delayed(_count_up_to)(folder, i, bound) for i in range(len(parts))]))
        bounds.append(bound)
        cuts.append(c)
    sizes = (cuts[0], cuts[1] - cuts[0], total - cuts[1])
    if total >= 3 and not all(size > 0 or p <= 0 for size, p in zip(sizes, cfg.probabilities, strict=True)):
        raise NotOnWorkers("the forward cuts leave a split empty: the definition picks cuts among run starts")
    offset = new_split_file(path, n)
    written = dask_compute([delayed(_write)(folder, i, tuple(bounds), str(path), offset, span)
                            for i, (*_rest, span) in enumerate(parsed)])
    return [int(x) for x in np.sum(written, axis=0)] if written else [0, 0, 0]
