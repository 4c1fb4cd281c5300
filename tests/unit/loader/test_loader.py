"""storage.loader: batches of tensors per channel from either format, seeded shuffling, sharding."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pandas as pd
import pytest
import torch

from storage.artifact import Artifact
from storage.loader import as_index, plan_channels, prefetched
from storage.order import Order
from storage.torch_dataset import ArtifactDataset
from tests.helpers import run, write_csv

N = 1000
CONFIG = {
    "input_features": [
        {"name": "rid", "type": "number", "preprocessing": {"normalization": "none"}},  # the row's id
        {"name": "x", "type": "number"},
        {"name": "c", "type": "category"},
        {"name": "d", "type": "category"},
        {"name": "b", "type": "binary"},
    ],
    "output_features": [{"name": "y", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.8, 0.1, 0.1], "seed": 1}},
    "publish": {"formats": ["parquet", "npy"], "shard_rows": 300, "row_group_rows": 64},
}


@pytest.fixture(scope="module")
def art(tmp_path_factory) -> Artifact:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"rid": np.arange(N), "x": rng.normal(size=N), "c": rng.choice(list("abcde"), N),
                       "d": rng.choice(list("uvw"), N), "b": rng.choice(["yes", "no"], N),
                       "y": rng.integers(0, 2, N)})
    tmp = tmp_path_factory.mktemp("loader")
    result = run(CONFIG, write_csv(df, tmp / "data.csv"), tmp, npartitions=3)
    return Artifact.open(result.artifact["artifact_path"])


def rids(batches) -> np.ndarray:
    return np.concatenate([b["numerical"][:, 0].numpy() for b in batches]).astype(np.int64)


def test_channels_are_stacked_from_the_published_columns(art):
    ref = art.read_split("train")
    batches = list(art.batches("train", batch_size=128, shuffle=False))
    assert len(batches) == len(art.batches("train", batch_size=128)) == -(-art.num_rows("train") // 128)
    num = torch.cat([b["numerical"] for b in batches])
    cat = torch.cat([b["categorical"] for b in batches])
    label = torch.cat([b["label"] for b in batches])
    # numerical = rid, x, b (binary: bool -> float32), in channel_spec order
    assert art.feature_spec["channel_spec"]["numerical"] == ["rid", "x", "b"]
    assert num.dtype == torch.float32 and num.shape == (art.num_rows("train"), 3)
    assert np.array_equal(num[:, 1].numpy(), ref["x"])
    assert np.array_equal(num[:, 2].numpy(), ref["b"].astype(np.float32))
    assert cat.dtype == torch.int32 and np.array_equal(cat.numpy(), np.stack([ref["c"], ref["d"]], axis=1))
    assert label.dtype == torch.bool and label.shape == (art.num_rows("train"),)
    assert np.array_equal(label.numpy(), ref["y"])


def test_parquet_and_npy_give_the_same_batches(art):
    a = list(art.batches("validation", batch_size=16, shuffle=True, seed=3, prefer="parquet"))
    b = list(art.batches("validation", batch_size=16, shuffle=True, seed=3, prefer="npy"))
    assert art.split_columns("validation", "parquet").format == "parquet"
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


@pytest.mark.parametrize("block, min_run", [(1, 4096), (32, 4096), (32, 16)])  # min_run 16: copies per run
def test_shuffle_is_seeded_per_epoch_and_covers_every_row_once(art, block, min_run, monkeypatch):
    monkeypatch.setattr("storage.loader.MIN_RUN", min_run)
    n = art.num_rows("train")
    first = rids(art.batches("train", batch_size=100, seed=5, epoch=0, shuffle_block=block))
    again = rids(art.batches("train", batch_size=100, seed=5, epoch=0, shuffle_block=block))
    other = rids(art.batches("train", batch_size=100, seed=5, epoch=1, shuffle_block=block))
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)
    ref = np.sort(art.read_split("train")["rid"].astype(np.int64))
    assert np.array_equal(np.sort(first), ref) and np.array_equal(np.sort(other), ref)
    assert len(first) == n
    in_order = rids(art.batches("train", batch_size=100, shuffle=False))
    assert np.array_equal(in_order, art.read_split("train")["rid"].astype(np.int64))


def test_set_epoch_changes_the_order(art):
    loader = art.batches("train", batch_size=256, seed=2)
    a = rids(loader)
    loader.set_epoch(1)
    assert not np.array_equal(a, rids(loader))
    loader.set_epoch(0)
    assert np.array_equal(a, rids(loader))


def test_drop_last_drops_the_short_batch(art):
    n = art.num_rows("train")
    sizes = [len(b["label"]) for b in art.batches("train", batch_size=300, drop_last=True)]
    assert sizes == [300] * (n // 300)
    assert sum(len(b["label"]) for b in art.batches("train", batch_size=300)) == n


@pytest.mark.parametrize("drop_last", [False, True])
def test_ranks_split_the_rows_evenly(art, drop_last):
    """Disjoint rows, the same number of batches on every rank; every row once without drop_last (storage.order)."""
    n, world = art.num_rows("train"), 3
    loaders = [art.batches("train", batch_size=64, seed=9, rank=r, world_size=world, drop_last=drop_last)
               for r in range(world)]
    batches = [list(loader) for loader in loaders]
    k = n // (world * 64) if drop_last else -(-n // (world * 64))
    assert [len(loader) for loader in loaders] == [len(b) for b in batches] == [k] * world
    parts = [rids(b) for b in batches]
    everything = np.concatenate(parts)
    assert len(np.unique(everything)) == len(everything)  # no row on two ranks, nor twice on one
    if drop_last:
        assert all(len(b["label"]) == 64 for bs in batches for b in bs)
        assert len(everything) == world * k * 64
    else:
        assert np.array_equal(np.sort(everything), np.sort(art.read_split("train")["rid"].astype(np.int64)))
        assert all(len(b["label"]) == 64 for bs in batches for b in bs[:-1])


def test_order_rejects_bad_arguments():
    with pytest.raises(ValueError, match="rank"):
        Order(10, 4, False, rank=2, world_size=2)
    with pytest.raises(ValueError, match="shuffle_block"):
        Order(10, 4, True, block=0)
    with pytest.raises(ValueError, match="batch_size"):
        Order(10, 0)
    with pytest.raises(ValueError, match="shard_rows"):
        Order(10, 4, window=8)


def test_as_index_picks_slices_runs_or_arrays():
    assert as_index(np.arange(5, 105)) == slice(5, 105)
    runs = as_index(np.concatenate([np.arange(0, 5000), np.arange(9000, 14000)]))
    assert runs.starts.tolist() == [0, 9000] and runs.stops.tolist() == [5000, 14000] and len(runs) == 10000
    short = np.concatenate([np.arange(0, 64), np.arange(200, 264)])  # short runs: one gather is cheaper
    assert as_index(short) is short
    scattered = np.array([1, 5, 9, 30])
    assert as_index(scattered) is scattered


def test_channels_with_different_shapes_come_as_a_dict():
    spec = {"feature_spec": {"a": {"dtype": "torch.int32", "shape": [4]}, "b": {"dtype": "torch.int32", "shape": [7]},
                             "u": {"dtype": "torch.bool", "shape": []}, "v": {"dtype": "torch.int8", "shape": []}},
            "channel_spec": {"text": ["a", "b"], "flags": ["u", "v"]}}
    plans = {p.name: p for p in plan_channels(spec)}
    assert plans["text"].kind == "dict"
    assert plans["flags"].kind == "stack" and plans["flags"].dtype == np.int8 and plans["flags"].shape == (2,)


def test_prefetch_thread_stops_on_break_and_passes_errors_on(art):
    loader = art.batches("train", batch_size=10, prefetch=2)
    for _ in loader:
        break
    assert not any(t.name == "prepflow-loader" and t.is_alive() for t in threading.enumerate())

    def failing():
        yield 1
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        list(prefetched(failing, 2))


def test_pin_memory_and_device_work_without_cuda(art):
    batch = next(iter(art.batches("test", batch_size=8, pin_memory=True, device="cpu")))
    assert batch["numerical"].device.type == "cpu"
    # the CUDA path (pinned buffers, the copy stream) needs a GPU: benchmarks/loader_cuda.py checks it there


def test_batches_for_a_cuda_device_are_pinned_unless_asked_not_to(art, monkeypatch):
    import storage.loader

    monkeypatch.setattr(storage.loader, "_pin_available", lambda: True)  # as on a machine with CUDA
    assert art.batches("test", device="cuda").pin_memory
    assert art.batches("test", device=torch.device("cuda", 1)).pin_memory
    assert not art.batches("test", device="cuda", pin_memory=False).pin_memory
    assert not art.batches("test").pin_memory and not art.batches("test", device="cpu").pin_memory
    assert art.batches("test", pin_memory=True).pin_memory
    monkeypatch.setattr(storage.loader, "_pin_available", lambda: False)  # no CUDA: nothing to pin for
    assert not art.batches("test", device="cuda", pin_memory=True).pin_memory


def test_torch_dataset_rows_batches_and_dataloader(art):
    ds = art.torch_dataset("test")
    ref = art.read_split("test")
    n = art.num_rows("test")
    assert len(ds) == n
    row = ds[3]
    assert row["numerical"].shape == (3,) and float(row["numerical"][1]) == float(ref["x"][3])
    assert int(ds[-1]["categorical"][0]) == int(ref["c"][-1])
    batch = ds[[4, 0, 2]]
    assert np.array_equal(batch["categorical"][:, 1].numpy(), ref["d"][[4, 0, 2]])
    assert np.array_equal(ds[2:5]["label"].numpy(), ref["y"][2:5])
    with pytest.raises(IndexError):
        ds[n]
    sampler = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(ds), 16, drop_last=False)
    loaded = list(torch.utils.data.DataLoader(ds, sampler=sampler, batch_size=None))
    assert np.array_equal(torch.cat([b["label"] for b in loaded]).numpy(), ref["y"])


def test_dataset_pickles_without_its_arrays(art):
    ds = art.torch_dataset("train")
    ds[0]  # maps the files
    blob = pickle.dumps(ds)
    assert len(blob) < 10_000
    clone = pickle.loads(blob)
    assert isinstance(clone, ArtifactDataset)
    assert all(torch.equal(clone[7][k], ds[7][k]) for k in ds[7])


def test_matrix_columns_and_mixed_shape_channels(tmp_path):
    """Text (word + char ids: a dict channel), sets, time series, dates: n x d tensors, both formats."""
    from tests.contract.test_feature_types_contract import CONFIG as ALL_TYPES
    from tests.contract.test_feature_types_contract import make_frame

    result = run(ALL_TYPES, write_csv(make_frame(), tmp_path / "data.csv"), tmp_path, npartitions=2)
    art = Artifact.open(result.artifact["artifact_path"])
    ref = art.read_split("train")
    batches = list(art.batches("train", batch_size=64, shuffle=False))
    text = batches[0]["text"]
    assert set(text) == {"text", "text_char"}
    assert np.array_equal(torch.cat([b["text"]["text_char"] for b in batches]).numpy(), ref["text_char"])
    for channel in ("tags", "ts", "when", "tfidf"):
        assert np.array_equal(torch.cat([b[channel] for b in batches]).numpy(), ref[channel]), channel
    a = list(art.batches("test", batch_size=50, seed=1, prefer="parquet"))
    b = list(art.batches("test", batch_size=50, seed=1))
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x["text"]["text"], y["text"]["text"]) and torch.equal(x["vec"], y["vec"])


def test_channel_shapes_do_not_depend_on_how_many_features_they_hold(tmp_path):
    """numerical and categorical are n x k also with k = 1, in batches, torch_dataset and plan_channels;
    the one-column label stays n."""
    rng = np.random.default_rng(4)
    n = 200
    df = pd.DataFrame({"x": rng.normal(size=n), "c": rng.choice(list("abc"), n), "y": rng.integers(0, 2, n)})
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}],
              "preprocessing": {"split": {"type": "random", "probabilities": [0.8, 0.1, 0.1], "seed": 1}}}
    result = run(config, write_csv(df, tmp_path / "data.csv"), tmp_path, npartitions=2)
    one = Artifact.open(result.artifact["artifact_path"])
    ref = one.read_split("train")
    rows = one.num_rows("train")
    for prefer in ("npy", "parquet"):
        batch = next(iter(one.batches("train", batch_size=rows, shuffle=False, prefer=prefer)))
        assert batch["numerical"].shape == (rows, 1) and batch["numerical"].dtype == torch.float32
        assert np.array_equal(batch["numerical"][:, 0].numpy(), ref["x"])
        assert batch["categorical"].shape == (rows, 1) and np.array_equal(batch["categorical"][:, 0].numpy(), ref["c"])
        assert batch["label"].shape == (rows,)
    ds = one.torch_dataset("train")
    assert ds[0]["numerical"].shape == (1,) and ds[[0, 1, 2]]["numerical"].shape == (3, 1)
    assert ds[[0, 1]]["categorical"].shape == (2, 1)
    plans = {p.name: p for p in plan_channels(one.feature_spec)}
    assert plans["numerical"].kind == "stack" and plans["numerical"].shape == (1,)
    assert plans["label"].kind == "single" and plans["label"].shape == ()
