"""degenerate: data that would train nothing, caught once the split is known and before anything is fitted
or published.

* a feature with no non-missing value in its fit rows (``fit_on``: the training rows, or all rows) is a
  **warning** naming the feature: every row would get the fill value (a category: 100% ``<UNK>``);
* an output feature with a single distinct value in its fit rows (a constant target) is a ``DataError``
  naming the feature: a model would learn one answer.

Both are judged from the ingested parts' raw columns (nulls as ingest read them: empty cells and the
null spellings), one Dask task per part: per column the fit rows holding a value and, for outputs, up to
two of their distinct values, merged in part order (the result does not depend on partitioning).
A target class that a stratified split leaves out of train is ``tasks.split``'s check
(``check_classes_in_train``), where the classes are counted.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather

from core.errors import DataError
from tasks.dask_run import compute, shared
from tasks.ingest_common import ROW

log = logging.getLogger("prepflow.degenerate")


def fit_mask(assign: np.ndarray, fit_on: str) -> np.ndarray:
    """Rows statistics are fitted on: the training rows (split 0), or every sampled row."""
    return assign == 0 if fit_on == "train" else assign >= 0


def part_summary(path: str, columns: list[str], outputs: list[str], fit: np.ndarray) -> dict:
    """One ingested part: fit rows holding a value per column; for outputs, up to two distinct values."""
    table = feather.read_table(path, columns=[*dict.fromkeys([*columns, ROW])], memory_map=True)
    in_fit = pa.array(fit[table.column(ROW).to_numpy()])
    present, values = {}, {}
    for column in columns:
        col = table.column(column)
        held = pc.and_(pc.is_valid(col), in_fit)
        present[column] = int(pc.sum(pc.cast(held, pa.int64())).as_py() or 0)
        if column in outputs:
            uniques = pc.unique(col.filter(held))
            values[column] = sorted(str(v) for v in uniques.slice(0, 2).to_pylist())
    return {"present": present, "values": values}


def merge(summaries: list[dict], columns: list[str], outputs: list[str]) -> dict:
    present = {c: sum(s["present"][c] for s in summaries) for c in columns}
    values = {c: sorted({v for s in summaries for v in s["values"][c]})[:2] for c in outputs}
    return {"present": present, "values": values}


def findings(features: list[tuple[str, str, bool]], merged: dict, fit_on: str, fit_rows: int) -> list[str]:
    """Warnings (returned) and errors (raised) for ``features`` = (name, column, is_output)."""
    where = "training rows" if fit_on == "train" else "rows"
    warnings = []
    for name, column, output in features:
        if fit_rows and merged["present"][column] == 0:
            message = (f"feature '{name}' (column '{column}') has no value in any of its {fit_rows:,} {where}: "
                       f"every row will get its fill value")
            if output:
                raise DataError(f"output feature '{name}' (column '{column}') has no value in any of its "
                                f"{fit_rows:,} {where}; nothing to learn")
            warnings.append(message)
        elif output and len(merged["values"][column]) == 1:
            raise DataError(f"output feature '{name}' (column '{column}') is constant: all {merged['present'][column]:,} "
                            f"{where} with a value hold {merged['values'][column][0]!r}; a model would learn one "
                            "answer (check the column, the filter that made the file, or the split)")
    return warnings


def check(ctx, ingest_path: str, assign: np.ndarray) -> list[str]:
    """Run the checks for the run's features (each warning is also logged); raises ``DataError``."""
    from dask import delayed  # Dask is imported when first used, as everywhere in the stages (tasks.dask_run)

    files = sorted(str(p) for p in (Path(ingest_path) / "data").glob("part-*.arrow"))  # tasks.ingest's parts
    if not files:
        return []
    with pa.memory_map(files[0]) as source:
        available = set(pa.ipc.open_file(source).schema.names)
    fit_on = ctx.config.preprocessing.fit_on
    features = [(f.name, f.source_column, ctx.config.is_output(f.name)) for f in ctx.config.features
                if f.source_column in available]  # columns a custom stage makes are not ingested
    if not features:
        return []
    columns = sorted({c for _n, c, _o in features})
    outputs = sorted({c for _n, c, o in features if o})
    fit = fit_mask(np.asarray(assign), fit_on)
    summaries = compute([delayed(part_summary, pure=True)(f, columns, outputs, shared(fit)) for f in files])
    messages = findings(features, merge(summaries, columns, outputs), fit_on, int(fit.sum()))
    for message in messages:
        log.warning(message)
    return messages
