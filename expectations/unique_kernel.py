"""The uniqueness kernel (``expect_column_values_to_be_unique``): per-partition sorted values or bitmaps of dense integer keys, combined on the workers in blocks (``BitBlocks``); a repeated key found there is flagged by the partitions (``Flag``), so the flow process never receives every key."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.lazy import pandas as pd
from expectations import results
from expectations.kernel_base import RESCAN, Flag, Kernel, is_numeric, numbers
from expectations.suites import PARTIAL_UNEXPECTED_COUNT


def _is_arrow_string(dtype) -> bool:
    """pandas' Arrow-backed strings (``str``, ``string[pyarrow]``)."""
    return isinstance(dtype, pd.StringDtype) and getattr(dtype, "storage", "") == "pyarrow"




BITMAP_SPAN_PER_ROW = 64  # a partition's integer keys go as a bitmap while it is at most 8 bytes a row


class ValuesToBeUnique(Kernel):
    """Every non-null value occurs once; unexpected: every row whose value repeats (GX:
    ``duplicated(keep=False)``). Integers unique within a partition and dense (their range at most
    ``BITMAP_SPAN_PER_ROW`` x its rows, as ``__row__`` of the encoded gate, which covers a range of
    input rows per partition) go as a bitmap of their range. The bitmaps are combined on the workers
    (``combines``: ``BitBlocks``, blocks of the key range; a block every key of which is present is kept as
    a mark, not bits), and this process receives their row counts and the keys found twice, not the
    bitmaps, whose bits grow with the input rows (a validation chunk's rows span many more input rows) and
    would grow the flow's peak memory with them (``benchmarks/encoded_gate_memory.py``). Blocks that do not
    overlap are the exact result (nothing repeats). Keys the blocks find twice (up to
    ``BitBlocks.MAX_REPEATED``) come here as a ``Flag``, and each partition flags its rows that hold one,
    on the workers (``flag``): a failing check costs this process the repeated keys, not every key.
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

    def per_file(self, dtypes: dict[str, str]) -> bool:
        """No: its partials hold pandas indexes and values and Arrow arrays, and its merge may read the
        partitions again (a repeated key to flag, a rescan)."""
        return False

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
