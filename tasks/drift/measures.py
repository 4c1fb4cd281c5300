"""Drift and skew measures on encoded columns: vectorized numpy, no per-row Python.

A feature's **reference** is its fitted distribution, made from the train split's encoded column:

* number (and binned number): the train split's decile edges (``np.quantile``, repeated edges merged) and
  the count of train values in each of the bins they make; the **population stability index** (PSI)
  compares the new values' bin fractions with the reference's. The encoded value is a monotone function of
  the raw value (z-score, min-max, log1p, bin id), so deciles of the encoded values are the deciles of the
  raw values and PSI is the same on either;
* category, binary, and the tokens of set, bag, sequence and text: the frequency of each id (the first
  ``TOP_IDS`` ids, most frequent first as vocabularies are ordered, and the rest pooled); the
  **L-infinity distance** of the two frequency vectors (TFDV's measure), where the pooled rest of the
  reference is spread evenly over its ids; and the **OOV rate**: the share of ``<UNK>`` (id 0 of a
  category, 1 of a token feature) in the new data minus the reference's.

A reference is a ``Histogram`` (``tasks.runtime.statistics``) named ``drift.reference.<feature>``, so it
travels in the manifest's statistics: bucket ``i`` of a number's holds the values in
``[edge[i-1], edge[i])``; bucket ``i < TOP_IDS`` of a category's holds id ``i``, the last bucket the rest.
"""

from __future__ import annotations

import numpy as np

from tasks.runtime.statistics import Counter, Histogram

TOP_IDS = 200  # ids whose frequency a category reference keeps one by one
EPS = 1e-4  # a bin's fraction floor in PSI (an empty bin would make it infinite)
NUMBER_TYPES = ("number", "numerical")
CATEGORY_TYPES = ("category", "binary")
TOKEN_TYPES = ("set", "bag", "sequence", "text")
REFERENCE = "drift.reference."
TAIL_IDS = "drift.reference_tail_ids."


def kind(feature_type: str) -> str | None:
    """``number``, ``category`` (ids, tokens included) or None (not measured: dates, vectors, media)."""
    if feature_type in NUMBER_TYPES:
        return "number"
    if feature_type in CATEGORY_TYPES or feature_type in TOKEN_TYPES:
        return "category"
    return None


def unk_id(feature_type: str) -> int | None:
    """The ``<UNK>`` id: 0 for a category, 1 for a token feature (``tasks.features.tokens``), none for binary."""
    return 0 if feature_type == "category" else 1 if feature_type in TOKEN_TYPES else None


def id_counts(feature_type: str, column: np.ndarray, size: int) -> np.ndarray:
    """How often each id ``0..size-1`` occurs: a category's ids, a set's or bag's columns (a row holds the
    token when its slot is non-zero), a sequence's or text's ids without ``<PAD>`` (0)."""
    column = np.asarray(column)
    if feature_type in ("set", "bag") and column.ndim == 2:
        counts = np.count_nonzero(column, axis=0).astype(np.int64)
        return np.pad(counts, (0, max(size - len(counts), 0)))[:size] if size else counts
    ids = column.astype(np.int64, copy=False).ravel()
    if feature_type in ("sequence", "text"):
        ids = ids[ids != 0]
    return np.bincount(ids, minlength=size)


def number_reference(name: str, train: np.ndarray) -> Histogram:
    """The train values' decile edges and bin counts (NaN values left out)."""
    values = np.asarray(train, dtype=np.float64).ravel()
    values = values[np.isfinite(values)]
    edges = np.unique(np.quantile(values, np.linspace(0.1, 0.9, 9))) if len(values) else np.array([], np.float64)
    return Histogram(REFERENCE + name, edges.tolist(), number_counts(edges, values).tolist())


def number_counts(edges, values: np.ndarray) -> np.ndarray:
    """Counts of ``values`` in the buckets ``[-inf, e0), [e0, e1), ..., [en, inf)`` (``Histogram``'s); NaN not
    counted. float32 values are compared with each edge rounded up to float32: for a float32 ``v``,
    ``v >= e`` exactly when ``v >= ceil32(e)``, so the counts are the float64 comparison's."""
    values = np.asarray(values).ravel()
    edges = np.asarray(edges, dtype=np.float64)
    if values.dtype == np.float32:
        rounded = edges.astype(np.float32)
        edges = np.where(rounded.astype(np.float64) < edges, np.nextafter(rounded, np.float32(np.inf)), rounded)
    else:
        values = values.astype(np.float64, copy=False)
    # one vectorized comparison per edge (a decile has at most 9): faster than a binary search per value
    at_least = np.array([np.count_nonzero(values >= e) for e in edges], dtype=np.int64)
    valid = len(values) - (int(np.count_nonzero(np.isnan(values))) if values.dtype.kind == "f" else 0)
    return -np.diff(np.concatenate([[valid], at_least, [0]]))


def category_reference(name: str, counts: np.ndarray) -> tuple[Histogram, Counter]:
    """The first ``TOP_IDS`` ids' counts and the rest pooled in the last bucket; how many ids the rest has."""
    top = min(len(counts), TOP_IDS)
    pooled = np.append(counts[:top], counts[top:].sum())
    return (Histogram(REFERENCE + name, [i + 0.5 for i in range(top)], pooled.tolist()),
            Counter(TAIL_IDS + name, max(len(counts) - top, 0)))


def psi(reference_counts, new_counts) -> float:
    """Population stability index: sum over bins of (q - p) * ln(q / p), fractions floored at ``EPS``."""
    p = _fractions(reference_counts)
    q = _fractions(new_counts)
    if p is None or q is None:
        return 0.0
    p, q = np.maximum(p, EPS), np.maximum(q, EPS)
    return float(np.sum((q - p) * np.log(q / p)))


def linf(reference: Histogram, tail_ids: int, new_counts: np.ndarray, skip: int | None = None) -> float:
    """L-infinity distance between the reference's id frequencies and ``new_counts``' (ids past the
    reference's kept ones compared with the reference's pooled rest spread evenly over ``tail_ids`` ids).
    ``skip``: the ``<UNK>`` id, left out: unseen values are many values that all encode as it, which the OOV
    rate measures (TFDV compares them value by value)."""
    ref = np.asarray(reference.counts, dtype=np.float64)
    top = len(ref) - 1
    new = np.asarray(new_counts, dtype=np.float64)
    if ref.sum() == 0 or new.sum() == 0:
        return 0.0
    p = ref / ref.sum()
    q = new / new.sum()
    head = np.pad(q[:top], (0, max(top - len(q[:top]), 0)))
    if skip is not None and skip < top:
        head[skip] = p[skip]
    distance = float(np.max(np.abs(head - p[:top]))) if top else 0.0
    tail = q[top:]
    if len(tail):
        spread = p[top] / tail_ids if tail_ids else 0.0
        distance = max(distance, float(np.max(np.abs(tail - spread))))
    return distance


def oov_rate(reference: Histogram, unk: int | None, new_counts: np.ndarray) -> float | None:
    """The new data's share of ``<UNK>`` minus the reference's (None: the feature has no ``<UNK>``)."""
    ref = np.asarray(reference.counts, dtype=np.float64)
    new = np.asarray(new_counts, dtype=np.float64)
    if unk is None or unk >= len(ref) - 1 or new.sum() == 0:
        return None
    before = ref[unk] / ref.sum() if ref.sum() else 0.0
    after = new[unk] / new.sum() if unk < len(new) else 0.0
    return float(after - before)


def _fractions(counts) -> np.ndarray | None:
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    return counts / total if total else None


def status(value: float, warn: float | None, fail: float | None) -> tuple[str, float | None]:
    """``ok``, ``warn`` or ``fail`` and the threshold that decided it (the warn one when ok)."""
    if fail is not None and value > fail:
        return "fail", fail
    if warn is not None and value > warn:
        return "warn", warn
    return "ok", warn if warn is not None else fail


def raw_value(encoded: float, meta: dict) -> float:
    """A number's encoded value as the raw value it encodes (the normalizations are monotone and invertible;
    a bin id stays a bin id)."""
    norm = meta.get("normalization", "none")
    if norm == "zscore":
        return encoded * (meta.get("std") or 1.0) + meta.get("mean", 0.0)
    if norm == "minmax":
        return encoded * ((meta.get("max", 1.0) - meta.get("min", 0.0)) or 1.0) + meta.get("min", 0.0)
    if norm == "iq":
        return encoded * ((meta.get("q3", 1.0) - meta.get("q1", 0.0)) or 1.0) + meta.get("q2", 0.0)
    if norm == "log1p":
        return float(np.expm1(encoded))
    return encoded


def bin_labels(reference: Histogram, feature_type: str, meta: dict, top: int) -> list[str]:
    """Names of the first ``top`` buckets of a reference, for the report: a number's raw value ranges
    (``< a``, ``a to b``, ``>= z``), a category's values (its inline ``idx2str``, a binary's labels) or ids."""
    if kind(feature_type) == "number":
        edges = [f"{raw_value(float(e), meta):.4g}" for e in reference.starts]
        if not edges:
            return ["all"]
        inner = [f"{a} to {b}" for a, b in zip(edges[:-1], edges[1:], strict=True)]
        return [f"< {edges[0]}", *inner, f">= {edges[-1]}"][:top]
    kept = len(reference.counts) - 1
    names = meta.get("idx2str") if isinstance(meta.get("idx2str"), list) else \
        meta.get("bool2str") or (["false", "true"] if feature_type == "binary" else [])
    labels = [str(names[i]) if i < len(names) else f"id {i}" for i in range(min(kept, top))]
    return labels + (["other ids"] if kept < top else [])
