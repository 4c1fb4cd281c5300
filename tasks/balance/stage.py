"""balance: oversample the minority or undersample the majority class of the training split.

Ludwig semantics: exactly one binary or category output feature; only training rows change.
``oversample_minority: r`` grows the minority class to ``int(r * majority)`` rows; prepflow keeps
every original minority row and adds seeded draws with replacement (Ludwig replaces the class by
a sample, which can lose rows). ``undersample_majority: r`` shrinks the majority class to
``int(minority / r)`` rows, drawn without replacement. If the classes are already at least that
balanced nothing changes.

Output ``multiplicity.npy``: uint32 per input row, how many times the row appears in the
published training split (rows keep input order, duplicates adjacent). No balancing: no file.

Nothing per row is built in the flow process: Dask tasks count each partition's training labels (the
flow merges the counts and picks the classes); one task draws the seeded positions into the resampled
class's rows (``rng.integers`` / ``rng.permutation`` over the class's row count, as a single draw does),
bucketed by partition; chunk tasks write ones, then each partition's task writes the multiplicities of
its rows in place. The file's bytes are those of the single-array computation (one ``rng`` draw over the
class's rows in row order).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from dask import delayed

from core.errors import ConfigError
from storage.fs import write_at
from tasks.config.constants import ROW
from tasks.custom.prepared import filled_partitions
from tasks.runtime import dask_run, frame
from tasks.runtime.dask_run import row_chunks
from tasks.runtime.node import FILLED, Node
from tasks.runtime.outputs import Ingested, MissingStates, Multiplicity, SplitAssignment
from tasks.runtime.statistics import Statistics


def label_feature(ctx) -> str:
    outputs = [f for f in ctx.config.output_features if f.type in ("binary", "category")]
    if len(ctx.config.output_features) != 1 or len(outputs) != 1:
        raise ConfigError("preprocessing.balance: balancing needs exactly one output feature of type binary or "
                          f"category, the config has {[(f.name, f.type) for f in ctx.config.output_features]}")
    return outputs[0].name


def _train_labels(prepared, name):
    f = prepared.frame
    train = f.loc[f[frame.SPLIT] == 0]
    return train[ROW].to_numpy(dtype=np.int64), train[name].astype("string").to_numpy(dtype=object)


def _plan(counts: dict[str, int], oversample: float | None, undersample: float | None):
    """(kind, the resampled class, the draw's arguments) from the training class counts; None: no change."""
    classes = sorted(counts)
    if len(classes) < 2:
        return None
    order = sorted(classes, key=lambda c: (counts[c], c))
    minority, majority = order[0], order[-1]
    if oversample is not None:
        target = int(counts[majority] * oversample)
        extra = target - counts[minority]
        return ("over", minority, (counts[minority], extra)) if extra > 0 else None
    target = int(counts[minority] / undersample)
    size = counts[majority]
    return ("under", majority, (size, size - target)) if target < size else None


def _draw(kind: str, args: tuple[int, int], seed: int) -> np.ndarray:
    """Positions into the resampled class's rows (in row order): ``extra`` draws with replacement, or the
    ``drop`` positions of a permutation."""
    rng = np.random.default_rng(seed)
    size, k = args
    if kind == "over":
        return rng.integers(0, size, size=k)
    return rng.permutation(size)[:k]


def _class_counts(prepared, name) -> tuple[dict[str, int], int, int]:
    """The partition's training rows per class; its first and last input row (-1: no row)."""
    rows, labels = _train_labels(prepared, name)
    classes, counts = np.unique(labels.astype(str), return_counts=True)
    all_rows = prepared.frame[ROW].to_numpy(dtype=np.int64)
    return (dict(zip(classes.tolist(), counts.tolist(), strict=True)),
            int(all_rows[0]) if len(all_rows) else -1, int(all_rows[-1]) if len(all_rows) else -1)


def _by_partition(kind: str, args: tuple[int, int], seed: int, starts: list[int]) -> list[np.ndarray]:
    """The draw's positions, each made local to the partition holding it (``starts``: where each
    partition's rows of the class begin among the class's rows)."""
    positions = _draw(kind, args, seed)
    bounds = [*starts, args[0]]
    return [positions[(positions >= a) & (positions < b)] - a for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _ones(path: str, offset: int, lo: int, hi: int) -> None:
    write_at(path, np.ones(hi - lo, dtype="<u4"), offset + 4 * lo)


def _apply(prepared, name, kind: str, cls: str, local: list[np.ndarray], j: int, span: tuple[int, int], path: str,
           offset: int) -> None:
    """Partition ``j``'s multiplicities over its input rows ``span`` (first, last), written in place."""
    if span[0] < 0:
        return
    rows, labels = _train_labels(prepared, name)
    pool = np.sort(rows[labels.astype(str) == cls])
    mult = np.ones(span[1] - span[0] + 1, dtype=np.uint32)
    if kind == "over":
        np.add.at(mult, pool[local[j]] - span[0], 1)
    else:
        mult[pool[local[j]] - span[0]] = 0
    write_at(path, mult.astype("<u4", copy=False), offset + 4 * span[0])


def config_slice(ctx) -> dict:
    cfg = ctx.config.preprocessing.balance
    enabled = cfg.oversample_minority is not None or cfg.undersample_majority is not None
    return {"balance": cfg.model_dump(), "seed": ctx.config.preprocessing.split.seed,
            "label": label_feature(ctx) if enabled else None}


def compute(ctx, out: Path, ingest: Ingested, split: SplitAssignment, missing: MissingStates) -> Statistics:
    cfg = ctx.config.preprocessing.balance
    seed = ctx.config.preprocessing.split.seed
    enabled = cfg.oversample_minority is not None or cfg.undersample_majority is not None
    label = label_feature(ctx) if enabled else None
    stats = Statistics()
    if not enabled:
        Multiplicity.write_info(out, {"enabled": False})
        return stats
    assign = split.assignment()
    states = missing.states()
    parts = frame.partitions(ingest.parts, ctx.npartitions)
    prepared = filled_partitions(parts, ctx.features, assign, states)
    found = dask_run.compute([delayed(_class_counts)(p, label) for p in prepared])
    counts: dict[str, int] = {}
    for partial, _first, _last in found:
        for c, k in partial.items():
            counts[c] = counts.get(c, 0) + k
    for c in sorted(counts):
        stats.counter(f"balance.class_count_before.{c}", counts[c])
    n = len(assign)
    path = Multiplicity.file(out)
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint32, shape=(n,))  # np.save's header
    offset = array.offset
    del array
    dask_run.compute([delayed(_ones)(str(path), offset, lo, hi) for lo, hi in row_chunks(n)])
    after = dict(counts)
    plan = _plan(counts, cfg.oversample_minority, cfg.undersample_majority)
    if plan is not None:
        kind, cls, args = plan
        starts = np.concatenate([[0], np.cumsum([f[0].get(cls, 0) for f in found])[:-1]]).astype(int).tolist()
        local = delayed(_by_partition)(kind, args, seed, starts)  # on a worker: one position per draw
        dask_run.compute([delayed(_apply)(p, label, kind, cls, local, j, (f[1], f[2]), str(path), offset)
                       for j, (p, f) in enumerate(zip(prepared, found, strict=True))])
        after[cls] = counts[cls] + args[1] if kind == "over" else counts[cls] - args[1]
    Multiplicity.write_info(out, {"enabled": True, "label": label})
    for c in sorted(counts):
        stats.counter(f"balance.class_count_after.{c}", after[c])
    return stats


NODE = Node("balance", compute, inputs=("ingest", "split", FILLED), output=Multiplicity, reads=config_slice)
