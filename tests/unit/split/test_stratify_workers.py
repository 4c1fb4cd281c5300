"""The stratified split on the workers (tasks.split.stratify.stratify_on_workers) writes the ``split.npy`` that the
definition (``stratify_split`` over one process's arrays, after ``sample_mask``) gives, for any
partitioning, sampling, probabilities and class values; a class of a target that gets no training row
is the same error."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import DataError
from tasks.config.constants import ROW
from tasks.split import stage as split
from tasks.split.stratify import stratify_on_workers, stratify_split

values = st.one_of(st.sampled_from(["a", "b", "c", " a", "1", None]), st.sampled_from([1.0, 2.0, 1.5, np.nan]))
probabilities = st.sampled_from([[0.8, 0.1, 0.1], [0.6, 0.2, 0.2], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])


def _definition(column: pd.Series, n: int, probs, seed: int, ratio: float, size, sample_seed: int, target=None):
    keep = split.sample_mask(n, ratio, size, sample_seed)
    assign = np.full(n, -1, dtype=np.int8)
    rows = np.flatnonzero(keep)
    assign[rows] = stratify_split(column[keep].reset_index(drop=True), rows, probs, seed, target, "y")
    return assign


def _on_workers(tmp_path, column: pd.Series, n: int, probs, seed: int, ratio: float, size, sample_seed: int, cuts,
                target=None):
    frame = pd.DataFrame({"y": column, ROW: np.arange(n, dtype=np.int64)})
    bounds = [0, *sorted({min(c, n) for c in cuts}), n]
    parts = [frame.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
    keep, sample = split._sample_on_workers(n, ratio, size, sample_seed)
    path = tmp_path / "split.npy"
    counts = stratify_on_workers(parts, n, SimpleNamespace(column="y", probabilities=probs, seed=seed), sample, path,
                                 target)
    assign = np.load(path)
    assert counts == [int((assign == i).sum()) for i in range(3)] and sum(counts) == keep
    return assign


@settings(max_examples=120, deadline=None)
@given(st.lists(values, min_size=1, max_size=80), probabilities, st.integers(0, 2**31), st.lists(st.integers(0, 80),
       max_size=5), st.sampled_from([(1.0, None), (0.5, None), (1.0, 7)]), st.booleans())
def test_workers_write_the_definitions_split(tmp_path_factory, column, probs, seed, cuts, sampling, floats):
    series = pd.Series(column, dtype=object if not floats else None)
    n = len(series)
    ratio, size = sampling
    expected = _definition(series, n, probs, seed, ratio, size, 3)
    got = _on_workers(tmp_path_factory.mktemp("s"), series, n, probs, seed, ratio, size, 3, cuts)
    assert got.tolist() == expected.tolist()


def test_many_rows_select_the_cut_hashes_exactly(tmp_path, monkeypatch):
    """Enough rows per class that the cuts fall inside histogram buckets holding many hashes (few bits)."""
    import tasks.split.stratify as stratify

    monkeypatch.setattr(stratify, "HISTOGRAM_CELLS", 64)  # 5 classes x 8 buckets of ~600 hashes each
    rng = np.random.default_rng(4)
    column = pd.Series(rng.choice(["x", "y", "z", "w", None], 25_000, p=[0.5, 0.3, 0.1, 0.09, 0.01]), dtype=object)
    expected = _definition(column, len(column), [0.7, 0.2, 0.1], 11, 0.9, None, 5)
    got = _on_workers(tmp_path, column, len(column), [0.7, 0.2, 0.1], 11, 0.9, None, 5, [3000, 12_345, 20_000])
    assert got.tolist() == expected.tolist()


def test_a_target_class_without_a_training_row_is_the_same_error(tmp_path):
    column = pd.Series(["a"] * 10 + ["b"] * 2, dtype=object)  # b: 0.1 x 2 rows rounds to none in train
    with pytest.raises(DataError) as definition:
        _definition(column, 12, [0.1, 0.45, 0.45], 1, 1.0, None, 0, target="y")
    with pytest.raises(DataError) as workers:
        _on_workers(tmp_path, column, 12, [0.1, 0.45, 0.45], 1, 1.0, None, 0, [4], target="y")
    assert str(workers.value) == str(definition.value) and "class 'b'" in str(workers.value)
