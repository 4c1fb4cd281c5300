"""Media decoded on a Dask cluster's workers (issue 19 item 5): with a distributed Client, the media_cache
stage's hashing of every source and its decoding run as Dask tasks that write the decoded tensors into the stores (eager scratch,
lazy_cached memmap) at their slots, and one task per encoded part rewrites it with its media columns;
the flow process only gathers each slot's failure and length and each part's counts. The
artifact (and the memmap) must be byte-identical to the in-process decoding, failures included, and
``fail`` must name the same row and path."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from distributed import Client

from core.errors import DataError
from tests.helpers import artifact_files, run, without_created_at, write_csv
from tests.unit.media.test_media_pipeline import broken_dataset, config

pytestmark = pytest.mark.integration


def _files(result) -> dict[str, bytes]:
    path = Path(result.artifact["artifact_path"])
    files = without_created_at(artifact_files(path))
    memmaps = path.parent / "media"
    return {**files, **{f"media/{p.name}": p.read_bytes() for p in sorted(memmaps.glob("*")) if memmaps.is_dir()}}


@pytest.mark.parametrize("mode", ["eager", "lazy_cached", "lazy"])
@pytest.mark.parametrize("policy", ["skip_row", "fill"])
def test_workers_decode_to_the_same_artifact(cluster, tmp_path, mode, policy, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    data = broken_dataset(tmp_path / "data")
    cfg = config(mode, media_root="img", height=8, width=8, on_decode_error=policy)
    cfg["input_features"][1]["preprocessing"]["on_decode_error"] = policy
    local = _files(run(cfg, data, tmp_path / "local", npartitions=3))
    with Client(cluster) as client:
        on_cluster = _files(run(cfg, data, tmp_path / "cluster", npartitions=3))
        prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert {"hash_sources", "decode_slots", "rewrite_part"} <= set(prefixes), prefixes  # (Dask drops the leading underscore)
    assert on_cluster == local


def test_fail_on_the_workers_names_the_same_row(cluster, tmp_path):
    data = broken_dataset(tmp_path / "data")
    df = pd.read_csv(data)
    df.loc[5, "photo"] = df.loc[7, "photo"] = "p1.png"  # the unreadable files go: a decode failure remains
    data = write_csv(df, tmp_path / "data" / "decode.csv")
    cfg = config("eager", media_root="img", height=8, width=8)
    with pytest.raises(DataError) as local:
        run(cfg, data, tmp_path / "local")
    with Client(cluster), pytest.raises(DataError) as remote:
        run(cfg, data, tmp_path / "cluster")
    assert str(remote.value) == str(local.value)
    assert "row 2, column 'photo' in str(local.value)" and "corrupt or truncated" in str(local.value)
    assert not os.listdir(tmp_path / "cluster" / "cache" / "media_cache") or all(
        not p.startswith(".tmp") for p in os.listdir(tmp_path / "cluster" / "cache" / "media_cache"))
