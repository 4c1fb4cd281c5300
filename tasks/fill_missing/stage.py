"""fill_missing: fit each feature's missing-value state on the ``fit_on`` rows.

Each feature's ``missing_combiner()`` is fitted over the partitions with ``tasks.runtime.combine.fit``
(create + add per partition on the workers, merge, extract -> the JSON fill state).

Output ``missing.json``: per feature ``missing_value_strategy`` and ``computed_fill_value`` (the
value actually used; None for ffill/bfill/drop_row), plus type-specific state such as a binary
feature's ``str2bool``. The fill itself is applied by ``tasks.runtime.frame.normalize_and_fill`` in every
later stage, so this stage writes no copy of the data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core.combiner import WithNulls, merge_extract
from tasks.custom import plan as custom_plan
from tasks.features.base import NullCount
from tasks.runtime import combine, file_fits, frame
from tasks.runtime.node import Node
from tasks.runtime.outputs import Ingested, MissingStates, SplitAssignment
from tasks.runtime.statistics import Statistics


def _batches(pdf, features, assign, fit_on, counted):
    """One partition's fit values per feature (the rows a drop_row feature drops left out); a feature in
    ``counted`` (its combiner reads no values) gets the fit rows' ``NullCount`` instead, so its column is
    not copied."""
    typed = frame.cast_partition(pdf, features, assign)
    drop = np.zeros(len(typed), dtype=bool)
    for f in features:
        if f.missing_strategy == "drop_row":
            drop |= typed[f.name].isna().to_numpy()
    keep = frame.fit_mask(typed, fit_on, drop)
    valued = [f.name for f in features if f.name not in counted]
    fit = typed[valued] if keep is None else typed.loc[keep, valued]
    out = {name: fit[name] for name in valued}
    size = len(fit)
    for name in counted:
        missing = typed[name].isna().to_numpy()
        out[name] = NullCount(int(np.count_nonzero(missing if keep is None else missing & keep)), size)
    return out


def config_slice(ctx) -> dict:
    ctx = custom_plan.raw_view(ctx)  # features on columns a custom stage makes are fitted by its step
    return {"features": ctx.features_slice(), "fit_on": ctx.config.preprocessing.fit_on}


def compute(ctx, out: Path, ingest: Ingested, split: SplitAssignment) -> Statistics:
    key_slice = config_slice(ctx)  # the per-file entries' (config_slice takes the raw view itself)
    ctx = custom_plan.raw_view(ctx)
    fit_on = ctx.config.preprocessing.fit_on
    assign = split.assignment()
    combiners = {f.name: WithNulls(f.missing_combiner()) for f in ctx.features}
    counted = {name for name, c in combiners.items() if not c.needs_values()}
    # a category column as ingest stored it (a dictionary) where only its nulls are counted: not decoded
    dictionaries = frame.dictionary_columns(ctx.features, bool(ctx.config.stages), counted)
    strategies = {f.name: {"missing_value_strategy": f.missing_strategy} for f in ctx.features}
    if file_fits.applicable(ctx, ingest, strategies) and file_fits.storable(*(c.create() for c in
                                                                             combiners.values())):
        # a folder's files one by one, each file's accumulators a cache entry (tasks.runtime.file_fits)
        def fit_file(parts: list, _folder: str):
            return combine.accumulated(combiners, frame.partitions(parts, None, dictionaries), _batches,
                                       ctx.features, assign, fit_on, counted)[0]

        by_file = file_fits.fit_files(ctx, ingest, assign, key_slice, fit_file)
        fitted = merge_extract(combiners, [acc for acc, _entry in by_file])
    else:
        parts = frame.partitions(ingest.parts, ctx.npartitions, dictionaries)
        fitted = combine.fit(combiners, parts, _batches, ctx.features, assign, fit_on, counted)
    states = {}
    stats = Statistics()
    for f in ctx.features:
        states[f.name], nulls = fitted[f.name]
        stats.counter(f"fill_missing.missing_in_fit_rows.{f.name}", nulls)
    MissingStates.write(out, states)
    return stats


NODE = Node("fill_missing", compute, inputs=("ingest", "split"), output=MissingStates, reads=config_slice,
            per_file=True)
