"""infer_types: give every column without a declared ``type`` one, from a full pass over the data.

Two steps, like a fit: each Dask partition returns a mergeable profile per column (counts, an
exact value count capped at ``VALUE_CAP`` distinct values, a HyperLogLog sketch of the distinct
values, per-value pattern counts), the profiles are merged (sums, min/max, register-wise max; so
the result does not depend on the partitioning) and ``decide`` turns each merged profile into a
type and a one-line reason. Distinct counts are exact up to ``VALUE_CAP`` and HyperLogLog
estimates (about 1% error) above it.

The rules start from Ludwig's AutoML heuristics and fix the cases where those are known to be wrong:

* Ludwig looks at the first 10 distinct values; here every row is looked at.
* integers are numbers unless they look like codes: a name such as ``zip``/``code``/``class``/
  ``*_id`` with repeated values, leading zeros (``02134``), exactly two values other than 0/1, or
  fixed-width codes of 4+ digits that are not years. So ``age`` is a number (Ludwig: category when
  its first values are consecutive) and a zip code a category (Ludwig: number).
* booleans spelled yes/no, Y/N, 1/0, true/false, t/f, on/off (any case, mixed) are binary, also
  with missing values (Ludwig: category unless there are no missing values).
* a column with a single value is excluded (it carries no information), unless it is the target.
* unique integers that are sequential or named like an id, unique single-token strings and UUIDs
  are ID-like and excluded (Ludwig makes them categories with one row per class, or text).
* high-cardinality single-token strings stay categories (the vocabulary is capped by
  ``most_common``); multi-token strings are ``set`` when a small token vocabulary makes up many
  distinct combinations and (almost) no value repeats a token, otherwise ``text``.
* date, vector and timeseries are recognised from every value (date: parses; vector: lists of
  numbers, space- or comma-separated, optionally in brackets, all of one length; timeseries: such
  lists of varying length).
* image / audio: every non-missing value is a path or URL ending in an image extension (png, jpg,
  jpeg, bmp, gif, tif, tiff, webp, ppm, pgm: Pillow reads them) or an audio one (wav, flac, ogg,
  oga, opus, mp3, aif, aiff: what soundfile/libsndfile reads; not m4a/aac), checked on every row
  with a vectorized regex over the distinct values, and the files exist. Existence is checked on a
  bounded, deterministic sample: the ``MEDIA_SAMPLE`` distinct values with the lowest stable hashes
  (a bottom-k sample, so it is the same for any partitioning and spread over the whole column, not
  its first folder). Relative paths resolve as the media stage resolves them
  (``storage.media.resolve``: against the dataset's folder, the working directory for an in-memory
  DataFrame, or ``media_root``; ``media-cache:`` references under the cache folder); URLs (and relative
  paths under a URL dataset) are judged by their extension only, never fetched. One sampled file
  that is missing (or escapes ``media_root``) and the column is excluded, with a reason naming it:
  its values are meant as media, but the run would fail on them, and a category of file names
  would be useless (Ludwig falls back to category/text). Existence is judged when inference runs;
  the stage's cache entry does not follow the files later (``media_cache`` hashes every source and
  fails on a missing one).

``run`` is the pipeline stage (after ingest, cached like the others): it infers the untyped
features only and writes ``types.json``; ``apply`` puts the types into the run's config, which
every later stage then reads. ``infer_dataset`` + ``render_config`` are ``prepflow infer``
(``--config``: the ``media_root`` to resolve against, kept in the printed config; ``--cache-dir``);
``infer_dataset`` also takes a pandas/Dask DataFrame, read as the pipeline's ingest reads one.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import warnings
from dataclasses import asdict, dataclass, field
from functools import reduce
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
import pyarrow.parquet as pq
import yaml
from dask import delayed

from core.code_version import module_version
from core.errors import ConfigError, DataError
from core.lazy import pandas as pd
from storage import media
from storage.fs import open_input
from tasks.config.loader import load_config
from tasks.config.schema import suggest
from tasks.dataset import csv_dialect
from tasks.features import date as date_feature
from tasks.features import resolve_preprocessing
from tasks.ingest import dataframe as ingest_frame
from tasks.ingest import stage as ingest
from tasks.ingest import stage as ingest_mod
from tasks.ingest.dataframe import _scalar_text
from tasks.runtime import frame
from tasks.runtime.context import run_cached
from tasks.runtime.statistics import Statistics

CODE_VERSION = module_version(__name__)  # this module and what it imports directly (core.code_version)
TYPES_FILE = "types.json"
TYPES = ("binary", "number", "category", "text", "date", "image", "audio", "set", "vector", "timeseries")

VALUE_CAP = 10_000  # exact value counts up to this many distinct values per column
EXACT_DISTINCT_CAP = 4_000_000  # distinct counts exact (a set of 64-bit value hashes, 8 bytes each) up to this
TOKEN_CAP = 2_000  # exact token counts (for set detection) up to this many distinct tokens
HLL_P = 14  # 16384 registers: ~0.8% standard error
SET_MAX_TOKENS = 20  # values with more tokens are not set members
SET_MAX_VOCAB = 1_000
ID_MIN_ROWS = 20  # fewer non-missing rows: too few to call a column ID-like
ID_UNIQUE_SHARE = 0.95  # distinct / non-missing at or above this: unique for ID purposes
CATEGORY_MAX_SHARE = 0.5  # multi-token strings: category when distinct <= this share of rows
TEXT_MIN_TOKENS = 3.0  # mean whitespace tokens from which a string column is text
MEDIA_SAMPLE = 1_000  # distinct media paths whose files are checked (bottom-k by hash)
SAMPLE_SIZE = 5  # example values shown in reasons when there are too many to count exactly

TRUE_STRS = {"yes", "y", "true", "t", "1", "1.0", "on"}
FALSE_STRS = {"no", "n", "false", "f", "0", "0.0", "off"}
CODE_NAME = re.compile(r"zip|postal|postcode|code|class|categ|status|kind|group|type", re.IGNORECASE)
ID_NAME = re.compile(r"(?i:(?:^|[^a-z])(?:id|uuid|guid|key|index|idx)$|^id[^a-z])|[a-z](?:Id|ID)$")
# numbers that name things: flight_number, FlightNum, invoice_no, order_nr (a prefix, num_rooms, is a count)
NUMBER_NAME = re.compile(r"(?i:(?:^|[^a-z])(?:number|num|no|nr|nbr)$)|[a-z](?:Number|Num|No|Nr|NUM|NO)$")
TIME_NAME = re.compile(r"(?i:time|date|epoch|created|updated|modified|(?:^|[^a-z])(?:ts|at|when)(?:$|[^a-z]))"
                       r"|[a-z](?:At|TS)(?:$|[^a-z])")  # booked_at, created_at_ms, updatedAt, event_ts
EPOCH_SECONDS = (315_532_800, 4_102_444_800)  # 1980-01-01 .. 2100-01-01 UTC as epoch seconds
SET_DELIMITERS = {"|": {"tokenizer": "regex", "pattern": r"\s*\|\s*"}, ";": {"tokenizer": "regex", "pattern": r"\s*;\s*"},
                  ",": {"tokenizer": "comma"}}  # multi-value strings: the set feature's tokenizer for each
SET_MIN_MULTI = 0.05  # share of rows holding the delimiter from which a delimited set is considered
SET_MAX_WORDS = 1.5  # mean words per token of a delimited set ("Sci-Fi", "(no genres listed)"); a name's parts are more
LOG_BUCKETS = 1026  # floor(log2(x + 1)) of non-negative finite floats is at most 1024
HEAVY_TAIL_SPREAD = 4  # log2 buckets between the median and the 99th percentile that call for log1p
POSITIVE_LABELS = {"positive", "pos", "good", "spam", "fraud", "fraudulent", "churn", "churned", "click", "clicked",
                   "success", "successful", "win", "won", "pass", "passed", "malignant", "present", "active",
                   "approved", "accepted", "survived", "alive", "default", "defaulted", "buy", "bought", "purchased"}
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


@dataclass
class Inferred:
    """The type given to one column (``None``: excluded) and why."""

    name: str
    column: str
    type: str | None
    reason: str
    output: bool = False
    preprocessing: dict = field(default_factory=dict)  # options the type needs (a true label, a tokenizer)

    def to_json(self) -> dict:
        return asdict(self)


# ---- HyperLogLog ---------------------------------------------------------------------------------

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


# ---- one partition -------------------------------------------------------------------------------

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
        ok = ~np.isnat(date_feature.parse_dates(pd.Series(distinct_values, dtype="string"), None))
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
                "n_long", "chars", "n_date", "n_image", "n_audio", "n_vector", "n_uuid", "n_repeat", "n_negative"):
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


# ---- media files ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class MediaPlace:
    """Where a column's media paths resolve, as the media stage resolves them: ``base_dir`` (the
    dataset's folder, ``storage.media.dataset_dir``), ``media_root`` per kind (image/audio), the
    stage cache (for ``media-cache:`` references)."""

    base_dir: str
    media_root: dict[str, str | None] = field(default_factory=dict)
    cache_dir: str | None = None


@dataclass
class MediaCheck:
    """Sampled media values: how many are local files (checked), URLs (extension only), and the
    local ones that are missing or unusable, as ``(raw value, why)``."""

    local: int = 0
    urls: int = 0
    missing: list[tuple[str, str]] = field(default_factory=list)


def check_media_files(values: list[str], kind: str, place: MediaPlace) -> MediaCheck:
    """Resolve each sampled value like ``media_cache`` does and check that local files exist; URLs
    are not fetched. ``values`` is a bounded sample (``MEDIA_SAMPLE``), never a whole column."""
    check = MediaCheck()
    root = place.media_root.get(kind)
    for raw in values:
        try:
            path = media.resolve(raw, place.base_dir, root, place.cache_dir)
        except media.MediaError as exc:
            check.local += 1
            check.missing.append((raw, str(exc)))
            continue
        if media.is_url(path):
            check.urls += 1
            continue
        check.local += 1
        if not os.path.isfile(path):
            check.missing.append((raw, f"no file {path}" if not os.path.exists(path) else f"{path} is not a file"))
    return check


def _decide_media(kind: str, prof: dict, place: MediaPlace | None, out) -> Inferred:
    n = prof["n"]
    d, exact = distinct(prof)
    exts = "/".join(f".{e}" for e in sorted(prof["media_ext"]))
    sample = [v for _h, v in prof["media_sample"]]
    if place is None:
        return out(kind, f"all {n:,} values are {kind} file paths or URLs ending in {exts} (files not checked)")
    check = check_media_files(sample, kind, place)
    noun = "URLs" if not check.local else "paths or URLs" if check.urls else "paths"
    head = f"all {n:,} values are {kind} file {noun} ending in {exts}"
    if check.missing:
        examples = "; ".join(f"{raw!r}: {why}" for raw, why in check.missing[:2])
        relative = (f"relative paths resolve against {place.media_root[kind]} (media_root)"
                    if place.media_root.get(kind) else f"relative paths resolve against {place.base_dir}")
        bad = len(check.missing)
        verb = "does not exist or cannot be used" if bad == 1 else "do not exist or cannot be used"
        return out(None, f"excluded: {head}, but {bad:,} of the {check.local:,} sampled files {verb} "
                         f"(e.g. {examples}); {relative}. Fix the paths, or give it "
                         f"type: {kind} (with on_decode_error: skip_row to drop those rows)")
    if not check.local:
        return out(kind, f"{head} (URLs are not fetched: extension only)")
    whole = exact and d <= len(sample)  # the sample is every distinct value
    files = (f"all {check.local:,} distinct files exist" if whole and not check.urls
             else f"the {check.local:,} sampled local files exist (URLs: extension only)" if check.urls
             else f"the {check.local:,} sampled files (of {'' if exact else '~'}{d:,} distinct) exist")
    return out(kind, f"{head}; {files}")


# ---- the decision --------------------------------------------------------------------------------

def _examples(prof: dict, k: int = 3) -> str:
    counts = prof["counts"]
    top = sorted(counts, key=lambda v: (-counts[v], v))[:k] if counts else [v for _h, v in prof["sample"][:k]]
    return ", ".join(repr(v if len(v) <= 24 else v[:21] + "...") for v in top)


def _fmt_num(x: float | None) -> str:
    return "?" if x is None else (f"{int(x)}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}")


def decide(name: str, prof: dict, is_target: bool = False, column: str | None = None,
           media_place: MediaPlace | None = None) -> Inferred:
    """The type of one column from its merged profile, with the reason (``type=None``: excluded).
    ``media_place``: where media paths resolve, to check that a media column's sampled files exist
    (None: by extension only, said so in the reason)."""
    column = column or name
    kind, n, rows = prof["kind"], prof["n"], prof["rows"]
    d, exact = distinct(prof)
    dn = f"{d}" if exact else f"~{d}"
    missing = rows - n
    miss = f"; {missing} missing ({missing / rows:.1%})" if missing and rows else ""

    def out(type_name: str | None, reason: str, preprocessing: dict | None = None) -> Inferred:
        if type_name is None and is_target:
            fallback = "number" if n and prof["n_numeric"] == n else "category"
            return Inferred(name, column, fallback, f"{reason}; kept as {fallback} because it is the target",
                            is_target)
        return Inferred(name, column, type_name, reason + miss, is_target, dict(preprocessing or {}))

    if n == 0:
        return out(None, "excluded: every value is missing")
    if d == 1:
        return out(None, f"excluded: a single value ({_examples(prof, 1)}) in every non-missing row")
    if kind == "bool":
        return out("binary", "boolean column")
    if kind == "datetime":
        return out("date", "timestamp column")
    if prof["n_true"] + prof["n_false"] == n and prof["n_true"] and prof["n_false"]:
        return out("binary", f"boolean values ({_examples(prof, 4)})")
    if prof["n_true"] + prof["n_false"] == n:
        return out(None, f"excluded: every value means the same boolean ({_examples(prof, 2)})")
    if d == 2 and exact and kind in ("int", "float"):  # stored as numbers (Parquet, a DataFrame), not 0/1
        return out("category", f"two numbers ({_examples(prof, 2)}) stored as numbers: a binary feature reads "
                               "stored numbers as 0/1 only; write them as text for a binary with a true label")
    if d == 2 and exact:
        return _decide_two_values(prof, out)
    unique = n >= ID_MIN_ROWS and d >= ID_UNIQUE_SHARE * n
    if prof["n_numeric"] == n:
        return _decide_number(name, prof, out, d, dn, unique)
    note = ""
    if prof["n_numeric"] >= 0.95 * n:
        bad = n - prof["n_numeric"]
        note = f" ({bad} value(s) are not numbers, so not a number column)"
    if prof["n_date"] == n:
        return out("date", f"every value parses as a date (e.g. {_examples(prof, 2)})")
    for media_kind in ("image", "audio"):
        if prof[f"n_{media_kind}"] == n:
            return _decide_media(media_kind, prof, media_place, out)
    thousands = prof.get("delimited", {}).get(",", {}).get("n_thousands", 0)
    if thousands >= 0.5 * n:  # 1,234: not a vector, not a list, and a number feature cannot read it
        return out("category", f"{dn} distinct values, {thousands} of them numbers with thousands separators (e.g. "
                               f"{_examples(prof, 2)}): remove the separators to use them as numbers")
    if prof["n_vector"] == n and prof["vector_min"] == prof["vector_max"]:
        return out("vector", f"every value is a list of {prof['vector_min']} numbers")
    if prof["n_vector"] == n:
        return out("timeseries", f"every value is a list of numbers, of {prof['vector_min']} to "
                                 f"{prof['vector_max']} values")
    if prof["n_uuid"] == n and unique:
        return out(None, f"excluded: ID-like ({dn} distinct UUIDs in {n} rows)")
    delimited = _delimited_set(prof, d, dn, out)
    if delimited is not None:
        return delimited
    mean_tokens = prof["tokens"] / n
    if mean_tokens < 1.5 and prof["n_multi"] < 0.5 * n:  # (mostly) single tokens
        if unique:
            return out(None, f"excluded: ID-like ({dn} distinct values in {n} rows, e.g. {_examples(prof, 2)})")
        high = "high-cardinality " if d > CATEGORY_MAX_SHARE * n else ""
        return out("category", f"{dn} distinct {high}values (e.g. {_examples(prof, 3)}){note}")
    vocab = prof["token_counts"]
    if (prof["n_long"] == 0 and vocab is not None and mean_tokens < TEXT_MIN_TOKENS * 2
            and len(vocab) <= SET_MAX_VOCAB and len(vocab) * 2 <= d and prof["n_multi"] >= 0.1 * n
            and prof["n_repeat"] <= 0.01 * prof["n_multi"]):
        return out("set", f"{dn} distinct combinations of {len(vocab)} space-separated tokens "
                          f"(mean {mean_tokens:.1f} per row)")
    if mean_tokens >= TEXT_MIN_TOKENS or d > CATEGORY_MAX_SHARE * n:
        return out("text", f"free text: {dn} distinct values of {n}, mean {mean_tokens:.1f} words")
    return out("category", f"{dn} distinct short phrases (e.g. {_examples(prof, 3)}){note}")


def _decide_two_values(prof: dict, out) -> Inferred:
    """Exactly two distinct values that are not both booleans: binary, with the true label chosen (and
    named in the config as ``fallback_true_label``): a value that reads as the positive outcome, else
    the larger of two numbers, else the rarer value (a positive class usually is), else the later one."""
    counts, n = prof["counts"], prof["n"]
    low, high = sorted(counts)
    positive = [v for v in (low, high) if v.lower() in POSITIVE_LABELS]
    if len(positive) == 1:
        true, why = positive[0], "it reads as the positive outcome"
    elif prof["n_numeric"] == n:
        true, why = max((low, high), key=float), "the larger number"
    elif counts[low] != counts[high]:
        true, why = min((low, high), key=lambda v: counts[v]), "the rarer value, as a positive class usually is"
    else:
        true, why = high, "the later in string order (both equally frequent)"
    shares = ", ".join(f"{v!r} {counts[v] / n:.0%}" for v in sorted((low, high), key=lambda v: (-counts[v], v)))
    return out("binary", f"two distinct values ({shares}); true label {true!r}: {why}",
               {"fallback_true_label": true})


THOUSANDS_RE = r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?"


def _delimited_set(prof: dict, d: int, dn: str, out) -> Inferred | None:
    """``Comedy|Romance``-style values: a set when one delimiter (``|``, ``;``, ``,``) cuts many rows into
    tokens with a consistent structure (no empty tokens, no token twice in a row, at most
    ``SET_MAX_TOKENS`` per row) from a small vocabulary that recurs (fewer tokens than distinct values)."""
    n = prof["n"]
    for delimiter, options in SET_DELIMITERS.items():
        p = prof.get("delimited", {}).get(delimiter)
        if not p or p["n_has"] < SET_MIN_MULTI * n or p["n_empty"] or p["max_tokens"] > SET_MAX_TOKENS:
            continue
        if p["words"] > SET_MAX_WORDS * p["tokens"]:  # "Braund, Mr. Owen Harris": phrases, not labels
            continue
        vocab = p["token_counts"]
        if vocab is None or len(vocab) > SET_MAX_VOCAB or len(vocab) >= d or p["n_repeat"] > 0.01 * p["n_has"]:
            continue
        if delimiter == "," and p.get("n_thousands", 0) >= 0.5 * p["n_has"]:
            continue  # 1,234: a number written with thousands separators, not a list
        name = {"|": "pipe", ";": "semicolon", ",": "comma"}[delimiter]
        top = ", ".join(repr(t) for t in sorted(vocab, key=lambda t: (-vocab[t], t))[:4])
        return out("set", f"{dn} distinct combinations of {len(vocab)} {name}-separated tokens (e.g. {top}; "
                          f"mean {p['tokens'] / n:.1f} per row)", options)
    return None


def _epoch(name: str, prof: dict) -> tuple[str, str] | None:
    """(datetime_format, unit) when a column named like a time holds epoch seconds or milliseconds
    (every value within 1980..2100)."""
    if not TIME_NAME.search(name) or prof["min"] is None:
        return None
    lo, hi = EPOCH_SECONDS
    for fmt, unit, scale in (("epoch_s", "seconds", 1), ("epoch_ms", "milliseconds", 1000)):
        if lo * scale <= prof["min"] and prof["max"] <= hi * scale:
            return fmt, unit
    return None


def _bucket_range(b: int) -> str:
    return f"{_fmt_num(2.0 ** b - 1)}..{_fmt_num(2.0 ** (b + 1) - 1)}"


def _tail_note(prof: dict) -> str:
    """A log1p suggestion for a non-negative column with a heavy right tail: the 99th percentile at least
    ``2**HEAVY_TAIL_SPREAD`` times the median (judged on exact log2 bucket counts)."""
    hist = prof["log_hist"]
    total = int(hist.sum())
    if prof["n_negative"] or total < ID_MIN_ROWS:
        return ""
    cumulative = np.cumsum(hist)
    median = int(np.searchsorted(cumulative, (total + 1) // 2))
    p99 = int(np.searchsorted(cumulative, -(-99 * total // 100)))
    if p99 - median < HEAVY_TAIL_SPREAD:
        return ""
    return (f"; heavy right tail (median {_bucket_range(median)}, 99th percentile {_bucket_range(p99)}, max "
            f"{_fmt_num(prof['max'])}): consider preprocessing: {{normalization: log1p}}")


def _decide_number(name: str, prof: dict, out, d: int, dn: str, unique: bool) -> Inferred:
    n, lo, hi = prof["n"], prof["min"], prof["max"]
    rng = f"{_fmt_num(lo)}..{_fmt_num(hi)}"
    integers = prof["n_integer"] == n
    if prof["n_leading_zero"]:
        if unique:
            return out(None, f"excluded: ID-like ({dn} distinct digit strings with leading zeros in {n} rows)")
        return out("category", f"{dn} distinct digit codes with leading zeros (e.g. {_examples(prof, 2)}): "
                               "a number would drop the zeros")
    epoch = _epoch(name, prof)
    if epoch is not None:
        fmt, unit = epoch
        scale = 1000 if fmt == "epoch_ms" else 1
        first, last = (str(np.datetime64(int(x // scale), "s")).replace("T", " ") for x in (lo, hi))
        return out("date", f"epoch {unit} ({first}..{last} UTC) in a column named like a time",
                   {"datetime_format": fmt})
    if not integers:
        return out("number", f"{dn} distinct numeric values ({rng}){_tail_note(prof)}")
    sequential = hi - lo + 1 <= d * 1.01 + 1 if lo is not None else False
    named = ID_NAME.search(name) or NUMBER_NAME.search(name)
    fixed = prof["width_min"] is not None and prof["width_min"] == prof["width_max"] and prof["width_min"] >= 4
    years = lo is not None and lo >= 1800 and hi <= 2100
    if unique and (sequential or named or (fixed and prof["width_min"] >= 5)):
        why = ("sequential" if sequential else f"named like an identifier ('{name}')" if named
               else f"fixed-width {prof['width_min']}-digit numbers")
        return out(None, f"excluded: ID-like ({dn} distinct integers in {n} rows, {rng}, {why}; no arithmetic "
                         "meaning)")
    if (CODE_NAME.search(name) or named) and not unique:
        return out("category", f"{dn} distinct integers ({rng}) and the name '{name}' suggests a code or an "
                               "identifier, not a quantity")
    if fixed and not years and lo >= 0 and not unique:
        return out("category", f"{dn} distinct fixed-width {prof['width_min']}-digit codes (e.g. "
                               f"{_examples(prof, 2)})")
    return out("number", f"{dn} distinct integers ({rng}){_tail_note(prof)}")


# ---- over a dataset ------------------------------------------------------------------------------

def profile_columns(ingest_dir: str, columns: list[str], npartitions: int | None = None) -> dict[str, dict]:
    """Full pass over the ingested parts with Dask: merged profile per column."""


    parts = frame.partitions(ingest_dir, npartitions)
    partials = frame.compute([delayed(profile_partition)(p, columns) for p in parts])
    return {c: reduce(merge_profiles, [p[c] for p in partials]) for c in columns}


def dataset_columns(path: str, fmt: str, delimiter: str | None = None) -> list[str]:
    """The column names of a dataset, in file order (CSV/TSV: in the dialect sniffed from the file,
    ``delimiter``: the config's override)."""


    if fmt in ("csv", "tsv"):
        return csv_dialect.header(path, fmt, delimiter)[0]
    if fmt == "parquet":
        with open_input(path) as fh:
            return list(pq.ParquetFile(fh).schema_arrow.names)
    if fmt == "feather":
        with open_input(path) as fh:
            return list(feather.read_table(fh).column_names)
    if fmt == "excel":
        with open_input(path) as fh:
            return [str(c) for c in pd.read_excel(fh, nrows=0).columns]
    with open_input(path) as fh:
        data = fh.read().decode("utf-8", errors="replace")
    if fmt == "jsonl":
        records = [json.loads(line) for line in data.splitlines()[:1000] if line.strip()]
    else:
        loaded = json.loads(data)
        records = loaded[:1000] if isinstance(loaded, list) else [dict.fromkeys(loaded)]
    return list(dict.fromkeys(k for r in records if isinstance(r, dict) for k in r))


def infer_dataset(dataset, target: str | None = None, npartitions: int | None = None, config=None,
                  cache_dir: str | None = None) -> tuple[list[Inferred], int]:
    """Every column of the dataset typed (``prepflow infer``): read as strings, profiled, decided.
    ``dataset``: a path or URL, or a pandas/Dask DataFrame (columns converted to text the way the
    pipeline's ingest converts an untyped one). Media files are checked where the ``media_cache``
    stage would look for them: relative paths against the dataset's folder (the working directory
    for a DataFrame) or the ``media_root`` that ``config`` (a ``Config`` or a config file) gives the
    column's feature or its kind's ``defaults``; ``media-cache:`` references under ``cache_dir``.
    Returns the decisions (in column order) and the row count."""

    if isinstance(config, (str, os.PathLike)):
        config = load_config(config)
    in_memory = ingest_frame.is_frame(dataset)
    if in_memory:
        dataset = ingest_frame._pandas(dataset)
        by_name = {str(c): c for c in dataset.columns}
        columns, where = [c for c in by_name if c != ingest.ROW], ingest_frame.SOURCE
    else:
        fmt = ingest.detect_format(dataset)
        csv_options = config.preprocessing.csv if config is not None else None
        delimiter = csv_options.delimiter if csv_options else None
        columns, where = [c for c in dataset_columns(dataset, fmt, delimiter) if c != ingest.ROW], dataset
    if target is not None and target not in columns:
        raise ConfigError(f"--target: column {target!r} is not in {where}{suggest(target, columns)}")
    with tempfile.TemporaryDirectory(prefix="prepflow-infer-") as tmp:
        if in_memory:
            spec = ingest.IngestSpec(columns=dict.fromkeys(columns, "string"), format="dataframe")
            table = pa.table({c: _frame_text(dataset[by_name[c]], c) for c in columns})
            ingest.write_parts(table.to_batches(max_chunksize=ingest.PART_ROWS), spec, Path(tmp) / "data", where)
        else:
            spec = ingest.IngestSpec(columns=dict.fromkeys(columns, "string"), format=fmt, delimiter=delimiter)
            ingest.write_parts(ingest.read_batches(dataset, spec), spec, Path(tmp) / "data", dataset)
        profiles = profile_columns(str(Path(tmp) / "data"), columns, npartitions)
        rows = profiles[columns[0]]["rows"] if columns else 0
    base = media.dataset_dir(dataset)
    return [decide(c, profiles[c], c == target, media_place=MediaPlace(base, column_media_roots(config, c), cache_dir))
            for c in columns], rows


def _frame_text(values: pd.Series, column: str) -> pa.Array:
    """A DataFrame column as the pipeline's ingest reads an untyped one (``tasks.ingest.dataframe``)."""

    return pa.array([_scalar_text(v, i, column) for i, v in enumerate(values.tolist())], type=pa.string())


def media_roots(config, feature=None) -> dict[str, str]:
    """Per media kind (image, audio), the ``media_root`` the media stage would use for ``feature``
    (a ``FeatureConfig``) once it has that type: its own, else the kind's ``defaults``; kinds
    without one are left out. ``feature=None``: the defaults only."""
    roots = {}
    for kind in ("image", "audio"):
        defaults = config.defaults.get(kind)
        root = defaults.preprocessing.get("media_root") if defaults else None
        if feature is not None:
            root = feature.preprocessing.get("media_root", root)
        if root is not None:
            roots[kind] = root
    return roots


def column_media_roots(config, column: str) -> dict[str, str]:
    """``media_roots`` for the first feature of ``config`` reading ``column`` (the defaults when none
    does, or when there is no config: ``{}``)."""
    if config is None:
        return {}
    feature = next((f for f in config.features if f.source_column == column), None)
    return media_roots(config, feature)


def _yaml_scalar(value: str) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 20).removesuffix("\n...\n").strip()


def render_config(inferred: list[Inferred], dataset: str, rows: int, config=None) -> str:
    """A config YAML with a comment per column saying why it got its type (excluded columns as
    comments, ready to uncomment with a type). ``config``: the one inference read ``media_root``
    from; an image/audio feature whose files were found under one keeps it."""
    lines = [f"# prepflow infer {dataset}: {rows} rows, {len(inferred)} columns (full pass).",
             "# Each type comes with the reason it was chosen; edit freely."]

    def block(title: str, items: list[Inferred]) -> None:
        if not items:
            return
        lines.append(f"{title}:")
        for item in items:
            lines.append(f"  - name: {_yaml_scalar(item.name)}")
            lines.append(f"    type: {item.type}  # {item.reason}")
            options = dict(item.preprocessing)
            root = column_media_roots(config, item.column).get(item.type)
            if root is not None:
                options["media_root"] = root
            if options:
                pairs = ", ".join(f"{key}: {_yaml_scalar(str(value))}" for key, value in options.items())
                lines.append(f"    preprocessing: {{{pairs}}}")

    block("input_features", [i for i in inferred if i.type and not i.output])
    block("output_features", [i for i in inferred if i.type and i.output])
    if not any(i.type and not i.output for i in inferred):
        lines.append("input_features: []  # no column could be typed as an input; see the excluded columns")
    excluded = [i for i in inferred if not i.type]
    if excluded:
        lines.append("# Excluded (give a column a type to use it anyway):")
        for item in excluded:
            lines.append(f"#  - name: {_yaml_scalar(item.name)}  # {item.reason.removeprefix('excluded: ')}")
    return "\n".join(lines) + "\n"


# ---- the pipeline stage --------------------------------------------------------------------------

def untyped(config) -> list[dict]:
    """The features without a type; ``media_root``: per media kind, the feature's own or the kind's
    ``defaults`` (where its paths would resolve once typed)."""
    return [{"name": f.name, "column": f.source_column, "output": config.is_output(f.name),
             "media_root": media_roots(config, f)} for f in config.features if f.type is None]


def run(ctx, ingest):
    """Stage entry point: infer the untyped features from the ingested data; writes ``types.json``."""

    todo = untyped(ctx.config)

    def compute(out: Path) -> Statistics:
        stats = Statistics()
        decisions = {}
        if todo:
            columns = sorted({t["column"] for t in todo})
            profiles = profile_columns(ingest_mod.data_dir(ingest.path), columns, ctx.npartitions)
            base = media.dataset_dir(ctx.dataset)
            for t in todo:
                place = MediaPlace(base, t["media_root"], str(ctx.cache.root))
                item = decide(t["name"], profiles[t["column"]], t["output"], t["column"], place)
                decisions[t["name"]] = item.to_json()
                stats.counter(f"infer_types.{item.type or 'excluded'}", 1)
        (out / TYPES_FILE).write_text(json.dumps({"features": decisions}, sort_keys=True, indent=1))
        return stats

    return run_cached(ctx, "infer_types", CODE_VERSION, [ingest.key], {"untyped": todo}, compute)


def load(result_or_path) -> dict[str, dict]:
    path = Path(getattr(result_or_path, "path", result_or_path))
    return json.loads((path / TYPES_FILE).read_text())["features"]


def apply(ctx, result_or_path):
    """The run's context with a new config in which every untyped feature has its inferred type (the
    given context and its config are unchanged)."""

    decisions = load(result_or_path)
    if all(f.type is not None for f in ctx.config.features):
        return ctx
    config = ctx.config.model_copy(deep=True)
    for f in config.features:
        if f.type is not None:
            continue
        item = decisions.get(f.name)
        if item is None:
            raise DataError(f"feature '{f.name}' has no type and no inferred type; rerun the infer_types stage")
        if item["type"] is None:
            raise DataError(f"feature '{f.name}' (column '{f.source_column}') has no type and inference would "
                            f"exclude it: {item['reason'].removeprefix('excluded: ')}; give it a 'type' in the "
                            "config or remove it")
        f.type = item["type"]
        for key, value in (item.get("preprocessing") or {}).items():  # e.g. the true label inference chose
            f.preprocessing.setdefault(key, value)  # the user's own options win
    resolve_preprocessing(config, "inferred config")
    return ctx.with_config(config)
