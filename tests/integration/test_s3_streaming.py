"""Per-rank streaming from a real S3 endpoint (moto's server mode, as in test_s3_artifact.py), issue 41
item 4: an artifact published to ``s3://`` by the remote publisher, opened with ``stream=True`` by two
ranks with caches of a quarter of the split: each rank downloads only its shards (under 0.6x of the split
per epoch), the cache stays within its limit, the order is the one of the downloaded copy, the next
window's shards come while the current one is read, a resumed stream goes on where it stopped, and a
shard whose bytes differ from its sha256 is refused by name and none of its rows is served."""

from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd
import pytest

from core.errors import IntegrityError
from tests.integration.test_s3_artifact import BUCKET, s3_env  # noqa: F401  (the moto server fixture)

pytestmark = pytest.mark.integration

SHARD_ROWS = 50


@pytest.fixture(scope="module")
def published(s3_env, tmp_path_factory):  # noqa: F811
    """(the artifact's s3 URL, a downloaded copy); the environment points at the endpoint for the module."""
    import fsspec

    from prepflow import Artifact
    from storage.cache import StageCache
    from tasks.config.loader import parse_config
    from tasks.graph import run_pipeline
    from tasks.runtime.context import RunContext

    tmp = tmp_path_factory.mktemp("s3-stream")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in s3_env.items():
            mp.setenv(key, value)
        mp.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp / "artifact-cache"))
        fsspec.filesystem("s3").clear_instance_cache()
        rng = np.random.default_rng(7)
        n = 4000
        df = pd.DataFrame({"x": rng.normal(size=n), "c": rng.choice(list("abcdef"), n),
                           "y": rng.integers(0, 2, n)})
        df.to_csv(tmp / "d.csv", index=False)
        config = parse_config({
            "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
            "output_features": [{"name": "y", "type": "binary"}],
            "preprocessing": {"split": {"type": "random", "probabilities": [0.8, 0.1, 0.1], "seed": 1}},
            "publish": {"shard_rows": SHARD_ROWS, "row_group_rows": 50}})
        result = run_pipeline(RunContext(config, str(tmp / "d.csv"), StageCache(tmp / "cache"), None,
                                         f"s3://{BUCKET}/runs/stream"))
        url = result.artifact["artifact_path"]
        yield url, Artifact.open(url, verify=True)  # the whole artifact, downloaded and checked


@pytest.fixture
def env(s3_env, tmp_path, monkeypatch):  # noqa: F811
    for key, value in s3_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp_path / "artifact-cache"))


def split_bytes(art, split: str = "train") -> int:
    return sum(art.manifest["files"][f]["bytes"] for f in art.chunks(split)[0]["files"])


def rows_of(loader) -> list[list[int]]:
    return [b["__row__"].tolist() for b in loader]


def test_two_ranks_stream_only_their_shards_through_a_quarter_size_cache(published, env, tmp_path):
    from prepflow import Artifact

    url, local = published
    total = split_bytes(local)
    assert len(local.chunks("train")[0]["files"]) >= 60
    limit = total // 4
    kw = {"batch_size": 64, "seed": 3, "world_size": 2, "channels": ["__row__", "label", "numerical"]}
    arts = [Artifact.open(url, stream=True, cache_limit=limit, cache_dir=tmp_path / f"rank{r}") for r in range(2)]
    assert all(not any((tmp_path / f"rank{r}").iterdir()) for r in range(2))  # opening downloads no shard
    loaders = [art.batches("train", rank=r, **kw) for r, art in enumerate(arts)]
    assert len(loaders[0]) == len(loaders[1])
    for epoch in range(3):
        everything = []
        for rank, loader in enumerate(loaders):
            loader.set_epoch(epoch)
            before = loader.stream.cache.downloaded_bytes
            streamed = rows_of(loader)
            downloaded = loader.stream.cache.downloaded_bytes - before
            assert 0 < downloaded <= 0.6 * total, (epoch, rank, downloaded / total)
            assert loader.stream.cache.stats()["cached_bytes"] <= limit
            reference = local.batches("train", rank=rank, epoch=epoch, shuffle_window=loader.shuffle_window, **kw)
            assert streamed == rows_of(reference)  # the downloaded copy's order, batch for batch
            everything.extend(r for batch in streamed for r in batch)
        assert sorted(everything) == sorted(local.read_split("train")["__row__"].tolist())  # disjoint, complete
    first, second = (next(iter(loader))["numerical"] for loader in loaders)
    assert first.shape[1] == 1 and first.dtype == second.dtype


def test_the_next_window_is_downloaded_while_the_current_one_is_read(published, env, tmp_path):
    from prepflow import Artifact

    url, _ = published
    art = Artifact.open(url, stream=True, cache_dir=tmp_path / "c")
    loader = art.batches("train", batch_size=50, seed=1, prefetch=0, channels=["__row__"])
    per_window = loader.shuffle_window // 50  # 2 batches of 50 rows per window of two shards
    rows = loader.order.rows(0)
    shards = [set((rows[i * loader.shuffle_window:(i + 1) * loader.shuffle_window] // SHARD_ROWS).tolist())
              for i in range(3)]
    it = iter(loader)
    for _ in range(per_window):  # the whole first window, nothing of the second asked for yet
        next(it)
    deadline = time.monotonic() + 30
    while loader.stream.cache.downloads < len(shards[0] | shards[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert loader.stream.cache.downloads == len(shards[0] | shards[1])  # the second window's, not the third's
    it.close()


def test_a_streamed_job_resumes_where_it_stopped(published, env, tmp_path):
    from prepflow import Artifact

    url, local = published
    kw = {"batch_size": 64, "seed": 9, "rank": 1, "world_size": 2, "epoch": 1, "channels": ["__row__"]}
    loader = Artifact.open(url, stream=True, cache_dir=tmp_path / "a").batches("train", **kw)
    it = iter(loader)
    head = [next(it)["__row__"].tolist() for _ in range(7)]
    it.close()
    state = loader.state_dict()
    resumed = Artifact.open(url, stream=True, cache_dir=tmp_path / "b").batches("train", **kw)
    resumed.load_state_dict(state)
    rest = rows_of(resumed)
    assert head + rest == rows_of(Artifact.open(url, stream=True, cache_dir=tmp_path / "c").batches("train", **kw))
    on_disk = local.batches("train", shuffle_window=loader.shuffle_window, **kw)  # the same state on a local copy
    on_disk.load_state_dict(state)
    assert rows_of(on_disk) == rest


def test_a_shard_changed_on_s3_is_refused_by_name_and_never_served(published, env, tmp_path):
    import boto3

    from prepflow import Artifact

    url, local = published
    art = Artifact.open(url, stream=True, cache_dir=tmp_path / "c")
    rel = local.chunks("validation")[0]["files"][1]
    key = url.removeprefix(f"s3://{BUCKET}/") + "/" + rel
    s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT_URL"], aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    body = bytearray(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    original = bytes(body)
    body[len(body) // 2] ^= 0x01
    s3.put_object(Bucket=BUCKET, Key=key, Body=bytes(body))
    try:
        served = []
        with pytest.raises(IntegrityError, match=rf"{rel}: shard {rel} does not match manifest\.json.*not served"):
            for batch in art.batches("validation", batch_size=10, shuffle=False, prefetch=2, channels=["__row__"]):
                served.extend(batch["__row__"].tolist())
        ids = local.read_split("validation")["__row__"]
        assert served == ids[:len(served)].tolist() and len(served) <= SHARD_ROWS  # shard 0 at most
        assert local.manifest["files"][rel]["sha256"] not in {p.stem for p in (tmp_path / "c").iterdir()}
    finally:
        s3.put_object(Bucket=BUCKET, Key=key, Body=original)
