"""The feature-type contract shared by built-in and custom feature types.

A feature type turns one raw column into fixed-dtype tensors. It is fitted with the one fit protocol
of ``tasks.runtime.combine`` (create, add, merge, extract: mergeable accumulators, so the fit does not depend
on the partitioning) and encodes partition by partition with vectorized pyarrow/numpy code. It knows:

* ``cast``: raw column -> typed values (nulls kept); a bad value raises ``DataError`` naming
  the row and column;
* ``missing_combiner()``: the combiner of what a missing-value strategy needs (nulls, mode, mean,
  ...), whose ``extract`` is the JSON fill state (``missing_value_strategy``, ``computed_fill_value``);
  ``MissingStatistics`` serves every type (a type with more state subclasses it);
* ``create``/``add``/``merge``/``extract(acc, missing_state)``: the fit of the metadata
  (training_set_metadata.json), as the combiner ``fit_combiner(missing_state)``;
* ``encode``: typed, filled values + metadata -> ``{column name: numpy array}``; metadata without
  the fitted keys it needs (``fitted_keys``/``required_metadata``) raises ``NotFittedError``
  (``check_fitted``, the first thing every built-in ``encode`` does);
* ``output_columns``: name, dtype and per-row shape of every published column.

Instances are built by ``tasks.features.build`` from a resolved ``FeatureConfig``; the constructor
only stores settings (scikit-learn style), and a fit keeps nothing on the instance.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import field_validator

from core.combiner import Combiner
from core.errors import DataError, NotFittedError
from core.lazy import pandas as pd
from core.options import StrictModel

MISSING_STRATEGIES = ("fill_with_const", "fill_with_mode", "fill_with_mean", "fill_with_false",
                      "fill_with_true", "bfill", "ffill", "drop_row")


class BasePreprocessing(StrictModel):
    missing_value_strategy: str | None = None  # None: the type's default (drop_row for outputs)
    fill_value: Any = None
    # whether ``fill_value`` may be a flat list of numbers (a vector's or a time series' row), not one value
    fill_value_list: ClassVar[bool] = False

    @field_validator("fill_value", mode="before")
    @classmethod
    def _one_fill_value(cls, value: Any) -> Any:
        """One value (a string, number, boolean or YAML date), or a flat list of them where a row holds several:
        a mapping or a nested list is refused here, naming the key, not deep in a stage."""
        if cls.fill_value_list and isinstance(value, (list, tuple)):
            if all(isinstance(v, _SCALARS) and v is not None for v in value):
                return value
            raise ValueError(f"expected one value or a flat list of numbers, got a list holding "
                             f"{_shape(next(v for v in value if not isinstance(v, _SCALARS) or v is None))}")
        if not isinstance(value, _SCALARS):
            raise ValueError(f"expected one value (a string, number or boolean), got {_shape(value)}")
        return value


_SCALARS = (str, bool, int, float, datetime.date, datetime.time, type(None))


def _shape(value: Any) -> str:
    """What a wrong-shaped config value is, without quoting it whole (it may be large)."""
    if isinstance(value, dict):
        return f"a mapping with {len(value)} key{'s' * (len(value) != 1)}"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} item{'s' * (len(value) != 1)}"
    return "null" if value is None else f"a {type(value).__name__}"


@dataclass(frozen=True)
class ColumnSpec:
    """One published column: numpy dtype name and the shape of one row (``()`` for scalars)."""

    name: str
    dtype: str
    shape: tuple[int, ...] = ()


class FeatureType:
    type_name: ClassVar[str] = ""
    Preprocessing: ClassVar[type[BasePreprocessing]] = BasePreprocessing
    default_missing_strategy: ClassVar[str] = "fill_with_const"
    allowed_missing_strategies: ClassVar[tuple[str, ...]] = ("fill_with_const", "fill_with_mode", "bfill",
                                                              "ffill", "drop_row")
    default_fill_value: ClassVar[Any] = None
    # metadata keys ``encode`` needs (what ``extract`` always writes); see ``required_metadata``
    fitted_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str, column: str, options: BasePreprocessing, is_output: bool = False):
        self.name = name
        self.column = column
        self.options = options
        self.is_output = is_output

    # ---- reading -------------------------------------------------------------------
    def read_as(self) -> str:
        """How text formats should read the column: 'string' or 'float64'."""
        return "string"

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        """Raw column -> typed values, nulls kept. ``rows`` are the input row numbers (0-based)."""
        return values

    def normalize(self, values: pd.Series, missing_state: dict, rows: np.ndarray) -> pd.Series:
        """Typed values -> the domain fill values live in (binary: strings -> bool)."""
        return values

    # ---- missing values ----------------------------------------------------------------
    @property
    def missing_strategy(self) -> str:
        return self.options.missing_value_strategy or ("drop_row" if self.is_output else self.default_missing_strategy)

    def missing_combiner(self) -> Combiner:
        """The combiner of the missing-value statistics over the fit rows; its ``extract`` is the fill state."""
        return MissingStatistics(self)

    def fill_value_from_config(self, value: Any) -> Any:
        return value

    def reads_missing_as_fill(self) -> bool:
        """Whether this feature's fit and encode read a missing value exactly as its fill value, so that the
        stages' preparation may leave it missing (``tasks.runtime.frame.normalize_and_fill(lazy=True)``) instead of
        writing the fill into every row: a category's ``<UNK>`` (id 0 either way). No by default."""
        return False

    @property
    def keeps_dictionary(self) -> bool:
        """Whether the vocab and encode stages may hand this feature its column as ingest stored it, an Arrow
        dictionary array (pandas ``ArrowDtype``), unfilled: ``cast``, ``add`` and ``encode`` then read each
        distinct value once (``tasks.custom.prepared.dictionary_columns``). No by default."""
        return False

    # ---- fit (a combiner over the filled fit rows) / encode ------------------------------------------
    def create(self) -> Any:
        """An empty fit accumulator (the default type fits nothing)."""
        return None

    def add(self, acc: Any, values: pd.Series) -> Any:
        """``acc`` with a batch of filled fit values added (indexed by input row position)."""
        return acc

    def merge(self, a: Any, b: Any) -> Any:
        """Two accumulators as one: associative and commutative."""
        return a

    def extract(self, acc: Any, missing_state: dict) -> dict:
        """The fitted metadata (a JSON object) from the merged accumulator and the fill state."""
        return {}

    def fit_combiner(self, missing_state: dict) -> Combiner:
        """The fit as a ``Combiner`` (``create``/``add``/``merge`` of this type, ``extract`` with ``missing_state``)."""
        return FeatureFit(self, missing_state)

    def required_metadata(self, metadata: dict) -> tuple[str, ...]:
        """The metadata keys ``encode`` needs (may depend on the options, e.g. a number's normalization)."""
        return self.fitted_keys

    def check_fitted(self, metadata: Any, *keys: str) -> None:
        """``NotFittedError`` unless ``metadata`` holds ``keys`` (default: ``required_metadata``)."""
        if not isinstance(metadata, dict):
            raise NotFittedError(f"{self.describe()}: encode needs the fitted metadata (a dict from extract), "
                                 f"got {type(metadata).__name__}")
        missing = [k for k in (keys or self.required_metadata(metadata)) if k not in metadata]
        if missing:
            raise NotFittedError(f"{self.describe()}: encode needs fitted metadata (missing {missing}); run the "
                                 "vocab stage (fit) first, or pass the artifact's training_set_metadata.json entry")

    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.type_name} feature '{self.name}'"


@dataclass(frozen=True)
class NullCount:
    """A batch of fit rows reduced to what a missing-value combiner that reads no values needs: how many
    rows, and how many of them are missing (``MissingStatistics.needs_values``)."""

    nulls: int
    size: int


class MissingStatistics(Combiner):
    """What a missing-value strategy needs, over the fit rows: nulls and rows, the value counts for
    ``fill_with_mode``. ``extract``: the JSON fill state, ``missing_value_strategy`` and
    ``computed_fill_value`` (None for bfill/ffill/drop_row).

    A batch is the fit rows' values (a Series) or, when ``needs_values()`` is false, a ``NullCount``:
    fill_missing then copies no column it only counts the nulls of (gathering a string column's fit rows is
    not free)."""

    def __init__(self, feature: FeatureType):
        self.feature = feature

    @property
    def wants_counts(self) -> bool:
        return self.feature.missing_strategy == "fill_with_mode"

    def needs_values(self) -> bool:
        """Whether ``add`` reads the values. A subclass with its own ``add`` does unless it says otherwise
        (by overriding this)."""
        return self.wants_counts or type(self).add is not MissingStatistics.add

    def create(self) -> dict:
        acc: dict[str, Any] = {"nulls": 0, "count": 0}
        if self.wants_counts:
            acc["value_counts"] = {}
        return acc

    def add(self, acc: dict, values: pd.Series | NullCount) -> dict:
        if isinstance(values, NullCount):
            return {**acc, "nulls": acc["nulls"] + values.nulls, "count": acc["count"] + values.size}
        out = {**acc, "nulls": acc["nulls"] + int(values.isna().sum()), "count": acc["count"] + int(values.size)}
        if "value_counts" in acc:
            out["value_counts"] = merge_counts(acc["value_counts"], value_counts(values))
        return out

    def merge(self, a: dict, b: dict) -> dict:
        out = {"nulls": a["nulls"] + b["nulls"], "count": a["count"] + b["count"]}
        if "value_counts" in a:
            out["value_counts"] = merge_counts(a["value_counts"], b["value_counts"])
        return out

    def extract(self, acc: dict) -> dict:
        f = self.feature
        strategy = f.missing_strategy
        state: dict[str, Any] = {"missing_value_strategy": strategy, "computed_fill_value": None}
        if strategy == "fill_with_const":
            fill = f.options.fill_value if f.options.fill_value is not None else f.default_fill_value
            state["computed_fill_value"] = f.fill_value_from_config(fill)
        elif strategy == "fill_with_mode":
            state["computed_fill_value"] = mode_of(acc.get("value_counts", {}), f.name)
        return state


class FeatureFit(Combiner):
    """A feature type's fit as a ``Combiner``: its ``create``/``add``/``merge``, and ``extract`` with the
    fill state fitted before (``FeatureType.fit_combiner``)."""

    def __init__(self, feature: FeatureType, missing_state: dict):
        self.feature, self.missing_state = feature, missing_state

    def create(self) -> Any:
        return self.feature.create()

    def add(self, acc: Any, batch: pd.Series) -> Any:
        return self.feature.add(acc, batch)

    def merge(self, a: Any, b: Any) -> Any:
        return self.feature.merge(a, b)

    def extract(self, acc: Any) -> dict:
        return self.feature.extract(acc, self.missing_state)


# ---- shared helpers ------------------------------------------------------------------------

def value_counts(values: pd.Series) -> dict:
    """Non-null value -> count, as a plain dict (keys keep their Python type). A float ``-0.0`` is counted as
    ``0.0``: the two are one key of a dict and of pandas' counts, and the one kept would otherwise be whichever
    a partition met first, so a mode's tie-break (``order_vocab`` compares ``str(key)``) and the fill value
    itself depended on the partitioning."""
    vc = values.dropna().value_counts(sort=False)
    out: dict = {}
    for k, v in vc.items():
        k = k.item() if hasattr(k, "item") else k
        if isinstance(k, float):
            k += 0.0  # -0.0 + 0.0 == +0.0
        out[k] = out.get(k, 0) + int(v)
    return out


def merge_counts(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def order_vocab(counts: dict) -> list:
    """Tokens by frequency descending, ties by the token's string ascending (DESIGN section 3)."""
    return sorted(counts, key=lambda t: (-counts[t], str(t)))


def mode_of(counts: dict, feature: str) -> Any:
    if not counts:
        raise DataError(f"feature '{feature}': fill_with_mode needs at least one non-missing value "
                        "in the rows the fill is fitted on")
    return order_vocab(counts)[0]


def first_bad(mask: np.ndarray, values: pd.Series, rows: np.ndarray) -> tuple[int, Any]:
    i = int(np.flatnonzero(mask)[0])
    return int(rows[i]), values.iloc[i]


def by_count_then(table: pa.Table, tie: str) -> np.ndarray:
    """Row order of a vocabulary's ``(value, count[, first])`` table (category values, tokens): ``count``
    descending, equal counts by ``tie`` ascending (distinct per row): a stable sort by count of the rows
    sorted by ``tie``, the same order as Arrow's two-key ``sort_indices`` (which compares strings inside every
    group of equal counts). Values of at most 8 bytes each (Criteo's) are sorted as integers
    (``short_string_order``), which is faster than Arrow's string sort and its two-key sort; others by Arrow's
    string sort (``benchmarks/vocab_order.py``)."""
    column = table.column(tie)
    by_tie = short_string_order(column)
    if by_tie is None:
        by_tie = pc.sort_indices(column).to_numpy()
    counts = table.column("count").to_numpy()[by_tie]
    return by_tie[np.argsort(-counts, kind="stable")]


SHORT_STRING_BYTES = 8


def short_string_order(values) -> np.ndarray | None:
    """The ascending order of strings (UTF-8 bytes compared as unsigned, as Arrow's ``sort_indices`` compares
    them; a value before its extensions; ties in row order) for a string array (32-bit offsets) in which no
    value is null or longer than 8 bytes; else None. Each value's bytes zero-padded to 8 and read big-endian
    are an integer whose order is the bytes' order, except that a value and the same value followed by zero
    bytes tie: the length breaks it. Sorting integers is faster than Arrow's string sort."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    n = len(arr)
    if not pa.types.is_string(arr.type) or arr.null_count:  # (ints, large strings: the caller's sort)
        return None
    if n == 0:
        return np.zeros(0, np.int64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    lengths = np.diff(offsets)
    longest = int(lengths.max())
    if longest > SHORT_STRING_BYTES:
        return None
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if longest else np.zeros(1, np.uint8)
    padded = np.zeros((n, SHORT_STRING_BYTES), dtype=np.uint8)
    if int(lengths.min()) == longest:  # equal lengths (hex ids, codes): the bytes as one block
        padded[:, :longest] = data[offsets[0]:offsets[0] + n * longest].reshape(n, longest)
        return np.argsort(padded.view(">u8").ravel(), kind="stable")
    starts = offsets[:-1]
    for k in range(longest):
        has = lengths > k
        padded[has, k] = data[starts[has] + k]
    return np.lexsort((lengths, padded.view(">u8").ravel()))


def is_dictionary(values: pd.Series) -> bool:
    """Whether the column is an Arrow dictionary array (pandas ``ArrowDtype``; ``keeps_dictionary``)."""
    return isinstance(values.dtype, pd.ArrowDtype) and pa.types.is_dictionary(values.dtype.pyarrow_dtype)


def dictionary_array(values: pd.Series) -> pa.DictionaryArray | None:
    """The column as one Arrow dictionary array when it is one (``keeps_dictionary``), else None."""
    if not is_dictionary(values):
        return None
    arr = values.array.__arrow_array__()
    if isinstance(arr, pa.ChunkedArray):  # (concatenating chunks of several dictionaries merges them)
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


def as_strings(values: pd.Series) -> pa.Array:
    """A column as one Arrow string array (nulls kept)."""
    if not len(values):
        return pa.array([], pa.string())
    arr = pa.array(values.astype("string"), type=pa.string())
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
