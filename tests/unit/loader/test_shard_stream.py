"""storage.shard_stream on fsspec's in-memory store: the bounded LRU shard cache, sha256 checks, a
streamed split read in the same order as the local copy (the real S3 endpoint:
tests/integration/test_s3_streaming.py)."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pandas as pd
import pytest

from core.errors import DataError, IntegrityError
from storage.artifact import Artifact
from storage.fs import filesystem
from storage.shard_stream import ShardCache, parse_limit
from tests.helpers import run, write_csv


@pytest.fixture
def store():
    fs = filesystem("memory://")
    root = f"memory://shard-stream-{os.getpid()}-{id(fs)}"
    yield fs, root
    fs.rm(root, recursive=True)


def put(fs, url: str, data: bytes) -> tuple[str, int]:
    fs.pipe_file(url, data)
    return hashlib.sha256(data).hexdigest(), len(data)


def raw(source) -> bytes:
    return open(source, "rb").read() if isinstance(source, str) else bytes(source.read())


def test_the_cache_keeps_the_most_recently_used_shards_within_its_limit(store, tmp_path):
    fs, root = store
    shards = {name: put(fs, f"{root}/{name}", bytes([i]) * 100) for i, name in enumerate("abcd")}
    cache = ShardCache(tmp_path / "cache", limit=250)  # two shards of 100 bytes fit, not three
    for name in "abab":
        assert cache.read(f"{root}/{name}", name, *shards[name], raw) == bytes(["abcd".index(name)]) * 100
    assert (cache.downloads, cache.hits, cache.downloaded_bytes) == (2, 2, 200)
    os.utime(tmp_path / "cache" / f"{shards['a'][0]}.parquet", (1, 1))  # a: used long ago
    cache.read(f"{root}/c", "c", *shards["c"], raw)
    kept = {p.name for p in (tmp_path / "cache").iterdir() if p.suffix == ".parquet"}
    assert kept == {f"{shards['b'][0]}.parquet", f"{shards['c'][0]}.parquet"}  # the least recently used went
    assert cache.stats()["cached_bytes"] == 200 <= cache.limit
    cache.read(f"{root}/a", "a", *shards["a"], raw)
    assert cache.downloads == 4  # a downloaded again
    big = put(fs, f"{root}/big", b"x" * 1000)
    assert cache.read(f"{root}/big", "big", *big, raw) == b"x" * 1000  # used, not kept: over the whole limit
    assert cache.stats()["cached_bytes"] <= cache.limit
    assert not any(p.name.startswith(".tmp-") for p in (tmp_path / "cache").iterdir())


def test_a_shard_that_differs_from_its_sha256_is_refused_by_name_and_not_kept(store, tmp_path):
    fs, root = store
    digest, size = put(fs, f"{root}/train/part-00003.parquet", b"good bytes")
    fs.pipe_file(f"{root}/train/part-00003.parquet", b"evil bytes")  # same size, other bytes
    cache = ShardCache(tmp_path / "cache", limit=1 << 20)
    served = []
    with pytest.raises(IntegrityError, match=r"part-00003\.parquet: shard train/part-00003\.parquet does not "
                                             r"match manifest\.json.*not served"):
        served.append(cache.read(f"{root}/train/part-00003.parquet", "train/part-00003.parquet", digest, size, raw))
    assert served == [] and list((tmp_path / "cache").iterdir()) == []
    with pytest.raises(IntegrityError, match="missing on the store"):
        cache.read(f"{root}/gone.parquet", "gone.parquet", digest, size, raw)


def test_limits_parse_from_numbers_and_units(monkeypatch):
    assert parse_limit(1000) == 1000 and parse_limit("512M") == 512 << 20 and parse_limit("2GiB") == 2 << 30
    monkeypatch.setenv("PREPFLOW_SHARD_CACHE_BYTES", "3G")
    assert parse_limit(None) == 3 << 30
    with pytest.raises(DataError, match="not a byte count"):
        parse_limit("lots")


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Artifact:
    tmp = tmp_path_factory.mktemp("stream")
    rng = np.random.default_rng(3)
    n = 4000
    df = pd.DataFrame({"x": rng.normal(size=n), "c": rng.choice(list("abcde"), n), "y": rng.integers(0, 2, n)})
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}],
              "preprocessing": {"split": {"type": "random", "probabilities": [0.8, 0.1, 0.1], "seed": 1}},
              "publish": {"shard_rows": 50, "row_group_rows": 50}}  # the default format: Parquet shards
    return Artifact.open(run(config, write_csv(df, tmp / "d.csv"), tmp, npartitions=2).artifact["artifact_path"])


@pytest.fixture
def remote(local, store, tmp_path, monkeypatch):
    fs, root = store
    url = f"{root}/runs/{local.artifact_id}"
    fs.put(str(local.path) + "/", url, recursive=True)
    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp_path / "artifacts"))
    return url


def rows_of(loader) -> list[list[int]]:
    return [b["__row__"].tolist() for b in loader]


def test_a_streamed_split_reads_in_the_local_order_and_each_rank_only_its_shards(local, remote, tmp_path):
    kw = {"batch_size": 64, "seed": 5, "world_size": 2, "channels": ["__row__", "label"]}
    split_bytes = sum(local.manifest["files"][f]["bytes"] for f in local.chunks("train")[0]["files"])
    seen = []
    for rank in range(2):
        art = Artifact.open(remote, stream=True, cache_limit=split_bytes // 4, cache_dir=tmp_path / f"c{rank}")
        assert art.streamed and sorted(p.name for p in art.path.iterdir()) == \
            ["feature_spec.yaml", "manifest.json", "training_set_metadata.json"]  # no row file on open
        loader = art.batches("train", rank=rank, **kw)
        assert loader.shuffle_window == 128  # two shards of 50 rows, rounded up to a multiple of 64
        streamed = rows_of(loader)
        assert streamed == rows_of(local.batches("train", rank=rank, shuffle_window=loader.shuffle_window, **kw))
        stats = loader.stream.cache.stats()
        assert stats["downloaded_bytes"] <= 0.6 * split_bytes and stats["cached_bytes"] <= split_bytes // 4
        seen.extend(r for batch in streamed for r in batch)
    assert sorted(seen) == sorted(local.read_split("train")["__row__"].tolist())  # disjoint and complete


def test_the_next_epochs_first_shards_are_fetched_while_an_epoch_ends(remote, tmp_path):
    art = Artifact.open(remote, stream=True, cache_dir=tmp_path / "c")
    loader = art.batches("train", batch_size=64, seed=2, channels=["__row__"])
    list(loader)
    first = set((loader.order.rows(1)[:loader.shuffle_window] // 50).tolist())
    for future in list(loader.stream._next.values()):
        future.result(timeout=60)
    assert set(loader.stream._next) == first  # fetched ahead, not yet read
    loader.set_epoch(1)
    hits = loader.stream.cache.hits
    it = iter(loader)
    next(it)
    it.close()
    assert loader.stream.cache.hits - hits >= len(first)  # epoch 1 starts from the cache


def test_a_streamed_artifact_serves_batches_only(remote, tmp_path):
    art = Artifact.open(remote, stream=True, cache_dir=tmp_path / "c")
    with pytest.raises(DataError, match="opened with stream=True"):
        art.read_split("train")
    with pytest.raises(DataError, match="opened with stream=True"):
        art.torch_dataset("train")
    with pytest.raises(DataError, match="verified shard by shard"):
        art.verify()
    assert art.num_rows("train") > 0 and "x" in art.metadata  # the description is there


def test_a_tampered_shard_stops_the_stream_before_any_of_its_rows(local, remote, tmp_path):
    fs = filesystem(remote)
    rel = local.chunks("train")[0]["files"][3]
    body = bytearray(fs.cat_file(f"{remote}/{rel}"))
    body[len(body) // 2] ^= 0xFF
    fs.pipe_file(f"{remote}/{rel}", bytes(body))
    art = Artifact.open(remote, stream=True, cache_dir=tmp_path / "c")
    served = []
    with pytest.raises(IntegrityError, match=f"shard {rel} does not match manifest.json"):
        for batch in art.batches("train", batch_size=50, shuffle=False, channels=["__row__"], prefetch=0):
            served.extend(batch["__row__"].tolist())
    ids = local.read_split("train")["__row__"]
    assert served == ids[:len(served)].tolist() and len(served) <= 150  # shards 0-2 at most, none of shard 3
    assert not any(p.name.startswith(str(local.manifest["files"][rel]["sha256"])) for p in (tmp_path / "c").iterdir())
