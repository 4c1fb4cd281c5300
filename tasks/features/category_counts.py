"""category's fit counts: each distinct value of a column and its count, the counts of the values dropped
from the vocabulary per OOV bucket, and ``Candidates``, the counted values reduced to what can still enter the
vocabulary (``tasks.features.category`` in memory, ``tasks.vocab.category`` at scale)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.lazy import pandas as pd
from storage import string_hash
from tasks.features.base import as_strings, by_count_then, dictionary_array
from tasks.features.category_options import UNK, CategoryPreprocessing


class Candidates:
    """Counted values of one feature, reduced to what can still enter the vocabulary.

    ``values``/``counts``: values with count >= min_frequency, at most ``most_common`` of them
    (sorted by count desc, then value asc, or with ``symbols: ludwig`` first row asc, when ``ordered``);
    ``first``: each value's first fit row (input row position; zeros unless ``symbols: ludwig``);
    ``total``: all non-null fit values counted; ``unk``: how many were the literal ``<UNK>``; ``oov``:
    per OOV bucket, the counts of values already dropped (B > 0); ``cut``: whether ``most_common``
    dropped a value. Reductions of disjoint sets of values ``combine`` exactly (the shuffle's reducers
    own disjoint sets of values).
    """

    def __init__(self, values: pa.Array, counts: np.ndarray, total: int, unk: int, oov: np.ndarray | None,
                 first: np.ndarray | None = None, cut: bool = False):
        self.values, self.counts, self.total, self.unk, self.oov = values, counts, total, unk, oov
        self.first = np.zeros(len(counts), np.int64) if first is None else np.asarray(first, dtype=np.int64)
        self.cut = cut

    @classmethod
    def reduce(cls, values: pa.Array, counts: np.ndarray, options: CategoryPreprocessing,
               ordered: bool = True, first: np.ndarray | None = None) -> "Candidates":
        """From distinct values and their counts (no nulls) and, for ``symbols: ludwig``, first rows."""
        values = values.cast(pa.string())
        counts = np.asarray(counts, dtype=np.int64)
        first = np.zeros(len(counts), np.int64) if first is None else np.asarray(first, dtype=np.int64)
        is_unk = pc.equal(values, UNK).to_numpy(zero_copy_only=False)
        total, unk = int(counts.sum()), int(counts[is_unk].sum())
        ludwig = options.symbols == "ludwig"
        special = np.zeros_like(is_unk) if ludwig else is_unk  # Ludwig ranks a filled <UNK> like any value
        eligible = ~special & (counts >= options.min_frequency)
        dropped = ~special & ~eligible
        oov = bucket_counts(values.filter(pa.array(dropped)), counts[dropped], options.num_oov_buckets)
        if eligible.all():
            table = pa.table({"value": values, "count": counts, "first": first})
        else:
            mask = pa.array(eligible)
            table = pa.table({"value": values.filter(mask), "count": counts[eligible], "first": first[eligible]})
        return cls.top(table, total, unk, oov, options, ordered, cut=bool(ludwig and dropped.any()))

    @classmethod
    def top(cls, table: pa.Table, total: int, unk: int, oov: np.ndarray | None, options: CategoryPreprocessing,
            ordered: bool = True, cut: bool = False) -> "Candidates":
        """Keep the ``most_common`` first of ``table`` (value, count[, first]); what is cut counts into the
        buckets. ``cut``: a value was already cut before (by a reducer)."""
        if "first" not in table.column_names:
            table = table.append_column("first", pa.array(np.zeros(table.num_rows, np.int64)))
        keep = min(options.most_common, table.num_rows)
        tie = "first" if options.symbols == "ludwig" else "value"  # Ludwig: equal counts in first-occurrence order
        if ordered or keep < table.num_rows:
            table = table.take(pa.array(by_count_then(table, tie)))
        dropped = table.slice(keep)
        if oov is not None and dropped.num_rows:
            oov = oov + bucket_counts(dropped.column("value"), dropped.column("count").to_numpy(), len(oov))
        table = table.slice(0, keep)
        return cls(table.column("value").combine_chunks(), table.column("count").to_numpy(), total, unk, oov,
                   table.column("first").to_numpy(), cut or dropped.num_rows > 0)

    @classmethod
    def combine(cls, parts: list["Candidates"], options: CategoryPreprocessing) -> "Candidates":
        values = pa.concat_arrays([p.values for p in parts]) if parts else pa.array([], pa.string())
        counts = np.concatenate([p.counts for p in parts]) if parts else np.zeros(0, np.int64)
        first = np.concatenate([p.first for p in parts]) if parts else np.zeros(0, np.int64)
        return cls.top(pa.table({"value": values, "count": counts, "first": first}), sum(p.total for p in parts),
                       sum(p.unk for p in parts), sum_buckets([p.oov for p in parts], options.num_oov_buckets), options,
                       cut=any(p.cut for p in parts))


def sum_buckets(parts: list[np.ndarray | None], buckets: int) -> np.ndarray | None:
    if not buckets:
        return None
    out = np.zeros(buckets, dtype=np.int64)
    for p in parts:
        out += p
    return out


def bucket_counts(values: pa.Array, counts: np.ndarray, buckets: int) -> np.ndarray | None:
    if not buckets:
        return None
    if len(values) == 0:
        return np.zeros(buckets, dtype=np.int64)
    b = string_hash.buckets(string_hash.hash_strings(values), buckets)
    return np.bincount(b, weights=np.asarray(counts, dtype=np.float64), minlength=buckets).round().astype(np.int64)


def value_counts(values: pd.Series) -> tuple[pa.Array, np.ndarray, int]:
    """Each distinct non-null value (strings), its count (int64) and the count of nulls. A dictionary column
    (``keeps_dictionary``; its dictionary holds each value once: ``tasks.ingest.common.dictionary_encoded``) is
    counted by its rows' indices, not by hashing every row's string."""
    d = dictionary_array(values)
    if d is None:
        arr = as_strings(values)
        vc = pc.value_counts(arr)  # nulls counted as one entry, dropped here (not the strings copied without them)
        if arr.null_count:
            vc = vc.filter(vc.field("values").is_valid())
        return vc.field("values").cast(pa.string()), vc.field("counts").cast(pa.int64()).to_numpy().copy(), \
            arr.null_count
    codes = d.indices if d.null_count == 0 else d.indices.drop_null()
    counts = np.bincount(codes.to_numpy(zero_copy_only=False), minlength=len(d.dictionary))
    seen = np.flatnonzero(counts)
    return d.dictionary.take(pa.array(seen)), counts[seen].astype(np.int64), d.null_count
