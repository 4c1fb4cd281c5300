"""Serving-time preprocessing: raw rows -> the columns the pipeline published for them.

``Preprocessor.load(artifact)`` rebuilds every feature type from ``training_set_metadata.json``
(type, column, resolved options, missing-value strategy and ``computed_fill_value``, fitted
vocabularies and statistics) and ``transform(rows)`` runs the pipeline's own per-row steps on new
data with nothing refitted:

    read as ingest reads text formats (numbers as float64, the rest as strings; the CSV null
    tokens "", "NA", "null", ... become missing) -> FeatureType.cast -> normalize -> fill
    (tasks.runtime.frame.normalize_and_fill) -> FeatureType.encode

so the output is bit-identical to the artifact's columns for the same rows. Unseen categories
encode as ``<UNK>`` (0). A missing column, a value of the wrong type, or a missing value where the
feature's strategy is ``drop_row`` raises ``DataError`` naming the row (0-based) and column.
``ffill``/``bfill`` fill from neighbouring rows of the same call; a value with no neighbour to fill
from is an error. Output features are transformed when their columns are present (``outputs=None``).

``torch_module()`` exports the number features' fill and normalization as a ``torch.nn.Module``
that ``torch.jit.script`` accepts, ``torch_discretizer(feature)`` a binned number feature
(``storage.torch_transforms``).

The Preprocessor is the serving layer: it replays the feature types (``tasks.features``), the stages'
preparation (``tasks.runtime.frame``) and the custom stages (``tasks.custom.steps``), so it sits above them in
the layers (``.importlinter``); ``storage`` itself imports it only when ``storage.Preprocessor`` is first
asked for. ``storage.torch_transforms`` (torch) is imported where the torch exports need it.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.errors import DataError, quoted
from core.lazy import pandas as pd
from storage.artifact import Artifact
from storage.vocab_store import resolve
from tasks.config.constants import ROW
from tasks.custom.apply import serve, serving_columns, serving_plan
from tasks.features.number import NumberFeature
from tasks.runtime.frame import normalize_and_fill
from tasks.serving.trust import check_row_sizes, check_shapes, check_sizes, check_stages, feature_class

METADATA_FILE = "training_set_metadata.json"
# ingest's CSV reader turns these strings into nulls (tasks/ingest/stage.py, _read_csv's null_values)
NULL_TOKENS = ("", "NA", "N/A", "NaN", "nan", "null", "NULL", "None")
SCALARS = (str, int, float, bool, np.generic, type(None))


def _feature_state(meta: dict) -> dict:
    """The fill_missing state the pipeline used, as recorded in the metadata."""
    state = {k: v for k, v in meta.items() if k != "preprocessing"}
    state.update(meta.get("preprocessing", {}))
    state.setdefault("str2bool", {})  # binary: recorded only for non-standard strings; the rest map by name
    return state


class Preprocessor:
    """Applies an artifact's fitted preprocessing to new rows (see the module docstring)."""

    def __init__(self, metadata: dict, outputs: Sequence[str] = (), columns: Sequence[str] | None = None,
                 trust_plugins: bool | Sequence[str] = False):
        """``trust_plugins``: build the feature types and custom stages the metadata names outside prepflow
        (``pkg.module:Class``, entry points): True for all, or the module names to trust; by default only
        prepflow's own feature types are built, and a plugin is an error naming the feature and the module
        (``tasks.serving.trust``)."""
        metadata = {name: meta for name, meta in metadata.items() if name != ROW}  # the row id is no feature
        self.metadata_ = metadata
        self.outputs_ = list(outputs)
        self.features_ = []
        check_stages(metadata, trust_plugins)
        for name, meta in metadata.items():
            where = f"{METADATA_FILE}: feature {quoted(name)}"
            if not isinstance(meta, dict) or "type" not in meta or "column" not in meta:
                raise DataError(f"{where}: no 'type'/'column'; the artifact predates serving support")
            cls = feature_class(name, meta, trust_plugins)
            check_sizes(name, meta)
            fields = cls.Preprocessing.model_fields
            options = cls.Preprocessing.model_validate({k: v for k, v in meta.get("preprocessing", {}).items()
                                                        if k in fields})
            self.features_.append(cls(name, meta["column"], options, is_output=name in self.outputs_))
            check_row_sizes(self.features_[-1], meta)
        self.states_ = {name: _feature_state(meta) for name, meta in metadata.items()}
        self.stages_ = []  # the custom stages that made features, with their fitted state
        if any("custom_stages" in meta for meta in metadata.values()):
            self.stages_ = serving_plan(metadata)
        order = {c: i for i, c in enumerate(columns or [])}
        self.features_.sort(key=lambda f: order.get(f.name, len(order)))

    @classmethod
    def load(cls, artifact: str | Path, trust_plugins: bool | Sequence[str] = False) -> "Preprocessor":
        """From an artifact folder, an output root with ``LATEST``, or an artifact URL. ``trust_plugins``: see
        ``__init__``; every encoded column's shape is checked against ``feature_spec.yaml``."""
        art = Artifact.open(artifact)
        outputs = [f["name"] for f in art.manifest.get("config", {}).get("output_features", [])]
        spec = art.feature_spec
        out = cls(resolve(art.metadata, art.path, art.manifest["files"]), outputs, list(spec.get("feature_spec", {})), trust_plugins)
        check_shapes(out.features_, out.metadata_, spec, str(art.path / "feature_spec.yaml"))
        art.check_sizes()  # and the spec's shapes and the manifest's rows with the files' headers and footers
        return out

    @classmethod
    def from_json(cls, path: str | Path, outputs: Sequence[str] = (),
                  trust_plugins: bool | Sequence[str] = False) -> "Preprocessor":
        return cls(resolve(json.loads(Path(path).read_text()), Path(path).parent), outputs, trust_plugins=trust_plugins)

    @property
    def input_columns(self) -> list[str]:
        if self.stages_:  # columns stages make are not requested; the dataset columns they read are
            return serving_columns(self.stages_, [f for f in self.features_ if not f.is_output])
        return list(dict.fromkeys(f.column for f in self.features_ if not f.is_output))

    # ---- transform -------------------------------------------------------------------------------
    def transform(self, rows, outputs: bool | None = None) -> dict[str, np.ndarray]:
        """``rows`` (a DataFrame, a list of dicts, or a mapping column -> values) -> ``{column: array}``.

        ``outputs``: True requires the output features' columns, False skips them, None (default)
        transforms them when all their columns are present.
        """
        df = _as_frame(rows)
        features = self._selected(df, outputs)
        if self.stages_:  # the custom stages run where the pipeline ran them (tasks/custom/steps.py)
            frame = serve(df, features, {f.name: self.states_[f.name] for f in features}, self.stages_, _as_ingested)
            return {k: v for f in features for k, v in f.encode(frame.frame[f.name], self.metadata_[f.name]).items()}
        n = len(df)
        positions = np.arange(n, dtype=np.int64)
        typed = pd.DataFrame({f.name: f.cast(_as_ingested(df[f.column], f.read_as(), f.column), positions)
                              .reset_index(drop=True) for f in features}, index=pd.RangeIndex(n))
        typed[ROW] = positions
        states = {f.name: self.states_[f.name] for f in features}
        for f in features:  # dropping rows would misalign the answer with the request
            if states[f.name]["missing_value_strategy"] == "drop_row":
                _no_missing(typed[f.name], f, "the pipeline drops such rows (missing_value_strategy: drop_row)")
        prepared = normalize_and_fill(typed, features, states)
        out: dict[str, np.ndarray] = {}
        for f in features:
            values = prepared.frame[f.name]
            if states[f.name]["missing_value_strategy"] in ("ffill", "bfill"):
                _no_missing(values, f, f"no neighbouring value in this call to {states[f.name]['missing_value_strategy']} "
                                       "from; pass the rows around it too")
            out.update(f.encode(values, self.metadata_[f.name]))
        return out

    def _selected(self, df: pd.DataFrame, outputs: bool | None) -> list:
        present = set(df.columns)
        missing_inputs = [c for c in self.input_columns if c not in present]
        if missing_inputs:
            hints = []
            for c in missing_inputs:
                close = difflib.get_close_matches(c, [str(p) for p in df.columns], n=1)
                hints.append(quoted(c) + (f" (did you mean {quoted(close[0])}?)" if close else ""))
            raise DataError(f"raw rows: column(s) {', '.join(hints)} missing; the artifact's features need "
                            f"{self.input_columns}")
        out_features = [f for f in self.features_ if f.is_output]
        with_outputs = outputs
        if outputs is None:
            with_outputs = all(f.column in present for f in out_features)
        elif outputs:
            absent = [f.column for f in out_features if f.column not in present]
            if absent:
                raise DataError(f"raw rows: output column(s) {absent} missing (outputs=True)")
        return [f for f in self.features_ if with_outputs or not f.is_output]

    # ---- torch -----------------------------------------------------------------------------------
    def number_features(self, discretized: bool = False) -> list[str]:
        """Input number features that are normalized (or, with ``discretized=True``, binned)."""
        return [f.name for f in self.features_ if isinstance(f, NumberFeature) and not f.is_output
                and (self.metadata_[f.name].get("normalization") == "bins") == discretized]

    def torch_module(self, features: Sequence[str] | None = None):
        """The number features' fill + normalization as one scriptable ``torch.nn.Module``.

        Input: ``n x k`` raw values (float64; NaN = missing) in the order of ``features`` (default:
        ``number_features()``); output: ``n x k`` float32, equal to ``transform``'s columns.
        """
        from storage.torch_transforms import NumberNormalizer  # torch: only for the torch exports

        names = list(features) if features is not None else self.number_features()
        return NumberNormalizer.from_metadata(self.metadata_, names)

    def torch_discretizer(self, feature: str):
        """A discretized number feature (``normalization: bins``) as a scriptable module:
        ``n`` raw float64 values -> ``n`` int32 bin ids, equal to ``transform``'s column."""
        from storage.torch_transforms import NumberDiscretizer  # torch: only for the torch exports

        return NumberDiscretizer.from_metadata(self.metadata_, feature)


def _as_frame(rows) -> pd.DataFrame:
    if isinstance(rows, pd.DataFrame):
        return rows.reset_index(drop=True)
    if isinstance(rows, Mapping):
        try:
            return pd.DataFrame({k: list(v) if not isinstance(v, (str, bytes)) and hasattr(v, "__iter__") else [v]
                                 for k, v in rows.items()})
        except ValueError as exc:
            raise DataError(f"raw rows: a mapping must give each column a sequence of equal length ({exc})") from None
    if isinstance(rows, Sequence) and not isinstance(rows, (str, bytes)):
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise DataError(f"raw rows: row {i} is a {type(row).__name__}; expected a mapping of "
                                "column -> value")
        return pd.DataFrame.from_records(list(rows)) if rows else pd.DataFrame()
    raise DataError(f"raw rows: expected a pandas DataFrame, a list of dicts or a mapping of columns, got "
                    f"{type(rows).__name__}")


def _check_scalars(values: pd.Series, column: str) -> None:
    if values.dtype != object:
        return
    for i, v in enumerate(values.tolist()):
        if not isinstance(v, SCALARS) and v is not pd.NA:
            raise DataError(f"row {i}, column {quoted(column)}: expected a number, string or boolean, got "
                            f"{type(v).__name__} {quoted(v)}")


def _as_ingested(values: pd.Series, kind: str, column: str) -> pd.Series:
    """The column as ingest would hand it to ``cast`` had it come from a CSV file."""
    _check_scalars(values, column)
    if pd.api.types.is_bool_dtype(values.dtype) or pd.api.types.is_numeric_dtype(values.dtype):
        return values.astype("float64") if kind == "float64" and not pd.api.types.is_bool_dtype(values.dtype) \
            else values
    if values.dtype == object and values.map(lambda v: isinstance(v, bool)).any():
        return values  # booleans keep their type; cast decides what they mean
    text = values.astype("string")
    text = text.mask(text.isin(NULL_TOKENS).fillna(False).to_numpy(dtype=bool))
    if kind != "float64":
        return text
    if values.dtype == object and text.notna().any() and all(
            isinstance(v, (int, float, np.number)) for v in values.dropna().tolist()):
        return values.astype("float64")
    try:  # Arrow's string -> double cast is the CSV reader's parser: the same float64 bits
        parsed = pc.cast(pa.array(text, type=pa.string()), pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return text  # cast raises the error that names the row and the value
    return pd.Series(parsed.to_numpy(zero_copy_only=False), index=values.index)


def _no_missing(values: pd.Series, feature, why: str) -> None:
    missing = values.isna().to_numpy()
    if missing.any():
        row = int(np.flatnonzero(missing)[0])
        raise DataError(f"row {row}, column {quoted(feature.column)}: {feature.describe()} is missing a value; {why}")
