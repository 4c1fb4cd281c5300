"""Artifacts on an fsspec store (memory://): upload order, verified download, refusing half artifacts."""

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
from tasks.report.page import open_view
from tasks.runtime.context import RunContext
from tests.helpers import write_csv

CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "publish": {"formats": ["parquet", "npy"]},
}


@pytest.fixture
def dataset(tmp_path):
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"x": rng.normal(size=200), "c": rng.choice(list("pqr"), 200), "y": rng.integers(0, 2, 200)})
    return write_csv(df, tmp_path / "data.csv")


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp_path / "artifact-cache"))
    url = f"memory://prepflow-test-{tmp_path.name}/out"
    yield url
    fs = fsspec.filesystem("memory")
    if fs.exists(url):
        fs.rm(url, recursive=True)


def publish(dataset, tmp_path, output: str):
    ctx = RunContext(parse_config(CONFIG), str(dataset), StageCache(tmp_path / "cache"), None, output)
    return run_pipeline(ctx).artifact


def test_publish_uploads_manifest_then_latest_and_open_verifies(dataset, tmp_path, store, monkeypatch):
    calls: list[str] = []
    real = remote.filesystem

    class Recording:
        def __init__(self, fs):
            self.fs = fs

        def __getattr__(self, name):
            attr = getattr(self.fs, name)
            if name in ("put", "put_file", "pipe_file"):
                def record(*args, **kwargs):
                    target = args[1] if name != "pipe_file" else args[0]
                    calls.extend(target if isinstance(target, list) else [target])
                    return attr(*args, **kwargs)
                return record
            return attr

    monkeypatch.setattr(remote, "filesystem", lambda url: Recording(real(url)))
    art = publish(dataset, tmp_path, store)
    assert art["artifact_path"] == f"{store}/{art['artifact_id']}" and not art["reused"]
    assert calls[-2:] == [f"{art['artifact_path']}/manifest.json", f"{store}/LATEST"]
    assert len(calls) > 3  # every file went up before the manifest

    local = publish(dataset, tmp_path / "again", str(tmp_path / "local-out"))
    assert local["artifact_id"] == art["artifact_id"]
    opened = Artifact.open(store, verify=True)  # through LATEST
    assert opened.artifact_id == art["artifact_id"] and opened.url == store
    assert opened.path.parent == tmp_path / "artifact-cache"
    ref = Artifact.open(local["artifact_path"])
    for split in ref.splits:
        got, want = opened.read_split(split), ref.read_split(split)
        assert all(np.array_equal(got[k], want[k]) for k in want)
    assert publish(dataset, tmp_path, store)["reused"]


def test_a_corrupted_remote_file_fails_verification(dataset, tmp_path, store):
    art = publish(dataset, tmp_path, store)
    Artifact.open(store)  # cached copy
    fs = fsspec.filesystem("memory")
    target = f"{art['artifact_path']}/train/x.npy"
    data = bytearray(fs.cat_file(target))
    data[-1] ^= 0xFF
    fs.pipe_file(target, bytes(data))
    with pytest.raises(IntegrityError, match="train/x.npy: sha256"):
        Artifact.open(art["artifact_path"], verify=True)
    fs.rm(target)
    with pytest.raises(IntegrityError, match="missing"):
        Artifact.open(store, verify=True)


def test_an_artifact_without_its_manifest_is_not_there(dataset, tmp_path, store):
    art = publish(dataset, tmp_path, store)
    fsspec.filesystem("memory").rm(f"{art['artifact_path']}/manifest.json")
    with pytest.raises(DataError, match="not a complete artifact"):
        Artifact.open(art["artifact_path"])
    with pytest.raises(DataError, match="not a complete artifact"):
        Artifact.open(store)  # LATEST points at it
    with pytest.raises(DataError, match="no LATEST"):
        Artifact.open(f"{store}-nothing-here")


def test_the_report_of_a_remote_split_binary_artifact_reads_prepflows_spec(dataset, tmp_path, store):
    """NVIDIA's feature_spec.yaml keeps prepflow's own spec under metadata.prepflow: the report of a
    remote artifact reads that view, as Artifact.open does for a local one."""
    config = {**CONFIG, "publish": {"formats": ["split_binary"]}}
    ctx = RunContext(parse_config(config), str(dataset), StageCache(tmp_path / "cache"), None, store)
    art = run_pipeline(ctx).artifact
    view = open_view(store)
    local = Artifact.open(art["artifact_path"] if "://" not in art["artifact_path"] else store)
    assert view.feature_spec == local.feature_spec
    assert "x" in view.feature_spec["feature_spec"] and "prepflow" not in view.feature_spec.get("metadata", {})
