"""Category counts file by file, for a folder's per-file fits (``tasks.runtime.file_fits``).

Each file's partitions are counted as ``tasks.vocab.category`` counts any partition, merged in a tree on the
workers, and the file's counts (one row per ``(feature, value)``) written into the file's cache entry as
``counts.arrow``, beside its other features' accumulators. The vocabulary is then reduced from the files'
counts: merged in a tree (one reducer) or, on a cluster whose workers could not hold them at once,
exchanged by value through the stage's folder, exactly as partitions' counts are (``category`` steps 2-4).
So a file's counts are read, never recounted, while its entry holds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
from dask import delayed

from core.combiner import merge_all
from tasks.runtime import dask_run
from tasks.runtime.frame import write_ipc
from tasks.vocab.category import (
    LOCAL_REDUCE_PARTS,
    MERGE_FAN_IN,
    REDUCER_MEMORY_SHARE,
    TREE_MEMORY_SHARE,
    _all_written,
    _empty_counts,
    _partition,
    _reduce_bucket,
    memory_budget,
    merge_counts,
    reduce_partition,
    reducer_count,
    write_buckets,
)

COUNTS_FILE = "counts.arrow"


def _tree(values: list, fn, *args) -> object:
    """``values`` (delayed) merged ``MERGE_FAN_IN`` at a time by ``fn(values, *args)``, to one."""
    level = values
    while len(level) > 1:
        level = [delayed(fn)(level[i:i + MERGE_FAN_IN], *args) for i in range(0, len(level), MERGE_FAN_IN)]
    return level[0]


def _merged_partials(partials: list, combiners) -> dict:
    return merge_all(combiners, *partials)


def _write_counts(counts: pa.Table, folder: str) -> str:
    path = os.path.join(folder, COUNTS_FILE)
    write_ipc(counts, Path(path))
    return path


def _result(accumulators, _written: str):
    return accumulators


def file_fit(prepared: list, features: list, fit_on: str, folder: str, partial, combiners) -> object:
    """A delayed accumulator of one file's ``prepared`` partitions (``partial(prepared, combiners, fit_on)``
    merged in a tree), whose graph also writes the file's category ``features``' counts to
    ``folder/counts.arrow``."""
    f, c = dask_run.shared(features), dask_run.shared(combiners)
    both = [delayed(_partition, nout=2)(p, f, fit_on, partial, c, fit_on) for p in prepared]
    accumulators = _tree([b[0] for b in both], _merged_partials, c) if both else {}
    counts = _tree([b[1] for b in both], merge_counts) if both else _empty_counts()
    return delayed(_result)(accumulators, delayed(_write_counts)(counts, folder))


def _read(path: str) -> pa.Table:
    return feather.read_table(path, memory_map=True)


def reduce_files(paths: list[str], features: list, folder: Path) -> list:
    """One delayed result per reducer over the files' counts (``category.reduce_partition``'s candidates,
    written under ``folder``): a tree and one reducer when they fit (locally up to ``LOCAL_REDUCE_PARTS``
    files; on a cluster by their size against the workers' memory), else the exchange."""
    if not features or not paths:
        return []
    f = dask_run.shared(features)
    reducers = 1
    if dask_run.on_cluster():
        from distributed import get_client

        workers = list(get_client().scheduler_info(n_workers=-1)["workers"].values())
        estimate = sum(os.path.getsize(p) for p in paths)
        reducers = reducer_count(estimate, memory_budget(workers, TREE_MEMORY_SHARE),
                                 memory_budget(workers, REDUCER_MEMORY_SHARE), len(paths))
    elif len(paths) > LOCAL_REDUCE_PARTS:
        reducers = -(-len(paths) // MERGE_FAN_IN)
    counts = [delayed(_read)(p) for p in paths]
    if reducers == 1:
        return [delayed(reduce_partition)(_tree(counts, merge_counts), f, str(folder), 0, merged=True)]
    written = delayed(_all_written)([delayed(write_buckets)(c, str(folder), i, reducers) for i, c in enumerate(counts)])
    return [delayed(_reduce_bucket)(written, j, f, str(folder)) for j in range(reducers)]
