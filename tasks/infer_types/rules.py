"""The rules of type inference: a merged column profile -> a type and a one-line reason.

The rules start from Ludwig's AutoML heuristics and fix the cases where those are known to be wrong:

* Ludwig looks at the first 10 distinct values; here every row is looked at.
* integers are numbers unless they look like codes: a name such as ``zip``/``code``/``class``/
  ``*_id``/``*_id_str`` or a thing that integers identify (``flight``, ``store``, ``customer``: ``ENTITY_NAME``)
  with repeated values, leading zeros (``02134``), exactly two values other than 0/1, or
  fixed-width codes of 4+ digits that are not years. Whole numbers stored as floats (an id column
  with missing values, ``25073877.0``) are judged the same way.
* integers with a unit in their name (``body_mass_g``, ``Body Mass (g)``, ``length_mm``: ``UNIT_NAME``) are
  quantities: never fixed-width codes.
* YYYYMMDD dates written as whole numbers (``19580329``) named like a time are dates
  (``datetime_format: "%Y%m%d"``).
* strings are ``text`` when their values are mostly distinct or long, but a column whose values repeat
  (each ``CATEGORY_MIN_REPEATS`` times or more on average: a species' long name, a restaurant chain's)
  is a category, however many words its values have.
* HHMM clock times (``dep_time``: 517 is 05:17, 2400 the day's end) are dates with
  ``datetime_format: hhmm`` (hour, minute and second of the day), not numbers (1259 -> 1300 is one
  minute, not 41): a column named like a time whose values are all whole numbers 0..2400 ending in
  00..59, with at least ``CLOCK_MIN_DISTINCT`` of them. So ``age`` is a number (Ludwig: category when
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
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field

import numpy as np

from storage import media
from tasks.infer_types.profile import SET_DELIMITERS, SET_MAX_TOKENS, distinct

SET_MAX_VOCAB = 1_000
ID_MIN_ROWS = 20  # fewer non-missing rows: too few to call a column ID-like
ID_UNIQUE_SHARE = 0.95  # distinct / non-missing at or above this: unique for ID purposes
CATEGORY_MAX_SHARE = 0.5  # multi-token strings: category when distinct <= this share of rows
TEXT_MIN_TOKENS = 3.0  # mean whitespace tokens from which a string column is text
CODE_NAME = re.compile(r"zip|postal|postcode|code|class|categ|status|kind|group|type", re.IGNORECASE)
ID_NAME = re.compile(r"(?i:(?:^|[^a-z])(?:id|uuid|guid|key|index|idx)$|(?:^|[^a-z])id[^a-z])|[a-z](?:Id|ID)(?:$|[^a-z])")
# things that integers name rather than count (a flight number, a store, a customer): a category when values repeat
ENTITY_NAME = re.compile(r"(?i:(?:^|[^a-z])(?:flight|route|store|shop|station|customer|client|user|account|member|"
                         r"product|item|sku|order|invoice|ticket|patient|subject|employee|vendor|supplier|device|"
                         r"sensor|vehicle|driver|player|team|school|district|county|ward|precinct|branch)s?$)")
# a unit at the end of a name: a quantity (body_mass_g, flipper_length_mm, Body Mass (g), price_usd)
UNIT_NAME = re.compile(r"(?i:(?:^|[^a-z])(?:mm|cm|m|km|g|kg|mg|lb|lbs|oz|ml|l|s|sec|ms|min|h|hrs|usd|eur|pct|"
                       r"kwh|mw|mwh|mph|kmh|ft|in)\)?$)")
CATEGORY_MIN_REPEATS = 5  # strings whose values repeat this often on average are categories, not free text
CLOCK_MIN_DISTINCT = 60  # distinct HHMM values from which a time-named column is clock times (more than 24 hours)
# numbers that name things: flight_number, FlightNum, invoice_no, order_nr (a prefix, num_rooms, is a count)
NUMBER_NAME = re.compile(r"(?i:(?:^|[^a-z])(?:number|num|no|nr|nbr)$)|[a-z](?:Number|Num|No|Nr|NUM|NO)$")
TIME_NAME = re.compile(r"(?i:time|date|epoch|created|updated|modified|(?:^|[^a-z])(?:ts|at|when)(?:$|[^a-z]))"
                       r"|[a-z](?:At|TS)(?:$|[^a-z])")  # booked_at, created_at_ms, updatedAt, event_ts
EPOCH_SECONDS = (315_532_800, 4_102_444_800)  # 1980-01-01 .. 2100-01-01 UTC as epoch seconds
SET_MIN_MULTI = 0.05  # share of rows holding the delimiter from which a delimited set is considered
SET_MAX_WORDS = 1.5  # mean words per token of a delimited set ("Sci-Fi", "(no genres listed)"); a name's parts are more
HEAVY_TAIL_SPREAD = 4  # log2 buckets between the median and the 99th percentile that call for log1p
POSITIVE_LABELS = {"positive", "pos", "good", "spam", "fraud", "fraudulent", "churn", "churned", "click", "clicked",
                   "success", "successful", "win", "won", "pass", "passed", "malignant", "present", "active",
                   "approved", "accepted", "survived", "alive", "default", "defaulted", "buy", "bought", "purchased"}
THOUSANDS_RE = r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?"


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
    if exact and n >= CATEGORY_MIN_REPEATS * d:
        return out("category", f"{dn} distinct phrases (e.g. {_examples(prof, 2)}), each in {n / d:.0f} rows on "
                               f"average: labels, not free text{note}")
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


def _compact(x: float) -> str:
    """A readable magnitude: 4194303 -> '4.19M', 131071 -> '131K'; small numbers as they are."""
    if abs(x) < 10_000:
        return _fmt_num(x)
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return _fmt_num(x)


def _bucket_range(b: int) -> str:
    return f"{_compact(2.0 ** b - 1)}..{_compact(2.0 ** (b + 1) - 1)}"


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
            f"{_compact(prof['max'])}): consider preprocessing: {{normalization: log1p}}")


def _decide_number(name: str, prof: dict, out, d: int, dn: str, unique: bool) -> Inferred:
    n, lo, hi = prof["n"], prof["min"], prof["max"]
    rng = f"{_fmt_num(lo)}..{_fmt_num(hi)}"
    integers = prof["n_integer"] == n
    if prof["n_leading_zero"]:
        if unique:
            return out(None, f"excluded: ID-like ({dn} distinct digit strings with leading zeros in {n} rows)")
        return out("category", f"{dn} distinct digit codes with leading zeros (e.g. {_examples(prof, 2)}): "
                               "a number would drop the zeros")
    if (TIME_NAME.search(name) and prof.get("n_clock", 0) == n and d >= CLOCK_MIN_DISTINCT
            and not prof["n_leading_zero"]):
        example = max((int(float(v)) for _h, v in prof["sample"] if float(v) < 2400), default=0)
        return out("date", f"HHMM clock times ({_fmt_num(lo)}..{_fmt_num(hi)}; {example} is "
                           f"{example // 100:02d}:{example % 100:02d}) in a column named like a time",
                   {"datetime_format": "hhmm"})
    if TIME_NAME.search(name) and prof.get("n_ymd", 0) == n:
        return out("date", f"YYYYMMDD dates ({_fmt_num(lo)}..{_fmt_num(hi)}) in a column named like a time",
                   {"datetime_format": "%Y%m%d"})
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
    named = ID_NAME.search(name) or NUMBER_NAME.search(name) or ENTITY_NAME.search(name)
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
    if fixed and not years and lo >= 0 and not unique and not UNIT_NAME.search(name):
        return out("category", f"{dn} distinct fixed-width {prof['width_min']}-digit codes (e.g. "
                               f"{_examples(prof, 2)})")
    return out("number", f"{dn} distinct integers ({rng}){_tail_note(prof)}")
