"""date: 9 int32 values per row, Ludwig's layout:
``[year, month, day, weekday, yearday, hour, minute, second, second_of_day]``
(weekday: Monday = 0; yearday: 1 = January 1st; second_of_day = 3600 h + 60 m + s).

Parsing (``cast``): with ``datetime_format`` (strftime codes, e.g. ``"%d/%m/%Y %H:%M"``) every value
must match it; ``epoch_s`` / ``epoch_ms`` read numbers as seconds / milliseconds since 1970 (UTC);
``hhmm`` reads clock times written as whole numbers ``H * 100 + M`` (``517`` is 05:17, ``2400`` the
day's end, read as 00:00), as flight tables store them: the date part is 1970-01-01, so hour, minute
and second_of_day carry the value. Without it each value is parsed by the first of these that accepts it: ISO 8601
(``2020-01-31``, ``2020-01-31T08:15:00``, with fractions and offsets), then ``CANDIDATE_FORMATS``
in order (month-first before day-first: ``01/02/2020`` is January 2nd). The choice is made per
value, so it never depends on how the rows are partitioned. Times with a UTC offset are
converted to UTC; fractions of a second are dropped (floored).

A value that cannot be parsed is a ``DataError`` naming the row and column
(``on_parse_error: error``, the default) or is treated as missing (``fill``), and then filled by
the missing-value strategy. A date is never replaced by the current time (Ludwig's fallback).
The default strategy is ``fill_with_mode`` (the most frequent date of the fitted rows);
``fill_with_const`` takes a ``fill_value`` in any accepted form, or ``""`` (Ludwig's default fill, also
what no ``fill_value`` means): a row filled with ``""`` encodes as nine zeros (Ludwig fills the
time of preprocessing, which no rerun reproduces).

Typed values are canonical strings ``YYYY-MM-DDTHH:MM:SS`` (UTC), so fills, modes and the cache
are plain strings. Metadata: ``datetime_format`` (the configured format, or null when inferred).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.errors import DataError
from core.lazy import pandas as pd
from tasks.features.base import BasePreprocessing, ColumnSpec, FeatureType
from tasks.features.tokenizers import as_strings

CANONICAL = "%Y-%m-%dT%H:%M:%S"
CANDIDATE_FORMATS = (
    "%Y/%m/%d %H:%M:%S", "%Y/%m/%d %H:%M", "%Y/%m/%d",
    "%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M", "%m/%d/%Y %I:%M:%S %p", "%m/%d/%Y %I:%M %p", "%m/%d/%Y",
    "%d/%m/%Y %H:%M:%S", "%d/%m/%Y %H:%M", "%d/%m/%Y",
    "%m/%d/%y %H:%M", "%m/%d/%y", "%d/%m/%y",
    "%d.%m.%Y %H:%M:%S", "%d.%m.%Y %H:%M", "%d.%m.%Y",
    "%m-%d-%Y", "%d-%m-%Y",
    "%d %b %Y", "%d %B %Y", "%b %d %Y", "%b %d, %Y", "%B %d %Y", "%B %d, %Y",
    "%a %b %d %H:%M:%S %Y", "%a, %d %b %Y %H:%M:%S",
)
LAYOUT = ("year", "month", "day", "weekday", "yearday", "hour", "minute", "second", "second_of_day")


class DatePreprocessing(BasePreprocessing):
    datetime_format: str | None = None
    on_parse_error: Literal["error", "fill"] = "error"


# datetime_format values for numeric timestamps (what `prepflow infer` writes for epoch columns)
EPOCH_UNITS = {"epoch_s": "s", "epoch_ms": "ms"}
CLOCK_HHMM = "hhmm"  # whole numbers H * 100 + M (what `prepflow infer` writes for HHMM clock-time columns)


def _clock_seconds(text: pd.Series) -> np.ndarray:
    """HHMM numbers -> datetime64[s] on 1970-01-01 (NaT where missing or not a clock time); 2400 -> 00:00."""
    num = pd.to_numeric(text, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    hours, minutes = np.floor_divide(num, 100), np.mod(num, 100)
    ok = (num == np.round(num)) & (num >= 0) & (minutes < 60) & ((hours < 24) | (num == 2400))
    seconds = np.where(ok, np.mod(hours, 24) * 3600 + minutes * 60, 0).astype(np.int64)
    out = seconds.astype("datetime64[s]")
    out[~ok] = np.datetime64("NaT")
    return out


def _to_seconds(parsed: pd.Series) -> np.ndarray:
    """tz-aware (UTC) datetimes -> naive datetime64[s], floored to the second."""
    naive = parsed.dt.tz_convert(None).to_numpy()
    ints = naive.astype("datetime64[us]").astype(np.int64)
    nat = np.isnat(naive)
    secs = np.floor_divide(ints, 1_000_000)
    out = secs.astype("datetime64[s]")
    out[nat] = np.datetime64("NaT")
    return out


def parse_dates(text: pd.Series, datetime_format: str | None) -> np.ndarray:
    """Strings -> datetime64[s] (UTC, NaT where missing or unparseable); vectorized per format."""
    text = text.astype("string").str.strip()
    if datetime_format == CLOCK_HHMM:
        return _clock_seconds(text)
    if datetime_format in EPOCH_UNITS:  # numbers: seconds or milliseconds since 1970-01-01 UTC
        return _to_seconds(pd.to_datetime(pd.to_numeric(text, errors="coerce"), unit=EPOCH_UNITS[datetime_format],
                                          errors="coerce", utc=True))
    if datetime_format is not None:
        return _to_seconds(pd.to_datetime(text, format=datetime_format, errors="coerce", utc=True))
    out = _to_seconds(pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True))
    present = text.notna().to_numpy()
    for fmt in CANDIDATE_FORMATS:
        todo = np.isnat(out) & present
        if not todo.any():
            break
        out[todo] = _to_seconds(pd.to_datetime(text[todo], format=fmt, errors="coerce", utc=True))
    return out


def canonical(seconds: np.ndarray, index) -> pd.Series:
    text = np.datetime_as_string(seconds, unit="s")
    return pd.Series(text, index=index, dtype="string").mask(np.isnat(seconds))


class DateFeature(FeatureType):
    type_name = "date"
    Preprocessing = DatePreprocessing
    default_missing_strategy = "fill_with_mode"
    fitted_keys = ("datetime_format",)

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        if pd.api.types.is_datetime64_any_dtype(values.dtype):
            parsed = values if getattr(values.dtype, "tz", None) else values.dt.tz_localize("UTC")
            return canonical(_to_seconds(parsed), values.index)
        seconds = parse_dates(values, self.options.datetime_format)
        text = values.astype("string").str.strip()
        bad = np.isnat(seconds) & text.notna().to_numpy() & (text != "").fillna(False).to_numpy()
        if bad.any() and self.options.on_parse_error == "error":
            i = int(np.flatnonzero(bad)[0])
            how = f"the format {self.options.datetime_format!r}" if self.options.datetime_format else "a known format"
            raise DataError(f"row {int(rows[i])}, column '{self.column}': {self.describe()} cannot parse "
                            f"{values.iloc[i]!r} as a date in {how} (set datetime_format, or on_parse_error: fill "
                            "to treat it as missing)")
        return canonical(seconds, values.index)

    def fill_value_from_config(self, value: Any) -> str:
        if value is None or (isinstance(value, str) and not value.strip()):
            return ""  # "no date": encodes as zeros
        seconds = parse_dates(pd.Series([None if value is None else str(value)], dtype="string"),
                              self.options.datetime_format)
        if np.isnat(seconds[0]):
            raise DataError(f"{self.describe()}: fill_value {value!r} is not a date; fill_with_const needs a date "
                            "such as '2020-01-31' (or use fill_with_mode)")
        return str(np.datetime_as_string(seconds[0], unit="s"))

    def extract(self, acc: Any, missing_state: dict) -> dict:
        return {"datetime_format": self.options.datetime_format}

    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        self.check_fitted(metadata)
        arr = as_strings(values)
        empty = (values.astype("string") == "").fillna(False).to_numpy(dtype=bool)  # a null is still an error
        if empty.any():  # filled with "" (no date): encoded as zeros below
            arr = pc.if_else(pa.array(empty), "1970-01-01T00:00:00", arr)
        ts = pc.strptime(arr, format=CANONICAL, unit="s", error_is_null=True)
        if ts.null_count:  # not canonical (e.g. raw values at serving time): parse them here
            seconds = parse_dates(pd.Series(arr.to_pandas(), dtype="string"), self.options.datetime_format)
            if np.isnat(seconds).any():
                i = int(np.flatnonzero(np.isnat(seconds))[0])
                raise DataError(f"row {int(values.index[i])}, column '{self.column}': {self.describe()} cannot "
                                f"parse {values.iloc[i]!r} as a date")
            ts = pa.array(seconds.astype(np.int64), type=pa.timestamp("s"))
        year, month, day = pc.year(ts), pc.month(ts), pc.day(ts)
        weekday = pc.day_of_week(ts)  # Monday = 0
        yearday = pc.day_of_year(ts)
        hour, minute, second = pc.hour(ts), pc.minute(ts), pc.second(ts)
        cols = [np.asarray(c, dtype=np.int64) for c in (year, month, day, weekday, yearday, hour, minute, second)]
        cols.append(cols[5] * 3600 + cols[6] * 60 + cols[7])
        out = np.stack(cols, axis=1).astype(np.int32) if len(arr) else np.zeros((0, 9), np.int32)
        out[empty] = 0
        return {self.name: out}

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        return [ColumnSpec(self.name, "int32", (len(LAYOUT),))]
