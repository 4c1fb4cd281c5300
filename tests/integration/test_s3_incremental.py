"""A growing folder of daily files on S3 (a glob over a prefix; moto's server mode): the run after a file was
added reads and hashes only that file, and an object rewritten in place (a new ETag) is read again. The same
process runs every time, as ``prepflow serve`` does, so the S3 client's listing cache is in play too."""

from __future__ import annotations

import io
import uuid

import boto3
import pandas as pd
import pytest

from tasks.dataset import fingerprint
from tests.helpers import artifact_files, names_passed, run, without_created_at
from tests.integration.test_s3_artifact import BUCKET, in_env, s3_env  # noqa: F401  (the moto_server fixtures)

pytestmark = pytest.mark.integration

CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 3, "exact": False}},
}


def day(i: int, n: int = 60) -> bytes:
    frame = pd.DataFrame({"x": [float(i * n + j) for j in range(n)], "c": [f"v{(i + j) % 7}" for j in range(n)],
                          "y": [j % 2 for j in range(n)]})
    return frame.to_csv(index=False).encode()


@pytest.fixture
def counted(monkeypatch):
    """The files whose bytes a run hashes (``hash_block``) and reads (ingest's ``_write_file``)."""
    from tasks.ingest import stage as ingest_stage

    return {"hashed": names_passed(monkeypatch, fingerprint, "hash_block"),
            "read": names_passed(monkeypatch, ingest_stage, "_write_file")}


def test_a_file_added_to_an_s3_prefix_is_the_only_one_hashed_and_read(in_env, counted, tmp_path,  # noqa: F811
                                                                      monkeypatch):
    from tasks.dataset import file_stamps

    monkeypatch.setattr(file_stamps, "SETTLE_NS", 0)
    s3 = boto3.client("s3", endpoint_url=in_env["S3_ENDPOINT_URL"], region_name="us-east-1")
    prefix = f"days-{uuid.uuid4().hex[:8]}"
    for i in range(3):
        s3.upload_fileobj(io.BytesIO(day(i)), BUCKET, f"{prefix}/day_{i}.csv")
    dataset = f"s3://{BUCKET}/{prefix}/*.csv"

    run(CONFIG, dataset, tmp_path)
    assert sorted(set(counted["hashed"])) == counted["read"] == ["day_0.csv", "day_1.csv", "day_2.csv"]

    s3.upload_fileobj(io.BytesIO(day(3)), BUCKET, f"{prefix}/day_3.csv")
    counted["hashed"].clear(), counted["read"].clear()
    monkeypatch.setattr(fingerprint, "_KNOWN", {})  # a new run's process knows nothing in memory
    grown = run(CONFIG, dataset, tmp_path)
    assert counted["hashed"] == counted["read"] == ["day_3.csv"]
    assert grown.summary()["files"] == {"total": 4, "new": 1}

    rewritten = day(0).replace(b"v1", b"v9")  # the same size, other bytes: a new ETag
    s3.upload_fileobj(io.BytesIO(rewritten), BUCKET, f"{prefix}/day_0.csv")
    counted["hashed"].clear(), counted["read"].clear()
    again = run(CONFIG, dataset, tmp_path)  # the same process: _KNOWN and the S3 client's caches as they are
    assert counted["hashed"] == counted["read"] == ["day_0.csv"]

    cold = run(CONFIG, dataset, tmp_path, cache="cold", output="cold-out")
    assert again.artifact["artifact_id"] == cold.artifact["artifact_id"]
    assert without_created_at(artifact_files(again.artifact["artifact_path"])) == \
        without_created_at(artifact_files(cold.artifact["artifact_path"]))


def test_a_list_of_s3_objects_is_the_prefix_s_dataset(in_env, counted, tmp_path):  # noqa: F811
    """A dataset given as a list of S3 URLs (in any order) is the dataset the glob over the same objects is:
    the same names, the same artifact; a listed object that does not exist is one line naming it."""
    import prepflow
    from core.errors import DataError
    from prepflow import Artifact

    s3 = boto3.client("s3", endpoint_url=in_env["S3_ENDPOINT_URL"], region_name="us-east-1")
    prefix = f"listed-{uuid.uuid4().hex[:8]}"
    for i in range(3):
        s3.upload_fileobj(io.BytesIO(day(i)), BUCKET, f"{prefix}/day_{i}.csv")
    listed = [f"s3://{BUCKET}/{prefix}/day_{i}.csv" for i in (2, 0, 1)]
    by_list = prepflow.run(CONFIG, listed, tmp_path / "out-list", cache_dir=tmp_path / "cache-list")
    assert counted["read"] == ["day_0.csv", "day_1.csv", "day_2.csv"]
    by_glob = prepflow.run(CONFIG, f"s3://{BUCKET}/{prefix}/*.csv", tmp_path / "out-glob",
                           cache_dir=tmp_path / "cache-glob")
    assert by_list["artifact_id"] == by_glob["artifact_id"]
    names = [f["name"] for f in Artifact.open(by_list["artifact_path"]).manifest["dataset_files"]]
    assert names == ["day_0.csv", "day_1.csv", "day_2.csv"]
    with pytest.raises(DataError, match=f"s3://{BUCKET}/{prefix}/day_7.csv: dataset file not found"):
        prepflow.run(CONFIG, [*listed, f"s3://{BUCKET}/{prefix}/day_7.csv"], tmp_path / "out-gone",
                     cache_dir=tmp_path / "cache-list")
