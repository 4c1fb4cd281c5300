"""split for ``--extend``: the new rows' splits, each a function of the row alone, so every parent row
keeps its split and no new row depends on another.

The new rows are numbered after the parent's last ``__row__`` (``ctx.extend["row_offset"]``):

* ``random``: the row's hash ``mix64(seed, row)`` against the probabilities' fractions of 2**64 (the rule of
  ``exact: false``; the parent's exact counts are not recomputed);
* ``hash``: the key column's hash, as in a run;
* ``fixed``: the column's value.

Other split types are refused before any data is read (``flows.extend_context``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from dask import delayed

from tasks.config.constants import SPLIT_NAMES
from tasks.runtime import dask_run, frame
from tasks.runtime.node import Node
from tasks.runtime.outputs import Ingested, SplitAssignment
from tasks.runtime.statistics import Statistics
from tasks.split.rows import mix64
from tasks.split.stage import _column_of, _threshold, fixed_split, hash_ids


def random_ids(rows: np.ndarray, probabilities: list[float], seed: int) -> np.ndarray:
    """Each row's split from its own hash: below ``p_train`` of 2**64 train, below ``p_train + p_val``
    validation, else test."""
    keys = mix64(seed, rows)
    out = np.full(len(rows), 2, dtype=np.int8)
    for split_id, cumulative in ((1, probabilities[0] + probabilities[1]), (0, probabilities[0])):
        bound = _threshold(cumulative)
        out[keys < np.uint64(bound) if bound < 1 << 64 else slice(None)] = split_id
    return out


def compute(ctx, out: Path, ingest: Ingested) -> Statistics:
    split = ctx.config.preprocessing.split
    offset = int(ctx.extend["row_offset"])
    n = ingest.num_rows
    if split.type == "random":
        assign = random_ids(np.arange(offset, offset + n, dtype=np.int64), split.probabilities, split.seed)
    else:
        parts = frame.partitions(ingest.parts, ctx.npartitions)
        results = dask_run.compute([delayed(_column_of)(p, split.column) for p in parts])
        assign = np.zeros(n, dtype=np.int8)
        for rows, values in results:
            if not len(rows):
                continue
            values = values.reset_index(drop=True)
            if split.type == "fixed":
                assign[rows] = fixed_split(values, rows + offset, split.column)
            else:
                assign[rows] = hash_ids(values, rows + offset, split.probabilities, split.column, split.seed)
    SplitAssignment.write(out, assign)
    stats = Statistics()
    for i, name in enumerate(SPLIT_NAMES):
        stats.counter(f"split.rows.{name}", int((assign == i).sum()))
    return stats


def config_slice(ctx) -> dict:
    return {"split": ctx.config.preprocessing.split.model_dump(), "parent": ctx.extend["parent"]["artifact_id"],
            "row_offset": ctx.extend["row_offset"]}


NODE = Node("split", compute, inputs=("ingest",), output=SplitAssignment, reads=config_slice)
