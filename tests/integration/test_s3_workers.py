"""Workers write an S3 output's row files (issue 19 item 2), on a real S3 endpoint (moto's server mode)
and a 2-worker process cluster (``LocalCluster(processes=True)``).

Observed: every S3 request the flow process (this test process) makes goes through its s3fs client,
whose ``_call_s3`` is wrapped to record each request and pass it on unchanged; the workers are other
processes with their own clients. The flow process writes no Parquet shard, ``.npy`` or split_binary
object (it puts the small rest, the manifest last, then LATEST); the scheduler ran the writer tasks;
every object equals a local run's bytes.
"""

from __future__ import annotations

import os

import boto3
import numpy as np
import pandas as pd
import pytest
import s3fs
from distributed import Client, LocalCluster

from prepflow import Artifact
from storage.cache import StageCache
from tasks.config.loader import parse_config
from tasks.graph import run_pipeline
from tasks.runtime.context import RunContext
from tests.helpers import artifact_files, run, write_csv
from tests.integration.test_s3_artifact import BUCKET, s3_env  # noqa: F401  (the moto_server fixture)

pytestmark = pytest.mark.integration

CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "publish": {"formats": ["parquet", "npy", "split_binary"], "shard_rows": 150, "row_group_rows": 64},
}
ROW_FILES = (".parquet", ".npy", ".bin")
WRITES = ("put_object", "create_multipart_upload", "upload_part", "complete_multipart_upload", "copy_object")
NPARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(s3_env):  # noqa: F811
    """Workers started with the S3 endpoint and credentials in their environment."""
    saved = {k: os.environ.get(k) for k in s3_env}
    os.environ.update(s3_env)
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None, worker_dashboard_address=None) as c:
            yield c
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_workers_write_the_s3_row_objects(cluster, s3_env, tmp_path, monkeypatch):  # noqa: F811
    for k, v in s3_env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp_path / "artifact-cache"))
    s3fs.S3FileSystem.clear_instance_cache()
    rng = np.random.default_rng(11)
    df = pd.DataFrame({"x": rng.normal(size=600), "c": rng.choice(list("pqrst"), 600), "y": rng.integers(0, 2, 600)})
    dataset = write_csv(df, tmp_path / "data.csv")
    local = run(CONFIG, dataset, tmp_path / "local", npartitions=NPARTITIONS).artifact

    requests: list[tuple[str, str]] = []
    real_call = s3fs.S3FileSystem._call_s3

    async def recording(self, method, *args, **kwargs):
        requests.append((method, kwargs.get("Key", "")))
        return await real_call(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", recording)
    url = f"s3://{BUCKET}/workers/run"
    ctx = RunContext(parse_config(CONFIG), str(dataset), StageCache(tmp_path / "cache"), NPARTITIONS, url)
    with Client(cluster.scheduler_address) as client:
        art = run_pipeline(ctx).artifact
        prefixes = set(client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes)))
    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", real_call)
    assert art["artifact_id"] == local["artifact_id"] and art["artifact_path"] == f"{url}/{art['artifact_id']}"
    assert {"write_parquet_shard", "stream_npy", "stream_file"} <= prefixes, prefixes

    s3 = boto3.client("s3", endpoint_url=s3_env["S3_ENDPOINT_URL"], aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    prefix = f"workers/run/{art['artifact_id']}/"
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"])
    stored = {k.removeprefix(prefix): s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys}
    want = artifact_files(local["artifact_path"])
    assert stored == want  # every object, manifest included, byte for byte
    row_objects = [rel for rel in want if rel.endswith(ROW_FILES)]
    assert len(row_objects) >= 10

    flow_writes = [key.removeprefix(prefix) for method, key in requests if method in WRITES]
    assert not [rel for rel in flow_writes if rel.endswith(ROW_FILES)], flow_writes
    assert flow_writes[-2:] == ["manifest.json", "workers/run/LATEST"]
    assert sorted(flow_writes[:-1]) == sorted(rel for rel in want if not rel.endswith(ROW_FILES))

    opened = Artifact.open(url, verify=True)
    assert opened.artifact_id == art["artifact_id"]
