"""Timeseries forecasting windows (Ludwig's ``window_size`` and ``horizon``), built over the whole table.

A timeseries feature with ``window_size: w`` (input) or ``horizon: h`` (output) reads a column with one
number per row. Its series for a row is made of the column's values at other rows, in input row order
(``__row__``), which may lie in other partitions; so the windows are built here, from the whole column,
before the per-partition preparation (``tasks.custom.prepared.filled_partitions`` calls ``add_windows``):

* window_size ``w``: the values of the ``w - 1`` rows before the row and the row's own, oldest first;
* horizon ``h``: the values of the ``h`` rows after the row, its own excluded;
* a position before the first row or after the last holds ``padding_value``; so does a row without a
  number (missing, or filled with ``""``);
* missing values are handled first, as Ludwig does before it shifts the column, by the strategy of the
  first feature (inputs, then outputs, in config order) that reads the column: Ludwig fills one copy of
  each column, feature after feature, so the first one's strategy leaves nothing missing for the others
  (in Ludwig's forecasting example the input's ``fill_with_const ''`` wins over the output's default
  ``drop_row``). ``fill_with_const``/``fill_with_mode`` put the fill value in, ``ffill``/``bfill`` carry
  the previous/next value over the whole column (then the other direction for a leading/trailing gap),
  and ``drop_row`` takes the row out of the series (the windows skip it) and the row is dropped;
* rows another feature drops (its ``drop_row``) and rows left out by sampling or put in another split keep
  their place in the series: the windows are built over every row, before the split, as in Ludwig.

Each windowed feature then reads a column ``__window__<name>`` holding its window as a string of numbers
(Arrow's shortest round-trip form, so the numbers parse back exactly; null for a dropped row), which the
feature's own cast, fit and encode read like any series. The result depends on the column alone, never on
the partitioning.

Differences from Ludwig (0.11 and later): with ``sample_ratio``/``sample_size`` Ludwig shuffles the rows
(``DataFrame.sample``) before it builds windows; prepflow builds them in input order over every row. A feature
that is not windowed keeps its own missing-value strategy even when it shares the column (in Ludwig the
first feature's wins for it too). A value that is not a finite number is an error (Ludwig turns NaN into
padding and infinities into float32's extremes).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from dask import delayed

from core.errors import ConfigError, DataError
from core.lazy import pandas as pd
from tasks.config.constants import ROW
from tasks.features.base import FeatureType
from tasks.features.timeseries import TimeseriesFeature, parse_numbers
from tasks.runtime.dask_run import compute, shared

PREFIX = "__window__"


def windowed(features: list[FeatureType]) -> list[TimeseriesFeature]:
    """The timeseries features with ``window_size`` or ``horizon``."""
    return [f for f in features if isinstance(f, TimeseriesFeature) and f.options.window_width]


def window_column(feature: FeatureType) -> str:
    return f"{PREFIX}{feature.name}"


@dataclass(frozen=True)
class Windows:
    """One feature's windows: ``padded`` is its series with NaN around it, ``position`` each input row's
    place in the series (-1: dropped; None: the row number itself, nothing dropped), ``start`` the offset of
    a row's window in ``padded``."""

    column: str
    padded: np.ndarray  # float64
    position: np.ndarray | None  # int64, indexed by input row
    start: int
    width: int
    padding_value: float
    separator: str


def offsets(window_size: int, horizon: int) -> tuple[int, int]:
    """(start, width): the window of series position ``p`` is ``series[p + start : p + start + width]``."""
    if window_size:
        return 1 - window_size, window_size + horizon
    return 1, horizon


def column_values(pdf: pd.DataFrame, feature: TimeseriesFeature) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input rows, float64 values, missing) of one partition; a row with no number is missing, a row with
    more than one is a ``DataError`` naming it."""
    if feature.column not in pdf.columns:
        raise ConfigError(f"{feature.describe()}: window_size/horizon need the column '{feature.column}' in the "
                          "input data (a column made by a custom stage cannot be windowed)")
    rows = pdf[ROW].to_numpy(dtype=np.int64)
    text = feature.cast(pdf[feature.column].reset_index(drop=True), rows)  # a bad number names its row
    numbers, tokens = parse_numbers(feature, text, feature.options.tokenizer, rows)
    lengths = tokens.lengths
    if (lengths > 1).any():
        i = int(np.flatnonzero(lengths > 1)[0])
        option = "window_size" if feature.options.window_size else "horizon"
        raise DataError(f"row {int(rows[i])}, column '{feature.column}': {feature.describe()} with {option} "
                        f"expects one number per row, got {text.iloc[i]!r}")
    values = np.full(len(rows), np.nan)
    values[lengths == 1] = numbers
    return rows, values, lengths == 0


def _fill_forward(values: np.ndarray, missing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each missing value replaced by the last present one before it; what stays missing."""
    last = np.maximum.accumulate(np.where(missing, -1, np.arange(len(values))))
    found = last >= 0
    return np.where(found, values[np.maximum(last, 0)], values), ~found


def fill_number(value, where: str = "the fill value") -> float:
    """A fill state's value (``""``, ``"2.5"``, a number, None) as a float; NaN = padding."""
    if value is None:
        return np.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    parts = str(value).replace(",", " ").split()
    try:
        if len(parts) <= 1:
            return float(parts[0]) if parts else np.nan
    except ValueError:
        pass
    raise DataError(f"{where} must be one number or '' to fill a windowed timeseries, got {value!r}")


def series(values: np.ndarray, missing: np.ndarray, state: dict,
           where: str = "the fill value") -> tuple[np.ndarray, np.ndarray]:
    """(the series the windows slide over, each row's position in it or -1), after the missing values are
    handled by ``state``'s strategy."""
    n = len(values)
    strategy = state["missing_value_strategy"]
    if strategy == "drop_row":
        keep = ~missing
        return values[keep], np.where(keep, np.cumsum(keep) - 1, -1)
    if strategy in ("ffill", "bfill"):
        first = strategy == "ffill"
        order = slice(None) if first else slice(None, None, -1)
        filled, left = _fill_forward(values[order], missing[order])
        filled, _ = _fill_forward(filled[::-1], left[::-1])  # the opposite direction for the edge gap
        values = filled[::-1][order]
    elif missing.any():
        values = np.where(missing, fill_number(state.get("computed_fill_value"), where), values)
    return values, np.arange(n, dtype=np.int64)


def build(feature: TimeseriesFeature, rows: np.ndarray, values: np.ndarray, missing: np.ndarray,
          state: dict, decider: str | None = None) -> Windows:
    """One feature's ``Windows`` from its whole column (``rows``, ``values``, ``missing`` in row order)."""
    opts = feature.options
    start, width = offsets(opts.window_size, opts.horizon)
    decider = decider or feature.name
    where = (f"column '{feature.column}': the fill value of feature '{decider}' (the first feature reading the column, "
             f"whose missing-value strategy Ludwig applies to it before {feature.describe()} windows it)")
    line, place = series(values, missing, state, where)
    before, after = max(-start, 0), max(start + width - 1, 0)
    after = max(after, width - before - len(line))  # at least one window's length (a series with no rows)
    padded = np.concatenate([np.full(before, np.nan), line, np.full(after, np.nan)])
    position = None
    if not np.array_equal(place, rows):
        position = np.full(int(rows.max()) + 1 if len(rows) else 0, -1, dtype=np.int64)
        position[rows] = place
    return Windows(window_column(feature), padded, position, start + before, width, float(opts.padding_value),
                   ", " if opts.tokenizer == "comma" else " ")


def window_strings(w: Windows, rows: np.ndarray) -> pd.Series:
    """The windows of input ``rows`` as strings of numbers (null for a dropped row)."""
    place = rows if w.position is None else w.position[rows]
    kept = place >= 0
    view = np.lib.stride_tricks.sliding_window_view(w.padded, w.width)
    block = view[place[kept] + w.start]
    block = np.where(np.isnan(block), w.padding_value, block)
    numbers = pc.cast(pa.array(block.reshape(-1)), pa.string())
    lists = pa.ListArray.from_arrays(pa.array(np.arange(0, block.size + 1, w.width, dtype=np.int32)), numbers)
    text = pc.binary_join(lists, w.separator)
    if not kept.all():
        text = text.take(pa.array(np.cumsum(kept) - 1, mask=~kept))
    return pd.Series(pd.arrays.ArrowStringArray(pa.chunked_array([text], pa.string())), dtype="string[pyarrow]")


def _read(pdf: pd.DataFrame, features: list[TimeseriesFeature]) -> dict:
    return {f.name: column_values(pdf, f) for f in features}


def _with_windows(pdf: pd.DataFrame, windows: list[Windows]) -> pd.DataFrame:
    rows = pdf[ROW].to_numpy(dtype=np.int64)
    return pdf.assign(**{w.column: window_strings(w, rows).set_axis(pdf.index) for w in windows})


def add_windows(parts: list, features: list[FeatureType], states: dict) -> tuple[list, list[FeatureType]]:
    """The delayed ``parts`` (the ingested table in row order) with each windowed feature's window column
    added, and the features with those reading it; both unchanged when no feature is windowed."""
    chosen = windowed(features)
    if not chosen:
        return parts, features
    # dask: heavy, imported when first used (as tasks.runtime.frame does): a reused artifact's run reads no data

    some = shared(chosen)
    read = compute([delayed(_read)(p, some) for p in parts])
    first: dict[str, str] = {}  # column -> the first feature reading it, whose strategy Ludwig applies
    for f in features:
        first.setdefault(f.column, f.name)
    windows = []
    for f in chosen:
        rows, values, missing = (np.concatenate([r[f.name][k] for r in read]) for k in range(3))
        windows.append(build(f, rows, values, missing, states[first[f.column]], first[f.column]))
    w = shared(windows)
    reading = {f.name: window_column(f) for f in chosen}
    out = []
    for f in features:
        if f.name in reading:
            f = copy.copy(f)
            f.column = reading[f.name]
        out.append(f)
    return [delayed(_with_windows)(p, w) for p in parts], out
