"""category: one int32 id per row.

Values are compared as strings (``1`` and ``"1"`` are the same category, as in Ludwig). Options
(NVTabular ``Categorify`` / TF Transform ``compute_and_apply_vocabulary`` semantics):

* ``most_common`` (default 10000): keep the N most frequent values;
* ``min_frequency`` (default 1): values seen fewer times in the fit rows are not in the vocabulary;
* ``num_oov_buckets`` (default 0): values not in the vocabulary (rare, cut by ``most_common``, or
  unseen at fit time) are hashed into that many buckets instead of all becoming ``<UNK>``;
* ``hash_buckets`` (default none): no vocabulary at all; every value is hashed into N buckets;
* ``encoded: true`` with ``cardinality: N``: the column already holds integer ids in ``[0, N)``
  (pre-encoded data, e.g. an NVIDIA FeatureSpec dataset): each id is kept as given, nothing is
  fitted, ``vocab_size`` is N. An id outside ``[0, N)`` (or a value that is not an integer) is an
  error naming the row and column, unless ``out_of_range_id: K`` (an id in ``[0, N)``) maps every
  out-of-range id to K, as TensorFlow's ``categorical_column_with_identity(default_value=K)`` does.
  A missing value is filled with ``fill_value`` (an id), else ``out_of_range_id``; with neither, a
  missing value is an error naming its row (``missing_value_strategy`` such as ``fill_with_mode``
  or ``drop_row`` works as for any feature).

Id layout with a vocabulary (B = ``num_oov_buckets``)::

    0                 <UNK>: a missing value (filled with "<UNK>" by default) and, when B = 0,
                      every value not in the vocabulary
    1 .. B            OOV buckets: a value not in the vocabulary -> 1 + hash(value) mod B
                      (named "<OOV_0>" .. "<OOV_{B-1}>" in idx2str)
    B+1 .. size-1     the vocabulary: frequency descending, ties by the value's string ascending

So with B > 0 the known values start after the buckets. With ``hash_buckets: N`` the ids are 0 for
``<UNK>`` (missing) and ``1 + hash(value) mod N`` for everything else (``vocab_size`` = N + 1).
The hash is ``storage.string_hash`` (XXH3-64 of the UTF-8 bytes with a fixed seed, from the
``xxhash`` library): the same in every process, on every machine and for any partitioning. Metadata
made with another hash (``hash: fnv1a64-fmix64-prepflow1``, before prepflow used XXH3) is refused
at encode time, naming the feature: its bucket ids differ.

Metadata: ``vocab_size``; ``num_oov_buckets`` and ``hash`` (the hash's name) when B > 0;
``hash_buckets`` and ``hash`` for hashing; ``encoded: true`` and ``cardinality`` for pre-encoded ids. A vocabulary of up to ``INLINE_MAX`` ids is inlined as
Ludwig's ``idx2str``/``str2idx``/``str2freq`` (``str2freq`` counts the fit rows per id, so
``<UNK>`` and each bucket have their count). A larger one is stored by the vocab stage as Parquet
(``vocab_file``, see ``storage.vocab_store``: row i = id i, columns ``value`` and ``count``) and
encoding joins against it partition by partition. Fitting at scale (per-partition counts, a
shuffle, exact ordering) is ``tasks.vocab.category``; the type's combiner (``create``/``add``/``merge``/
``extract``, ``tasks.runtime.combine``) gives the same result in memory.

This module is the feature type; its options and the id layout's constants are
``tasks.features.category_options``, the fit's counts and candidates ``tasks.features.category_counts``, and
the per-row ids from each distinct value's ``tasks.features.category_ids``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.errors import ConfigError, DataError, NotFittedError
from core.lazy import pandas as pd
from storage import string_hash, vocab_store
from tasks.features.base import (
    ColumnSpec,
    FeatureType,
    as_strings,
    dictionary_array,
    first_bad,
    is_dictionary,
)
from tasks.features.category_counts import Candidates, sum_buckets, value_counts
from tasks.features.category_ids import hash_ids, ids_by_code
from tasks.features.category_options import INLINE_MAX, MAX_IDS, UNK, CategoryPreprocessing, oov_name

__all__ = ["INLINE_MAX", "MAX_IDS", "UNK", "Candidates", "CategoryFeature", "CategoryPreprocessing", "oov_name",
           "sum_buckets"]


class CategoryFeature(FeatureType):
    type_name = "category"
    Preprocessing = CategoryPreprocessing
    default_missing_strategy = "fill_with_const"
    default_fill_value = UNK

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        if self.encoded:
            return self._cast_ids(values, rows)
        if pd.api.types.is_float_dtype(values.dtype):
            x = values.to_numpy(dtype="float64", na_value=np.nan)
            whole = np.isfinite(x) & (x == np.round(x))
            text = pd.Series(np.where(whole, np.nan_to_num(x).astype(np.int64).astype(str), x.astype(str)),
                             index=values.index, dtype="string")
            return text.mask(np.isnan(x))
        if self.ludwig:  # Ludwig compares stripped values (vocabulary and lookup)
            return values.astype("string").str.strip()
        if is_dictionary(values):  # kept as ingest stored it (keeps_dictionary): strings already
            return values
        return values.astype("string")

    @property
    def keeps_dictionary(self) -> bool:
        """A category filled with ``<UNK>`` (the default; not Ludwig's symbols, not pre-encoded ids): its fit
        counts each distinct value of a partition's dictionary by the rows' indices, and encode looks up each
        distinct value once."""
        return self.reads_missing_as_fill()

    def fill_value_from_config(self, value: Any) -> str | int | None:
        if self.encoded:
            return self._fill_id(value)
        return str(value)

    @property
    def hashed(self) -> bool:
        return self.options.hash_buckets is not None

    @property
    def encoded(self) -> bool:
        return self.options.encoded

    @property
    def ludwig(self) -> bool:
        return self.options.symbols == "ludwig"

    def vocab_file_first(self) -> int:
        """The reserved rows of this feature's vocabulary file that encoding does not look values up in:
        ``<UNK>`` and the OOV buckets (``_encode_with_file``), none with ``symbols: ludwig``."""
        return 0 if self.ludwig else 1 + self.options.num_oov_buckets

    def reads_missing_as_fill(self) -> bool:
        """An input filled with ``<UNK>`` (the default): a missing value counts as ``<UNK>`` in the fit (``add``)
        and encodes to its id 0, as a written ``<UNK>`` does. Not with ``symbols: ludwig`` (a filled ``<UNK>``
        is ranked like any value there) nor for pre-encoded ids."""
        fill = self.options.fill_value if self.options.fill_value is not None else self.default_fill_value
        return (not self.is_output and not self.ludwig and not self.encoded
                and self.missing_strategy == "fill_with_const" and fill == UNK)

    @property
    def needs_vocabulary(self) -> bool:
        """Whether fitting counts values into a vocabulary (not for hash buckets or pre-encoded ids)."""
        return not (self.hashed or self.encoded)

    # ---- pre-encoded ids (encoded: true) ------------------------------------------------------------
    def _cast_ids(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        """Raw column -> nullable Int64 ids, checked against ``cardinality`` (see the module docstring)."""
        n = self.options.cardinality
        if pd.api.types.is_bool_dtype(values.dtype):
            numbers, bad = pd.Series(np.nan, index=values.index), values.notna().to_numpy(dtype=bool)
        elif pd.api.types.is_numeric_dtype(values.dtype):
            numbers, bad = values.astype("float64"), np.zeros(len(values), bool)
        else:
            text = values.astype("string").str.strip()
            text = text.mask(text == "")
            numbers = pd.to_numeric(text, errors="coerce").astype("float64")
            bad = numbers.isna().to_numpy(dtype=bool) & text.notna().to_numpy(dtype=bool)
        x = numbers.to_numpy(dtype="float64", na_value=np.nan)
        present = ~np.isnan(x)
        bad |= present & ~(np.isfinite(x) & (x == np.round(x)))
        if bad.any():
            row, value = first_bad(bad, values, rows)
            raise DataError(f"row {row}, column '{self.column}': {self.describe()} (encoded: true) expects an "
                            f"integer id in [0, {n}), got {value!r}")
        outside = present & ((x < 0) | (x >= n))
        if outside.any():
            if self.options.out_of_range_id is None:
                row, value = first_bad(outside, values, rows)
                raise DataError(f"row {row}, column '{self.column}': {self.describe()} got id {value!r}, outside "
                                f"its cardinality {n} (ids 0..{n - 1}); set preprocessing.out_of_range_id to map "
                                "such ids to one id")
            x = np.where(outside, self.options.out_of_range_id, x)
        if not present.all() and self.missing_strategy == "fill_with_const" and self._fill_id_or_none() is None:
            row, _ = first_bad(~present, values, rows)
            raise DataError(f"row {row}, column '{self.column}': {self.describe()} (encoded: true) has a missing "
                            f"value; set preprocessing.fill_value (an id in [0, {n})), out_of_range_id, or a "
                            "missing_value_strategy")
        ids = pd.array(np.where(present, x, 0).astype(np.int64), dtype="Int64")
        ids[~present] = pd.NA
        return pd.Series(ids, index=values.index)

    def _fill_id_or_none(self) -> int | None:
        return self._fill_id(self.options.fill_value)

    def _fill_id(self, value: Any) -> int | None:
        """The configured fill as an id in [0, cardinality); the category default ``<UNK>`` (or none) means
        ``out_of_range_id`` (None without one). Anything else is a ``ConfigError``."""
        n = self.options.cardinality
        if value is None or value == UNK:  # an encoded column has no <UNK>
            value = self.options.out_of_range_id
            if value is None:
                return None
        try:
            fill = int(str(value).strip())
        except ValueError:
            fill = -1
        if not 0 <= fill < n:
            raise ConfigError(f"{self.describe()}: preprocessing.fill_value: expected an id in [0, {n}) "
                              f"(encoded: true), got {value!r}")
        return fill

    def encoded_metadata(self) -> dict:
        n = self.options.cardinality
        options = {"encoded": True, "cardinality": n, "out_of_range_id": self.options.out_of_range_id}
        return {"vocab_size": n, "encoded": True, "cardinality": n, "preprocessing": options}

    # ---- fit: a combiner over (value, count) tables; tasks.vocab.category runs it at scale --------------
    def create(self) -> pa.Table:
        return pa.table({"value": pa.array([], pa.string()), "count": pa.array([], pa.int64()),
                         "first": pa.array([], pa.int64())})

    def add(self, acc: pa.Table, values: pd.Series) -> pa.Table:
        """``values`` indexed by input row position (as the vocab stage gives them): with ``symbols: ludwig``
        each value's first row is kept (a min over partitions), Ludwig's order of equal counts."""
        if not self.needs_vocabulary:
            return acc
        if self.ludwig:
            arr = as_strings(values)
            valid = arr.is_valid()
            rows = pa.array(np.asarray(values.index.to_numpy(), dtype=np.int64)).filter(valid)
            grouped = pa.table({"value": arr.filter(valid), "row": rows}).group_by("value").aggregate(
                [("row", "count"), ("row", "min")])
            batch = pa.table({"value": grouped["value"], "count": grouped["row_count"].cast(pa.int64()),
                              "first": grouped["row_min"]})
        else:
            values, counts, nulls = value_counts(values)
            if nulls and self.reads_missing_as_fill():  # left missing by the preparation: each is a <UNK>
                at = pc.index(values, UNK).as_py()
                if at >= 0:
                    counts[at] += nulls
                else:
                    values = pa.concat_arrays([values, pa.array([UNK], pa.string())])
                    counts = np.append(counts, nulls)
            batch = pa.table({"value": values, "count": counts, "first": pa.array(np.zeros(len(counts), np.int64))})
        return batch if acc.num_rows == 0 else self.merge(acc, batch)

    def merge(self, a: pa.Table, b: pa.Table) -> pa.Table:
        summed = pa.concat_tables([a, b]).group_by("value").aggregate([("count", "sum"), ("first", "min")])
        return pa.table({"value": summed["value"], "count": summed["count_sum"],
                         "first": summed["first_min"]})  # any order: extract sorts

    def extract(self, acc: pa.Table, missing_state: dict) -> dict:
        if self.hashed:
            return self.hashed_metadata()
        if self.encoded:
            return self.encoded_metadata()
        return self.vocabulary_metadata(Candidates.reduce(acc["value"].combine_chunks(), acc["count"].to_numpy(),
                                                          self.options, first=acc["first"].to_numpy()))

    def hashed_metadata(self) -> dict:
        n = self.options.hash_buckets
        return {"hash_buckets": n, "hash": string_hash.HASH_NAME, "vocab_size": n + 1,
                "preprocessing": {"hash_buckets": n}}

    def vocabulary_metadata(self, cand: Candidates, store=None) -> dict:
        """Metadata from the final candidates. ``store(values, counts) -> vocab_file`` stores a
        vocabulary of more than ``INLINE_MAX`` ids as a file (the vocab stage); without it, inline.
        Pre-encoded ids have no vocabulary: their metadata does not depend on what was counted."""
        if self.encoded:
            return self.encoded_metadata()
        if self.ludwig:
            return self.ludwig_metadata(cand, store)
        buckets = self.options.num_oov_buckets
        kept = cand.values.to_pylist() if store is None or 1 + buckets + len(cand.values) <= INLINE_MAX else None
        unk_freq = cand.unk if buckets else cand.total - int(cand.counts.sum())
        specials = [UNK, *(oov_name(b) for b in range(buckets))]
        special_freq = [unk_freq, *(cand.oov.tolist() if buckets else [])]
        size = len(specials) + len(cand.values)
        if size > MAX_IDS:
            raise DataError(f"{self.describe()}: {size} ids do not fit int32; lower most_common")
        meta: dict[str, Any] = {"vocab_size": size,
                                "preprocessing": {"most_common": self.options.most_common,
                                                  "min_frequency": self.options.min_frequency}}
        if buckets:
            meta.update(num_oov_buckets=buckets, hash=string_hash.HASH_NAME)
        if kept is None:
            values = pa.concat_arrays([pa.array(specials, pa.string()), cand.values.cast(pa.string())])
            meta["vocab_file"] = store(values, np.concatenate([np.asarray(special_freq, np.int64), cand.counts]))
            return meta
        idx2str = [*specials, *kept]
        meta.update(idx2str=idx2str, str2idx={t: i for i, t in enumerate(idx2str)},
                    str2freq={**dict(zip(specials, special_freq, strict=True)),
                              **dict(zip(kept, cand.counts.tolist(), strict=True))})
        return meta

    def ludwig_metadata(self, cand: Candidates, store=None) -> dict:
        """Ludwig's ``create_vocabulary_single_token``: the kept values by count, equal counts in first-occurrence
        order (a filled ``<UNK>`` ranked like any value); ``<UNK>`` prepended only when ``most_common`` cut a
        value. ``str2idx`` is Ludwig's dict (a data ``<UNK>`` kept after the prepended one takes the later id),
        ``str2freq`` each entry's count in the data, ``vocab_size`` = ``len(str2idx)``."""
        idx2str = [UNK, *cand.values.to_pylist()] if cand.cut else cand.values.to_pylist()
        freq = dict(zip(cand.values.to_pylist(), cand.counts.tolist(), strict=True))
        str2idx = {t: i for i, t in enumerate(idx2str)}
        if len(str2idx) > MAX_IDS:
            raise DataError(f"{self.describe()}: {len(str2idx)} ids do not fit int32; lower most_common")
        meta: dict[str, Any] = {"vocab_size": len(str2idx),
                                "preprocessing": {"most_common": self.options.most_common,
                                                  "min_frequency": self.options.min_frequency, "symbols": "ludwig"}}
        if store is not None and len(idx2str) > INLINE_MAX:
            counts = np.asarray([freq.get(t, cand.unk) for t in idx2str], np.int64)
            meta["vocab_file"] = store(pa.array(idx2str, pa.string()), counts)
            return meta
        meta.update(idx2str=idx2str, str2idx=str2idx, str2freq={t: freq.get(t, cand.unk) for t in idx2str})
        return meta

    # ---- encode -------------------------------------------------------------------------------------
    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        if "vocab_size" not in metadata:
            raise NotFittedError(f"{self.describe()}: no fitted metadata (vocab_size); fit before encoding")
        if metadata.get("encoded"):
            return {self.name: self._encode_ids(values, int(metadata["vocab_size"]))}
        string_hash.check_hash_name(metadata.get("hash"), self.describe())
        if metadata.get("preprocessing", {}).get("symbols") == "ludwig":
            return {self.name: self._encode_ludwig(as_strings(values), metadata)}
        arr = dictionary_array(values)  # a kept dictionary (keeps_dictionary): each distinct value looked up once
        if arr is None:
            arr = as_strings(values)
        if "hash_buckets" in metadata:
            ids = hash_ids(arr, metadata["hash_buckets"], offset=1)
        elif "vocab_file" in metadata:
            ids = self._encode_with_file(arr, metadata)
        elif pa.types.is_dictionary(arr.type):
            ids = ids_by_code(self._encode_inline(arr.dictionary, metadata), arr.indices)
        else:
            ids = self._encode_inline(arr, metadata)
        return {self.name: ids}

    def _encode_inline(self, arr: pa.Array, metadata: dict) -> np.ndarray:
        """Ids by the metadata's ``idx2str``: 0 for ``<UNK>``, a missing value and (without OOV buckets) a value
        not in the vocabulary."""
        buckets = int(metadata.get("num_oov_buckets", 0))
        vocab = pa.array(metadata["idx2str"][1 + buckets:], type=pa.string())
        idx = pc.index_in(arr, value_set=vocab)
        ids = pc.fill_null(pc.add(idx, 1 + buckets), 0).to_numpy(zero_copy_only=False).astype(np.int32)
        if buckets:
            oov = pc.and_(pc.is_null(idx), pc.invert(pc.fill_null(pc.equal(arr, UNK), True)))
            oov = oov.to_numpy(zero_copy_only=False)
            if oov.any():
                ids[oov] = hash_ids(arr.filter(pa.array(oov)), buckets, offset=1)
        return ids

    def _encode_with_file(self, arr: pa.Array, metadata: dict) -> np.ndarray:
        if "vocab_path" not in metadata:
            raise DataError(f"{self.describe()}: the vocabulary is in {metadata['vocab_file']['path']}; load the "
                            "metadata with storage.vocab_store.resolve(metadata, folder) to encode")
        buckets = int(metadata.get("num_oov_buckets", 0))
        table = vocab_store.lookup(metadata["vocab_path"], metadata["vocab_file"]["sha256"], 1 + buckets,
                                   metadata.get("lookups"))
        encoded = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
        distinct = encoded.dictionary
        pos = table.positions(distinct)
        ids_of = np.where(pos >= 0, pos + 1 + buckets, 0).astype(np.int32)
        if buckets:
            oov = (pos < 0) & ~pc.equal(distinct, UNK).to_numpy(zero_copy_only=False)
            if oov.any():
                ids_of[oov] = hash_ids(distinct.filter(pa.array(oov)), buckets, offset=1)
        return ids_by_code(ids_of, encoded.indices)

    def _encode_ludwig(self, arr: pa.Array, metadata: dict) -> np.ndarray:
        """Ludwig's lookup: ``str2idx`` of the value, else the id of ``<UNK>`` when the vocabulary has one, else
        id 0 (Ludwig: the most frequent value's, which is id 0)."""
        if "vocab_file" in metadata:
            if "vocab_path" not in metadata:
                raise DataError(f"{self.describe()}: the vocabulary is in {metadata['vocab_file']['path']}; load "
                                "the metadata with storage.vocab_store.resolve(metadata, folder) to encode")
            table = vocab_store.lookup(metadata["vocab_path"], metadata["vocab_file"]["sha256"], 0)
            unk = table.positions(pa.array([UNK], pa.string()))[0]
            encoded = pc.dictionary_encode(arr)
            pos = table.positions(encoded.dictionary)
            ids_of = np.where(pos >= 0, pos, max(int(unk), 0)).astype(np.int32)
            return ids_by_code(ids_of, encoded.indices, missing=max(int(unk), 0))
        str2idx = metadata["str2idx"]
        keys = pa.array(list(str2idx), pa.string())
        ids = np.asarray(list(str2idx.values()), np.int32)
        idx = pc.fill_null(pc.index_in(arr, value_set=keys), -1).to_numpy(zero_copy_only=False)
        return np.where(idx >= 0, ids[np.maximum(idx, 0)] if len(ids) else 0, int(str2idx.get(UNK, 0))).astype(np.int32)

    def _encode_ids(self, values: pd.Series, n: int) -> np.ndarray:
        """Filled, checked ids (``_cast_ids``) as int32; a value still missing or out of range fails."""
        ids = pd.to_numeric(values, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
        bad = np.isnan(ids) | (ids < 0) | (ids >= n)
        if bad.any():
            raise DataError(f"{self.describe()}: {int(bad.sum())} value(s) are missing or not ids in [0, {n}) after "
                            f"the fill, e.g. {values[bad].iloc[0]!r}")
        return ids.astype(np.int32)

    def oov_count(self, ids: np.ndarray, metadata: dict) -> int | None:
        """Rows encoded outside the vocabulary (``<UNK>`` or an OOV bucket); None when hashing or for
        pre-encoded ids (no vocabulary)."""
        if "hash_buckets" in metadata or metadata.get("encoded"):
            return None
        return int((ids <= int(metadata.get("num_oov_buckets", 0))).sum())

    def id_ranges(self, metadata: dict) -> dict[str, tuple[int, int]]:
        return {self.name: (0, int(metadata["vocab_size"]))}

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        return [ColumnSpec(self.name, "int32")]
