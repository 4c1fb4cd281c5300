"""Uniqueness of dense integer keys (expectations.unique_kernel.ValuesToBeUnique): a partition's distinct keys in
a narrow range go to the merge as a bitmap (the encoded gate's ``__row__``: one bit a row, not two int64
copies, in the flow process); any repeat makes the runner rescan with the exact partials. Whatever the
route, the result is the exact one."""

from __future__ import annotations

import pickle

import dask
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expectations import kernel_base, runner, unique_kernel

SUITE = {"name": "u", "meta": {"generated_by": "prepflow"},
         "expectations": [{"type": "expect_column_values_to_be_unique", "kwargs": {"column": "k"},
                           "meta": {"generated_by": "prepflow"}},
                          {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "k", "mostly": 0.5},
                           "meta": {"generated_by": "prepflow"}}]}


def _parts(keys: list, cuts: list[int], nullable: bool) -> list[pd.DataFrame]:
    col = pd.array(keys, dtype="Int64") if nullable else np.asarray(keys, dtype=np.int64)
    frame = pd.DataFrame({"k": col})
    bounds = [0, *sorted(min(c, len(keys)) for c in cuts), len(keys)]
    return [frame.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a] or [frame]


def _run(parts: list[pd.DataFrame]) -> list[dict]:
    [entry] = runner.run([("generated:encoded", SUITE)], parts, ["k"], scheduler="sync")
    return entry["results"]


def _exact(parts, monkeypatch) -> list[dict]:
    with monkeypatch.context() as m:
        m.setattr(unique_kernel.ValuesToBeUnique, "exact", True)
        return _run(parts)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.integers(-40, 40), st.integers(-2**62, 2**62)), min_size=1, max_size=60),
       st.lists(st.integers(0, 60), max_size=4), st.booleans(), st.booleans())
def test_every_route_gives_the_exact_result(keys, cuts, nullable, with_nulls):
    if nullable and with_nulls:
        keys = [None if i % 7 == 3 else k for i, k in enumerate(keys)]
    parts = _parts(keys, cuts, nullable)
    mp = pytest.MonkeyPatch()
    try:
        assert _run(parts) == _exact(parts, mp)
    finally:
        mp.undo()


def test_dense_distinct_keys_go_as_bitmaps_and_a_repeat_across_partitions_is_found(monkeypatch):
    parts = _parts(list(range(1000)), [250, 500, 750], nullable=False)
    check = unique_kernel.ValuesToBeUnique({"column": "k"}, ["k"])
    assert all("bitmap" in check.partial(p) for p in parts)
    assert [r["success"] for r in _run(parts)] == [True, True]
    repeated = _parts([*range(500), 3, *range(501, 1000)], [250, 500, 750], nullable=False)  # 3 twice, apart
    assert all("bitmap" in check.partial(p) for p in repeated)  # each partition alone is distinct
    found = _run(repeated)
    assert found == _exact(repeated, monkeypatch)
    assert not found[0]["success"] and found[0]["result"]["unexpected_count"] == 2
    assert found[0]["result"]["partial_unexpected_index_list"] == [3, 500]


def test_wide_or_repeating_keys_take_the_exact_partial():
    check = unique_kernel.ValuesToBeUnique({"column": "k"}, ["k"])
    assert "bitmap" not in check.partial(pd.DataFrame({"k": np.array([0, 10**9], np.int64)}))
    assert "bitmap" not in check.partial(pd.DataFrame({"k": np.array([1, 2, 2], np.int64)}))
    assert "bitmap" not in check.partial(pd.DataFrame({"k": np.array([1.0, 2.0])}))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=80), st.lists(st.integers(0, 80), max_size=6),
       st.randoms(use_true_random=False), st.integers(2, 5))
def test_combined_on_the_workers_in_any_order_and_grouping_gives_the_flat_merge(keys, cuts, rnd, fan_in):
    """``leaf``/``combine``/``finish`` (the runner's tree) over partitions taken in any order and any
    grouping give the exact result: at once when no key repeats, else after the partitions flag the rows of
    the repeated keys the blocks found; they never ask for the exact rescan."""
    parts = _parts(keys, cuts, nullable=False)
    check = unique_kernel.ValuesToBeUnique({"column": "k"}, ["k"])
    states = [check.leaf(check.partial(p), i) for i, p in enumerate(parts)]
    rnd.shuffle(states)
    while len(states) > 1:
        states = [check.combine(*states[i:i + fan_in]) for i in range(0, len(states), fan_in)]
    combined = check.merge(check.finish(states[0]))
    exact = unique_kernel.ValuesToBeUnique({"column": "k"}, ["k"])
    exact.exact = True
    want = exact.merge([exact.partial(p) for p in parts])
    assert combined is not kernel_base.RESCAN
    if isinstance(combined, kernel_base.Flag):
        assert want["result"]["unexpected_count"] > 0
        assert combined.keys.tolist() == sorted({k for k in keys if keys.count(k) > 1})
        combined = check.merge_flagged(combined, [check.flag(p, combined.keys) for p in parts])
    assert combined == want


def _split_chunks(n: int, seed: int) -> tuple[list[pd.DataFrame], list[int]]:
    """Chunks shaped like the encoded gate's: input rows 0..n-1 assigned to 3 splits (0.8/0.1/0.1); each
    split's rows in consecutive chunks of 32,768 of its rows, training first; and the order the encoded gate
    gives the tree (by the first input row a chunk holds)."""
    split = np.random.default_rng(seed).choice(3, n, p=[0.8, 0.1, 0.1])
    chunks = []
    for s in range(3):
        rows = np.flatnonzero(split == s)
        chunks += [rows[i:i + 32768] for i in range(0, len(rows), 32768)]
    parts = [pd.DataFrame({"k": c}) for c in chunks]
    return parts, sorted(range(len(parts)), key=lambda i: (int(chunks[i][0]), i))


def test_the_flow_receives_a_summary_and_the_tree_order_keeps_the_workers_states_small(monkeypatch):
    n = 1 << 22
    parts, order = _split_chunks(n, seed=3)
    check = unique_kernel.ValuesToBeUnique({"column": "k"}, ["k"])
    bitmap_bytes = sum(check.partial(p)["bitmap"].nbytes for p in parts)
    assert bitmap_bytes > 3 * n // 8 * 0.9  # ~3 bits a row: what the flow used to receive
    received, largest = [], []

    def scheduler(dsk, keys, **kwargs):
        out = dask.get(dsk, keys, **kwargs)
        received.append(len(pickle.dumps(out)))
        return out

    union = unique_kernel.BitBlocks.union

    def recording(self, *others):
        out = union(self, *others)
        largest.append(out.nbytes())
        return out

    monkeypatch.setattr(unique_kernel.BitBlocks, "union", recording)
    for tree_order in (None, order):
        received.clear()
        largest.clear()
        [entry] = runner.run([("generated:encoded", SUITE)], parts, ["k"], scheduler=scheduler, order=tree_order)
        assert [r["success"] for r in entry["results"]] == [True, True]
        assert received and max(received) < 4096  # counts and a flag, not the ~1.5 MB of bitmaps
        if tree_order is None:
            in_partition_order = max(largest)
    # in partition order the training chunks' union holds ~n/8 bytes of bits before the validation and
    # test chunks complete its blocks; gathered by input rows, only the blocks at the frontier are open
    assert in_partition_order >= n // 8 // 2
    assert max(largest) <= 8 * unique_kernel.BitBlocks.BYTES  # 96 KiB here
    assert 3 * max(largest) < in_partition_order  # 384 KiB here


def _recording(computes: list):
    """A Dask scheduler that records the pickled size of what each compute returns to this process."""
    def scheduler(dsk, keys, **kwargs):
        out = dask.get(dsk, keys, **kwargs)
        computes.append(len(pickle.dumps(out)))
        return out
    return scheduler


def test_repeats_found_on_the_workers_are_flagged_there_and_reported_exactly(monkeypatch):
    parts, order = _split_chunks(1 << 18, seed=5)
    last = parts[-1]["k"].to_numpy().copy()
    last[0] = int(parts[0]["k"].iloc[5])  # a test row that is also a training row
    last[1] = last[2]  # and a repeat inside one chunk
    parts[-1] = pd.DataFrame({"k": last}, index=parts[-1].index)
    computes = []
    [entry] = runner.run([("generated:encoded", SUITE)], parts, ["k"], scheduler=_recording(computes), order=order)
    assert entry["results"] == _exact(parts, monkeypatch)
    assert entry["results"][0]["result"]["unexpected_count"] == 4
    # the gather, then the partitions' flagged rows: never the 2^18 keys (a rescan returns ~5 MB here)
    assert len(computes) == 2 and max(computes) < 16384


def test_past_max_repeated_the_exact_rescan_still_gives_the_exact_result(monkeypatch):
    monkeypatch.setattr(unique_kernel.BitBlocks, "MAX_REPEATED", 3)
    parts = _parts([*range(100), *range(10)], [50, 100], nullable=False)  # 10 keys twice
    computes = []
    [entry] = runner.run([("generated:encoded", SUITE)], parts, ["k"], scheduler=_recording(computes))
    assert entry["results"] == _exact(parts, monkeypatch)
    assert entry["results"][0]["result"]["unexpected_count"] == 20
    assert len(computes) == 2  # the gather, then the exact rescan


def test_the_encoded_gate_gives_the_tree_its_chunks_by_first_input_partition(monkeypatch, tmp_path):
    """``tasks.validate.views``: the training, validation and test chunks of the same input partitions meet
    early in the runner's tree (``encoded_order``), while the chunks stay in encoded order."""
    from tasks.validate import stage as validate
    from tasks.validate import views

    def piece(split: str, part: int, split_id: int, offset: int, n: int) -> list:
        path = tmp_path / split / f"part-{part:05d}.arrow"
        return [str(path), str(path.with_name(f"rows-{part:05d}.npy")), split_id, offset, n]

    chunks = [[piece("train", 0, 0, 0, 8), piece("train", 1, 0, 8, 8)], [piece("train", 2, 0, 16, 8)],
              [piece("train", 3, 0, 24, 8)], [piece("validation", p, 1, 32 + p, 1) for p in range(4)],
              [piece("test", 1, 2, 36, 1), piece("test", 3, 2, 37, 1)]]
    assert views.encoded_order(chunks) == [0, 3, 4, 1, 2]
    seen = {}

    def run(named, parts, columns, scheduler=None, order=None):
        seen["order"], seen["parts"] = order, len(parts)
        return []

    monkeypatch.setattr(validate.runner, "run", run)
    validate.validate_view([("generated:encoded", SUITE)], "encoded", [chunks, {"k": False}])
    assert seen == {"order": [0, 3, 4, 1, 2], "parts": 5}


def test_keys_too_wide_for_a_bitmap_are_combined_as_blocks_without_a_rescan(monkeypatch):
    """A chunk with the last training rows and the first validation rows (its keys at both ends of the input
    rows) has no bitmap; its keys still go to the workers' blocks, so nothing is rescanned into the flow."""
    n = 1 << 20
    wide = pd.DataFrame({"k": np.r_[np.arange(0, 4096), np.arange(n - 4096, n)]})
    dense = [pd.DataFrame({"k": np.arange(a, a + 8192)}) for a in range(4096, n - 4096, 8192)]
    parts = [*dense, wide]
    check = unique_kernel.ValuesToBeUnique({"column": "k"}, ["k"])
    assert "bitmap" not in check.partial(wide) and all("bitmap" in check.partial(p) for p in dense)
    computes = []

    def scheduler(dsk, keys, **kwargs):
        computes.append(len(pickle.dumps(out := dask.get(dsk, keys, **kwargs))))
        return out

    [entry] = runner.run([("generated:encoded", SUITE)], parts, ["k"], scheduler=scheduler)
    assert [r["success"] for r in entry["results"]] == [True, True]
    assert len(computes) == 1 and computes[0] < 4096  # no rescan, no keys in this process
    dup = [*dense, wide.assign(k=np.r_[wide["k"].to_numpy()[:-1], 5000])]  # 5000: also in the first dense chunk
    [found] = runner.run([("generated:encoded", SUITE)], dup, ["k"], scheduler="sync")
    assert found["results"] == _exact(dup, monkeypatch)
    assert found["results"][0]["result"]["unexpected_count"] == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-2**40, 2**40), max_size=200, unique=True))
def test_blocks_of_sorted_keys_hold_exactly_those_keys(keys):
    keys = np.sort(np.asarray(keys, dtype=np.int64))
    blocks = unique_kernel.BitBlocks.of_keys(keys)
    if blocks is None:  # too sparse: more than MAX_BYTES_PER_KEY a key and more than MIN_LIMIT
        assert len(np.unique(keys // unique_kernel.BitBlocks.BITS)) * unique_kernel.BitBlocks.BYTES \
            > max(unique_kernel.BitBlocks.MAX_BYTES_PER_KEY * len(keys), unique_kernel.BitBlocks.MIN_LIMIT)
        return
    held = []
    for number, bits in blocks.blocks.items():
        bits = np.full(unique_kernel.BitBlocks.BYTES, 0xFF, np.uint8) if bits is None else bits
        held += (number * unique_kernel.BitBlocks.BITS + np.flatnonzero(np.unpackbits(bits, bitorder="little"))).tolist()
    assert sorted(held) == keys.tolist()


def test_an_order_that_is_not_a_permutation_of_the_partitions_is_refused():
    parts = _parts(list(range(10)), [5], nullable=False)
    with pytest.raises(ValueError, match="each of the 2 partitions once"):
        runner.run([("generated:encoded", SUITE)], parts, ["k"], scheduler="sync", order=[0])
