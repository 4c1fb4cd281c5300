"""Custom stages in the pipeline: the cached fit step of each (a node of the graph).

A custom stage (``tasks.Stage``, placed by ``config.stages``; ``tasks.custom.dag`` validates the DAG) is a
per-partition transform applied inside the preparation every stage after fill_missing shares
(``tasks.custom.apply``). Each custom stage is a cached pipeline step named after it (``run``), after fill_missing, with the
key ``[ingest, split, previous step] + its code version, params and the features it makes``. The
step fits the stage when it fits (a combiner, ``tasks.runtime.combine``: ``create`` + ``add`` per partition on
the ``fit_on`` rows, ``merge``, ``extract`` -> JSON state), fits the missing-value state
(``missing_combiner``) of the features whose column it makes
(fill_missing fits the others, ``raw_view``), records the statistics it emits, and writes
``missing.json``: every state so far plus the stage plan with fitted states under ``STATES_KEY``.
The last step's result is the ``missing`` parent of balance, vocab and encode, whose
``tasks.custom.prepared.filled_partitions`` hands the preparation to ``tasks.custom.apply`` when the states hold a plan. So a changed
plugin recomputes its step and everything after; ingest, split and fill_missing stay cached.

Missing-value fits of features made by a stage use the rows the preparation keeps up to that stage
(rows that a drop_row feature on a dataset column drops are excluded, as in fill_missing).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from dask import delayed

from core import combiner
from core.combiner import WithNulls
from core.errors import DataError, InvalidStatisticsError, InvalidTransformOutputError
from tasks.custom.apply import carries, coerce_inputs, layout, prepare, raw_part, split_states
from tasks.custom.dag import PlannedStage
from tasks.custom.plan import STATES_KEY, plan_of
from tasks.custom.stage import named_statistics, worker_copy
from tasks.runtime import dask_run, frame
from tasks.runtime.outputs import Ingested, MissingStates, SplitAssignment
from tasks.runtime.statistics import Statistics

# ---- the cached step of one custom stage ---------------------------------------------------------

def _fit_partition(pdf, index, lay, target: PlannedStage, assign, states, carry, fit_on):
    """One partition's accumulator of the stage (``combiner.accumulate``; none without fit rows) and the
    statistics its ``add`` emitted."""
    stats = Statistics()
    if target.phase == "raw":
        df = raw_part(pdf, index, lay, assign, None, None)
        fit = df.loc[df[frame.SPLIT] == 0] if fit_on == "train" else df
    else:
        fit = frame.fit_rows(prepare(pdf, index, lay, assign, states, carry)[0].frame, fit_on)
    if len(fit) == 0:
        return {}, stats
    worker = worker_copy(target.stage)
    acc = combiner.accumulate({target.name: worker},
                             {target.name: coerce_inputs(target, fit.reset_index(drop=True), index)})
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


def config_slice(ctx, index: int) -> dict:
    """What the ``index``-th custom stage reads of the config: its key and the features it makes."""
    plan = plan_of(ctx.config)
    made = [f.name for f in ctx.features if plan.maker(f.column) == index]
    return {"stage": plan.stages[index].key_json(), "features": ctx.features_slice(made),
            "fit_on": ctx.config.preprocessing.fit_on}


def compute(ctx, out: Path, index: int, ingest: Ingested, split: SplitAssignment, previous: MissingStates
            ) -> Statistics:
    """The ``index``-th custom stage (in run order); ``previous`` is the fill_missing result or the previous
    custom stage's."""
    plan = plan_of(ctx.config)
    target = plan.stages[index]
    made = [f for f in ctx.features if plan.maker(f.column) == index]
    known = [f for f in ctx.features if plan.maker(f.column) is None or plan.maker(f.column) < index]
    fit_on = ctx.config.preprocessing.fit_on
    earlier, states = split_states(previous.states())
    assign = split.assignment()
    parts = frame.partitions(ingest.parts, ctx.npartitions)
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
    MissingStates.write(out, {**states, STATES_KEY: [p.to_json() for p in current]})
    MissingStates.write_stage(out, current[-1].to_json())
    return stats


def load_state(result) -> dict:
    return MissingStates.of(result).stage_state()


