"""Row ids as a channel, and exact mid-epoch resume (issue 41 items 1 and 2): ``state_dict`` /
``load_state_dict`` of ``Artifact.batches`` and of ``ArtifactDataset.dataloader`` (DataLoader workers)."""

from __future__ import annotations

import copy
import json
import time

import numpy as np
import pandas as pd
import pytest

from core.errors import ConfigError, DataError
from storage.artifact import Artifact
from storage.loader import plan_channels
from tests.helpers import run, write_csv

N = 1200
CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.8, 0.1, 0.1], "seed": 1}},
    "publish": {"formats": ["parquet", "npy"], "shard_rows": 100, "row_group_rows": 50},
}


def publish(tmp, n: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x": rng.normal(size=n), "c": rng.choice(list("abcde"), n), "y": rng.integers(0, 2, n)})
    return run(CONFIG, write_csv(df, tmp / "data.csv"), tmp, npartitions=2).artifact["artifact_path"]


@pytest.fixture(scope="module")
def path(tmp_path_factory) -> str:
    return publish(tmp_path_factory.mktemp("resume"), N, 0)


@pytest.fixture(scope="module")
def art(path) -> Artifact:
    return Artifact.open(path)


def ids(batches) -> list[list[int]]:
    return [b["__row__"].tolist() for b in batches]


def test_row_ids_come_as_a_channel_beside_the_training_channels(art):
    ref = art.read_split("train")
    label_of = dict(zip(ref["__row__"].tolist(), ref["y"].tolist(), strict=True))
    for prefer in ("npy", "parquet"):
        batches = list(art.batches("train", batch_size=100, seed=3, channels=["label", "__row__"], prefer=prefer))
        assert all(set(b) == {"label", "__row__"} for b in batches)
        rows = np.concatenate([b["__row__"].numpy() for b in batches])
        assert batches[0]["__row__"].dtype.__str__() == "torch.int64" and batches[0]["__row__"].shape == (100,)
        assert np.array_equal(np.sort(rows), np.sort(ref["__row__"]))  # every row once, by its id
        labels = np.concatenate([b["label"].numpy() for b in batches])
        assert labels.tolist() == [label_of[r] for r in rows.tolist()]  # each id beside its own row
    default = next(iter(art.batches("train", batch_size=8)))
    assert "__row__" not in default  # only on request
    with pytest.raises(DataError, match=r"no channel\(s\) \['rowid'\].*'__row__'"):
        art.batches("train", channels=["rowid"])


def test_an_artifact_published_before_row_ids_says_so(art):
    spec = copy.deepcopy(art.feature_spec)
    del spec["feature_spec"]["__row__"]
    with pytest.raises(DataError, match="published before row ids"):
        plan_channels(spec, ["label", "__row__"])


SETTINGS = [
    {"shuffle": False},
    {"shuffle": True, "seed": 7},
    {"shuffle": True, "seed": 7, "shuffle_block": 16, "prefetch": 0},
    {"shuffle": True, "seed": 2, "rank": 2, "world_size": 3},
    {"shuffle": True, "seed": 2, "rank": 1, "world_size": 2, "drop_last": True, "shuffle_block": 8},
    {"shuffle": True, "seed": 5, "shuffle_window": 150, "rank": 0, "world_size": 2},
    {"shuffle": True, "seed": 5, "shuffle_window": 64, "shuffle_block": 4, "epoch": 3, "prefetch": 1},
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_a_resumed_loader_reads_exactly_what_an_uninterrupted_one_reads(path, settings):
    art = Artifact.open(path)
    full = ids(art.batches("train", batch_size=32, channels=["__row__"], **settings))
    k_all = len(full)
    assert k_all > 4
    for k in (0, 1, k_all // 2, k_all - 1, k_all):
        loader = art.batches("train", batch_size=32, channels=["__row__"], **settings)
        it = iter(loader)
        seen = [next(it)["__row__"].tolist() for _ in range(k)]
        state = json.loads(json.dumps(loader.state_dict()))  # JSON all the way
        assert state["batches"] == k and state["epoch"] == settings.get("epoch", 0)
        it.close()
        again = Artifact.open(path).batches("train", batch_size=32, channels=["__row__"],
                                            **{**settings, "prefetch": 3})  # prefetch does not change the order
        again.load_state_dict(state)
        rest = ids(again)
        assert seen + rest == full, k  # nothing repeated, nothing skipped, same batches
        assert ids(again) == full  # the next iteration starts the epoch over


def test_the_state_counts_what_the_consumer_was_handed_not_what_was_prefetched(art):
    loader = art.batches("train", batch_size=32, channels=["__row__"], prefetch=6, seed=1)
    it = iter(loader)
    first = [next(it)["__row__"].tolist() for _ in range(2)]
    time.sleep(0.3)  # the producer thread fills its queue meanwhile
    state = loader.state_dict()
    assert state["batches"] == 2 and state["rows"] == 64
    it.close()
    resumed = art.batches("train", batch_size=32, channels=["__row__"], seed=1)
    resumed.load_state_dict(state)
    assert first + ids(resumed) == ids(art.batches("train", batch_size=32, channels=["__row__"], seed=1))


def test_epochs_after_a_resume(art):
    kw = {"batch_size": 64, "channels": ["__row__"], "seed": 4}
    loader = art.batches("train", **kw)
    loader.set_epoch(2)
    it = iter(loader)
    head = [next(it)["__row__"].tolist() for _ in range(3)]
    it.close()
    state = loader.state_dict()
    resumed = art.batches("train", **kw)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)  # the state's epoch: the position is kept (a DistributedSampler-style loop)
    epoch2 = art.batches("train", **kw, epoch=2)
    assert head + ids(resumed) == ids(epoch2)
    resumed.set_epoch(3)  # another epoch starts at its first batch
    assert ids(resumed) == ids(art.batches("train", **kw, epoch=3))

    done = art.batches("train", **kw)
    list(done)
    finished = done.state_dict()
    assert finished["batches"] == len(done)
    after = art.batches("train", **kw)
    after.load_state_dict(finished)
    assert ids(after) == []  # the epoch was over: the loop goes on with the next one
    after.set_epoch(1)
    assert len(ids(after)) == len(after)


def test_any_rank_state_resumes_every_rank_of_the_same_world(art):
    kw = {"batch_size": 32, "channels": ["__row__"], "seed": 8, "world_size": 3}
    rank0 = art.batches("train", rank=0, **kw)
    it = iter(rank0)
    for _ in range(4):
        next(it)
    it.close()
    rank2 = art.batches("train", rank=2, **kw)
    rank2.load_state_dict(rank0.state_dict())
    assert ids(rank2) == ids(art.batches("train", rank=2, **kw))[4:]


def test_a_state_for_another_artifact_split_seed_or_world_size_is_refused(art, tmp_path):
    state = art.batches("train", batch_size=32, seed=1, world_size=2).state_dict()
    other = Artifact.open(publish(tmp_path, 600, 9))
    assert other.artifact_id != art.artifact_id
    cases = {
        "artifact_id": other.batches("train", batch_size=32, seed=1, world_size=2),
        "split": art.batches("validation", batch_size=32, seed=1, world_size=2),
        "seed": art.batches("train", batch_size=32, seed=2, world_size=2),
        "world_size": art.batches("train", batch_size=32, seed=1, world_size=4),
        "shuffle_window": art.batches("train", batch_size=32, seed=1, world_size=2, shuffle_window=128),
        "batch_size": art.batches("train", batch_size=16, seed=1, world_size=2),
    }
    for key, loader in cases.items():
        with pytest.raises(ConfigError) as info:
            loader.load_state_dict(state)
        message = str(info.value)
        assert "\n" not in message and message.startswith("this loader state is not for this loader: ")
        assert f"{key} " in message, (key, message)
        if key in ("seed", "world_size", "batch_size"):  # only what differs is named
            assert message.count(" in the state, ") == 1, message
    with pytest.raises(ConfigError, match="not a prepflow loader state"):
        art.batches("train").load_state_dict({"epoch": 1})
    bad = dict(state, batches=10_000)
    with pytest.raises(ConfigError, match="batches at most"):
        art.batches("train", batch_size=32, seed=1, world_size=2).load_state_dict(bad)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_map_style_dataset_resumes_under_a_dataloader_with_workers(art, num_workers):
    ds = art.torch_dataset("train", channels=["__row__"])
    kw = {"batch_size": 32, "seed": 6, "rank": 1, "world_size": 2, "shuffle_block": 4}
    reference = ids(art.batches("train", channels=["__row__"], **kw))
    assert ids(ds.dataloader(**kw, num_workers=num_workers)) == reference  # the loader's order and batches
    loader = ds.dataloader(**kw, num_workers=num_workers, prefetch_factor=4 if num_workers else None)
    it = iter(loader)
    head = [next(it)["__row__"].tolist() for _ in range(5)]
    time.sleep(0.3)  # the workers run ahead meanwhile
    state = json.loads(json.dumps(loader.state_dict()))
    it.close()
    assert state["batches"] == 5
    resumed = art.torch_dataset("train", channels=["__row__"]).dataloader(**kw, num_workers=num_workers)
    resumed.load_state_dict(state)
    assert head + ids(resumed) == reference
    batch_loader = art.batches("train", channels=["__row__"], **kw)  # the same state format both ways
    batch_loader.load_state_dict(state)
    assert ids(batch_loader) == reference[5:]
    with pytest.raises(ConfigError, match="seed 6 in the state, 7 here"):
        ds.dataloader(**{**kw, "seed": 7}).load_state_dict(state)
