"""Run expectation suites on Dask partitions: prepflow's generated suites on its own kernels, user
suites through Great Expectations' public API (``expectations.gx_suites``).

One Dask task per partition computes every suite's per-partition part (the kernels' partials and
GX's row-wise results); a user suite with expectations that need the whole table adds one task over
all partitions. The merge runs where ``run`` is called and handles small values only (counts, the
first unexpected values, sorted keys for uniqueness). GX is imported only when a user suite has
expectations: a run with the generated suites alone never imports it.

Partitions must carry a global index (row numbers), so that unexpected indices are those of the
whole table, and come in row order.
"""

from __future__ import annotations

import dask
import pandas as pd

from expectations import gx_suites, kernels, results
from expectations.suites import is_generated


def _partition(frame: pd.DataFrame, checks: list, plans: list, first: bool) -> tuple[list, list]:
    return ([kernels.scan(c, frame) for c in checks],
            gx_suites.scan(plans, frame, first) if plans else [])


def run(named: list[tuple[str, dict]], parts: list, columns: list[str], scheduler=None) -> list[dict]:
    """Run ``(source, suite JSON)`` pairs on ``parts`` (pandas frames or Dask delayed frames, in row
    order, with a global index) whose columns are ``columns``: one suite entry each
    (``expectations.results.suite_entry``). ``scheduler``: Dask's (default: the active one)."""
    generated = [(i, kernels.kernels(s, columns)) for i, (_src, s) in enumerate(named) if is_generated(s)]
    user = [(i, s) for i, (_src, s) in enumerate(named) if not is_generated(s) and s["expectations"]]
    plans = []
    if user:  # GX is imported (by gx_suites, on first use) only for these
        plans = [gx_suites.Plan(s, columns) for _i, s in user]
    checks = [c for _i, c in generated]
    if not parts:
        parts = [pd.DataFrame({c: pd.Series([], dtype=object) for c in columns})]
    tasks = [dask.delayed(_partition)(p, checks, plans, i == 0) for i, p in enumerate(parts)]
    if any(plan.whole for plan in plans):
        tasks.append(dask.delayed(gx_suites.whole)(plans, *parts))
    computed = list(dask.compute(*tasks, scheduler=scheduler)) if any(checks) or plans else []
    scanned = computed[:len(parts)]
    whole = computed[len(parts)] if len(computed) > len(parts) else [[] for _ in plans]

    out: list = [None] * len(named)
    for k, (i, group) in enumerate(generated):
        out[i] = kernels.merge(group, [s[0][k] for s in scanned]) if scanned else kernels.merge(group, [])
    for k, (i, _suite) in enumerate(user):
        out[i] = gx_suites.merge(plans[k], [s[1][k] for s in scanned], whole[k])
    return [results.suite_entry(s["name"], src, out[i] or []) for i, (src, s) in enumerate(named)]
