"""The random split and the sampling computed by Dask tasks over row-number ranges (tasks/split/stage.py,
``random_on_workers``): split.npy's bytes equal ``np.save`` of the in-process ``sample_mask`` +
``random_split`` for any row count, sample, probabilities, task size and histogram width; ``load``'s
``MappedArray`` pickles as its path and reads like the array."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import DataError
from storage.npy import MappedArray
from tasks.config.constants import ROW
from tasks.runtime import dask_run
from tasks.split import stage as split


def in_process(n: int, probabilities, seed: int, ratio: float, size, sample_seed: int) -> np.ndarray:
    keep = split.sample_mask(n, ratio, size, sample_seed)
    assign = np.full(n, -1, dtype=np.int8)
    active = np.flatnonzero(keep)
    assign[active] = split.random_split(active, probabilities, seed)
    return assign


probabilities = st.sampled_from([[0.8, 0.1, 0.1], [0.6, 0.2, 0.2], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5],
                                 [0.34, 0.33, 0.33], [0.5, 0.0, 0.5]])


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 400), probs=probabilities, seed=st.integers(0, 2**31), ratio=st.sampled_from([1.0, 0.5, 0.01]),
       size=st.one_of(st.none(), st.integers(0, 500)), sample_seed=st.integers(0, 99), chunk=st.integers(3, 300),
       bits=st.sampled_from([1, 3, 16]))
def test_split_npy_is_byte_identical_to_the_in_process_split(tmp_path_factory, n, probs, seed, ratio, size,
                                                             sample_seed, chunk, bits):
    tmp = tmp_path_factory.mktemp("s")
    old = dask_run.CHUNK_ROWS, split.BUCKET_BITS
    dask_run.CHUNK_ROWS, split.BUCKET_BITS = chunk, bits  # many tasks; crowded buckets
    try:
        kept, counts = split.random_on_workers(n, probs, seed, ratio, size, sample_seed, tmp / "split.npy")
    finally:
        dask_run.CHUNK_ROWS, split.BUCKET_BITS = old
    expected = in_process(n, probs, seed, ratio, size, sample_seed)
    np.save(tmp / "expected.npy", expected)
    assert (tmp / "split.npy").read_bytes() == (tmp / "expected.npy").read_bytes()
    assert kept == int((expected >= 0).sum())
    assert counts == [int((expected == i).sum()) for i in range(3)]


def test_the_order_statistics_are_exact_at_a_million_rows(tmp_path):
    n = 1_000_003
    kept, counts = split.random_on_workers(n, [0.8, 0.1, 0.1], 11, 0.7, None, 5, tmp_path / "split.npy")
    np.save(tmp_path / "expected.npy", in_process(n, [0.8, 0.1, 0.1], 11, 0.7, None, 5))
    assert (tmp_path / "split.npy").read_bytes() == (tmp_path / "expected.npy").read_bytes()
    assert kept == round(n * 0.7) and sum(counts) == kept


def test_an_assignment_pickles_as_its_path_and_reads_like_the_array(tmp_path):
    array = np.array([0, 1, 2, -1, 0, 0], dtype=np.int8)
    np.save(tmp_path / "split.npy", array)
    handle = MappedArray(tmp_path / "split.npy")
    assert len(pickle.dumps(handle)) < 200
    again = pickle.loads(pickle.dumps(handle))
    for a in (handle, again):
        np.testing.assert_array_equal(np.asarray(a), array)
        np.testing.assert_array_equal(a[np.array([5, 0, 3])], array[[5, 0, 3]])
        np.testing.assert_array_equal(a == 0, array == 0)
        np.testing.assert_array_equal(a >= 0, array >= 0)
        assert len(a) == 6 and a.shape == (6,) and a.dtype == np.int8
    with pytest.raises(TypeError):
        hash(handle)


def key_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    fixed = rng.choice(["train", "0", "validation", "2.0", "test", " Test "], n)
    return pd.DataFrame({ROW: np.arange(n, dtype=np.int64), "f": fixed,
                         "k": pd.array(rng.choice([f"user{i}" for i in range(40)], n), dtype="string")})


@settings(max_examples=20, deadline=None)
@given(n=st.integers(3, 300), kind=st.sampled_from(["fixed", "hash"]), ratio=st.sampled_from([1.0, 0.6]),
       cuts=st.lists(st.integers(1, 299), max_size=5, unique=True), seed=st.integers(0, 50))
def test_fixed_and_hash_splits_per_partition_are_byte_identical(tmp_path_factory, n, kind, ratio, cuts, seed):
    from tasks.config.schema import SplitConfig

    tmp = tmp_path_factory.mktemp("k")
    df = key_frame(n, seed)
    cfg = SplitConfig(type=kind, column="f" if kind == "fixed" else "k", probabilities=[0.6, 0.2, 0.2], seed=seed)
    keep = split.sample_mask(n, ratio, None, 4)
    expected = np.full(n, -1, dtype=np.int8)
    rows = np.flatnonzero(keep)
    values = df[cfg.column][keep].reset_index(drop=True)
    try:
        expected[rows] = split.SPLITTERS[kind](values, rows, cfg, {})
    except DataError as exc:  # a hash split that leaves a split empty: the same error per partition
        with pytest.raises(DataError, match=str(exc).split("(")[0].replace("'", ".")):
            split.rowwise_on_workers([df], n, cfg, ratio, None, 4, tmp / "split.npy")
        return
    np.save(tmp / "expected.npy", expected)
    bounds = [0, *sorted(c for c in cuts if c < n), n]
    parts = [df.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    kept, counts = split.rowwise_on_workers(parts, n, cfg, ratio, None, 4, tmp / "split.npy")
    assert (tmp / "split.npy").read_bytes() == (tmp / "expected.npy").read_bytes()
    assert kept == len(rows) and counts == [int((expected == i).sum()) for i in range(3)]


def test_a_bad_fixed_value_names_its_row(tmp_path):
    from tasks.config.schema import SplitConfig

    df = key_frame(50, 1)
    df.loc[37, "f"] = "holdout"
    cfg = SplitConfig(type="fixed", column="f")
    with pytest.raises(DataError, match=r"row 37, column 'f': fixed split expects .* got 'holdout'"):
        split.rowwise_on_workers([df.iloc[:20], df.iloc[20:]], 50, cfg, 1.0, None, 0, tmp_path / "split.npy")
