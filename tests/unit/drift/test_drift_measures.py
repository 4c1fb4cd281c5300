"""Drift measures (tasks/drift/measures.py) on constructed data with known values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.drift import measures
from tasks.runtime.statistics import Histogram


def test_psi_known_value():
    want = 0.4 * math.log(0.9 / 0.5) + (-0.4) * math.log(0.1 / 0.5)
    assert measures.psi([50, 50], [90, 10]) == pytest.approx(want)
    assert measures.psi([50, 50], [5, 5]) == 0.0


def test_number_shifted_by_three_std_fails_psi():
    rng = np.random.default_rng(0)
    train = rng.normal(0.0, 1.0, 20_000)
    ref = measures.number_reference("x", train)
    assert len(ref.starts) == 9 and sum(ref.counts) == 20_000
    assert np.allclose(np.asarray(ref.counts) / 20_000, 0.1, atol=0.002)  # deciles: 10% per bin
    same = measures.psi(ref.counts, measures.number_counts(ref.starts, rng.normal(0.0, 1.0, 5_000)))
    shifted = measures.psi(ref.counts, measures.number_counts(ref.starts, rng.normal(3.0, 1.0, 5_000)))
    assert same < 0.02
    assert shifted > 0.25


def test_linf_known_value_and_tail():
    ref, tail = measures.category_reference("c", np.array([10, 30, 60]))
    assert measures.linf(ref, tail.count, np.array([10, 60, 30])) == pytest.approx(0.3)
    # <UNK> (skip) is the OOV rate's: 40% unseen values move only the known ids' frequencies
    assert measures.linf(ref, tail.count, np.array([50, 18, 32]), skip=0) == pytest.approx(0.28)
    # past TOP_IDS ids: the reference's pooled rest is spread evenly over its ids
    counts = np.ones(measures.TOP_IDS + 100, dtype=np.int64)
    ref, tail = measures.category_reference("c", counts)
    assert tail.count == 100 and ref.counts[-1] == 100
    assert measures.linf(ref, tail.count, counts) == pytest.approx(0.0)


def test_forty_percent_unseen_categories_fail_oov_rate():
    rng = np.random.default_rng(1)
    train = rng.integers(1, 5, 10_000)  # ids 1..4, no <UNK> (0)
    ref, _tail = measures.category_reference("c", np.bincount(train, minlength=5))
    new = np.where(rng.random(10_000) < 0.4, 0, rng.integers(1, 5, 10_000))
    oov = measures.oov_rate(ref, 0, np.bincount(new, minlength=5))
    assert oov == pytest.approx(0.4, abs=0.02)
    assert measures.status(oov, 0.05, 0.2) == ("fail", 0.2)
    assert measures.status(0.07, 0.05, 0.2) == ("warn", 0.05)
    assert measures.status(0.01, 0.05, 0.2) == ("ok", 0.05)


def test_token_counts():
    multi_hot = np.array([[0, 1, 1], [0, 0, 1]], dtype=np.uint8)
    assert measures.id_counts("set", multi_hot, 3).tolist() == [0, 1, 2]
    ids = np.array([[2, 1, 0, 0], [3, 3, 1, 0]])
    assert measures.id_counts("sequence", ids, 4).tolist() == [0, 2, 1, 2]  # <PAD> (0) not counted


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=2, max_size=12), st.lists(st.integers(0, 1000), min_size=2, max_size=12))
def test_psi_and_linf_bounds(a, b):
    n = min(len(a), len(b))
    a, b = np.array(a[:n]), np.array(b[:n])
    if a.sum() and b.sum():
        assert measures.psi(a, b) >= 0.0
        assert measures.psi(a, a) == pytest.approx(0.0, abs=1e-12)
    ref = Histogram("c", [i + 0.5 for i in range(n - 1)], a.tolist())
    distance = measures.linf(ref, 0, b)
    assert 0.0 <= distance <= 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=60),
       st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=9))
def test_float32_counts_equal_the_float64_comparison(values, edges):
    edges = np.unique(np.asarray(edges, dtype=np.float64))
    v32 = np.asarray(values + [float("nan")], dtype=np.float32)
    want = np.bincount(np.searchsorted(edges, v32[:-1].astype(np.float64), side="right"), minlength=len(edges) + 1)
    assert measures.number_counts(edges, v32).tolist() == want.tolist()


def test_number_deciles_from_a_row_sample_do_not_depend_on_the_partitioning(monkeypatch):
    from types import SimpleNamespace

    from tasks.drift import stage

    monkeypatch.setattr(stage, "NUMBER_SAMPLE", 1000)
    rng = np.random.default_rng(3)
    x = rng.normal(size=10_007).astype(np.float32)
    ctx = SimpleNamespace(features=[SimpleNamespace(name="x")])
    metadata = {"x": {"type": "number"}}

    def reference(bounds):
        parts = [{"x": x[lo:hi]} for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        return stage.references(ctx, metadata, parts, len(x)).to_json()

    one = reference([0, len(x)])
    assert one == reference([0, 3, 4000, 4001, len(x)]) == reference([0, 5000, len(x)])
    assert sum(one["drift.reference.x"]["counts"]) == len(x[::11])  # step = ceil(10007 / 1000)


def test_an_empty_part_column_reads_as_an_empty_array():
    import pyarrow as pa

    from tasks.drift.stage import _numpy

    assert _numpy(pa.chunked_array([], type=pa.float32())).shape == (0,)
    assert _numpy(pa.chunked_array([pa.array([1, 2], pa.int32()), pa.array([3], pa.int32())])).tolist() == [1, 2, 3]


def test_references_and_counts_do_not_depend_on_how_the_parts_are_grouped(tmp_path, monkeypatch):
    """Each drift task reads a group of encoded parts (``GROUP_ROWS`` rows): counts and the row sample are the
    same whether every part is its own group, parts are grouped, or the split is one part."""
    import pyarrow as pa

    from tasks.drift import stage
    from tasks.runtime.frame import write_ipc

    monkeypatch.setattr(stage, "NUMBER_SAMPLE", 500)
    rng = np.random.default_rng(4)
    n = 5_003
    ids = np.minimum(rng.zipf(1.3, n), 400).astype(np.int32)  # past TOP_IDS: a tail
    x = rng.normal(size=n).astype(np.float32)
    spec = [("c", "category", 401), ("x", "number", 0)]

    def write(name, bounds):
        paths = []
        for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            path = tmp_path / name / f"part-{i:05d}.arrow"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_ipc(pa.table({"c": ids[lo:hi], "x": x[lo:hi]}), path)
            paths.append(path)
        return paths

    def measured(paths, group_rows):
        monkeypatch.setattr(stage, "GROUP_ROWS", group_rows)
        reference = stage._split_references(spec, paths, n)
        counts = stage._split_counts(spec, reference, paths)
        return reference.to_json(), {k: v.tolist() for k, v in counts.items()}

    whole = measured(write("one", [0, n]), 1 << 22)
    parts = write("many", [0, 7, 1000, 1001, 2500, 4000, n])
    assert measured(parts, 1) == measured(parts, 1500) == measured(parts, 1 << 22) == whole
    monkeypatch.setattr(stage, "GROUP_ROWS", 1)
    assert len(stage._groups(parts)) == 6 and [o for _g, o in stage._groups(parts)] == [0, 7, 1000, 1001, 2500, 4000]
    monkeypatch.setattr(stage, "GROUP_ROWS", 1500)
    assert [len(g) for g, _o in stage._groups(parts)] == [4, 1, 1]
    assert whole[1]["c"] == np.bincount(ids, minlength=401).tolist()
