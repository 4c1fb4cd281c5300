"""degenerate: data that would train nothing, caught once the split is known and before anything is fitted
or published.

* a feature with no non-missing value in its fit rows (``fit_on``: the training rows, or all rows) is a
  **warning** naming the feature: every row would get the fill value (a category: 100% ``<UNK>``);
* an output feature with a single distinct value (a constant target) or none in all the (sampled) rows
  is a ``DataError`` naming the feature: a model would learn one answer; one that is constant (or
  empty) in its fit rows only, which the split of a small or very unbalanced table can cause, is a
  warning.

Both are judged from the ingested parts' raw columns (nulls as ingest read them: empty cells and the
null spellings), one Dask task per part: per column the rows holding a value and, for outputs, up to
two of their distinct values, in the fit rows and in all rows, merged (the result does not depend on
partitioning).
A target class that a stratified split leaves out of train is ``tasks.split.stage``'s check
(``check_classes_in_train``), where the classes are counted.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
from dask import delayed

from core.errors import DataError
from tasks.config.constants import ROW
from tasks.runtime.dask_run import compute, shared

log = logging.getLogger("prepflow.degenerate")


def fit_mask(assign: np.ndarray, fit_on: str) -> np.ndarray:
    """Rows statistics are fitted on: the training rows (split 0), or every sampled row."""
    return assign == 0 if fit_on == "train" else assign >= 0


def _two_values(col, mask) -> list[str]:
    return sorted(str(v) for v in pc.unique(col.filter(mask)).slice(0, 2).to_pylist())


def part_summary(path: str, offset: int, columns: list[str], outputs: list[str], assign, fit_on: str) -> dict:
    """One ingested part: its fit rows, and the fit rows holding a value per column; for outputs, up to two
    distinct values in the fit rows and in all sampled rows. ``assign``: the split (an array, or
    ``tasks.split.stage``'s handle that reads ``split.npy`` here, on the worker)."""
    table = feather.read_table(path, columns=[*dict.fromkeys([*columns, ROW])], memory_map=True)
    rows = table.column(ROW).to_numpy() + offset  # the part's rows in the dataset (``Ingested.parts``)
    split = np.asarray(assign[rows])
    fit = fit_mask(split, fit_on)
    in_fit, sampled = pa.array(fit), pa.array(split >= 0)
    present, values, values_all = {}, {}, {}
    n_fit = int(fit.sum())
    for column in columns:
        col = table.column(column)
        if col.null_count == 0:  # every fit row holds a value
            held, present[column] = in_fit, n_fit
        else:
            held = pc.and_(pc.is_valid(col), in_fit)
            present[column] = int(pc.sum(held).as_py() or 0)
        if column in outputs:
            values[column] = _two_values(col, held)
            values_all[column] = _two_values(col, pc.and_(pc.is_valid(col), sampled))
    return {"fit_rows": n_fit, "present": present, "values": values, "values_all": values_all}


def merge(summaries: list[dict], columns: list[str], outputs: list[str]) -> dict:
    present = {c: sum(s["present"][c] for s in summaries) for c in columns}
    values = {c: sorted({v for s in summaries for v in s["values"][c]})[:2] for c in outputs}
    values_all = {c: sorted({v for s in summaries for v in s["values_all"][c]})[:2] for c in outputs}
    return {"fit_rows": sum(s.get("fit_rows", 0) for s in summaries), "present": present, "values": values,
            "values_all": values_all}


def findings(features: list[tuple[str, str, bool]], merged: dict, fit_on: str, fit_rows: int) -> list[str]:
    """Warnings (returned) and errors (raised) for ``features`` = (name, column, is_output)."""
    where = "training rows" if fit_on == "train" else "rows"
    warnings = []
    for name, column, output in features:
        everywhere = merged["values_all"][column] if output else None
        if output and not everywhere:
            raise DataError(f"output feature '{name}' (column '{column}') has no value in any row; nothing to learn")
        if output and len(everywhere) == 1:
            raise DataError(f"output feature '{name}' (column '{column}') is constant: every row with a value "
                            f"holds {everywhere[0]!r}; a model would learn one answer (check the column, or the "
                            "filter that made the file)")
        if fit_rows and merged["present"][column] == 0:
            warnings.append(f"{'output ' if output else ''}feature '{name}' (column '{column}') has no value in any "
                            f"of its {fit_rows:,} {where}: every row will get its fill value")
        elif output and len(merged["values"][column]) == 1:
            warnings.append(f"output feature '{name}' (column '{column}') holds one value, "
                            f"{merged['values'][column][0]!r}, in all {merged['present'][column]:,} {where} with a "
                            "value (the others are in other splits): a model trained on them learns one answer")
    return warnings


def check(ctx, parts: list[tuple[str, int]], assign: np.ndarray) -> list[str]:
    """Run the checks for the run's features (each warning is also logged) on the ingested ``parts``
    (``Ingested.parts``); raises ``DataError``."""

    if not parts:
        return []
    with pa.memory_map(parts[0][0]) as source:
        available = set(pa.ipc.open_file(source).schema.names)
    fit_on = ctx.config.preprocessing.fit_on
    features = [(f.name, f.source_column, ctx.config.is_output(f.name)) for f in ctx.config.features
                if f.source_column in available]  # columns a custom stage makes are not ingested
    if not features:
        return []
    columns = sorted({c for _n, c, _o in features})
    outputs = sorted({c for _n, c, o in features if o})
    # the split goes to the tasks as it is (split's handle pickles as its path): no per-row array here
    c, o, a = shared(columns), shared(outputs), shared(assign)  # once: lists are walked in every call
    summaries = compute([delayed(part_summary, pure=True)(f, offset, c, o, a, fit_on) for f, offset in parts])
    merged = merge(summaries, columns, outputs)
    messages = findings(features, merged, fit_on, merged["fit_rows"])
    for message in messages:
        log.warning(message)
    return messages
