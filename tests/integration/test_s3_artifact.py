"""`prepflow run --output s3://...` against a real S3 endpoint on loopback (moto's server mode),
then open, verify, serve and detect a corrupted object with `prepflow inspect --verify`."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from core.errors import DataError

pytestmark = pytest.mark.integration

BUCKET = "prepflow-artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_env():
    server = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which("moto_server")
    if server is None:
        pytest.fail("moto_server is not installed: it comes with the dev extra (moto[server]); run `make test`",
                    pytrace=False)
    port = free_port()
    # `timeout` bounds the server's life even if the test run is killed
    proc = subprocess.Popen(["timeout", "900", server, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"moto_server did not start on {endpoint}") from None
                time.sleep(0.2)
        env = {"S3_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1"}
        import boto3

        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket=BUCKET)
        yield env
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def in_env(s3_env, tmp_path, monkeypatch):
    for k, v in s3_env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp_path / "artifact-cache"))
    import fsspec

    fsspec.filesystem("s3").clear_instance_cache()  # endpoint from this environment
    return s3_env


def test_run_publishes_to_s3_and_the_artifact_opens_verified(cli, in_env, titanic_config, titanic_csv, tmp_path):
    import boto3

    url = f"s3://{BUCKET}/runs/titanic"
    env = {**in_env, "PREPFLOW_ARTIFACT_CACHE": str(tmp_path / "cli-cache")}
    result = cli("run", titanic_config, "--dataset", titanic_csv, "--output", url, "--cache-dir",
                 tmp_path / "cache", "--json", env=env)
    assert result.returncode == 0, result.stderr
    summary = result.json()
    art_id = summary["artifact_id"]
    assert summary["artifact_path"] == f"{url}/{art_id}"

    s3 = boto3.client("s3", endpoint_url=in_env["S3_ENDPOINT_URL"], aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="runs/titanic/")["Contents"]}
    assert f"runs/titanic/{art_id}/manifest.json" in keys and "runs/titanic/LATEST" in keys
    latest = s3.get_object(Bucket=BUCKET, Key="runs/titanic/LATEST")["Body"].read().decode().strip()
    assert latest == art_id
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=f"runs/titanic/{art_id}/manifest.json")["Body"].read())
    assert {f"runs/titanic/{art_id}/{rel}" for rel in manifest["files"]} <= keys

    from prepflow import Artifact, Preprocessor

    art = Artifact.open(url, verify=True)
    assert art.artifact_id == art_id and art.manifest["rows"] == summary["rows"]
    batch = next(iter(art.batches("train", batch_size=64, shuffle=False)))
    assert np.array_equal(batch["label"].numpy(), art.read_split("train")["Survived"][:64])
    assert list(Preprocessor.load(url).transform([{"Pclass": 1, "Sex": "female", "Age": 30, "SibSp": 0, "Parch": 0,
                                                   "Fare": 80.0, "Embarked": "C"}]))[0] == "Pclass"

    ok = cli("inspect", url, "--verify", env=env)
    assert ok.returncode == 0, ok.stderr
    assert f"verified: {len(manifest['files'])} files" in ok.stdout and "features:" in ok.stdout

    key = f"runs/titanic/{art_id}/train/Age.npy"
    body = bytearray(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    body[-1] ^= 0xFF
    s3.put_object(Bucket=BUCKET, Key=key, Body=bytes(body))
    bad = cli("inspect", url, "--verify", env=env)
    assert bad.returncode == 1
    assert "train/Age.npy: sha256 differs" in bad.stderr and "Traceback" not in bad.stderr

    again = cli("run", titanic_config, "--dataset", titanic_csv, "--output", url, "--cache-dir", tmp_path / "cache",
                "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert again.json()["artifact_id"] == art_id  # the published artifact is reused, never rewritten


def test_a_parquet_vocabulary_is_copied_to_the_store_by_its_task(in_env, tmp_path, monkeypatch):
    """A vocabulary over ``INLINE_MAX`` ids is a Parquet file of the vocab stage's entry; publish's copy task
    writes it to the store (tasks.publish.shards.copy_file) with the description the manifest records."""
    import boto3

    from prepflow import Artifact
    from storage.cache import StageCache
    from tasks.config.loader import parse_config
    from tasks.features import category
    from tasks.graph import run_pipeline
    from tasks.runtime.context import RunContext

    monkeypatch.setattr(category, "INLINE_MAX", 10)
    data = tmp_path / "d.csv"
    data.write_text("city,x,y\n" + "".join(f"c{i % 40},{i},{i % 2}\n" for i in range(400)))
    config = parse_config({"input_features": [{"name": "city", "type": "category"}, {"name": "x", "type": "number"}],
                           "output_features": [{"name": "y", "type": "binary"}]})
    url = f"s3://{BUCKET}/runs/vocab"
    result = run_pipeline(RunContext(config, str(data), StageCache(tmp_path / "cache"), None, url))

    art = Artifact.open(result.artifact["artifact_path"], verify=True)  # every object's sha256 and size checked
    vocab_files = [rel for rel in art.manifest["files"] if rel.endswith(".parquet") and rel.startswith("vocab")]
    assert len(vocab_files) == 1, sorted(art.manifest["files"])
    entry = next(p for p in (tmp_path / "cache" / "vocab").rglob(Path(vocab_files[0]).name))
    s3 = boto3.client("s3", endpoint_url=in_env["S3_ENDPOINT_URL"], aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    key = f"runs/vocab/{art.artifact_id}/{vocab_files[0]}"
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == entry.read_bytes()


def test_an_s3_dataset_is_fingerprinted_in_blocks_by_range_reads(in_env, tmp_path, monkeypatch):
    """A dataset object larger than one block is hashed block by block, each task reading its byte range of
    the object (tasks/dataset/fingerprint.py); the value is the definition's, whatever the store."""
    import hashlib

    import boto3

    from tasks.dataset import fingerprint

    data = bytes((i * 31 + i // 7) % 256 for i in range(10_000))
    boto3.client("s3", endpoint_url=in_env["S3_ENDPOINT_URL"], aws_access_key_id="testing",
                 aws_secret_access_key="testing", region_name="us-east-1").put_object(
        Bucket=BUCKET, Key="data/big.csv", Body=data)
    monkeypatch.setattr(fingerprint, "BLOCK", 4096)
    digests = b"".join(hashlib.sha256(data[i:i + 4096]).digest() for i in range(0, len(data), 4096))
    assert fingerprint.fingerprint(f"s3://{BUCKET}/data/big.csv") == \
        hashlib.sha256(fingerprint.BLOCK_TAG + digests).hexdigest()
    with pytest.raises(DataError, match=rf"s3://{BUCKET}/data/nope\.csv: dataset file not found"):
        fingerprint.fingerprint(f"s3://{BUCKET}/data/nope.csv")
