"""fill_missing: fit each feature's missing-value state on the ``fit_on`` rows.

Each feature's ``missing_combiner()`` is fitted over the partitions with ``tasks.runtime.combine.fit``
(create + add per partition on the workers, merge, extract -> the JSON fill state).

Output ``missing.json``: per feature ``missing_value_strategy`` and ``computed_fill_value`` (the
value actually used; None for ffill/bfill/drop_row), plus type-specific state such as a binary
feature's ``str2bool``. The fill itself is applied by ``tasks.runtime.frame.normalize_and_fill`` in every
later stage, so this stage writes no copy of the data.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from core.code_version import module_version
from tasks.custom import plan as custom_plan
from tasks.features.base import NullCount
from tasks.ingest import stage as ingest_mod
from tasks.runtime import combine, frame
from tasks.runtime.context import run_cached
from tasks.runtime.statistics import Statistics
from tasks.split import stage as split_mod

CODE_VERSION = module_version(__name__)  # this module and what it imports directly (core.code_version)


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


def run(ctx, ingest, split):
    ctx = custom_plan.raw_view(ctx)  # features on columns a custom stage makes are fitted by its step
    fit_on = ctx.config.preprocessing.fit_on
    config_slice = {"features": ctx.features_slice(), "fit_on": fit_on}

    def compute(out: Path) -> Statistics:
        assign = split_mod.load(split)
        combiners = {f.name: WithNulls(f.missing_combiner()) for f in ctx.features}
        counted = {name for name, c in combiners.items() if not c.needs_values()}
        # a category column as ingest stored it (a dictionary) where only its nulls are counted: not decoded
        parts = frame.partitions(ingest_mod.data_dir(ingest.path), ctx.npartitions,
                                 frame.dictionary_columns(ctx.features, bool(ctx.config.stages), counted))
        fitted = combine.fit(combiners, parts, _batches, ctx.features, assign, fit_on, counted)
        states = {}
        stats = Statistics()
        for f in ctx.features:
            states[f.name], nulls = fitted[f.name]
            stats.counter(f"fill_missing.missing_in_fit_rows.{f.name}", nulls)
        (out / "missing.json").write_text(json.dumps(states, sort_keys=True, indent=1))
        return stats

    return run_cached(ctx, "fill_missing", CODE_VERSION, [ingest.key, split.key], config_slice, compute)


class WithNulls(combine.Combiner):
    """A missing-value combiner whose ``extract`` also gives the nulls in the fit rows (a statistic)."""

    def __init__(self, inner: combine.Combiner):
        self.inner = inner

    def create(self):
        return self.inner.create()

    def add(self, acc, batch):
        return self.inner.add(acc, batch)

    def needs_values(self) -> bool:
        return self.inner.needs_values()

    def merge(self, a, b):
        return self.inner.merge(a, b)

    def extract(self, acc) -> tuple[dict, int]:
        return self.inner.extract(acc), acc["nulls"]


def load(result) -> dict:
    return json.loads((Path(result.path) / "missing.json").read_text())
