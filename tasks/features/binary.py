"""binary: one bool per row.

Raw values may be booleans, 0/1 numbers or strings. Strings in Ludwig's true/false sets
(yes/no, y/n, true/false, t/f, 1/0, on/off, case-insensitive) map directly; any other column
with exactly two distinct strings maps ``fallback_true_label`` (default: the larger of the two
in string order) to True. Values and the label are compared with surrounding whitespace removed.
``str2bool``/``bool2str``/``fallback_true_label`` are recorded when the raw values are strings that
Ludwig's own true/false sets do not all hold (two other strings, or on/off, which Ludwig does not take
as booleans), so that ``ludwig ... --training_set_metadata`` maps them as prepflow did.

``strings: ludwig`` (set by ``compatibility: ludwig``): Ludwig's rule (``ludwig/features/binary_feature.py``):
only Ludwig's sets are booleans (yes/no, y/n, true/false, t/f, 1/0, 1.0/0.0, -1/-1.0 as false; not
on/off), and of two other strings the smaller in string order is True (``sorted(distinct)[0]``), so an
on/off column maps ``off`` to True as Ludwig does. prepflow's default (the larger is True, on/off are
booleans) stays.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import field_validator

from core.errors import DataError, NotFittedError
from core.lazy import pandas as pd
from tasks.features.base import (
    BasePreprocessing,
    ColumnSpec,
    FeatureType,
    MissingStatistics,
    as_strings,
    first_bad,
    merge_counts,
)

TRUE_STRS = {"yes", "y", "true", "t", "1", "1.0", "on"}
FALSE_STRS = {"no", "n", "false", "f", "0", "0.0", "off"}
# Ludwig's (ludwig/utils/strings_utils.py BOOL_TRUE_STRS / BOOL_FALSE_STRS)
LUDWIG_TRUE_STRS = {"yes", "y", "true", "t", "1", "1.0"}
LUDWIG_FALSE_STRS = {"no", "n", "false", "f", "0", "0.0", "-1", "-1.0"}


class BinaryPreprocessing(BasePreprocessing):
    fallback_true_label: str | None = None
    # ``ludwig``: Ludwig's true/false strings and its true label of two others (see the module docstring)
    strings: Literal["prepflow", "ludwig"] = "prepflow"

    @field_validator("fallback_true_label")
    @classmethod
    def _strip(cls, value: str | None) -> str | None:
        """Values are compared stripped (``cast``), so is the label: Ludwig's adult-census example says
        ``fallback_true_label: " >50K"`` for the column's `` >50K``."""
        return value.strip() if isinstance(value, str) else value


class BinaryFeature(FeatureType):
    type_name = "binary"
    Preprocessing = BinaryPreprocessing
    default_missing_strategy = "fill_with_false"
    allowed_missing_strategies = ("fill_with_const", "fill_with_mode", "fill_with_false", "fill_with_true",
                                  "bfill", "ffill", "drop_row")

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        """The raw values as stripped strings (booleans as ``true``/``false``, numbers 0/1 as ``0``/``1``),
        nulls kept: Arrow kernels, no per-row Python."""
        if pd.api.types.is_bool_dtype(values.dtype) or pd.api.types.is_numeric_dtype(values.dtype):
            is_bool = pd.api.types.is_bool_dtype(values.dtype)
            x = values.to_numpy(dtype="float64", na_value=np.nan)
            missing = np.isnan(x)
            bad = ~missing & (x != 0) & (x != 1)
            if bad.any():
                row, value = first_bad(bad, values, rows)
                raise DataError(f"row {row}, column '{self.column}': binary feature '{self.name}' expects "
                                f"0/1, true/false or two distinct strings, got {value!r}")
            labels = pa.array(["false", "true"] if is_bool else ["0", "1"], pa.string())
            codes = pa.array((x == 1).astype(np.int8), mask=missing)
            return _string_series(pc.take(labels, codes), values)
        return _string_series(pc.utf8_trim_whitespace(as_strings(values)), values)

    @property
    def bool_strs(self) -> tuple[set[str], set[str]]:
        """The (true, false) strings taken as booleans whatever the column holds."""
        if self.options.strings == "ludwig":
            return LUDWIG_TRUE_STRS, LUDWIG_FALSE_STRS
        return TRUE_STRS, FALSE_STRS

    def missing_combiner(self) -> MissingStatistics:
        return BinaryMissing(self)

    def missing_state_from(self, raw_counts: dict[str, int]) -> dict:
        """The fill state (``str2bool`` included) from the raw values' counts over the fit rows."""
        distinct = sorted(raw_counts)
        trues, falses = self.bool_strs
        standard = all(v.lower() in trues | falses for v in distinct)
        if standard:
            str2bool = {v: v.lower() in trues for v in distinct}
        else:
            if len(distinct) > 2:
                raise DataError(f"column '{self.column}': binary feature '{self.name}' has {len(distinct)} "
                                f"distinct values {distinct[:5]}; expected at most 2")
            # Ludwig: sorted(distinct)[0]; prepflow: the larger
            smallest = self.options.strings == "ludwig"
            true_label = self.options.fallback_true_label or (distinct[0] if smallest else distinct[-1])
            if true_label not in distinct:
                raise DataError(f"binary feature '{self.name}': fallback_true_label {true_label!r} is not one "
                                f"of the column's values {distinct}")
            if smallest:  # Ludwig's str2bool(v, fallback_true_label): its sets first, then the label
                str2bool = {v: v.lower() in trues or (v.lower() not in falses and v == true_label) for v in distinct}
            else:
                str2bool = {v: v == true_label for v in distinct}
        state = {"str2bool": str2bool, "missing_value_strategy": self.missing_strategy, "computed_fill_value": None}
        strategy = self.missing_strategy
        if strategy in ("fill_with_false", "fill_with_true"):
            state["computed_fill_value"] = strategy == "fill_with_true"
        elif strategy == "fill_with_const":
            state["computed_fill_value"] = self._to_bool(self.options.fill_value, str2bool)
        elif strategy == "fill_with_mode":
            bool_counts: dict[bool, int] = {}
            for raw, n in raw_counts.items():
                bool_counts[str2bool[raw]] = bool_counts.get(str2bool[raw], 0) + n
            if not bool_counts:
                raise DataError(f"feature '{self.name}': fill_with_mode needs at least one non-missing value")
            state["computed_fill_value"] = sorted(bool_counts, key=lambda b: (-bool_counts[b], b))[0]
        return state

    def _to_bool(self, value: Any, str2bool: dict) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip()
        if text in str2bool:
            return str2bool[text]
        trues, falses = self.bool_strs
        if text.lower() in trues | falses:
            return text.lower() in trues
        raise DataError(f"binary feature '{self.name}': fill_value {value!r} is not a boolean or one of "
                        f"{sorted(str2bool)}")

    def normalize(self, values: pd.Series, missing_state: dict, rows: np.ndarray) -> pd.Series:
        if "str2bool" not in missing_state:
            raise NotFittedError(f"{self.describe()}: normalize needs the fitted fill state (str2bool); run "
                                 "fill_missing first, or pass the artifact's training_set_metadata.json entry")
        str2bool = missing_state["str2bool"]
        lookup = dict(str2bool)
        trues, falses = self.bool_strs
        arr = as_strings(values)
        for v in pc.unique(arr.drop_null()).to_pylist():  # the few distinct values, not the rows
            if v not in lookup and v.lower() in trues | falses:
                lookup[v] = v.lower() in trues
        keys = list(lookup)
        at = pc.index_in(arr, value_set=pa.array(keys, pa.string()))  # per row: its key's position, or null
        missing = arr.is_null().to_numpy(zero_copy_only=False)
        found = at.is_valid().to_numpy(zero_copy_only=False)
        bad = ~found & ~missing
        if bad.any():
            row, value = first_bad(bad, values, rows)
            raise DataError(f"row {row}, column '{self.column}': binary feature '{self.name}' got {value!r}, "
                            f"which is not one of the fitted values {sorted(str2bool)}")
        as_bool = np.array([bool(lookup[k]) for k in keys] or [False], dtype=bool)
        mapped = as_bool[pc.fill_null(at, 0).to_numpy(zero_copy_only=False)]
        return pd.Series(pd.arrays.BooleanArray(mapped, missing), index=values.index, name=values.name)

    def extract(self, acc: Any, missing_state: dict) -> dict:
        str2bool = missing_state["str2bool"]
        meta: dict[str, Any] = {}
        if str2bool and not all(v.lower() in LUDWIG_TRUE_STRS | LUDWIG_FALSE_STRS for v in str2bool):
            meta["str2bool"] = str2bool
            falses = sorted(k for k, v in str2bool.items() if not v)
            trues = sorted(k for k, v in str2bool.items() if v)
            meta["bool2str"] = [falses[0] if falses else "false", trues[0] if trues else "true"]
            meta["fallback_true_label"] = meta["bool2str"][1]
        return meta

    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        self.check_fitted(metadata)  # nothing to fit for encode (normalize mapped the values); a dict is still needed
        return {self.name: values.to_numpy(dtype=bool, na_value=False)}

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        return [ColumnSpec(self.name, "bool")]


def _string_series(arr: pa.Array, like: pd.Series) -> pd.Series:
    return pd.Series(pd.array(arr, dtype="string"), index=like.index, name=like.name)


class BinaryMissing(MissingStatistics):
    """The missing-value statistics with the counts of the raw values, which ``str2bool`` is fitted from."""

    def create(self) -> dict:
        return {**super().create(), "raw_counts": {}}

    def add(self, acc: dict, values: pd.Series) -> dict:
        return {**super().add(acc, values), "raw_counts": merge_counts(acc["raw_counts"], _counts(values))}

    def merge(self, a: dict, b: dict) -> dict:
        return {**super().merge(a, b), "raw_counts": merge_counts(a["raw_counts"], b["raw_counts"])}

    def extract(self, acc: dict) -> dict:
        return self.feature.missing_state_from(acc["raw_counts"])


def _counts(values: pd.Series) -> dict[str, int]:
    vc = values.dropna().value_counts(sort=False)
    return {str(k): int(v) for k, v in vc.items()}
