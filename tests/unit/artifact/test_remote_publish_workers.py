"""A remote output's row files are written by the publish tasks straight to the store (issue 19 item 2):
the bytes of every object equal a local run's for 1 and 3 partitions, the flow process uploads only
the small rest (then the manifest, then LATEST), and a reported object missing from the store stops
the publish before its manifest. fsspec's memory:// store, shared inside this process, with Dask's
local threaded scheduler; tests/integration/test_s3_workers.py does it on moto_server and a 2-worker
cluster."""

from __future__ import annotations

import fsspec
import numpy as np
import pandas as pd
import pytest

from core.errors import DataError, IntegrityError
from prepflow import Artifact
from storage import remote
from storage.cache import StageCache
from tasks.config.loader import parse_config
from tasks.graph import run_pipeline
from tasks.runtime.context import RunContext
from tests.helpers import artifact_files, run, write_csv

CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "publish": {"formats": ["parquet", "npy", "split_binary"], "shard_rows": 50, "row_group_rows": 20},
}
ROW_FILES = (".parquet", ".npy", ".bin")


@pytest.fixture
def dataset(tmp_path):
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"x": rng.normal(size=300), "c": rng.choice(list("pqrs"), 300), "y": rng.integers(0, 2, 300)})
    return write_csv(df, tmp_path / "data.csv")


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp_path / "artifact-cache"))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")  # manifests comparable byte for byte
    url = f"memory://prepflow-workers-{tmp_path.name}/out"
    yield url
    fs = fsspec.filesystem("memory")
    if fs.exists(url):
        fs.rm(url, recursive=True)


def run_remote(dataset, tmp_path, output: str, npartitions: int | None = None) -> dict:
    ctx = RunContext(parse_config(CONFIG), str(dataset), StageCache(tmp_path / "cache"), npartitions, output)
    return run_pipeline(ctx).artifact


class Recording:
    """The flow process's store (``storage.remote.filesystem``), recording the paths it writes."""

    def __init__(self, fs, written: list[str]):
        self.fs, self.written = fs, written

    def __getattr__(self, name):
        attr = getattr(self.fs, name)
        if name in ("put", "put_file", "pipe_file", "pipe", "open", "copy"):
            def record(*args, **kwargs):
                target = args[0] if name in ("pipe_file", "pipe", "open") else args[1]
                if name != "open" or "w" in (args[1] if len(args) > 1 else kwargs.get("mode", "rb")):
                    self.written.extend(target if isinstance(target, list) else [target])
                return attr(*args, **kwargs)
            return record
        return attr


def stored_objects(url: str) -> dict[str, bytes]:
    fs = fsspec.filesystem("memory")
    root = fs._strip_protocol(url).rstrip("/")
    return {path[len(root) + 1:]: fs.cat_file(path) for path in sorted(fs.find(root))}


@pytest.mark.parametrize("npartitions", [1, 3])
def test_workers_write_the_row_objects_and_they_equal_a_local_run(dataset, tmp_path, store, monkeypatch,
                                                                  npartitions):
    local = run(CONFIG, dataset, tmp_path / "local", npartitions=npartitions).artifact
    written: list[str] = []
    real = remote.filesystem
    monkeypatch.setattr(remote, "filesystem", lambda url: Recording(real(url), written))
    art = run_remote(dataset, tmp_path / "remote", store, npartitions)
    assert art["artifact_path"] == f"{store}/{art['artifact_id']}"
    assert art["artifact_id"] == local["artifact_id"] and not art["reused"]

    want = artifact_files(local["artifact_path"])
    got = stored_objects(art["artifact_path"])
    assert got == want  # every object, the manifest included, byte for byte
    row_files = [rel for rel in want if rel.endswith(ROW_FILES)]
    assert len([r for r in row_files if r.endswith(".parquet")]) >= 3  # several shards per split
    assert any(r.endswith(".bin") for r in row_files) and any(r.endswith(".npy") for r in row_files)

    # the flow process wrote the small rest, then the manifest, then LATEST, and no row file
    prefix = art["artifact_path"] + "/"
    uploaded = [w.removeprefix(prefix) for w in written]
    assert uploaded[-2:] == ["manifest.json", f"{store}/LATEST"]
    assert not [rel for rel in uploaded if rel.endswith(ROW_FILES)], uploaded
    assert sorted(uploaded[:-1]) == sorted(rel for rel in want if not rel.endswith(ROW_FILES))

    opened = Artifact.open(store, verify=True)  # sizes and sha256 of the workers' descriptions
    assert opened.artifact_id == art["artifact_id"]


def test_a_reported_object_missing_from_the_store_stops_before_the_manifest(dataset, tmp_path, store,
                                                                           monkeypatch):
    real_put = remote.upload

    def lose_one_then_upload(fs, local, art_url):
        victim = next(p for p in sorted(fs.find(art_url)) if p.endswith(".parquet"))
        fs.rm(victim)  # as if the store lost a worker's object
        real_put(fs, local, art_url)

    monkeypatch.setattr(remote, "upload", lose_one_then_upload)
    with pytest.raises(IntegrityError, match=r"\.parquet: missing on the store.*no manifest written"):
        run_remote(dataset, tmp_path / "remote", store)
    fs = fsspec.filesystem("memory")
    left = fs.find(fs._strip_protocol(store))
    assert any(p.endswith(".npy") for p in left)  # the workers' objects of the failed run stay...
    assert not [p for p in left if p.endswith(("manifest.json", "LATEST"))]
    with pytest.raises(DataError, match="not a complete artifact"):
        Artifact.open(store)  # ...invisible without a manifest

    monkeypatch.setattr(remote, "upload", real_put)
    art = run_remote(dataset, tmp_path / "remote", store)  # the rerun rewrites them, then the manifest
    assert not art["reused"]
    assert Artifact.open(store, verify=True).artifact_id == art["artifact_id"]
