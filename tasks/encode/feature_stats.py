"""What the data report (``tasks/report/page.py``) plots, recorded by the encode stage per partition.

The report reads only the artifact (manifest statistics, fitted metadata): it never makes a second
pass over the data. So ``encode`` records, per partition, mergeable statistics over the rows it
publishes (every split; oversampled training rows counted as published):

* number: ``encode.values.<f>``, a histogram of the values as read (after the missing-value fill),
  and ``encode.encoded.<f>``, one of the published values (normalized, or bin ids). Bucket starts
  come from the fitted metadata only (``HIST_BUCKETS`` equal buckets from the fitted min to max,
  and for the published values from the encoded min to max; integer-aligned buckets when the fitted
  min and max are integers: ``integer_starts``; logarithmic buckets for a heavy-tailed column:
  ``log_starts``), never from the partition, so the
  partials merge to the same counts for any partitioning; values outside the fitted range (other
  splits) fall in the two outer buckets.
* sequence, text (int mode): ``encode.length.<f>`` (row lengths before truncation, counting
  ``<START>``/``<STOP>``) and ``encode.truncated.<f>`` (``tasks.runtime.statistics.sequence_lengths``). The
  length is read off the encoded ids (non-``<PAD>`` slots); only rows that fill every slot, which may
  have been truncated, are tokenized again to learn their full length.
* set, bag, sequence, text: ``encode.oov.<split>.<f>``, the rows with at least one ``<UNK>`` token
  (category features get theirs from ``tasks.encode.stage``: rows that are ``<UNK>``).
* binary features and category outputs: ``encode.classes.<split>.<f>``, a histogram of the published
  ids (bucket ``i + 1`` = id ``i``; binary: 0 false, 1 true): per split, after balancing.
"""

from __future__ import annotations

import numpy as np

from core.lazy import pandas as pd
from tasks.runtime.statistics import Counter, Histogram, Statistic, sequence_lengths

HIST_BUCKETS = 30
PAD_ID = 0


def range_starts(lo: float, hi: float, buckets: int = HIST_BUCKETS) -> list[float]:
    """Bucket starts for ``buckets`` equal buckets over ``[lo, hi]``: the last start is the float just
    above ``hi``, so ``hi`` itself counts in the last inner bucket and only larger values overflow."""
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo, float(np.nextafter(lo, np.inf))]
    starts = np.linspace(lo, hi, buckets + 1)
    starts[0], starts[-1] = lo, np.nextafter(hi, np.inf)
    return np.maximum.accumulate(starts).tolist()  # sorted even where rounding would not be


def integer_starts(lo: float, hi: float, buckets: int = HIST_BUCKETS) -> list[float] | None:
    """Buckets of whole-number width centred on the integers when the fitted range runs between two integers
    (a day of the month, a count): one bucket per integer up to ``2 * buckets`` of them, else ``w``
    integers each. Equal buckets over ``[1, 31]`` would put one day in some buckets and two in others (a
    fake spike of twice the rows) and days 30 and 31 in one. None: not an integer range."""
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= lo or not (lo.is_integer() and hi.is_integer()):
        return None
    span = int(hi - lo) + 1
    width = 1 if span <= 2 * buckets else -(-span // buckets)
    count = -(-span // width)
    return [lo - 0.5 + width * k for k in range(count + 1)]


def id_starts(n: int) -> list[float]:
    """Starts for integer ids ``0..n-1``: bucket ``i + 1`` of the histogram holds id ``i``."""
    return [float(i) for i in range(n + 1)]


def heavy_tailed(metadata: dict) -> bool:
    """Whether equal buckets over the fitted range would put most values in the first two: the fitted mean
    sits within the first ``2 / HIST_BUCKETS`` of ``[min, max]`` (a lognormal or a count with a few huge
    values). Such a column gets logarithmic buckets (``log_starts``)."""
    lo, hi, mean = metadata.get("min"), metadata.get("max"), metadata.get("mean")
    if lo is None or hi is None or mean is None or not np.isfinite([lo, hi, mean]).all() or hi <= lo:
        return False
    return (float(mean) - float(lo)) / (float(hi) - float(lo)) < 2 / HIST_BUCKETS


def log_starts(lo: float, hi: float, mean: float, buckets: int = HIST_BUCKETS) -> list[float]:
    """Buckets equal on a logarithmic axis over ``[lo, hi]``: geometric when ``lo > 0``, else over ``lo + x``
    with ``x`` on ``log1p(x / s)``, ``s`` a thirtieth of the mean's distance from ``lo`` (the range where
    a linear axis turns logarithmic). The last start is the float just above ``hi``."""
    lo, hi = float(lo), float(hi)
    if lo > 0:
        starts = np.geomspace(lo, hi, buckets + 1)
    else:
        scale = max((float(mean) - lo) / buckets, np.finfo(np.float64).tiny)
        starts = lo + scale * np.expm1(np.linspace(0.0, np.log1p((hi - lo) / scale), buckets + 1))
    starts[0], starts[-1] = lo, np.nextafter(hi, np.inf)
    return np.maximum.accumulate(starts).tolist()


def number_starts(feature, metadata: dict) -> tuple[list[float], list[float]] | None:
    """Bucket starts (as read, as published) of a number feature, from its fitted metadata only. A heavy-tailed
    column's buckets are logarithmic, and its published buckets are the encoded images of the raw ones (every
    normalization but bins is increasing), so the two histograms show the same buckets."""
    lo, hi = metadata.get("min"), metadata.get("max")
    if lo is None or hi is None:
        return None
    heavy = heavy_tailed(metadata) and metadata.get("normalization") != "bins"
    raw = log_starts(lo, hi, metadata["mean"]) if heavy else integer_starts(lo, hi) or range_starts(lo, hi)
    if metadata.get("normalization") == "bins":
        return raw, id_starts(int(metadata["num_bins"]))
    if heavy:
        images = feature.encode(pd.Series([*raw[:-1], float(hi)], dtype="float64"), metadata)[feature.name]
        images = np.asarray(images, dtype=np.float32)
        if np.all(np.diff(images) > 0):  # distinct float32 images: the raw buckets, as published
            top = np.nextafter(images[-1], np.float32(np.inf))  # the largest published value counts inside
            return raw, [*images[:-1].astype(np.float64).tolist(), float(top)]
    ends = feature.encode(pd.Series([float(lo), float(hi)], dtype="float64"), metadata)[feature.name]
    lo_out, hi_out = float(np.min(ends)), float(np.max(ends))
    return raw, integer_starts(lo_out, hi_out) or range_starts(lo_out, hi_out)


def _finite(values) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    return x[np.isfinite(x)]


def _sequence_lengths(feature, values: pd.Series, ids: np.ndarray, width: int) -> np.ndarray:
    lengths = (ids != PAD_ID).sum(axis=1).astype(np.int64)
    full = np.flatnonzero(lengths >= width)
    if len(full):
        extra = 2 if getattr(feature, "uses_start_stop", False) else 0
        lengths[full] = np.asarray(feature.tokens(values.iloc[full]).lengths, dtype=np.int64) + extra
    return lengths


def _rows(values, index: np.ndarray | None):
    return values if index is None else values[index]


def published_statistics(features, metadata: dict, frame: pd.DataFrame, encoded: dict[str, np.ndarray],
                         index: np.ndarray | None) -> list[Statistic]:
    """The statistics over every published row of one encoded partition, whatever its split (number
    histograms, sequence lengths): ``frame`` is the prepared partition, ``encoded`` its encoded
    columns, ``index`` the published rows (oversampled training rows repeated; None: every row once)."""
    out: list[Statistic] = []
    for f in features:
        meta, col = metadata[f.name], encoded.get(f.name)
        if col is None:
            continue
        if f.type_name == "number":
            starts = number_starts(f, meta)
            if starts is not None:
                before = Histogram(f"encode.values.{f.name}", starts[0])
                before.add_array(_finite(_rows(frame[f.name].to_numpy(dtype="float64", na_value=np.nan), index)))
                after = Histogram(f"encode.encoded.{f.name}", starts[1])
                after.add_array(_finite(_rows(col, index)))
                out += [before, after]
        unk = (meta.get("str2idx") or {}).get("<UNK>")
        if (f.type_name in ("set", "bag", "sequence", "text") and unk is not None and col.ndim == 2
                and "max_sequence_length" in meta and len(_rows(col, index))):  # ids, n x L
            values = frame[f.name] if index is None else frame[f.name].take(index).reset_index(drop=True)
            lengths = _sequence_lengths(f, values, _rows(col, index), col.shape[1])
            out += sequence_lengths("encode", f.name, lengths, int(meta["max_sequence_length"])).items.values()
    return out


def split_statistics(features, metadata: dict, columns: dict[str, np.ndarray], split_name: str) -> list[Statistic]:
    """The per-split statistics of one split of one encoded partition (OOV rows, class counts)."""
    out: list[Statistic] = []
    for f in features:
        meta, col = metadata[f.name], columns.get(f.name)
        if col is None:
            continue
        kind = f.type_name
        unk = (meta.get("str2idx") or {}).get("<UNK>")
        if kind in ("set", "bag", "sequence", "text") and unk is not None and col.ndim == 2:
            if "max_sequence_length" in meta:  # ids, n x L
                out.append(Counter(f"encode.oov.{split_name}.{f.name}", int((col == unk).any(axis=1).sum())))
            elif col.shape[1] == meta.get("vocab_size"):  # multi-hot / counts, n x vocab_size
                out.append(Counter(f"encode.oov.{split_name}.{f.name}", int((col[:, unk] != 0).sum())))
        n = 2 if kind == "binary" else meta.get("vocab_size") if f.is_output and kind == "category" else None
        if n is not None and col.ndim == 1:
            hist = Histogram(f"encode.classes.{split_name}.{f.name}", id_starts(int(n)))
            hist.add_array(col.astype(np.float64))
            out.append(hist)
    return out
