"""Custom stages (DESIGN section 9): user-defined row transforms, typed like Magenta's pipelines.

A stage declares the columns it reads and writes, each with a dtype (``"float64"``, ``"int64"``,
``"bool"``, ``"string"``, ``"datetime64[ns]"``, ``"object"``) or a feature type (``"number"``:
float64, ``"binary"``: bool, ``"category"``/``"text"``/...: strings), and transforms one pandas
partition at a time::

    class LogDistance(Stage):
        input_type = {"distance": "float64"}
        output_type = {"log_distance": "float64"}

        def transform(self, df):
            return df.assign(log_distance=np.log1p(df["distance"]))

``transform`` gets the partition's rows (with ``__row__``, the input row, and ``__split__``) and
returns a DataFrame with the same rows in the same order holding at least the declared output
columns. A stage that learns from data is a combiner (``tasks.runtime.combine``, the protocol feature types
fit with too): ``create()`` -> an empty accumulator, ``add(acc, df)`` per partition (on the
``fit_on`` rows), ``merge(a, b)`` (associative and commutative, so the result does not depend on the
partitioning), ``extract(acc)`` -> a JSON object, the fitted state (default: the accumulator); then
it is called as ``transform(df, state)``::

    class Scaled(Stage):
        input_type = {"distance": "number"}
        output_type = {"distance_scaled": "float64"}

        def create(self):
            return {"min": None, "max": None}

        def add(self, acc, df):
            return self.merge(acc, {"min": df["distance"].min(), "max": df["distance"].max()})

        def merge(self, a, b):
            pick = lambda f, x, y: y if x is None else x if y is None else f(x, y)
            return {"min": pick(min, a["min"], b["min"]), "max": pick(max, a["max"], b["max"])}

        def extract(self, acc):
            return {"min": float(acc["min"]), "max": float(acc["max"])}

        def transform(self, df, state):
            span = (state["max"] - state["min"]) or 1.0
            return df.assign(distance_scaled=(df["distance"] - state["min"]) / span)

(A float sum is not associative: sum exact integers where a state must not depend on the partitioning.)
A partition without fit rows adds nothing. Statistics are ``tasks.runtime.statistics`` Counter/Histogram objects
passed to ``self.emit(...)``; they are named ``<stage>.<statistic>`` and merged over partitions.

The constructor only stores settings: ``params`` from the config, validated by the class's
pydantic ``Params`` model when it has one. ``input_type``/``output_type`` may be set per instance
(in ``__init__``, from the params). Each partition runs on a shallow copy of the instance, so
instance state is not shared between partitions; put what a transform learns in the fitted state.
"""

from __future__ import annotations

import copy
import difflib
import re
from typing import Any, ClassVar, Mapping

from pydantic import BaseModel

from core.combiner import Combiner
from core.errors import InvalidStatisticsError
from core.lazy import pandas as pd
from core.plugins import FEATURES_GROUP, entry_points
from tasks.runtime.statistics import Statistic, Statistics

KINDS = ("float", "int", "bool", "string", "datetime", "object")
# the values a filled feature's column holds: what a stage after fill_missing reads
FEATURE_KINDS = {"number": "float", "numerical": "float", "binary": "bool", "category": "string", "set": "string",
                 "bag": "string", "sequence": "string", "text": "string", "timeseries": "string",
                 "vector": "string", "date": "string", "image": "object", "audio": "object"}
# the kinds of column each feature type's ``cast`` reads (a column a stage makes for it)
FEATURE_ACCEPTS = {"number": {"float", "int", "bool"}, "numerical": {"float", "int", "bool"},
                   "binary": {"bool", "int", "float", "string"}, "category": {"string", "int", "float", "bool"},
                   "date": {"string", "datetime"}, "image": {"string", "object"}, "audio": {"string", "object"}}
EMPTY_DTYPES = {"float": "float64", "int": "int64", "bool": "bool", "string": "string",
                "datetime": "datetime64[ns]", "object": "object"}
DTYPE_WORDS = ("float64", "float32", "int64", "int32", "bool", "boolean", "string", "datetime64[ns]", "object")


def dtype_kind(dtype: Any) -> str:
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "int"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "datetime"
    if isinstance(dtype, pd.StringDtype):
        return "string"
    return "object"


def series_kind(values: pd.Series) -> str:
    kind = dtype_kind(values.dtype)
    if kind == "object" and pd.api.types.infer_dtype(values, skipna=True) in ("string", "empty"):
        return "string"
    return kind


def spec_kind(spec: Any) -> str:
    """The kind of a declared type: a feature type name or a pandas/numpy dtype name.
    Raises ValueError for anything else (a custom feature type counts as ``object``)."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"expected a dtype or feature type name, got {spec!r}")
    if spec in FEATURE_KINDS:
        return FEATURE_KINDS[spec]
    if spec in ("str", "string"):
        return "string"
    if spec in ("object", "any"):
        return "object"
    if ":" in spec:
        return "object"  # a custom feature type ("pkg.module:Class")
    if spec in entry_points(FEATURES_GROUP):
        return "object"
    try:
        return dtype_kind(pd.api.types.pandas_dtype(spec))
    except TypeError:
        close = difflib.get_close_matches(spec, [*DTYPE_WORDS, *FEATURE_KINDS], n=1)
        raise ValueError(f"{spec!r} is not a dtype or a feature type"
                         + (f"; did you mean {close[0]!r}?" if close else "")) from None


def compatible(producer: str, consumer: str) -> bool:
    """Can a column of kind ``producer`` be read where ``consumer`` is declared (ints widen to floats)?"""
    return producer == consumer or "object" in (producer, consumer) or (producer, consumer) == ("int", "float")


def feature_accepts(type_name: str | None) -> set[str]:
    if type_name is None or type_name not in FEATURE_KINDS:
        return set(KINDS)  # untyped (inferred later) or a custom type: its cast decides
    return FEATURE_ACCEPTS.get(type_name, {"string"})


def empty_column(spec: str) -> pd.Series:
    """A zero-row column of the declared type (for a partition with no rows)."""
    kind = spec_kind(spec)
    if spec in FEATURE_KINDS or kind in ("object", "string"):
        return pd.Series([], dtype=EMPTY_DTYPES[kind])
    try:
        return pd.Series([], dtype=pd.api.types.pandas_dtype(spec))
    except TypeError:
        return pd.Series([], dtype=EMPTY_DTYPES[kind])


def snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


class Stage(Combiner):
    """Base class of custom stages (see the module docstring); a stage that fits is a ``Combiner``."""

    input_type: ClassVar[Mapping[str, str]] = {}
    output_type: ClassVar[Mapping[str, str]] = {}
    version: ClassVar[str | None] = None  # declared code version; None: the module's source hash
    Params: ClassVar[type[BaseModel] | None] = None

    def __init__(self, **params: Any):
        self.params = self.Params.model_validate(params) if self.Params is not None else dict(params)
        self.name = self.default_name()
        self._emitted: list[Statistic] = []

    @classmethod
    def default_name(cls) -> str:
        return snake_case(cls.__name__)

    @property
    def fits(self) -> bool:
        return type(self).add is not Stage.add

    # ---- the contract -------------------------------------------------------------------------
    def transform(self, df: pd.DataFrame, state: dict | None = None) -> pd.DataFrame:
        raise NotImplementedError(f"stage '{self.name}' ({type(self).__name__}) must define transform(df)")

    def create(self) -> Any:
        """An empty accumulator (any picklable value)."""
        raise NotImplementedError(f"stage '{self.name}' fits: it must define create()")

    def add(self, acc: Any, df: pd.DataFrame) -> Any:
        """``acc`` with a partition's ``fit_on`` rows added; defining it makes the stage fit."""
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        raise NotImplementedError(f"stage '{self.name}' fits: it must define merge(a, b)")

    def extract(self, acc: Any) -> dict:
        """The merged accumulator -> the fitted state, a JSON object (default: the accumulator itself)."""
        return acc

    # ---- statistics ------------------------------------------------------------------------------
    def emit(self, *statistics: Statistic) -> None:
        """Record Counter/Histogram objects; they are named ``<stage>.<name>`` and merged over partitions."""
        for stat in statistics:
            if not isinstance(stat, Statistic):
                raise InvalidStatisticsError(
                    f"stage '{self.name}' emitted {type(stat).__name__} {stat!r}; statistics must be "
                    "tasks.runtime.statistics Counter or Histogram objects")
        self._emitted.extend(statistics)

    def describe(self) -> str:
        return f"stage '{self.name}' ({type(self).__module__}:{type(self).__qualname__})"


def worker_copy(stage: Stage) -> Stage:
    """A per-partition copy with its own statistics list (instances are shared between threads)."""
    worker = copy.copy(stage)
    worker._emitted = []
    return worker


def named_statistics(stage: Stage, emitted: list[Statistic]):
    """The emitted statistics, renamed ``<stage>.<name>``, as a ``Statistics``."""
    out = Statistics()
    prefix = f"{stage.name}."
    for stat in emitted:
        data = stat.to_json()
        if not data["name"].startswith(prefix):
            data["name"] = prefix + data["name"]
        out.add(Statistic.from_json(data))
    return out
