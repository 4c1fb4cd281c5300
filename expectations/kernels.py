"""The expectations prepflow generates from the config, and the common ones of user suites, on
numpy/pyarrow kernels (no GX import).

User suites: ``user_kernel`` gives the kernel of an expectation whose type and kwargs a kernel covers
(``USER_KERNELS``: not/be null, between, in/not in set, regex, value lengths, unique, row count,
mean/min/max/sum, proportion of non-null, distinct values containing numbers; no row condition, no
result format, no suite parameter); the others run on GX (``expectations.gx_suites``). A kernel makes
GX's own pandas call where one decides (``isin``, ``astype(str).str.contains``, ``.mean()`` on the
column's partitions concatenated in row order) and reports kwargs as GX does (no None, no defaults).
``tests/unit/test_gx_user_kernels.py`` checks each against GX.

Each generated expectation type has a kernel: ``partial(frame)`` reads one pandas partition (which
carries its global row index) and returns a small, mergeable value; ``merge(partials)`` (partials in
partition order, which is row order) returns the result JSON (``expectations.results``) that Great
Expectations 1.x gives for the whole frame. ``tests/unit/test_gx_kernels.py`` checks every kernel
against GX itself, on hypothesis frames cut into partitions anywhere.

* row-wise checks (between, not null, the number pattern) count per partition and keep their first
  ``PARTIAL_UNEXPECTED_COUNT`` unexpected values and index labels; counts add, lists concatenate.
* uniqueness keeps each partition's non-null values (numbers; anything else as pandas hashes,
  verified value by value among equal hashes) and a sorted copy; the merge sorts the runs together
  (numpy's stable sort merges sorted runs in about linear time) and flags every row of a repeated
  value, as GX's ``duplicated(keep=False)``.
* distinct values merge as sets, the row count and the non-null proportion as counts.

The number pattern (``NUMBER_PATTERN``, Python ``re`` semantics, the regex GX is given) runs on
Arrow's RE2 engine as ``NUMBER_PATTERN_ASCII``, which matches the same ASCII strings (Python's
``\\s`` on ASCII also matches ``\\x1c``-``\\x1f``, its ``\\d`` only ``0-9``); the rare values with
other characters (Unicode digits and spaces differ between the engines) are matched by ``re``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.lazy import pandas as pd
from expectations import gx_suites, results
from expectations.suites import PARTIAL_UNEXPECTED_COUNT

NUMBER_PATTERN = r"^\s*(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[Nn][Aa][Nn]?|[Nn][Uu][Ll][Ll]|[Nn]one)?\s*$"
_S = r"[\t\n\x0b\x0c\r \x1c-\x1f]"
NUMBER_PATTERN_ASCII = (rf"^{_S}*(?:[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[Nn][Aa][Nn]?|[Nn][Uu][Ll][Ll]"
                        rf"|[Nn]one)?{_S}*$")
# Regexes the kernel runs on RE2, with their RE2 equivalent on ASCII strings.
RE2_EQUIVALENT = {NUMBER_PATTERN: NUMBER_PATTERN_ASCII}

_BETWEEN_TYPE_ERROR = "Column values, min_value, and max_value must either be None or of the same type."


class KernelError(Exception):
    """An expectation that cannot be evaluated on the data (GX raises for it too); its message is
    reported in the result."""


def missing_column(column: str) -> str:
    return f'Error: The column "{column}" in BatchData does not exist.'


def is_numeric(dtype) -> bool:
    return (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)) \
        and not isinstance(dtype, pd.CategoricalDtype)


def numbers(series: pd.Series) -> np.ndarray:
    """A null-free numeric series as a numpy array (masked and Arrow dtypes as their numpy dtype)."""
    numpy_dtype = getattr(series.dtype, "numpy_dtype", None)
    return series.to_numpy(dtype=numpy_dtype) if numpy_dtype is not None else series.to_numpy()


def _float_bound(value):
    """GX reports integer bounds as floats (its pydantic field type)."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class Kernel:
    """One generated expectation. Subclasses set ``columns`` (the columns it reads)."""

    type: str = ""

    def __init__(self, kwargs: dict, columns: list[str]):
        # as GX reports them: without None and without the defaults (mostly 1, strict bounds off)
        self.kwargs = {k: v for k, v in kwargs.items() if v is not None and not (k == "mostly" and v == 1)
                       and not (k in ("strict_min", "strict_max") and v is False)}
        if "mostly" in self.kwargs:
            self.kwargs["mostly"] = float(self.kwargs["mostly"])
        self.table_columns = list(columns)
        self.column = kwargs.get("column")

    def reported_kwargs(self) -> dict:
        return dict(self.kwargs)

    @property
    def absent(self) -> str | None:
        """The column this expectation names that the table lacks, if any."""
        return self.column if self.column is not None and self.column not in self.table_columns else None

    def partial(self, frame: pd.DataFrame) -> Any:
        raise NotImplementedError

    def result(self, partials: list) -> tuple[bool, dict]:
        raise NotImplementedError

    def merge(self, partials: list) -> dict:
        if self.absent is not None:
            return results.failed(self.type, self.reported_kwargs(), missing_column(self.absent))
        errors = [p for p in partials if isinstance(p, KernelError)]
        if errors:
            return results.failed(self.type, self.reported_kwargs(), str(errors[0]))
        outcome = self.result(partials)
        if outcome is RESCAN or isinstance(outcome, Flag):
            return outcome
        success, result = outcome
        return results.entry(self.type, self.reported_kwargs(), success, result)

    # A kernel that ``combines`` merges its partials on the workers, in the tree that gathers the partitions
    # (``expectations.runner``): ``leaf(partial, index)`` starts a state from partition ``index``'s partial,
    # ``combine(*states)`` merges states (associative; the tree may take the partitions in any order) and
    # ``finish(state)`` gives the list of partials that ``merge`` takes in this process.
    combines = False

    def scan(self, frame: pd.DataFrame) -> Any:
        """``partial`` guarded: a missing column gives nothing, an evaluation error its message."""
        if self.absent is not None:
            return None
        try:
            return self.partial(frame)
        except KernelError as exc:
            return exc


# ---- schema and table --------------------------------------------------------------------------

class ColumnToExist(Kernel):
    type = "expect_column_to_exist"

    @property
    def absent(self) -> None:
        return None

    def partial(self, frame):
        return None

    def result(self, partials):
        return self.column in self.table_columns, {}


class TableRowCountToEqual(Kernel):
    type = "expect_table_row_count_to_equal"

    def partial(self, frame):
        return len(frame)

    def result(self, partials):
        rows = int(sum(partials))
        return rows == self.kwargs["value"], {"observed_value": rows}


class ProportionOfNonNull(Kernel):
    type = "expect_column_proportion_of_non_null_values_to_be_between"

    def reported_kwargs(self):
        return {k: _float_bound(v) if k in ("min_value", "max_value") else v for k, v in self.kwargs.items()}

    def partial(self, frame):
        col = frame[self.column]
        return len(col), int(col.notna().sum())

    def result(self, partials):
        rows, nonnull = sum(p[0] for p in partials), sum(p[1] for p in partials)
        observed = nonnull / rows if rows > 0 else 0
        kw = self.kwargs
        return results.between(observed, kw.get("min_value"), kw.get("max_value"), kw.get("strict_min", False),
                               kw.get("strict_max", False)), {"observed_value": observed}


class DistinctValuesToContainSet(Kernel):
    type = "expect_column_distinct_values_to_contain_set"

    def partial(self, frame):
        col = frame[self.column].dropna()
        return set(pd.unique(numbers(col)).tolist() if is_numeric(col.dtype) else col.unique().tolist())

    def result(self, partials):
        present = set().union(*partials) if partials else set()
        # GX's own set difference (value set minus the column's distinct values), so the missing values
        # come in its order: a set's, fixed for numbers (whose hashes are not randomized)
        missing = list(set(self.kwargs["value_set"]) - present)
        return not missing, {"observed_value": None, "missing_count": len(missing),
                             "partial_missing_list": missing[:PARTIAL_UNEXPECTED_COUNT]}


# ---- row-wise ----------------------------------------------------------------------------------

class _RowWise(Kernel):
    """A map expectation: nulls set apart (``missing_count``), ``unexpected(non-null values)`` decides."""

    def unexpected(self, values: pd.Series) -> np.ndarray:
        raise NotImplementedError

    def partial(self, frame):
        col = frame[self.column]
        null = col.isna().to_numpy(dtype=bool)
        missing = int(null.sum())
        values = col[~null] if missing else col
        mask = self.unexpected(values) if len(values) else np.zeros(0, dtype=bool)
        first = np.flatnonzero(mask)[:PARTIAL_UNEXPECTED_COUNT]
        return {"rows": len(col), "missing": missing, "unexpected": int(np.count_nonzero(mask)),
                "values": values.iloc[first].tolist(), "index": values.index[first].tolist()}

    def result(self, partials):
        return results.map_result(sum(p["rows"] for p in partials), sum(p["missing"] for p in partials),
                                  sum(p["unexpected"] for p in partials),
                                  [v for p in partials for v in p["values"]][:PARTIAL_UNEXPECTED_COUNT],
                                  [i for p in partials for i in p["index"]][:PARTIAL_UNEXPECTED_COUNT],
                                  self.kwargs.get("mostly", 1.0))


class ValuesToBeBetween(_RowWise):
    type = "expect_column_values_to_be_between"

    def reported_kwargs(self):
        return {k: _float_bound(v) if k in ("min_value", "max_value") else v for k, v in self.kwargs.items()}

    def partial(self, frame):
        low, high = self.kwargs.get("min_value"), self.kwargs.get("max_value")
        if low is None and high is None:
            raise KernelError("min_value and max_value cannot both be None")
        if low is not None and high is not None and low > high:
            raise KernelError("min_value cannot be greater than max_value")
        return super().partial(frame)

    def unexpected(self, values):
        if not is_numeric(values.dtype):
            raise KernelError(_BETWEEN_TYPE_ERROR)
        return ~within(numbers(values), self.kwargs)


def within(x: np.ndarray, kw: dict) -> np.ndarray:
    """``x`` inside GX's ``min_value``/``max_value`` bounds (either may be None; ``strict_min``/``strict_max``)."""
    low, high = kw.get("min_value"), kw.get("max_value")
    inside = np.ones(len(x), dtype=bool)
    if low is not None:
        inside &= x > low if kw.get("strict_min") else x >= low
    if high is not None:
        inside &= x < high if kw.get("strict_max") else x <= high
    return inside


class ValuesToMatchRegex(_RowWise):
    type = "expect_column_values_to_match_regex"

    def unexpected(self, values):
        regex = self.kwargs["regex"]
        if regex not in RE2_EQUIVALENT:
            raise KernelError(f"no RE2 equivalent of the regex {regex!r} is known to prepflow")
        if not pd.api.types.is_string_dtype(values.dtype) or values.dtype == object:
            values = values.astype(str)  # what GX matches: the values as Python strings
        arr = pa.array(values, type=pa.large_string())
        matched = pc.match_substring_regex(arr, RE2_EQUIVALENT[regex]).to_numpy(zero_copy_only=False)
        other = np.flatnonzero(~pc.string_is_ascii(arr).to_numpy(zero_copy_only=False))
        if len(other):  # non-ASCII values: Python's re, which GX uses
            pattern = re.compile(regex)
            matched = matched.copy()
            matched[other] = [pattern.search(s) is not None for s in arr.take(pa.array(other)).to_pylist()]
        return ~matched


class ValuesToNotBeNull(Kernel):
    type = "expect_column_values_to_not_be_null"

    def partial(self, frame):
        col = frame[self.column]
        null = col.isna().to_numpy(dtype=bool)
        first = np.flatnonzero(null)[:PARTIAL_UNEXPECTED_COUNT]
        # the null values themselves: GX counts each NaN apart (NaN != NaN) but None or pd.NA together
        return {"rows": len(col), "unexpected": int(null.sum()), "values": col.iloc[first].tolist(),
                "index": col.index[first].tolist()}

    def result(self, partials):
        return results.map_result(sum(p["rows"] for p in partials), None, sum(p["unexpected"] for p in partials),
                                  [v for p in partials for v in p["values"]][:PARTIAL_UNEXPECTED_COUNT],
                                  [i for p in partials for i in p["index"]][:PARTIAL_UNEXPECTED_COUNT],
                                  self.kwargs.get("mostly", 1.0))


def _is_arrow_string(dtype) -> bool:
    """pandas' Arrow-backed strings (``str``, ``string[pyarrow]``)."""
    return isinstance(dtype, pd.StringDtype) and getattr(dtype, "storage", "") == "pyarrow"


class Rescan:
    """What a kernel's merge returns when the partials it chose cannot give the exact result (see
    ``ValuesToBeUnique``): the runner scans the partitions again with the kernel's ``exact`` set."""


RESCAN = Rescan()


class Flag:
    """What ``ValuesToBeUnique``'s merge returns when the workers' blocks found repeated keys: ``keys``, the
    repeated ones (sorted, distinct). The runner has each partition flag its rows holding one
    (``ValuesToBeUnique.flag``, on the workers) and merges those (``merge_flagged``): the exact result,
    without this process receiving every key."""

    def __init__(self, summary: dict, keys: np.ndarray):
        self.summary = summary
        self.keys = keys
BITMAP_SPAN_PER_ROW = 64  # a partition's integer keys go as a bitmap while it is at most 8 bytes a row


class ValuesToBeUnique(Kernel):
    """Every non-null value occurs once; unexpected: every row whose value repeats (GX:
    ``duplicated(keep=False)``). Integers unique within a partition and dense (their range at most
    ``BITMAP_SPAN_PER_ROW`` x its rows, as ``__row__`` of the encoded gate, which covers a range of
    input rows per partition) go as a bitmap of their range. The bitmaps are combined on the workers
    (``combines``: ``BitBlocks``, blocks of the key range; a block every key of which is present is kept as
    a mark, not bits), and this process receives their row counts and the keys found twice: before, the
    encoded gate's bitmaps came here, ~3 bits per input row (a validation chunk's rows span 10x as many
    input rows); the flow's peak RSS grew by 346 MB at 400M rows (``benchmarks/encoded_gate_memory.py``),
    now by 7 MB. Blocks that do not overlap are the exact result (nothing repeats). Keys the blocks find
    twice (up to ``BitBlocks.MAX_REPEATED``) come here as a ``Flag``, and each partition flags its rows that
    hold one, on the workers (``flag``): a failing check costs this process the repeated keys, not every key.
    Past that many, or with a mix of blocks and other partials, the merge asks for a rescan (``RESCAN``) with
    ``exact`` set, whose partials are:
    Arrow strings: each partition keeps its non-null values as an Arrow array; the merge
    dictionary-encodes them all at once (Arrow's hash table) and counts each code. Otherwise, per
    partition: the non-null values as numbers (anything else as pandas hashes) and a sorted copy; the
    merge sorts the sorted runs together (numpy's stable sort merges runs in about linear time) and,
    only when a value repeats, flags its rows partition by partition (``np.isin``), in row order. Equal
    hashes are compared as values before they count."""

    type = "expect_column_values_to_be_unique"
    exact = False
    combines = True

    def leaf(self, partial, index: int) -> dict:
        """A partition's bitmap, or its distinct integer keys too wide for one (a chunk that holds the last
        training rows and the first validation rows, a sparse validation split), as ``BitBlocks``; any other
        partial (strings, floats, a repeat inside the partition, an error) as it is."""
        state = {"rows": 0, "missing": 0, "bits": None, "others": []}
        bits = None
        if isinstance(partial, dict) and "bitmap" in partial:
            bits = BitBlocks.of(partial["base"], partial["bitmap"])
        elif isinstance(partial, dict) and "sorted" in partial and partial["values"] is None \
                and _int64_exact(partial["sorted"].dtype) and not self.exact:
            bits = BitBlocks.of_keys(partial["sorted"])
        if bits is None:
            return {**state, "others": [(index, partial)]}
        return {**state, "rows": partial["rows"], "missing": partial["missing"], "bits": bits}

    def combine(self, *states: dict) -> dict:
        with_bits = [s["bits"] for s in states if s["bits"] is not None]
        bits = with_bits[0].union(*with_bits[1:]) if with_bits else None
        return {"rows": sum(s["rows"] for s in states), "missing": sum(s["missing"] for s in states),
                "bits": bits, "others": [o for s in states for o in s["others"]]}

    def finish(self, state: dict) -> list:
        others = [p for _i, p in sorted(state["others"], key=lambda o: o[0])]
        if state["bits"] is None:
            return others
        bits = state["bits"]
        summary = {"rows": state["rows"], "missing": state["missing"], "overflow": bits.overflow,
                   "repeated": bits.repeated_keys()}
        return [summary, *others]

    def flag(self, frame, keys: np.ndarray) -> dict:
        """A partition's rows whose value is one of the repeated ``keys`` (``Flag``): their count and the first
        ``PARTIAL_UNEXPECTED_COUNT`` values and index labels, as the exact merge reports them."""
        col = frame[self.column]
        null = col.isna().to_numpy(dtype=bool)
        values = col[~null] if null.any() else col
        own = numbers(values)
        flagged = np.flatnonzero(np.isin(own.astype(np.int64, copy=False), keys))
        head = flagged[:PARTIAL_UNEXPECTED_COUNT]
        return {"count": len(flagged), "values": own[head].tolist(),
                "index": [values.index[i] for i in head.tolist()]}

    def merge_flagged(self, flag: Flag, flagged: list[dict]) -> dict:
        """The result from every partition's ``flag`` (in partition order)."""
        values = [v for f in flagged for v in f["values"]][:PARTIAL_UNEXPECTED_COUNT]
        index = [i for f in flagged for i in f["index"]][:PARTIAL_UNEXPECTED_COUNT]
        success, result = results.map_result(flag.summary["rows"], flag.summary["missing"],
                                             sum(f["count"] for f in flagged), values, results.clean(index),
                                             self.kwargs.get("mostly", 1.0))
        return results.entry(self.type, self.reported_kwargs(), success, result)

    def partial(self, frame):
        col = frame[self.column]
        null = col.isna().to_numpy(dtype=bool)
        values = col[~null] if null.any() else col
        if not self.exact and len(values) and pd.api.types.is_integer_dtype(values.dtype) \
                and _int64_exact(numbers(values.iloc[:0]).dtype):
            bitmap = _dense_bitmap(numbers(values).astype(np.int64, copy=False))
            if bitmap is not None:
                return {"rows": len(col), "missing": int(null.sum()), "bitmap": bitmap[1], "base": bitmap[0]}
        out = {"rows": len(col), "missing": int(null.sum()), "labels": values.index, "values": None}
        if _is_arrow_string(values.dtype):
            strings = pa.array(values.array)
            if isinstance(strings, pa.ChunkedArray):
                strings = strings.combine_chunks()
            return {**out, "strings": strings.cast(pa.large_string()), "values": values}
        hashed = not is_numeric(values.dtype)
        keys = pd.util.hash_pandas_object(values, index=False).to_numpy() if hashed else numbers(values)
        return {**out, "keys": keys, "sorted": np.sort(keys), "values": values if hashed else None}

    def result(self, partials):
        if any("bitmap" in p for p in partials):  # partitions' own partials, not gathered by the runner's tree
            partials = self.finish(self.combine(*(self.leaf(p, i) for i, p in enumerate(partials))))
        rows = sum(p["rows"] for p in partials)
        missing = sum(p["missing"] for p in partials)
        mostly = self.kwargs.get("mostly", 1.0)
        summaries = [p for p in partials if "overflow" in p]  # finish's (at most one)
        if summaries:
            if len(summaries) < len(partials) or summaries[0]["overflow"]:
                return RESCAN
            if len(summaries[0]["repeated"]):  # the blocks found them: the workers flag their rows
                return Flag({"rows": rows, "missing": missing}, summaries[0]["repeated"])
            return results.map_result(rows, missing, 0, [], [], mostly)
        if all("strings" in p for p in partials):
            return self._strings(partials, rows, missing, mostly)
        partials = [self._hashed(p) if "strings" in p else p for p in partials]  # mixed dtypes: all hashed
        merged = np.sort(np.concatenate([p["sorted"] for p in partials]), kind="stable")
        same = merged[1:] == merged[:-1]
        count, values, index = 0, [], []
        if same.any():
            repeated = np.unique(merged[1:][same])
            flagged = [np.flatnonzero(np.isin(p["keys"], repeated)) for p in partials]
            if partials[0]["values"] is not None:  # equal hashes: keep the rows whose values repeat
                candidates = pd.concat([p["values"].iloc[f] for p, f in zip(partials, flagged, strict=True)],
                                       ignore_index=True).astype(object)
                keep = candidates.duplicated(keep=False).to_numpy()
                bounds = np.cumsum([0] + [len(f) for f in flagged])
                flagged = [f[keep[a:b]] for f, a, b in zip(flagged, bounds[:-1], bounds[1:], strict=True)]
            count = sum(len(f) for f in flagged)
            for p, f in zip(partials, flagged, strict=True):
                head = f[:PARTIAL_UNEXPECTED_COUNT - len(index)]
                index += [p["labels"][i] for i in head.tolist()]
                values += p["values"].iloc[head].tolist() if p["values"] is not None else p["keys"][head].tolist()
        return results.map_result(rows, missing, count, values, results.clean(index), mostly)

    @staticmethod
    def _hashed(p: dict) -> dict:
        keys = pd.util.hash_pandas_object(p["values"], index=False).to_numpy()
        return {**p, "keys": keys, "sorted": np.sort(keys)}

    @staticmethod
    def _strings(partials, rows, missing, mostly):
        strings = pa.concat_arrays([p["strings"] for p in partials])
        codes = pc.dictionary_encode(strings).indices.to_numpy(zero_copy_only=False)
        repeated = np.bincount(codes)[codes] > 1 if len(codes) else np.zeros(0, dtype=bool)
        flagged = np.flatnonzero(repeated)
        head = flagged[:PARTIAL_UNEXPECTED_COUNT]
        bounds = np.cumsum([0] + [len(p["strings"]) for p in partials])
        owner = np.searchsorted(bounds, head, side="right") - 1
        index = [partials[k]["labels"][i - bounds[k]] for k, i in zip(owner.tolist(), head.tolist(), strict=True)]
        values = strings.take(pa.array(head, type=pa.int64())).to_pylist()
        return results.map_result(rows, missing, len(flagged), values, results.clean(index), mostly)


def _dense_bitmap(keys: np.ndarray) -> tuple[int, np.ndarray] | None:
    """``(base, packed bits)`` of distinct integer ``keys`` whose range is dense enough (bit ``k - base``
    set for each key ``k``; ``base`` a multiple of 8, so bitmaps line up byte by byte); None when the
    range is too wide or a key repeats."""
    lo, hi = int(keys.min()), int(keys.max())
    base = lo - lo % 8
    span = hi - base + 1
    if span > BITMAP_SPAN_PER_ROW * len(keys):
        return None
    seen = np.zeros(span, dtype=bool)
    seen[keys - base] = True
    if int(np.count_nonzero(seen)) != len(keys):  # a repeat inside the partition
        return None
    return base, np.packbits(seen, bitorder="little")


class BitBlocks:
    """A set of integer keys as bitmaps of aligned blocks of ``BITS`` keys, for ``ValuesToBeUnique``'s
    combine on the workers: ``blocks`` maps a block's number to its bits (``np.packbits``, little bit
    order), or to None when every key of the block is present (a validation or test chunk's rows and the
    training chunks of the same input rows complete their blocks, so a tree that gathers them early, as the
    encoded gate's does, carries marks instead of bits); ``repeated``: arrays of the keys added more than
    once, up to ``MAX_REPEATED`` keys; past that, ``overflow`` (the blocks and keys are dropped, and the
    merge rescans the partitions' exact partials)."""

    BITS = 1 << 17  # keys per block: 16 KiB of bits
    BYTES = BITS // 8
    MAX_REPEATED = 1 << 20  # repeated keys kept (8 MiB), then overflow
    MAX_BYTES_PER_KEY = 128  # of_keys: at most 64 MiB of blocks for a chunk of 2^19 keys,
    MIN_LIMIT = 64 * BYTES  # and at least 64 blocks (1 MiB) for any chunk

    def __init__(self, blocks: dict, repeated: list | None = None, overflow: bool = False):
        self.blocks = blocks
        self.repeated = repeated or []
        self.overflow = overflow

    def repeated_keys(self) -> np.ndarray:
        """The distinct repeated keys, sorted (empty on overflow)."""
        if self.overflow or not self.repeated:
            return np.zeros(0, dtype=np.int64)
        return np.unique(np.concatenate(self.repeated))

    def _with_repeated(self, keys: np.ndarray) -> bool:
        """Record repeated keys; False (and overflow) past ``MAX_REPEATED``."""
        self.repeated.append(keys)
        if sum(len(k) for k in self.repeated) > self.MAX_REPEATED:
            self.blocks, self.repeated, self.overflow = {}, [], True
            return False
        return True

    @classmethod
    def of_keys(cls, keys: np.ndarray) -> "BitBlocks | None":
        """The sorted integer ``keys`` (int64 or narrower; those that repeat in ``repeated``), or None when
        their blocks would take more than ``MAX_BYTES_PER_KEY`` a key and more than ``MIN_LIMIT`` in all, or
        more than ``MAX_REPEATED`` of them repeat."""
        keys = keys.astype(np.int64, copy=False)
        repeated = None
        if len(keys) > 1:
            same = keys[1:] == keys[:-1]
            if same.any():
                repeated = np.unique(keys[1:][same])
                if len(repeated) > cls.MAX_REPEATED:
                    return None
                keys = np.unique(keys)
        number = keys // cls.BITS
        blocks, first = np.unique(number, return_inverse=True)
        if len(blocks) * cls.BYTES > max(cls.MAX_BYTES_PER_KEY * len(keys), cls.MIN_LIMIT):
            return None
        offset = keys - number * cls.BITS  # 0 <= offset < BITS, negative keys included
        byte = first * cls.BYTES + offset // 8
        # distinct keys set distinct bits, so the sum of a byte's bits is their OR
        packed = np.bincount(byte, weights=np.left_shift(1, offset % 8), minlength=len(blocks) * cls.BYTES)
        rows = packed.astype(np.uint8).reshape(len(blocks), cls.BYTES)
        return cls({int(n): None if bool((row == 0xFF).all()) else row for n, row in zip(blocks, rows, strict=True)},
                   [repeated] if repeated is not None else None)

    @classmethod
    def of(cls, base: int, bitmap: np.ndarray) -> "BitBlocks":
        """The keys of ``_dense_bitmap``'s ``(base, bitmap)``."""
        start = base // 8  # in bytes; base is a multiple of 8
        first, offset = divmod(start, cls.BYTES)
        padded = np.zeros(-(-(offset + len(bitmap)) // cls.BYTES) * cls.BYTES, dtype=np.uint8)
        padded[offset:offset + len(bitmap)] = bitmap
        blocks = {}
        for n, block in enumerate(padded.reshape(-1, cls.BYTES)):
            if block.any():
                blocks[first + n] = None if bool((block == 0xFF).all()) else block
        return cls(blocks)

    def union(self, *others: "BitBlocks") -> "BitBlocks":
        if self.overflow or any(o.overflow for o in others):
            return BitBlocks({}, overflow=True)
        out = BitBlocks(dict(self.blocks), [k for b in (self, *others) for k in b.repeated])
        if sum(len(k) for k in out.repeated) > self.MAX_REPEATED:
            return BitBlocks({}, overflow=True)
        blocks = out.blocks
        full = np.full(self.BYTES, 0xFF, dtype=np.uint8)
        for other in others:
            for n, block in other.blocks.items():
                if n not in blocks:
                    blocks[n] = block
                    continue
                mine = full if blocks[n] is None else blocks[n]
                theirs = full if block is None else block
                common = mine & theirs
                if common.any():  # keys in both: repeated
                    keys = n * self.BITS + np.flatnonzero(np.unpackbits(common, bitorder="little"))
                    if not out._with_repeated(keys.astype(np.int64)):
                        return out
                merged = mine | theirs
                blocks[n] = None if bool((merged == 0xFF).all()) else merged
        return out

    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.blocks.values() if b is not None)


def _int64_exact(dtype) -> bool:
    """Integers that int64 holds exactly (not uint64, whose large values would wrap)."""
    return dtype.kind == "i" or (dtype.kind == "u" and dtype.itemsize < 8)


class ValuesToBeNull(Kernel):
    type = "expect_column_values_to_be_null"

    def partial(self, frame):
        col = frame[self.column]
        nonnull = col.notna().to_numpy(dtype=bool)
        first = np.flatnonzero(nonnull)[:PARTIAL_UNEXPECTED_COUNT]
        return {"rows": len(col), "unexpected": int(nonnull.sum()), "values": col.iloc[first].tolist(),
                "index": col.index[first].tolist()}

    result = ValuesToNotBeNull.result


class ValuesToBeInSet(_RowWise):
    """GX: ``column.isin(value_set)`` on the non-null values (the same pandas call, per partition)."""

    type = "expect_column_values_to_be_in_set"

    def unexpected(self, values):
        return ~values.isin(self.kwargs["value_set"]).to_numpy(dtype=bool)


class ValuesToNotBeInSet(_RowWise):
    type = "expect_column_values_to_not_be_in_set"

    def unexpected(self, values):
        return values.isin(self.kwargs["value_set"]).to_numpy(dtype=bool)


class ValuesToMatchUserRegex(_RowWise):
    """A user's regex: GX's own pandas call (``astype(str).str.contains``) on the non-null values, so
    that the regex engine is the one GX uses on that dtype."""

    type = "expect_column_values_to_match_regex"

    def unexpected(self, values):
        return ~values.astype(str).str.contains(self.kwargs["regex"]).to_numpy(dtype=bool)


class ValuesToNotMatchUserRegex(_RowWise):
    type = "expect_column_values_to_not_match_regex"

    def unexpected(self, values):
        return values.astype(str).str.contains(self.kwargs["regex"]).to_numpy(dtype=bool)


class ValueLengthsToBeBetween(_RowWise):
    """GX: the lengths of ``astype(str)``, compared with the (optionally strict) bounds."""

    type = "expect_column_value_lengths_to_be_between"

    def unexpected(self, values):
        return ~within(values.astype(str).str.len().to_numpy(dtype=np.int64), self.kwargs)


class ValueLengthsToEqual(_RowWise):
    type = "expect_column_value_lengths_to_equal"

    def reported_kwargs(self):
        return {**self.kwargs, "value": float(self.kwargs["value"])}

    def unexpected(self, values):
        return values.astype(str).str.len().to_numpy(dtype=np.int64) != self.kwargs["value"]


class TableRowCountToBeBetween(Kernel):
    type = "expect_table_row_count_to_be_between"

    def partial(self, frame):
        return len(frame)

    def result(self, partials):
        rows = int(sum(partials))
        kw = self.kwargs
        return results.between(rows, kw.get("min_value"), kw.get("max_value"), kw.get("strict_min", False),
                               kw.get("strict_max", False)), {"observed_value": rows}


class _ColumnAggregate(Kernel):
    """An aggregate GX computes with one pandas call on the whole column, nulls included (``mean``,
    ``min``, ``max``, ``sum``): each partition gives its column, the merge concatenates them (in row
    order, so the same values in the same order as GX's frame) and makes the same call, so float
    sums round as GX's. A column that is not numeric is left to GX (``fallback``)."""

    method = ""

    def reported_kwargs(self):
        return {k: _float_bound(v) if k in ("min_value", "max_value") else v for k, v in self.kwargs.items()}

    def partial(self, frame):
        return frame[self.column]

    def merge(self, partials):
        if self.absent is None and partials and not all(is_numeric(p.dtype) for p in partials):
            return self.fallback(partials)
        return super().merge(partials)

    def fallback(self, partials):
        column = pd.concat(partials) if len(partials) > 1 else partials[0]
        [out] = gx_suites.validate_frame([{"type": self.type, "kwargs": dict(self.kwargs)}],
                                         column.to_frame(self.column))
        return results.from_gx(out)

    def result(self, partials):
        column = pd.concat(partials) if len(partials) > 1 else partials[0]
        value = getattr(column, self.method)()
        if value is None or pd.isnull(value):
            return False, {"observed_value": None}
        kw = self.kwargs
        return results.between(value, kw.get("min_value"), kw.get("max_value"), kw.get("strict_min", False),
                               kw.get("strict_max", False)), {"observed_value": value}


class ColumnMeanToBeBetween(_ColumnAggregate):
    type = "expect_column_mean_to_be_between"
    method = "mean"


class ColumnMinToBeBetween(_ColumnAggregate):
    type = "expect_column_min_to_be_between"
    method = "min"


class ColumnMaxToBeBetween(_ColumnAggregate):
    type = "expect_column_max_to_be_between"
    method = "max"


class ColumnSumToBeBetween(_ColumnAggregate):
    type = "expect_column_sum_to_be_between"
    method = "sum"


KERNELS: dict[str, type[Kernel]] = {k.type: k for k in (
    ColumnToExist, TableRowCountToEqual, ProportionOfNonNull, DistinctValuesToContainSet, ValuesToBeBetween,
    ValuesToMatchRegex, ValuesToNotBeNull, ValuesToBeUnique)}


# ---- user suites ---------------------------------------------------------------------------------

def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)


def _bounds_ok(kw: dict) -> bool:
    low, high = kw.get("min_value"), kw.get("max_value")
    return ((low is None or _num(low)) and (high is None or _num(high)) and (low is not None or high is not None)
            and (low is None or high is None or low <= high)
            and all(isinstance(kw.get(k, False), bool) for k in ("strict_min", "strict_max")))


def _mostly_ok(kw: dict) -> bool:
    return "mostly" not in kw or (_num(kw["mostly"]) and 0 <= kw["mostly"] <= 1)


def _scalar_set(kw: dict) -> bool:
    values = kw.get("value_set")
    return isinstance(values, list) and all(v is None or isinstance(v, (str, int, float)) for v in values)


def _number_set(kw: dict) -> bool:
    """Numbers only: GX lists the missing ones in its set's order, which is sorted for numbers only
    (for strings it varies with Python's hash seed, so GX runs those)."""
    values = kw.get("value_set")
    return isinstance(values, list) and all(_num(v) for v in values)


def _regex_ok(kw: dict) -> bool:
    try:
        re.compile(kw.get("regex"))
    except (TypeError, re.error):
        return False
    return True


_ROW = {"column", "mostly"}
_BOUNDS = {"min_value", "max_value", "strict_min", "strict_max"}
# user expectation type -> (kernel, the kwargs it takes, a check of their values); anything else
# (row_condition, result_format, a suite parameter, an odd value) runs on GX.
USER_KERNELS: dict[str, tuple[type[Kernel], set[str], Any]] = {
    "expect_column_to_exist": (ColumnToExist, {"column"}, lambda kw: True),
    "expect_table_row_count_to_equal": (TableRowCountToEqual, {"value"},
                                        lambda kw: isinstance(kw.get("value"), int) and not isinstance(
                                            kw["value"], bool)),
    "expect_table_row_count_to_be_between": (TableRowCountToBeBetween, _BOUNDS, lambda kw: _bounds_ok(kw) and all(
        v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in (kw.get("min_value"),
                                                                                kw.get("max_value")))),
    "expect_column_values_to_not_be_null": (ValuesToNotBeNull, _ROW, _mostly_ok),
    "expect_column_values_to_be_null": (ValuesToBeNull, _ROW, _mostly_ok),
    "expect_column_values_to_be_between": (ValuesToBeBetween, _ROW | _BOUNDS,
                                           lambda kw: _mostly_ok(kw) and _bounds_ok(kw)),
    "expect_column_values_to_be_in_set": (ValuesToBeInSet, _ROW | {"value_set"},
                                          lambda kw: _mostly_ok(kw) and _scalar_set(kw)),
    "expect_column_values_to_not_be_in_set": (ValuesToNotBeInSet, _ROW | {"value_set"},
                                              lambda kw: _mostly_ok(kw) and _scalar_set(kw)),
    "expect_column_values_to_match_regex": (ValuesToMatchUserRegex, _ROW | {"regex"},
                                            lambda kw: _mostly_ok(kw) and _regex_ok(kw)),
    "expect_column_values_to_not_match_regex": (ValuesToNotMatchUserRegex, _ROW | {"regex"},
                                                lambda kw: _mostly_ok(kw) and _regex_ok(kw)),
    "expect_column_value_lengths_to_be_between": (ValueLengthsToBeBetween, _ROW | _BOUNDS, lambda kw: _mostly_ok(
        kw) and _bounds_ok(kw) and all(v is None or isinstance(v, int) for v in (kw.get("min_value"),
                                                                                   kw.get("max_value")))),
    "expect_column_value_lengths_to_equal": (ValueLengthsToEqual, _ROW | {"value"}, lambda kw: _mostly_ok(kw) and (
        isinstance(kw.get("value"), int) and not isinstance(kw["value"], bool))),
    "expect_column_values_to_be_unique": (ValuesToBeUnique, _ROW, _mostly_ok),
    "expect_column_proportion_of_non_null_values_to_be_between": (ProportionOfNonNull, {"column"} | _BOUNDS,
                                                                  _bounds_ok),
    "expect_column_distinct_values_to_contain_set": (DistinctValuesToContainSet, {"column", "value_set"},
                                                     _number_set),
    "expect_column_mean_to_be_between": (ColumnMeanToBeBetween, {"column"} | _BOUNDS, _bounds_ok),
    "expect_column_min_to_be_between": (ColumnMinToBeBetween, {"column"} | _BOUNDS, _bounds_ok),
    "expect_column_max_to_be_between": (ColumnMaxToBeBetween, {"column"} | _BOUNDS, _bounds_ok),
    "expect_column_sum_to_be_between": (ColumnSumToBeBetween, {"column"} | _BOUNDS, _bounds_ok),
}


def user_kernel(expectation: dict, columns: list[str]) -> Kernel | None:
    """The kernel that runs a user's expectation exactly as GX would, or None when GX must run it (a type
    or kwargs prepflow has no kernel for). GX checks the kwargs of the ones it runs; the kwargs a kernel
    takes are checked here, strictly enough that GX would accept them too."""
    spec = USER_KERNELS.get(expectation.get("type"))
    kwargs = expectation.get("kwargs") or {}
    if spec is None or not set(kwargs) <= spec[1]:
        return None
    kernel, _keys, valid = spec
    if "column" in spec[1] and not isinstance(kwargs.get("column"), str):
        return None
    return kernel(kwargs, columns) if valid(kwargs) else None


def kernels(suite: dict, columns: list[str]) -> list[Kernel]:
    """The kernels of a generated suite's expectations, in suite order."""
    out = []
    for exp in suite["expectations"]:
        if exp["type"] not in KERNELS:  # a generator and its kernels disagree: a bug, not a user error
            raise AssertionError(f"no kernel for generated expectation type {exp['type']}")
        out.append(KERNELS[exp["type"]](exp.get("kwargs", {}), columns))
    return out


def scan(checks: list[Kernel], frame: pd.DataFrame) -> list:
    """One partition's partials, one per kernel."""
    return [check.scan(frame) for check in checks]
