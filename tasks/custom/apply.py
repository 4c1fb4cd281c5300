"""Custom stages applied to partitions: the preparation every stage after fill_missing shares, and the
same at serving time (the Preprocessor replays the stages from the metadata)::

    keep sampled rows -> raw-phase stages (dataset columns)
        -> cast, drop_row, fill the features on dataset columns and raw-phase columns
        -> filled-phase stages (features' filled values)
        -> cast, drop_row, fill the features on filled-phase columns

``tasks.custom.steps`` fits each stage (a cached step of the graph); ``tasks.custom.prepared`` hands the
preparation here when the fill states hold a stage plan.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from dask import delayed

from core.errors import DataError, InvalidStatisticsError, InvalidTransformOutputError, TypeMismatchError
from core.lazy import pandas as pd
from tasks.config.constants import ROW
from tasks.custom.dag import PlannedStage
from tasks.custom.plan import STATES_KEY
from tasks.custom.stage import compatible, empty_column, named_statistics, series_kind, spec_kind, worker_copy
from tasks.features.base import FeatureType
from tasks.runtime import dask_run, frame
from tasks.runtime.statistics import Statistics

# ---- the preparation ---------------------------------------------------------------------------------

@dataclass
class Layout:
    """What one preparation does: the stages to run and the features to cast + fill (``features``)
    or only cast (``pending``: their missing-value state is being fitted)."""

    stages: list[PlannedStage]
    features: list[FeatureType]
    pending: list[FeatureType]
    filled_made: frozenset  # columns made by the filled-phase stages in ``stages``
    passthrough: list[str]  # raw-partition columns the filled-phase stages read

    def phase(self, f: FeatureType) -> str:
        return "filled" if f.column in self.filled_made else "raw"

    def without_pending(self) -> "Layout":
        return replace(self, pending=[])


def layout(stages: list[PlannedStage], features: list[FeatureType], pending: list[FeatureType] = (),
           reads: list[str] = ()) -> Layout:
    """``reads``: more raw-partition columns to keep (those of a stage being fitted on the result)."""
    filled_made = frozenset(c for p in stages if p.phase == "filled" for c in p.outputs)
    passthrough = list(dict.fromkeys([*(c for p in stages if p.phase == "filled" for c in p.passthrough), *reads]))
    return Layout(list(stages), list(features), list(pending), filled_made, passthrough)


def _where(stage: PlannedStage, index: int, df: pd.DataFrame) -> str:
    rows = df[ROW].to_numpy() if ROW in df and len(df) else None
    span = f" (input rows {int(rows.min()) + 1}-{int(rows.max()) + 1})" if rows is not None else ""
    return f"stage '{stage.name}', partition {index}{span}"


def coerce_inputs(p: PlannedStage, df: pd.DataFrame, index: int) -> pd.DataFrame:
    """Dataset columns as the stage declares them (ingest reads text formats as float64 or strings)."""
    changed = {}
    for column in p.dataset_inputs:  # (a shallow copy either way: a transform that assigns in place is harmless)
        spec = p.inputs[column]
        values = df[column]
        want, have = spec_kind(spec), series_kind(values)
        if compatible(have, want):
            if want == "float" and have == "int":
                changed[column] = values.astype("float64")
            continue
        if want in ("float", "int") and have == "string":
            numbers = pd.to_numeric(values, errors="coerce")
            bad = numbers.isna().to_numpy() & values.notna().to_numpy()
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                row = int(df[ROW].iloc[i]) if ROW in df else i
                raise DataError(f"{_where(p, index, df)}: row {row}, column '{column}': expected a number for "
                                f"input_type {spec!r}, got {values.iloc[i]!r}")
            changed[column] = numbers.astype("float64")
        elif want == "string":
            changed[column] = values.astype("string")
        else:
            raise TypeMismatchError(f"{_where(p, index, df)}: input column '{column}' holds {have} values, but "
                                    f"input_type declares {spec!r}")
    return df.assign(**changed) if changed else df.copy(deep=False)


def _check_output(p: PlannedStage, result, df: pd.DataFrame, index: int) -> dict[str, pd.Series]:
    where = _where(p, index, df)
    if not isinstance(result, pd.DataFrame):
        raise InvalidTransformOutputError(f"{where}: transform returned {type(result).__name__}; it must return a "
                                          "pandas DataFrame with the partition's rows")
    if len(result) != len(df):
        raise InvalidTransformOutputError(f"{where}: transform returned {len(result)} rows for {len(df)}; a stage "
                                          "keeps every row, in order")
    out = {}
    for column, spec in p.outputs.items():
        if column not in result.columns:
            raise InvalidTransformOutputError(f"{where}: column '{column}' (output_type {spec!r}) is missing from "
                                              f"transform's result, which has {[str(c) for c in result.columns]}")
        values = result[column]
        want, have = spec_kind(spec), series_kind(values)
        if not compatible(have, want):
            raise InvalidTransformOutputError(f"{where}: column '{column}' holds {have} values ({values.dtype}), "
                                              f"but output_type declares {spec!r}")
        if want == "float" and have == "int":
            values = values.astype("float64")
        out[column] = values.set_axis(df.index)
    return out


def apply_stage(p: PlannedStage, df: pd.DataFrame, index: int, stats: Statistics | None) -> pd.DataFrame:
    """Run one stage on one partition; its checked output columns are added to ``df``."""
    worker = worker_copy(p.stage)
    if len(df) == 0:
        outputs = {c: empty_column(spec).set_axis(df.index) for c, spec in p.outputs.items()}
    else:
        view = coerce_inputs(p, df, index)
        result = worker.transform(view, p.state) if p.fits else worker.transform(view)
        outputs = _check_output(p, result, df, index)
    if stats is not None and worker._emitted:
        try:
            for stat in named_statistics(worker, worker._emitted).items.values():
                stats.add(stat)
        except TypeError as exc:  # one name emitted as two kinds, or histograms with other buckets
            raise InvalidStatisticsError(f"{_where(p, index, df)}: its statistics do not merge ({exc})") from None
    out = df.copy(deep=False)
    for column, values in outputs.items():
        out[column] = values
    return out


def raw_part(pdf: pd.DataFrame, index: int, lay: Layout, assign: np.ndarray, stats, collect: str | None):
    rows = pdf[ROW].to_numpy(dtype=np.int64)
    split = np.asarray(assign)[rows]
    keep = split >= 0
    pdf = pdf.loc[keep].reset_index(drop=True)
    pdf[frame.SPLIT] = split[keep]
    for p in lay.stages:
        if p.phase == "raw":
            pdf = apply_stage(p, pdf, index, stats if collect == p.name else None)
    return pdf


def prepare(pdf: pd.DataFrame, index: int, lay: Layout, assign: np.ndarray, states: dict, carry: dict | None,
            collect: str | None = None) -> tuple[frame.Prepared, Statistics]:
    """One partition through ``lay`` (see the module docstring); ``collect`` names the stage whose
    statistics are returned."""
    stats = Statistics()
    pdf = raw_part(pdf, index, lay, assign, stats, collect)
    early = [f for f in lay.features if lay.phase(f) == "raw"]
    early_pending = [f for f in lay.pending if lay.phase(f) == "raw"]
    typed = frame.cast_partition(pdf, early + early_pending, assign)
    for column in lay.passthrough:
        if column not in typed.columns:
            typed[column] = pdf[column].reset_index(drop=True)
    prepared = frame.normalize_and_fill(typed, early, states, carry)
    df, filled, dropped = prepared.frame, dict(prepared.filled), dict(prepared.dropped)
    for p in lay.stages:
        if p.phase == "filled":
            df = apply_stage(p, df, index, stats if collect == p.name else None)
    late = [f for f in lay.features if lay.phase(f) == "filled"]
    late_pending = [f for f in lay.pending if lay.phase(f) == "filled"]
    if late or late_pending:
        rows = df[ROW].to_numpy()
        df = df.copy(deep=False)
        for f in late + late_pending:
            df[f.name] = f.cast(df[f.column], rows).set_axis(df.index)
        again = frame.normalize_and_fill(df, late, states, carry)
        df = again.frame
        filled.update(again.filled)
        for name, n in again.dropped.items():
            dropped[name] = dropped.get(name, 0) + n
    return frame.Prepared(df, filled, dropped), stats


def _keep(states: dict, names: list[str]) -> dict:
    return {n: ({**s, "missing_value_strategy": "keep"} if n in names else s) for n, s in states.items()}


def _edges(pdf, index, lay, assign, states, carry, names):
    prepared, _ = prepare(pdf, index, lay, assign, states, carry)
    return frame.first_last_valid(prepared.frame, names)


def carries(parts: list, lay: Layout, assign: np.ndarray, states: dict) -> list[dict | None]:
    """Per partition: ffill/bfill carries for ``lay.features``, in two rounds (features on dataset or
    raw-phase columns first; filled-phase features see the first round's fills)."""
    early = {f.name: states[f.name] for f in lay.features if lay.phase(f) == "raw"}
    late = {f.name: states[f.name] for f in lay.features if lay.phase(f) == "filled"}
    result: list[dict] = [{} for _ in parts]
    a = dask_run.shared(assign)
    for group, base in ((early, None), (late, "first")):
        names = frame.needs_carries(group)
        if not names:
            continue
        sub = lay.without_pending() if base else layout([p for p in lay.stages if p.phase == "raw"],
                                                        [f for f in lay.features if f.name in early])
        s = dask_run.shared(_keep(states, names))
        edges = dask_run.compute([delayed(_edges)(p, i, dask_run.shared(sub), a, s, result[i] or None, names)
                               for i, p in enumerate(parts)])
        for i, c in enumerate(frame.carries(edges, names)):
            result[i] = {**result[i], **c}
    return [r or None for r in result]


def _prepared(pdf, index, lay, assign, states, carry):
    return prepare(pdf, index, lay, assign, states, carry)[0]


def split_states(states: dict) -> tuple[list[PlannedStage], dict]:
    plan = [PlannedStage.from_json(item) for item in states.get(STATES_KEY, [])]
    return plan, {k: v for k, v in states.items() if k != STATES_KEY}


def filled_partitions(parts: list, features: list[FeatureType], assign: np.ndarray, states: dict) -> list:
    """``tasks.custom.prepared.filled_partitions`` when the states hold a stage plan: delayed ``Prepared`` partitions."""
    stages, states = split_states(states)
    lay = layout(stages, features)
    carry = carries(parts, lay, assign, states)
    L, a, s = dask_run.shared(lay), dask_run.shared(assign), dask_run.shared(states)
    return [delayed(_prepared)(p, i, L, a, s, c) for i, (p, c) in enumerate(zip(parts, carry, strict=True))]


# ---- serving: the Preprocessor replays the stages ----------------------------------------------------

PLAN_METADATA_KEY = "custom_stages"  # in training_set_metadata.json, on each feature a stage makes


def annotate_metadata(metadata: dict, states: dict) -> None:
    """Give every feature whose column a custom stage makes the fitted stage plan (for serving)."""
    if STATES_KEY not in states:
        return
    plan = states[STATES_KEY]
    made = {column for item in plan for column in item["output_type"]}
    for meta in metadata.values():
        if meta.get("column") in made:
            meta[PLAN_METADATA_KEY] = plan


def serving_plan(metadata: dict) -> list[PlannedStage]:
    """The stage plan recorded in an artifact's metadata (``[]`` when no stage made a feature)."""
    for meta in metadata.values():
        if PLAN_METADATA_KEY in meta:
            return [PlannedStage.from_json(item) for item in meta[PLAN_METADATA_KEY]]
    return []


def _made(plan: list[PlannedStage]) -> set[str]:
    return {column for p in plan for column in p.outputs}


def serving_columns(plan: list[PlannedStage], features: list[FeatureType]) -> list[str]:
    """The raw columns a request needs: the features' dataset columns and the stages' dataset inputs."""
    made = _made(plan)
    columns = [f.column for f in features if f.column not in made]
    columns += [c for p in plan for c in p.dataset_inputs]
    return list(dict.fromkeys(columns))


def serve(df: pd.DataFrame, features: list[FeatureType], states: dict, plan: list[PlannedStage],
          as_ingested) -> frame.Prepared:
    """Raw request rows through the stages and the features' cast + fill, nothing refitted, no row
    dropped: a missing value where the pipeline would drop the row (``drop_row``) or has no
    neighbour to fill from (``ffill``/``bfill``) raises ``DataError`` naming the row and feature.
    ``as_ingested(values, kind, column)`` reads a column the way ingest reads text formats."""
    made = _made(plan)
    needed: dict[str, str] = {}
    for f in features:
        if f.column not in made:
            needed.setdefault(f.column, f.read_as())
    for p in plan:
        for column in p.dataset_inputs:
            needed.setdefault(column, "float64" if spec_kind(p.inputs[column]) in ("float", "int") else "string")
    n = len(df)
    pdf = pd.DataFrame({c: as_ingested(df[c], kind, c).reset_index(drop=True) for c, kind in needed.items()},
                       index=pd.RangeIndex(n))
    pdf[ROW] = np.arange(n, dtype=np.int64)
    strict = [f for f in features if states[f.name]["missing_value_strategy"] == "drop_row"]
    kept = _keep(states, [f.name for f in strict])  # report the row instead of dropping it
    prepared, _ = prepare(pdf, 0, layout(plan, features), np.zeros(n, dtype=np.int8), kept, None)
    for f in features:
        strategy = states[f.name]["missing_value_strategy"]
        if strategy not in ("drop_row", "ffill", "bfill"):
            continue
        missing = prepared.frame[f.name].isna().to_numpy()
        if missing.any():
            row = int(np.flatnonzero(missing)[0])
            why = ("the pipeline drops such rows (missing_value_strategy: drop_row)" if strategy == "drop_row" else
                   f"no neighbouring value in this call to {strategy} from; pass the rows around it too")
            raise DataError(f"row {row}, column '{f.column}': {f.describe()} is missing a value; {why}")
    return prepared
