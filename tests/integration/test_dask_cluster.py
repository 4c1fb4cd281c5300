"""Stages on a distributed Dask cluster (DESIGN section 7, issue 8).

A 2-worker process cluster (``LocalCluster(processes=True)``) stands in for ``dask scheduler`` +
``dask worker``s. Checked: ``prepflow run --dask-address`` puts every stage's Dask work on the
cluster and publishes an artifact byte-identical to the local scheduler's, and its flow process never
imports pandas; a worker process killed
while the encode stage runs does not change the artifact (the scheduler reruns its tasks on the other
worker).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from distributed import WorkerPlugin

from tests.helpers import artifact_files, run

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "titanic"
NPARTITIONS = 4


@pytest.fixture(scope="module")
def local_artifact(tmp_path_factory):
    """The reference: the same inputs on Dask's local (threaded) scheduler, in-process."""
    tmp = tmp_path_factory.mktemp("local")
    old = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = "0"
    try:
        result = run(yaml.safe_load((EXAMPLE / "config.yaml").read_text()), EXAMPLE / "titanic.csv", tmp,
                     npartitions=NPARTITIONS)
    finally:
        if old is None:
            os.environ.pop("SOURCE_DATE_EPOCH")
        else:
            os.environ["SOURCE_DATE_EPOCH"] = old
    files = artifact_files(result.artifact["artifact_path"])
    assert files
    return files


def _scheduler_prefixes(cluster) -> set[str]:
    from distributed import Client

    with Client(cluster.scheduler_address, set_as_default=False) as client:
        return set(client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes)))


def test_run_on_cluster_is_byte_identical_to_local(cluster, local_artifact, tmp_path):
    # Relative --output/--cache-dir from a working directory that is not the workers': the flow must
    # hand the workers absolute paths.
    work = tmp_path / "cwd"
    work.mkdir()
    env = {**os.environ, "SOURCE_DATE_EPOCH": "0", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "flows.cli", "run", str(EXAMPLE / "config.yaml"), "--dataset",
                           str(EXAMPLE / "titanic.csv"), "--output", "out", "--cache-dir", "cache",
                           "--npartitions", str(NPARTITIONS), "--dask-address", cluster.scheduler_address,
                           "--json"], capture_output=True, text=True, cwd=work, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not any(stage["cached"] for stage in summary["stages"])
    assert artifact_files(work / "out" / summary["artifact_id"]) == local_artifact
    # the flow process plans; pandas runs on the workers (core/lazy.py): -X importtime lists every import
    imported = {line.rpartition("|")[2].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "pyarrow" in imported  # the listing is there
    assert "pandas" not in imported, "the flow process of a cluster run imported pandas"
    # every stage's partition work went through the cluster's scheduler
    prefixes = _scheduler_prefixes(cluster)
    assert {"partition", "encode_partition", "part_summary", "write_parquet_shard"} <= prefixes, prefixes
    assert "split_counts" in prefixes, prefixes  # the encoded gate's row count: split.npy read by a worker
    # the drift stage's references and counts: the encoded parts read by the workers, not by the flow (a split of
    # one group of parts: its reference task is fused into reference_stats, core/task_fusion.py)
    assert {"count_group", "reference_stats"} <= prefixes, prefixes
    # a partition's read and preparation ran inside its stage's tasks (core/task_fusion.py), the vocab stage's
    # probe of the first partitions included: never tasks of their own
    assert not {"read_ipc", "read_rows", "prepare"} & prefixes, prefixes
    # the HTML report is built by a worker too, beside the artifact the flow's working directory names
    assert "write_report" in prefixes, prefixes
    report = work / "out" / f"{summary['artifact_id']}.report.html"
    assert Path(summary["report_path"]).resolve() == report.resolve()
    assert "<html" in report.read_text()[:2000].lower()


@pytest.mark.parametrize("suffix,on_workers", [(".csv", True), (".jsonl", False)])
def test_a_large_dataset_is_fingerprinted_by_the_workers_that_read_it(cluster, tmp_path, monkeypatch, suffix,
                                                                      on_workers):
    """``prepflow run --dask-address`` hashes a dataset larger than one block on the cluster (tasks/dataset/fingerprint.py)
    when the workers read it (CSV, Parquet): the flow's process plans the blocks and reads none of the bytes. A
    JSON Lines file is read by the flow's process (it may be on its own disk): its blocks are hashed here."""
    import argparse
    import hashlib

    from flows import cli
    from tasks.dataset import fingerprint
    from tasks.runtime import dask_run

    path = tmp_path / f"big{suffix}"
    data = b"".join(b"%d,%d\n" % (i, i * 7 % 13) for i in range(4000))
    path.write_bytes(data)
    monkeypatch.setattr(fingerprint, "BLOCK", 4096)  # ~9 blocks: the planning side's size only
    read_here = []  # hash_block opens files through this process's fingerprint.open_input only if it runs here
    real = fingerprint.open_input
    monkeypatch.setattr(fingerprint, "open_input", lambda p: read_here.append(p) or real(p))
    value = cli._fingerprint(argparse.Namespace(dataset=str(path), dask_address=cluster.scheduler_address,
                                                cache_dir=str(tmp_path / "cache")))
    digests = b"".join(hashlib.sha256(data[i:i + 4096]).digest() for i in range(0, len(data), 4096))
    assert value == hashlib.sha256(fingerprint.BLOCK_TAG + digests).hexdigest()
    assert len(read_here) == (0 if on_workers else len(data) // 4096 + 1)
    if on_workers:
        assert "hash_block" in _scheduler_prefixes(cluster)
    assert not dask_run.on_cluster()  # the fingerprint's Client is closed before the flow opens the run's


class KillOnFirstEncode(WorkerPlugin):
    """Worker plugin: the first worker to start an encode task kills its own process (SIGKILL)."""

    name = "kill-on-first-encode"

    def __init__(self, marker: str):
        self.marker = marker

    def setup(self, worker):
        self.worker = worker

    def transition(self, key, start, finish, **kwargs):
        from dask.utils import key_split

        if finish != "executing" or "encode_partition" not in key_split(key):
            return
        try:  # exactly one kill across all workers
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os.kill(os.getpid(), signal.SIGKILL)


def test_worker_killed_during_encode_does_not_change_the_artifact(cluster, local_artifact, tmp_path, monkeypatch):
    import cloudpickle
    from distributed import Client

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import this test
    marker = tmp_path / "killed"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    with Client(cluster.scheduler_address) as client:  # the default scheduler, as in the flow
        client.wait_for_workers(2, timeout=60)
        before = set(client.scheduler_info()["workers"])
        client.register_plugin(KillOnFirstEncode(str(marker)))
        try:
            result = run(yaml.safe_load((EXAMPLE / "config.yaml").read_text()), EXAMPLE / "titanic.csv", tmp_path,
                         npartitions=NPARTITIONS)
        finally:
            client.unregister_worker_plugin(KillOnFirstEncode.name)
        client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker
        after = set(client.scheduler_info()["workers"])
    assert marker.exists(), "no worker was killed: the encode stage did not run on the cluster"
    assert before - after, "the killed worker is still registered"
    assert artifact_files(result.artifact["artifact_path"]) == local_artifact


def test_unreachable_scheduler_is_a_usage_error(cli, titanic_config, titanic_csv, tmp_path):
    result = cli("run", titanic_config, "--dataset", titanic_csv, "--output", tmp_path / "out", "--cache-dir",
                 tmp_path / "cache", "--dask-address", "tcp://127.0.0.1:9", env={"PREPFLOW_DASK_CONNECT_TIMEOUT": "1s"})
    assert result.returncode == 2, result.stderr[-2000:]
    assert "--dask-address tcp://127.0.0.1:9: cannot reach the Dask scheduler" in result.stderr
