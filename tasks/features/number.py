"""number: one float32 value per row, normalized; metadata keys as in Ludwig.

normalization  encoded value                       metadata
zscore         (x - mean) / std  (std 0 -> x-mean)  mean, std (sample std, ddof=1)
minmax         (x - min) / (max - min)             min, max
iq             (x - q2) / (q3 - q1)                q1, q2, q3
log1p          log1p(x); x <= -1 is an error       -
none           x                                   -
bins           int32 bin id in [0, num_bins)       bin_edges (num_bins + 1 edges), num_bins

Statistics are exact (``storage.exact_sum``) so they do not depend on the partitioning. With
``arithmetic: float32`` (set by ``compatibility: ludwig``) they are Ludwig's: of the float32-cast column
(after the fill), the mean as pandas' ``Series.mean`` of a float32 column gives it (numpy's pairwise
float32 sum over the column in input row order, divided in float32: the fit keeps the float32 values
with their input rows, 12 bytes a row, and sums them in row order, so any partitioning gives the same
bits), the std the float32 square root of the float32-rounded sample variance (pandas' ``Series.std``).

Discretization (``normalization: bins``): ``bin_edges`` are the user's (strictly increasing) or the
quantiles at ``linspace(0, 1, num_bins + 1)`` of the fitted values, from the mergeable
``tasks.features.quantiles.QuantileSketch`` (exact, equal to ``numpy.quantile``, when the column
has at most 2**20 distinct values; otherwise within the documented bucket error, recorded as
``bin_edges_exact``). Repeated edges are dropped, so ``num_bins`` may come out smaller. A value's
bin is ``searchsorted(bin_edges[1:-1], x, side="right")`` (scikit-learn's KBinsDiscretizer): values
below the first edge go to bin 0, above the last to the last bin.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from core.errors import DataError
from core.lazy import pandas as pd
from storage.exact_sum import ExactSum
from tasks.features.base import BasePreprocessing, ColumnSpec, FeatureType, MissingStatistics, first_bad
from tasks.features.quantiles import QuantileSketch


class NumberPreprocessing(BasePreprocessing):
    normalization: Literal["zscore", "minmax", "iq", "log1p", "none", "bins"] = "zscore"  # Ludwig >= 0.7 default
    num_bins: int = Field(default=10, ge=1)  # normalization: bins
    bin_edges: list[float] | None = None  # normalization: bins; fixed edges instead of fitted quantiles
    # float64: normalize in float64, then round to float32 (the nearest float32 to the exact value);
    # float32: in float32 with the statistics rounded to float32 first, as Ludwig does (compatibility: ludwig)
    arithmetic: Literal["float64", "float32"] = "float64"
    # Keys Ludwig reads from the metadata's preprocessing (``--training_set_metadata``), at Ludwig's defaults:
    # tasks.config.ludwig drops them from a config (and refuses other values), so they hold these values
    outlier_strategy: None = None
    outlier_threshold: float = 3.0
    computed_outlier_fill_value: float = 0.0

    @field_validator("bin_edges")
    @classmethod
    def _edges(cls, value: list[float] | None) -> list[float] | None:
        if value is not None:
            if len(value) < 2:
                raise ValueError(f"needs at least 2 edges, got {len(value)}")
            if not all(np.isfinite(value)) or any(b <= a for a, b in zip(value, value[1:], strict=False)):
                raise ValueError(f"must be finite and strictly increasing, got {value}")
        return value

    @model_validator(mode="after")
    def _bins_only(self):
        if self.bin_edges is not None and self.normalization != "bins":
            raise ValueError(f"bin_edges is only used with normalization 'bins', not {self.normalization!r}")
        return self


class NumberFeature(FeatureType):
    type_name = "number"
    Preprocessing = NumberPreprocessing
    default_missing_strategy = "fill_with_mean"
    allowed_missing_strategies = ("fill_with_const", "fill_with_mode", "fill_with_mean", "bfill", "ffill",
                                  "drop_row")
    default_fill_value = 0.0
    NORMALIZATION_KEYS = {"zscore": ("mean", "std"), "minmax": ("min", "max"), "iq": ("q1", "q2", "q3"),
                          "bins": ("bin_edges",)}

    def read_as(self) -> str:
        return "float64"

    @property
    def normalization(self) -> str:
        return self.options.normalization

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        if pd.api.types.is_bool_dtype(values.dtype):
            return values.astype("float64")
        if pd.api.types.is_numeric_dtype(values.dtype):
            out = values.astype("float64")
        else:
            text = values.astype("string").str.strip()
            out = pd.to_numeric(text, errors="coerce").astype("float64")
            bad = out.isna().to_numpy() & text.notna().to_numpy() & (text != "").fillna(False).to_numpy()
            bad &= ~text.str.lower().isin(["nan", "na", "null", "none"]).fillna(False).to_numpy()
            if bad.any():
                row, value = first_bad(bad, values, rows)
                raise DataError(f"row {row}, column '{self.column}': number feature '{self.name}' expects "
                                f"a number, got {value!r}")
        arr = out.to_numpy(dtype="float64", na_value=np.nan)
        inf = np.isinf(arr)
        if inf.any():
            row, value = first_bad(inf, out, rows)
            raise DataError(f"row {row}, column '{self.column}': number feature '{self.name}' got "
                            f"{value!r}; infinities are not allowed (use a fill strategy for missing values)")
        return pd.Series(arr, index=values.index)

    def fill_value_from_config(self, value: Any) -> float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise DataError(f"feature '{self.name}': fill_value must be a number, got {value!r}") from None

    def missing_combiner(self) -> MissingStatistics:
        return NumberMissing(self)

    # ---- fit (a combiner: exact sums, so any partitioning gives the same metadata) ----------------------
    def fills_at_extract(self, missing_state: dict) -> bool:
        """Whether the fit may be given the values unfilled: its accumulator's statistics (count, exact sums,
        min and max) take the constant fill of the missing values in ``extract``, so an accumulator does not
        depend on the fill value (a mean fitted from every row), and a folder's files keep their accumulators
        (``tasks.vocab.stage``). Not for the modes that keep the values themselves (iq, fitted bins, float32)."""
        return (missing_state["missing_value_strategy"] in ("fill_with_mean", "fill_with_const")
                and self.normalization != "iq" and not (self.normalization == "bins" and self.options.bin_edges is None)
                and self.options.arithmetic != "float32")

    def create(self) -> dict:
        acc: dict[str, Any] = {"n": 0, "sum": ExactSum(), "sumsq": ExactSum(), "min": None, "max": None, "nulls": 0}
        if self.normalization == "iq":
            acc["values"] = np.zeros(0, dtype=np.float64)
        if self.normalization == "bins" and self.options.bin_edges is None:
            acc["sketch"] = QuantileSketch.from_values(np.zeros(0, dtype=np.float64))
        if self.options.arithmetic == "float32":  # Ludwig's mean: a float32 sum in input row order
            acc["rows"], acc["f32"] = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        return acc

    def add(self, acc: dict, values: pd.Series) -> dict:
        """``values``' index: the rows' input positions (the vocab stage's), which order Ludwig's float32 sum."""
        present = values.dropna()
        x = present.to_numpy(dtype="float64")
        if self.options.arithmetic == "float32":  # Ludwig's statistics are of its float32 column
            x = x.astype(np.float32).astype(np.float64)
        batch: dict[str, Any] = {"n": int(x.size), "sum": ExactSum().add_array(x),
                                 "sumsq": ExactSum().add_array(x * x),
                                 "min": float(x.min()) if x.size else None,
                                 "max": float(x.max()) if x.size else None,
                                 "nulls": int(values.size - present.size)}  # left unfilled: fills_at_extract
        if "values" in acc:
            batch["values"] = x
        if "sketch" in acc:
            batch["sketch"] = QuantileSketch.from_values(x)
        if "f32" in acc:
            batch["rows"], batch["f32"] = present.index.to_numpy(dtype=np.int64), x.astype(np.float32)
        return batch if acc["n"] == 0 and not acc["nulls"] else self.merge(acc, batch)  # acc is create()'s

    def merge(self, a: dict, b: dict) -> dict:
        out = {"n": a["n"] + b["n"], "sum": a["sum"].merge(b["sum"]), "sumsq": a["sumsq"].merge(b["sumsq"]),
               "min": _opt(min, a["min"], b["min"]), "max": _opt(max, a["max"], b["max"]),
               "nulls": a.get("nulls", 0) + b.get("nulls", 0)}
        if "values" in a:
            out["values"] = np.concatenate([a["values"], b["values"]])
        if "sketch" in a:
            out["sketch"] = a["sketch"].merge(b["sketch"])
        if "f32" in a:
            out["rows"], out["f32"] = np.concatenate([a["rows"], b["rows"]]), np.concatenate([a["f32"], b["f32"]])
        return out

    def extract(self, acc: dict, missing_state: dict) -> dict:
        if acc.get("nulls"):  # values given unfilled (fills_at_extract): the fill added here, exactly as rows
            acc = self._with_fill(acc, missing_state)
        n = acc["n"]
        meta: dict[str, Any] = {"normalization": self.normalization}
        if n == 0:
            raise DataError(f"number feature '{self.name}': no non-missing values to fit on")
        total, sumsq = acc["sum"].fraction(), acc["sumsq"].fraction()
        mean = total / n
        var = (sumsq - total * total / n) / (n - 1) if n > 1 else Fraction(0)
        var = float(max(var, Fraction(0)))
        if self.options.arithmetic == "float32":  # Ludwig: float32 mean; float32 sqrt of the float32 variance
            meta.update(mean=self.float32_mean(acc), std=float(np.sqrt(np.float32(var))))
        else:
            meta.update(mean=float(mean), std=float(np.sqrt(var)))
        meta.update(min=acc["min"], max=acc["max"])
        if self.normalization == "iq":
            q1, q2, q3 = np.quantile(np.sort(acc["values"]), [0.25, 0.5, 0.75])
            meta.update(q1=float(q1), q2=float(q2), q3=float(q3))
        if self.normalization == "bins":
            meta.update(self.bins(acc))
        if self.normalization == "log1p" and acc["min"] <= -1:
            raise DataError(f"number feature '{self.name}': log1p normalization needs values > -1, "
                            f"the fitted minimum is {acc['min']}")
        return meta

    @staticmethod
    def _with_fill(acc: dict, missing_state: dict) -> dict:
        """``acc`` with its ``nulls`` missing values as the constant fill: what adding the filled values gives."""
        fill, k = missing_state["computed_fill_value"], acc["nulls"]
        if fill is None:
            raise DataError(f"a number fit left {k} values unfilled, and the fill state has no constant value")
        fill = float(fill)
        return {**acc, "n": acc["n"] + k, "nulls": 0,
                "sum": ExactSum(acc["sum"].numerator, acc["sum"].exponent).add_repeated(fill, k),
                "sumsq": ExactSum(acc["sumsq"].numerator, acc["sumsq"].exponent).add_repeated(fill * fill, k),
                "min": _opt(min, acc["min"], fill), "max": _opt(max, acc["max"], fill)}

    @staticmethod
    def float32_mean(acc: dict) -> float:
        """pandas' mean of a float32 column (``nanops.nanmean``: the float32 sum, numpy's pairwise
        summation, over the column in row order, divided by the count as float32)."""
        values = acc["f32"][np.argsort(acc["rows"], kind="stable")]
        return float(values.sum(dtype=np.float32) / np.float32(values.size))

    def bins(self, acc: dict) -> dict:
        if self.options.bin_edges is not None:
            edges, exact = [float(e) for e in self.options.bin_edges], True
        else:
            sketch = acc["sketch"]
            q = np.linspace(0.0, 1.0, self.options.num_bins + 1)
            edges = np.unique(sketch.quantiles(q)).tolist()
            exact = sketch.exact
            if len(edges) == 1:
                edges = edges * 2  # one value: one bin
        return {"bin_edges": edges, "num_bins": len(edges) - 1, "bin_edges_exact": exact}

    def required_metadata(self, metadata: dict) -> tuple[str, ...]:
        return ("normalization", *self.NORMALIZATION_KEYS.get(metadata.get("normalization", self.normalization), ()))

    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        self.check_fitted(metadata)
        x = values.to_numpy(dtype="float64", na_value=np.nan)
        norm = metadata["normalization"]
        if norm == "bins":
            inner = np.asarray(metadata["bin_edges"][1:-1], dtype=np.float64)
            return {self.name: np.searchsorted(inner, x, side="right").astype(np.int32)}
        if self.options.arithmetic == "float32":
            return {self.name: self.normalize_float32(x.astype(np.float32), metadata)}
        if norm == "zscore":
            std = metadata["std"] or 1.0
            x = (x - metadata["mean"]) / std
        elif norm == "minmax":
            span = (metadata["max"] - metadata["min"]) or 1.0
            x = (x - metadata["min"]) / span
        elif norm == "iq":
            span = (metadata["q3"] - metadata["q1"]) or 1.0
            x = (x - metadata["q2"]) / span
        elif norm == "log1p":
            with np.errstate(invalid="ignore", divide="ignore"):
                x = np.log1p(x)
        return {self.name: x.astype(np.float32)}

    @staticmethod
    def normalize_float32(x: np.ndarray, metadata: dict) -> np.ndarray:
        """Ludwig's transformers (``ludwig/features/number_feature.py``) on its float32 column: each statistic
        (or span) a Python float, rounded to float32 by numpy before the float32 subtraction and division."""
        f32, norm = np.float32, metadata["normalization"]
        with np.errstate(invalid="ignore", divide="ignore"):
            if norm == "zscore":
                return (x - f32(metadata["mean"])) / f32(metadata["std"] or 1.0)
            if norm == "minmax":
                return (x - f32(metadata["min"])) / f32((metadata["max"] - metadata["min"]) or 1.0)
            if norm == "iq":
                return (x - f32(metadata["q2"])) / f32((metadata["q3"] - metadata["q1"]) or 1.0)
            if norm == "log1p":
                return np.log1p(x)
        return x

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        return [ColumnSpec(self.name, "int32" if metadata.get("normalization") == "bins" else "float32")]


class NumberMissing(MissingStatistics):
    """The missing-value statistics with the exact sum of the values, for ``fill_with_mean``."""

    def create(self) -> dict:
        acc = super().create()
        if self.feature.missing_strategy == "fill_with_mean":
            acc["sum"] = ExactSum()
        return acc

    def needs_values(self) -> bool:
        return self.wants_counts or self.feature.missing_strategy == "fill_with_mean"

    def add(self, acc: dict, values: pd.Series) -> dict:
        out = super().add(acc, values)
        if "sum" in acc:
            out["sum"] = acc["sum"].merge(ExactSum().add_array(values.dropna().to_numpy()))
        return out

    def merge(self, a: dict, b: dict) -> dict:
        out = super().merge(a, b)
        if "sum" in a:
            out["sum"] = a["sum"].merge(b["sum"])
        return out

    def extract(self, acc: dict) -> dict:
        state = super().extract(acc)
        if state["missing_value_strategy"] == "fill_with_mean":
            n = acc["count"] - acc["nulls"]
            # no value to average (tasks.split.degenerate has warned, naming the feature): 0.0, Ludwig's constant fill
            state["computed_fill_value"] = float(acc["sum"].fraction() / n) if n else 0.0
        return state


def _opt(fn, a, b):
    if a is None:
        return b
    if b is None:
        return a
    return fn(a, b)
