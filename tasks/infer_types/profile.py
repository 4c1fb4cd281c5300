"""The column profiles of type inference: two steps, like a fit: each Dask partition returns a mergeable profile per column (counts, an
exact value count capped at ``VALUE_CAP`` distinct values, a HyperLogLog sketch of the distinct
values, per-value pattern counts), the profiles are merged (sums, min/max, register-wise max; so
the result does not depend on the partitioning) and ``decide`` turns each merged profile into a
type and a one-line reason. Distinct counts are exact up to ``VALUE_CAP`` and HyperLogLog
estimates (about 1% error) above it.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.lazy import pandas as pd
from tasks.features.date import parse_dates

VALUE_CAP = 10_000  # exact value counts up to this many distinct values per column
EXACT_DISTINCT_CAP = 4_000_000  # distinct counts exact (a set of 64-bit value hashes, 8 bytes each) up to this
TOKEN_CAP = 2_000  # exact token counts (for set detection) up to this many distinct tokens
HLL_P = 14  # 16384 registers: ~0.8% standard error
SET_MAX_TOKENS = 20  # values with more tokens are not set members
MEDIA_SAMPLE = 1_000  # distinct media paths whose files are checked (bottom-k by hash)
SAMPLE_SIZE = 5  # example values shown in reasons when there are too many to count exactly
TRUE_STRS = {"yes", "y", "true", "t", "1", "1.0", "on"}
FALSE_STRS = {"no", "n", "false", "f", "0", "0.0", "off"}
SET_DELIMITERS = {"|": {"tokenizer": "regex", "pattern": r"\s*\|\s*"}, ";": {"tokenizer": "regex", "pattern": r"\s*;\s*"},
                  ",": {"tokenizer": "comma"}}  # multi-value strings: the set feature's tokenizer for each
LOG_BUCKETS = 1026  # floor(log2(x + 1)) of non-negative finite floats is at most 1024
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
VECTOR_RE = rf"\[?\s*{_NUM}(?:(?:\s*,\s*|\s+){_NUM})+\s*\]?"  # also [1, 2] and numpy's [1. 2.]
UUID_RE = r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_TIME = r"(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:[AaPp][Mm])?\s*(?:Z|UTC|[+-]\d{2}:?\d{2})?)?"
DATE_RE = (rf"(?:\d{{4}}[-/.]\d{{1,2}}[-/.]\d{{1,2}}{_TIME}"
           rf"|\d{{1,2}}[-/.]\d{{1,2}}[-/.]\d{{2,4}}{_TIME}"
           rf"|(?:[a-z]{{3,9}},?\s+)?\d{{1,2}}\s+{_MONTH},?\s+\d{{4}}{_TIME}"
           rf"|(?:[a-z]{{3,9}},?\s+)?{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}{_TIME})")
IMAGE_EXTENSIONS = ("png", "jpg", "jpeg", "bmp", "gif", "tif", "tiff", "webp", "ppm", "pgm")  # Pillow reads them
AUDIO_EXTENSIONS = ("wav", "flac", "ogg", "oga", "opus", "mp3", "aif", "aiff")  # libsndfile (soundfile) reads them
EXT_RE = r"\.(?P<ext>[a-z0-9]+)(?:\?.*)?$"  # a path's extension, before a URL's query string (lower-cased values)
THOUSANDS_RE = r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?"


def _clz64(x: np.ndarray) -> np.ndarray:
    """Leading zero bits of each uint64 (64 for 0), exact."""
    x = x.astype(np.uint64, copy=True)
    n = np.zeros(x.shape, dtype=np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        top_empty = (x >> np.uint64(64 - shift)) == 0
        n += np.where(top_empty, shift, 0)
        x = np.where(top_empty, x << np.uint64(shift), x)
    return np.where(x == 0, 64, n)


def hll_registers(hashes: np.ndarray) -> np.ndarray:
    registers = np.zeros(1 << HLL_P, dtype=np.uint8)
    if len(hashes):
        h = hashes.astype(np.uint64)
        index = (h >> np.uint64(64 - HLL_P)).astype(np.int64)
        rank = np.minimum(_clz64(h << np.uint64(HLL_P)) + 1, 64 - HLL_P + 1).astype(np.uint8)
        np.maximum.at(registers, index, rank)
    return registers


def hll_estimate(registers: np.ndarray) -> int:
    m = float(len(registers))
    estimate = 0.7213 / (1 + 1.079 / m) * m * m / float(np.sum(np.ldexp(1.0, -registers.astype(np.int64))))
    zeros = int((registers == 0).sum())
    if estimate <= 2.5 * m and zeros:
        estimate = m * math.log(m / zeros)  # linear counting for small cardinalities
    return int(round(estimate))


def _hashes(values: np.ndarray) -> np.ndarray:
    """Deterministic 64-bit hashes of distinct values (pandas' SipHash with its fixed key)."""
    return pd.util.hash_array(values, categorize=False)


def as_text(values: pd.Series) -> tuple[str, pd.Series]:
    """(kind, stripped strings with nulls): numbers as category would spell them (``3.0`` -> ``3``),
    lists/arrays as space-separated items, mappings as JSON."""
    dtype = values.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return "bool", values.map({True: "true", False: "false"}).astype("string[pyarrow]")
    if pd.api.types.is_integer_dtype(dtype):
        return "int", values.astype("Int64").astype("string[pyarrow]")
    if pd.api.types.is_float_dtype(dtype):
        x = values.to_numpy(dtype="float64", na_value=np.nan)
        whole = np.isfinite(x) & (x == np.round(x)) & (np.abs(x) < 2**62)
        text = np.where(whole, np.nan_to_num(x).astype(np.int64).astype(str), x.astype(str))
        return "float", pd.Series(text, dtype="string[pyarrow]").mask(np.isnan(x))
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "datetime", values.astype("string[pyarrow]")
    if pd.api.types.is_object_dtype(dtype) and values.notna().any():
        def one(v):
            if v is None or isinstance(v, str) or (isinstance(v, float) and math.isnan(v)):
                return v
            if isinstance(v, (bytes, bytearray)):
                return "<bytes>"
            if isinstance(v, dict):
                return json.dumps(v, sort_keys=True, default=str)
            if isinstance(v, (list, tuple, np.ndarray)):
                return " ".join(str(x) for x in v)
            return str(v)

        values = values.map(one)
    return "string", values.astype("string[pyarrow]").str.strip()


def _match(arr: pa.Array, pattern: str, ignore_case: bool = False) -> pa.Array:
    """Full-string regex match (RE2, vectorized)."""
    return pc.match_substring_regex(arr, pattern=f"^(?:{pattern})$", ignore_case=ignore_case)


def _count(mask: pa.Array) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


def profile_values(values: pd.Series) -> dict:
    """Mergeable statistics of one column in one partition (see ``merge_profiles``); vectorized
    with pyarrow compute."""
    kind, text = as_text(values.reset_index(drop=True))
    arr = pa.array(text.array).cast(pa.string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = arr.filter(pc.and_(pc.is_valid(arr), pc.not_equal(arr, "")))
    n = len(arr)
    prof: dict = {"kind": kind, "rows": int(len(values)), "n": n}
    vc = pc.value_counts(arr)
    uniques = vc.field("values")
    prof["counts"] = (dict(zip(uniques.to_pylist(), vc.field("counts").to_pylist(), strict=True))
                      if len(vc) <= VALUE_CAP else None)
    distinct_values = uniques.to_numpy(zero_copy_only=False)
    hashes = _hashes(distinct_values)
    prof["hll"] = hll_registers(hashes)  # distinct values suffice
    prof["hash_set"] = np.sort(hashes) if len(hashes) <= EXACT_DISTINCT_CAP else None
    first = np.argsort(hashes, kind="stable")[:SAMPLE_SIZE]  # bottom-k sample: mergeable, partition-independent
    prof["sample"] = [(int(hashes[i]), str(distinct_values[i])) for i in first]
    lower = pc.utf8_lower(arr)
    prof["n_true"] = _count(pc.is_in(lower, value_set=pa.array(sorted(TRUE_STRS))))
    prof["n_false"] = _count(pc.is_in(lower, value_set=pa.array(sorted(FALSE_STRS))))
    if kind in ("int", "float"):
        num = values.dropna().to_numpy(dtype="float64")
    elif kind == "bool":
        num = np.zeros(0)
    else:
        numeric = _match(arr, rf"\s*{_NUM}\s*")
        num = pc.cast(pc.utf8_trim_whitespace(arr.filter(numeric)), pa.float64()).to_numpy(zero_copy_only=False)
    finite = num[np.isfinite(num)]
    prof["n_numeric"] = int(len(finite))
    prof["n_negative"] = int((finite < 0).sum())
    prof["log_hist"] = _log_histogram(finite)
    prof["n_integer"] = int((finite == np.round(finite)).sum())
    # HHMM clock times (517 = 05:17, 2400 = the day's end): whole numbers 0..2400 whose last two digits are minutes
    prof["n_clock"] = int(((finite >= 0) & (finite <= 2400) & (finite == np.round(finite))
                           & (np.mod(finite, 100) < 60)).sum())
    # YYYYMMDD dates written as whole numbers (19580329): a year 1800..2100, a month and a day of the month
    month, day = np.mod(np.floor_divide(finite, 100), 100), np.mod(finite, 100)
    prof["n_ymd"] = int(((finite >= 18000101) & (finite <= 21001231) & (finite == np.round(finite))
                         & (month >= 1) & (month <= 12) & (day >= 1) & (day <= 31)).sum())
    prof["min"] = float(finite.min()) if len(finite) else None
    prof["max"] = float(finite.max()) if len(finite) else None
    prof["n_leading_zero"] = _count(_match(arr, r"0\d+")) if kind == "string" else 0
    widths = pc.utf8_length(arr.filter(_match(arr, r"[+-]?\d+"))).to_numpy(zero_copy_only=False)
    prof["width_min"] = int(widths.min()) if len(widths) else None
    prof["width_max"] = int(widths.max()) if len(widths) else None
    split = pc.utf8_split_whitespace(arr)  # values are stripped: one token per run of non-space
    ntok = pc.list_value_length(split).to_numpy(zero_copy_only=False).astype(np.int64)
    prof["tokens"] = int(ntok.sum())
    prof["max_tokens"] = int(ntok.max()) if n else 0
    prof["n_multi"] = int((ntok >= 2).sum())
    prof["n_long"] = int((ntok > SET_MAX_TOKENS).sum())
    prof["chars"] = int(pc.sum(pc.utf8_length(arr)).as_py() or 0)
    if kind == "string" and n:
        prof["n_date"] = _count_dates(arr)
        prof.update(_media_profile(uniques, vc.field("counts").to_numpy(zero_copy_only=False), hashes))
        vec = _match(arr, VECTOR_RE)
        lengths = pc.count_substring_regex(arr.filter(vec), pattern=_NUM).to_numpy(zero_copy_only=False)
        prof["n_vector"] = int(len(lengths))
        prof["vector_min"] = int(lengths.min()) if len(lengths) else None
        prof["vector_max"] = int(lengths.max()) if len(lengths) else None
        prof["n_uuid"] = _count(_match(arr, UUID_RE))
        short = split.filter(pa.array((ntok >= 2) & (ntok <= SET_MAX_TOKENS)))
        flat = pc.list_flatten(short)
        tokens = pc.value_counts(flat)
        prof["n_repeat"] = _rows_with_repeats(short, flat)
        prof["token_counts"] = (dict(zip(tokens.field("values").to_pylist(), tokens.field("counts").to_pylist(),
                                         strict=True)) if len(tokens) <= TOKEN_CAP else None)
        prof["delimited"] = {d: _delimited_profile(arr, d, prof["counts"], prof["tokens"]) for d in SET_DELIMITERS}
    else:
        prof.update(n_date=n if kind == "datetime" else 0, n_image=0, n_audio=0, media_ext={}, media_sample=[],
                    n_vector=0, vector_min=None, vector_max=None, n_uuid=0, token_counts={}, n_repeat=0,
                    delimited={})
    return prof


def _log_histogram(finite: np.ndarray) -> np.ndarray:
    """Counts of ``floor(log2(x + 1))`` over the non-negative values: exact integer counts, so the merged
    histogram (and the tail judged from it) does not depend on the partitioning."""
    x = finite[finite >= 0]
    exponents = np.frexp(x + 1.0)[1] - 1  # floor(log2(x + 1)), exactly (no rounding near powers of two)
    return np.bincount(exponents.astype(np.int64), minlength=LOG_BUCKETS)


def _delimited_profile(arr: pa.Array, delimiter: str, counts: dict | None, words: int) -> dict:
    """The values as lists cut at ``delimiter`` (tokens trimmed): rows holding it, tokens per row, empty
    tokens (``a||b``, a trailing delimiter), rows repeating a token, the token counts (up to
    ``TOKEN_CAP``), words in the tokens. A partition without the delimiter: every value is one token (its
    value counts; ``words``: the values' whitespace tokens)."""
    has = pc.match_substring(arr, delimiter)
    n_has = _count(has)
    if not n_has:
        return {"n_has": 0, "n_empty": 0, "n_repeat": 0, "n_thousands": 0, "max_tokens": 1 if len(arr) else 0,
                "words": words,
                "tokens": len(arr), "token_counts": counts if counts is not None and len(counts) <= TOKEN_CAP else None}
    lists = pc.split_pattern(arr, delimiter)
    flat = pc.utf8_trim_whitespace(pc.list_flatten(lists))
    ntok = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    multi = lists.filter(has)
    vc = pc.value_counts(flat)
    words = int(pc.sum(pc.list_value_length(pc.utf8_split_whitespace(flat))).as_py() or 0)
    return {"n_has": n_has, "n_empty": _count(pc.equal(flat, "")), "max_tokens": int(ntok.max()), "words": words,
            "tokens": int(ntok.sum()), "n_thousands": _count(_match(arr, THOUSANDS_RE)) if delimiter == "," else 0,
            "n_repeat": _rows_with_repeats(multi, pc.utf8_trim_whitespace(pc.list_flatten(multi))),
            "token_counts": (dict(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist(), strict=True))
                             if len(vc) <= TOKEN_CAP else None)}


def _merge_delimited(a: dict, b: dict) -> dict:
    out = {}
    for d in set(a) | set(b):
        if d not in a or d not in b:  # a partition of another kind (no string values): nothing to add
            out[d] = a.get(d) or b[d]
            continue
        x, y = a[d], b[d]
        out[d] = {"n_has": x["n_has"] + y["n_has"], "n_empty": x["n_empty"] + y["n_empty"],
                  "n_thousands": x["n_thousands"] + y["n_thousands"], "words": x["words"] + y["words"],
                  "n_repeat": x["n_repeat"] + y["n_repeat"], "tokens": x["tokens"] + y["tokens"],
                  "max_tokens": max(x["max_tokens"], y["max_tokens"]),
                  "token_counts": _merge_counts(x["token_counts"], y["token_counts"], TOKEN_CAP)}
    return out


def _media_profile(uniques: pa.Array, counts: np.ndarray, hashes: np.ndarray) -> dict:
    """From a partition's distinct values (their row counts and hashes): rows with an image / audio
    extension, rows per extension, and the ``MEDIA_SAMPLE`` media values with the lowest hashes
    (mergeable: the bottom-k of a union is the bottom-k of the parts' bottom-ks)."""
    ext = pc.struct_field(pc.extract_regex(pc.utf8_lower(uniques), pattern=EXT_RE), [0])  # null: no extension
    image = pc.fill_null(pc.is_in(ext, value_set=pa.array(IMAGE_EXTENSIONS)), False).to_numpy(zero_copy_only=False)
    audio = pc.fill_null(pc.is_in(ext, value_set=pa.array(AUDIO_EXTENSIONS)), False).to_numpy(zero_copy_only=False)
    media = image | audio
    ext_counts: dict[str, int] = {}
    if media.any():
        grouped = (pa.table({"ext": ext.filter(pa.array(media)), "n": pa.array(counts[media])})
                   .group_by("ext").aggregate([("n", "sum")]))
        ext_counts = dict(zip(grouped.column("ext").to_pylist(), grouped.column("n_sum").to_pylist(), strict=True))
    chosen = np.flatnonzero(media)
    if len(chosen) > MEDIA_SAMPLE:  # the lowest hashes, ties at the cut included: O(n), no full sort
        cut = np.partition(hashes[chosen], MEDIA_SAMPLE - 1)[MEDIA_SAMPLE - 1]
        chosen = chosen[hashes[chosen] <= cut]
    values = uniques.take(pa.array(chosen, pa.int64())).to_pylist()
    sample = sorted(zip(hashes[chosen].tolist(), values, strict=True))[:MEDIA_SAMPLE]  # (hash, value): as merged
    return {"n_image": int(counts[image].sum()), "n_audio": int(counts[audio].sum()), "media_ext": ext_counts,
            "media_sample": sample}


def _rows_with_repeats(lists: pa.Array, flat: pa.Array) -> int:
    """How many of the token lists hold a token twice (text does; a set never does)."""
    if not len(flat):
        return 0
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    codes = pc.dictionary_encode(flat).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    pairs = np.unique(parents * (int(codes.max()) + 1) + codes)
    distinct_per_row = np.bincount(pairs // (int(codes.max()) + 1), minlength=len(lists))
    return int((distinct_per_row < pc.list_value_length(lists).to_numpy(zero_copy_only=False)).sum())


def _count_dates(arr: pa.Array) -> int:
    """Values that look like a date (pattern) and parse as one (each distinct value parsed once) with
    the date feature's own parser when that type is available, so ``date`` is only inferred for
    values the date feature will accept."""
    matched = arr.filter(_match(arr, DATE_RE, ignore_case=True))
    if not len(matched):
        return 0
    vc = pc.value_counts(matched)
    distinct_values = vc.field("values").to_numpy(zero_copy_only=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ok = ~np.isnat(parse_dates(pd.Series(distinct_values, dtype="string"), None))
    return int(vc.field("counts").to_numpy()[ok].sum())


def profile_partition(pdf: pd.DataFrame, columns: list[str]) -> dict[str, dict]:
    return {c: profile_values(pdf[c]) for c in columns}


def _merge_counts(a: dict | None, b: dict | None, cap: int) -> dict | None:
    if a is None or b is None:
        return None
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out if len(out) <= cap else None


def _opt(fn, a, b):
    return b if a is None else a if b is None else fn(a, b)


def merge_profiles(a: dict, b: dict) -> dict:
    """Associative and commutative: the merged profile does not depend on the partitioning."""
    out = {"kind": a["kind"] if a["kind"] == b["kind"] else "string"}
    for key in ("rows", "n", "n_true", "n_false", "n_numeric", "n_integer", "n_leading_zero", "tokens", "n_multi",
                "n_long", "chars", "n_date", "n_image", "n_audio", "n_vector", "n_uuid", "n_repeat", "n_negative",
                "n_clock", "n_ymd"):
        out[key] = a[key] + b[key]
    out["log_hist"] = a["log_hist"] + b["log_hist"]
    out["delimited"] = _merge_delimited(a["delimited"], b["delimited"])
    hash_set = (np.union1d(a["hash_set"], b["hash_set"]) if a["hash_set"] is not None and b["hash_set"] is not None
                else None)
    out["hash_set"] = hash_set if hash_set is not None and len(hash_set) <= EXACT_DISTINCT_CAP else None
    out["max_tokens"] = max(a["max_tokens"], b["max_tokens"])
    for key in ("min", "width_min", "vector_min"):
        out[key] = _opt(min, a[key], b[key])
    for key in ("max", "width_max", "vector_max"):
        out[key] = _opt(max, a[key], b[key])
    out["counts"] = _merge_counts(a["counts"], b["counts"], VALUE_CAP)
    out["token_counts"] = _merge_counts(a["token_counts"], b["token_counts"], TOKEN_CAP)
    out["media_ext"] = _merge_counts(a["media_ext"], b["media_ext"], len(a["media_ext"]) + len(b["media_ext"]))
    out["media_sample"] = sorted(set(a["media_sample"]) | set(b["media_sample"]))[:MEDIA_SAMPLE]
    out["hll"] = np.maximum(a["hll"], b["hll"])
    out["sample"] = sorted(set(a["sample"]) | set(b["sample"]))[:SAMPLE_SIZE]
    return out


def distinct(prof: dict) -> tuple[int, bool]:
    """(distinct non-missing values, exact?): exact from the value counts or the set of value hashes (a
    64-bit hash collision among a few million values has a chance of about 1e-6), above
    ``EXACT_DISTINCT_CAP`` a HyperLogLog estimate, never above the non-missing row count."""
    if prof["counts"] is not None:
        return len(prof["counts"]), True
    if prof.get("hash_set") is not None:
        return len(prof["hash_set"]), True
    return min(max(hll_estimate(prof["hll"]), EXACT_DISTINCT_CAP + 1), prof["n"]), False
