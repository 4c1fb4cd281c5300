"""Balancing computed by partition (tasks/balance/stage.py): per-partition class counts, one seeded draw
bucketed by partition, ones written by chunks, each partition's multiplicities written in place: the
bytes of the single-array computation (the stage's earlier code, restated below) for any partitioning,
dropped rows and sampled rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.balance import stage as balance
from tasks.config.constants import ROW
from tasks.runtime import dask_run, frame
from tasks.runtime.frame import Prepared


def single_array(n, rows, labels, oversample, undersample, seed) -> np.ndarray:
    """The multiplicities as the stage computed them in one process before."""
    classes, counts = np.unique(labels.astype(str), return_counts=True)
    mult = np.ones(n, dtype=np.uint32)
    if len(classes) >= 2:
        order = sorted(range(len(classes)), key=lambda i: (counts[i], classes[i]))
        minority, majority = order[0], order[-1]
        rng = np.random.default_rng(seed)
        if oversample is not None:
            target = int(counts[majority] * oversample)
            pool = np.sort(rows[labels.astype(str) == classes[minority]])
            extra = target - len(pool)
            if extra > 0:
                np.add.at(mult, pool[rng.integers(0, len(pool), size=extra)], 1)
        else:
            target = int(counts[minority] / undersample)
            pool = np.sort(rows[labels.astype(str) == classes[majority]])
            if target < len(pool):
                mult[pool[rng.permutation(len(pool))[: len(pool) - target]]] = 0
    return mult


def partitioned(prepared: list[Prepared], n: int, oversample, undersample, seed, path) -> dict[str, int]:
    """The stage's partitioned steps, run in order on prepared partitions (as its compute does)."""
    found = [balance._class_counts(p, "y") for p in prepared]
    counts: dict[str, int] = {}
    for partial, _a, _b in found:
        for c, k in partial.items():
            counts[c] = counts.get(c, 0) + k
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint32, shape=(n,))
    offset = array.offset
    del array
    for lo, hi in dask_run.row_chunks(n):
        balance._ones(str(path), offset, lo, hi)
    after = dict(counts)
    plan = balance._plan(counts, oversample, undersample)
    if plan is not None:
        kind, cls, args = plan
        starts = np.concatenate([[0], np.cumsum([f[0].get(cls, 0) for f in found])[:-1]]).astype(int).tolist()
        local = balance._by_partition(kind, args, seed, starts)
        for j, (p, f) in enumerate(zip(prepared, found, strict=True)):
            balance._apply(p, "y", kind, cls, local, j, (f[1], f[2]), str(path), offset)
        after[cls] = counts[cls] + args[1] if kind == "over" else counts[cls] - args[1]
    return after


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), cuts=st.lists(st.integers(1, 299), max_size=6, unique=True),
       minority=st.floats(0.02, 0.6), mode=st.sampled_from(["over", "under"]), ratio=st.floats(0.3, 1.5),
       seed=st.integers(0, 1000), dropped=st.floats(0, 0.3))
def test_multiplicities_are_the_single_arrays_bytes_for_any_partitioning(tmp_path_factory, n, cuts, minority, mode,
                                                                        ratio, seed, dropped):
    rng = np.random.default_rng(seed)
    labels = np.where(rng.random(n) < minority, "fraud", "ok").astype(object)
    labels[rng.random(n) < 0.02] = "third"
    kept = rng.random(n) >= dropped  # rows a drop_row feature or the sampling took out
    assign = rng.choice([0, 0, 0, 1, 2], n).astype(np.int8)
    df = pd.DataFrame({"y": pd.array(labels, dtype="string"), ROW: np.arange(n), frame.SPLIT: assign})
    bounds = [0, *sorted(c for c in cuts if c < n), n]
    prepared = [Prepared(df.iloc[a:b].loc[kept[a:b]].reset_index(drop=True)) for a, b in
                zip(bounds[:-1], bounds[1:], strict=True)]
    oversample, undersample = (ratio, None) if mode == "over" else (None, min(ratio, 1.0))
    train = kept & (assign == 0)
    expected = single_array(n, np.flatnonzero(train), labels[train], oversample, undersample, seed)
    tmp = tmp_path_factory.mktemp("b")
    np.save(tmp / "expected.npy", expected)
    after = partitioned(prepared, n, oversample, undersample, seed, tmp / "mult.npy")
    assert (tmp / "mult.npy").read_bytes() == (tmp / "expected.npy").read_bytes()
    for c, k in after.items():
        assert k == int(expected[np.flatnonzero(train)[labels[train].astype(str) == c]].sum())
