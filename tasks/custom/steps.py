"""Custom stages in the pipeline: their cached fit steps and the per-partition preparation that runs them.

A custom stage (``tasks.Stage``, placed by ``config.stages``; ``tasks.custom.dag`` validates the DAG) is a
per-partition transform applied inside the preparation every stage after fill_missing shares::

    keep sampled rows -> raw-phase stages (dataset columns)
        -> cast, drop_row, fill the features on dataset columns and raw-phase columns
        -> filled-phase stages (features' filled values)
        -> cast, drop_row, fill the features on filled-phase columns

Each custom stage is a cached pipeline step named after it (``run``), after fill_missing, with the
key ``[ingest, split, previous step] + its code version, params and the features it makes``. The
step fits the stage when it fits (a combiner, ``tasks.runtime.combine``: ``create`` + ``add`` per partition on
the ``fit_on`` rows, ``merge``, ``extract`` -> JSON state), fits the missing-value state
(``missing_combiner``) of the features whose column it makes
(fill_missing fits the others, ``raw_view``), records the statistics it emits, and writes
``missing.json``: every state so far plus the stage plan with fitted states under ``STATES_KEY``.
The last step's result is the ``missing`` parent of balance, vocab and encode, whose
``tasks.custom.prepared.filled_partitions`` hands the preparation here when the states hold a plan. So a changed
plugin recomputes its step and everything after; ingest, split and fill_missing stay cached.

Missing-value fits of features made by a stage use the rows the preparation keeps up to that stage
(rows that a drop_row feature on a dataset column drops are excluded, as in fill_missing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from dask import delayed

from core import combiner
from core.code_version import module_version
from core.combiner import WithNulls
from core.errors import DataError, InvalidStatisticsError, InvalidTransformOutputError, TypeMismatchError
from core.lazy import pandas as pd
from tasks.config.constants import ROW
from tasks.custom.dag import PlannedStage
from tasks.custom.plan import STATES_KEY, plan_of
from tasks.custom.stage import compatible, empty_column, named_statistics, series_kind, spec_kind, worker_copy
from tasks.features.base import FeatureType
from tasks.runtime import dask_run, frame
from tasks.runtime.context import run_cached
from tasks.runtime.outputs import Ingested, MissingStates, SplitAssignment
from tasks.runtime.statistics import Statistics

CODE_VERSION = module_version(__name__)  # this module and what it imports directly (core.code_version)
STAGE_FILE = "stage.json"


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


def _coerce_inputs(p: PlannedStage, df: pd.DataFrame, index: int) -> pd.DataFrame:
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
                row = int(df[ROW].iloc[i]) + 1 if ROW in df else i + 1
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
        view = _coerce_inputs(p, df, index)
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


def _raw_part(pdf: pd.DataFrame, index: int, lay: Layout, assign: np.ndarray, stats, collect: str | None):
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
    pdf = _raw_part(pdf, index, lay, assign, stats, collect)
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


# ---- the cached step of one custom stage ---------------------------------------------------------

def _fit_partition(pdf, index, lay, target: PlannedStage, assign, states, carry, fit_on):
    """One partition's accumulator of the stage (``combiner.accumulate``; none without fit rows) and the
    statistics its ``add`` emitted."""
    stats = Statistics()
    if target.phase == "raw":
        df = _raw_part(pdf, index, lay, assign, None, None)
        fit = df.loc[df[frame.SPLIT] == 0] if fit_on == "train" else df
    else:
        fit = frame.fit_rows(prepare(pdf, index, lay, assign, states, carry)[0].frame, fit_on)
    if len(fit) == 0:
        return {}, stats
    worker = worker_copy(target.stage)
    acc = combiner.accumulate({target.name: worker},
                             {target.name: _coerce_inputs(target, fit.reset_index(drop=True), index)})
    if worker._emitted:
        stats = stats.merge(named_statistics(worker, worker._emitted))
    return acc, stats


def _produce(pdf, index, lay, assign, states, carry, fit_on, collect):
    prepared, stats = prepare(pdf, index, lay, assign, states, carry, collect=collect)
    df = prepared.frame
    drop = np.zeros(len(df), dtype=bool)
    for f in lay.pending:
        if f.missing_strategy == "drop_row":
            drop |= df[f.name].isna().to_numpy()
    fit = frame.fit_rows(df.loc[~drop], fit_on)
    combiners = {f.name: WithNulls(f.missing_combiner()) for f in lay.pending}
    return combiner.accumulate(combiners, {f.name: fit[f.name] for f in lay.pending}), stats


def _merged(p: PlannedStage, total: Statistics, parts: list[Statistics]) -> Statistics:
    for part in parts:
        try:
            total = total.merge(part)
        except TypeError as exc:
            raise InvalidStatisticsError(f"stage '{p.name}': its statistics do not merge across partitions ({exc}); "
                                         "emit a statistic under one name with one kind, and a histogram with the "
                                         "same bucket starts, in every partition") from None
    return total


def _json_state(p: PlannedStage, state) -> dict:
    if not isinstance(state, dict):
        raise InvalidTransformOutputError(f"stage '{p.name}': extract returned {type(state).__name__}; the fitted "
                                          "state must be a JSON object (a dict)")
    try:
        return json.loads(json.dumps(state, sort_keys=True, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidTransformOutputError(f"stage '{p.name}': the fitted state is not JSON ({exc})") from None


def run(ctx, index: int, ingest: Ingested, split: SplitAssignment, previous: MissingStates):
    """Stage entry point for the ``index``-th custom stage (in run order); ``previous`` is the
    fill_missing result or the previous custom stage's."""
    plan = plan_of(ctx.config)
    target = plan.stages[index]
    made = [f for f in ctx.features if plan.maker(f.column) == index]
    known = [f for f in ctx.features if plan.maker(f.column) is None or plan.maker(f.column) < index]
    fit_on = ctx.config.preprocessing.fit_on
    config_slice = {"stage": target.key_json(), "features": ctx.features_slice([f.name for f in made]),
                    "fit_on": fit_on}

    def compute(out: Path) -> Statistics:
        earlier, states = split_states(previous.states())
        assign = split.assignment()
        parts = frame.partitions(ingest.data_dir, ctx.npartitions)
        stats = Statistics()
        state = None
        if target.fits:
            lay = layout(earlier, known, reads=target.passthrough)
            carry = carries(parts, lay, assign, states)
            L, a, s = dask_run.shared(lay), dask_run.shared(assign), dask_run.shared(states)
            results = dask_run.compute([delayed(_fit_partition)(p, i, L, target, a, s, c, fit_on)
                                     for i, (p, c) in enumerate(zip(parts, carry, strict=True))])
            stats = _merged(target, stats, [st for _, st in results])
            fitted = combiner.merge_extract({target.name: target.stage}, [acc for acc, _ in results])
            if target.name not in fitted:
                raise DataError(f"stage '{target.name}': no {'training ' if fit_on == 'train' else ''}rows to fit on")
            state = _json_state(target, fitted[target.name])
        current = [*earlier, replace(target, state=state)]
        lay = layout(current, known, made)
        carry = carries(parts, lay.without_pending(), assign, states)
        L, a, s = dask_run.shared(lay), dask_run.shared(assign), dask_run.shared(states)
        results = dask_run.compute([delayed(_produce)(p, i, L, a, s, c, fit_on, target.name)
                                 for i, (p, c) in enumerate(zip(parts, carry, strict=True))])
        stats = _merged(target, stats, [st for _, st in results])
        fitted = combiner.merge_extract({f.name: WithNulls(f.missing_combiner()) for f in made},
                                       [acc for acc, _ in results])
        for f in made:
            states[f.name], nulls = fitted[f.name]
            stats.counter(f"fill_missing.missing_in_fit_rows.{f.name}", nulls)
        (out / "missing.json").write_text(json.dumps({**states, STATES_KEY: [p.to_json() for p in current]},
                                                     sort_keys=True, indent=1))
        (out / STAGE_FILE).write_text(json.dumps(current[-1].to_json(), sort_keys=True, indent=1))
        return stats

    return run_cached(ctx, target.name, CODE_VERSION, [ingest.key, split.key, previous.key], config_slice, compute,
                      MissingStates)


def load_state(result) -> dict:
    return json.loads((Path(result.path) / STAGE_FILE).read_text())


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
            raise DataError(f"row {row + 1}, column '{f.column}': {f.describe()} is missing a value; {why}")
    return prepared
