"""storage.order: every rank's rows per epoch are disjoint, complete (or a dropped tail under drop_last),
in the same number of batches on every rank, and a function of the settings only (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.order import Order, ranges_to_rows, rank_span


@st.composite
def orders(draw) -> dict:
    shard_rows = draw(st.integers(1, 400))
    return {
        "n": draw(st.integers(0, 3000)),
        "batch_size": draw(st.integers(1, 300)),
        "shuffle": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**32 - 1)),
        "world_size": draw(st.integers(1, 6)),
        "drop_last": draw(st.booleans()),
        "block": draw(st.integers(1, 50)),
        "window": draw(st.none() | st.integers(1, 1000)),
        "shard_rows": shard_rows,
    }


def epoch_rows(kw: dict, epoch: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per rank: (rows in reading order, batch bounds)."""
    out = []
    for rank in range(kw["world_size"]):
        order = Order(rank=rank, **kw)
        rows = order.rows(epoch)
        out.append((rows, order.bounds(len(rows))))
    return out


@settings(max_examples=300, deadline=None, derandomize=True)
@given(orders(), st.integers(0, 5))
def test_ranks_read_disjoint_rows_in_equal_batch_counts(kw, epoch):
    n, world, size = kw["n"], kw["world_size"], kw["batch_size"]
    parts = epoch_rows(kw, epoch)
    k = n // (world * size) if kw["drop_last"] else -(-n // (world * size))
    for rows, bounds in parts:
        assert len(bounds) - 1 == k == Order(**kw).num_batches  # the same count on every rank: no hang
        sizes = np.diff(bounds)
        assert bounds[0] == 0 and bounds[-1] == len(rows) and (sizes >= 0).all()
        if kw["drop_last"]:
            assert (sizes == size).all()
        else:
            assert (sizes[:-1] == size).all() and (sizes[-1:] <= size).all()
        assert rows.dtype == np.int64 and ((rows >= 0) & (rows < n)).all()
    everything = np.concatenate([rows for rows, _ in parts])
    assert len(np.unique(everything)) == len(everything)  # disjoint across ranks, no row twice on one
    if kw["drop_last"]:
        assert len(everything) == world * k * size and n - len(everything) < world * size
    else:
        assert np.array_equal(np.sort(everything), np.arange(n))  # complete: every row once
        last = [int(np.diff(bounds)[-1]) for _, bounds in parts if len(bounds) > 1]
        assert not last or max(last) - min(last) <= 1  # the tail is shared out evenly


@settings(max_examples=150, deadline=None, derandomize=True)
@given(orders(), st.integers(0, 5))
def test_the_order_is_a_function_of_its_settings(kw, epoch):
    a = epoch_rows(kw, epoch)
    b = epoch_rows(dict(kw), epoch)
    for (ra, ba), (rb, bb) in zip(a, b, strict=True):
        assert np.array_equal(ra, rb) and np.array_equal(ba, bb)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(orders(), st.integers(0, 5))
def test_the_shard_aware_order_keeps_a_rank_on_its_own_shards(kw, epoch):
    """Windows are shuffled within the rank's part of the shard sequence: a rank touches the shards of its
    span(s) only, a run of consecutive shards of that epoch's shard permutation, and no batch straddles
    two windows."""
    if kw["window"] is None:
        kw["window"] = 1
    shard_rows = kw["shard_rows"]
    for rank in range(kw["world_size"]):
        order = Order(rank=rank, **kw)
        assert order.window % order.batch_size == 0
        rows = order.rows(epoch)
        start, stop = rank_span(kw["n"], kw["world_size"], rank, kw["batch_size"], kw["drop_last"])
        plain = order.sequence(epoch)[start:stop]
        starts = order.windows(len(rows))
        for a, b in zip(starts[:-1], starts[1:], strict=True):  # each window a permutation of the plain window
            assert np.array_equal(np.sort(rows[a:b]), np.sort(plain[a:b]))
        shards = np.unique(rows // shard_rows)
        # its span's shards: two of them partly, and the split's last (short) shard may sit anywhere in it
        assert len(shards) <= -(-(stop - start) // shard_rows) + 2


def test_a_small_case_by_hand():
    """10 rows, 3 ranks, batches of 2: 2 batches per rank; the 4 rows left after a full batch each are
    shared out 1, 1, 2."""
    got = [Order(10, 2, shuffle=False, rank=r, world_size=3).rows(0).tolist() for r in range(3)]
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert Order(10, 2, shuffle=False, rank=2, world_size=3).bounds().tolist() == [0, 2, 4]
    dropped = [Order(10, 2, shuffle=False, rank=r, world_size=3, drop_last=True).rows(0).tolist() for r in range(3)]
    assert dropped == [[0, 1], [2, 3], [4, 5]]
    # fewer tail rows than ranks: two ranks get an empty last batch, nothing is repeated
    assert [Order(7, 2, shuffle=False, rank=r, world_size=3).bounds().tolist() for r in range(3)] == \
        [[0, 2, 2], [0, 2, 2], [0, 2, 3]]


def test_epochs_and_seeds_change_the_order_and_shards_move_between_ranks():
    kw = {"n": 10_000, "batch_size": 100, "world_size": 2, "shard_rows": 500, "window": 1000}
    a, b = Order(rank=0, seed=1, **kw), Order(rank=0, seed=2, **kw)
    assert not np.array_equal(a.rows(0), a.rows(1)) and not np.array_equal(a.rows(0), b.rows(0))
    shards = [set(np.unique(a.rows(e) // 500).tolist()) for e in range(4)]
    assert all(len(s) == 10 for s in shards)  # half the 20 shards, whole (the spans end on shard edges)
    assert len(set(map(frozenset, shards))) > 1  # assigned to ranks per epoch by the seed
    whole = Order(rank=0, seed=1, n=10_000, batch_size=100, world_size=2)
    assert len(np.unique(whole.rows(0) // 500)) == 20  # the whole-split shuffle touches every shard


def test_ranges_to_rows():
    assert ranges_to_rows(np.array([5, 0, 9]), np.array([2, 3, 0])).tolist() == [5, 6, 0, 1, 2]
    assert ranges_to_rows(np.array([3]), np.array([0])).tolist() == []


@pytest.mark.parametrize("block", [1, 7])
def test_input_order_without_shuffle_is_the_same_in_both_orders(block):
    for rank in range(3):
        plain = Order(1000, 64, shuffle=False, rank=rank, world_size=3, block=block)
        shards = Order(1000, 64, shuffle=False, rank=rank, world_size=3, block=block, window=128, shard_rows=100)
        assert np.array_equal(plain.rows(4), shards.rows(4))
