"""A training loop SIGKILLed mid-epoch and restarted from its last checkpoint reads exactly the rows an
uninterrupted run reads, batch for batch (issue 41 item 5). The loop is ``tests/loader_jobs.py train``:
it logs each batch's row ids and then replaces its checkpoint (the loader's ``state_dict()`` and the
log's length); a restart truncates the log to the checkpoint and resumes the loader from it. The kills
land wherever the process happens to be: inside a step, between the log write and the checkpoint, in
the prefetch thread's gather."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prepflow import Artifact
from tests.helpers import run, write_csv

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("kill")
    rng = np.random.default_rng(4)
    n = 2500
    df = pd.DataFrame({"x": rng.normal(size=n), "c": rng.choice(list("abcd"), n), "y": rng.integers(0, 2, n)})
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}],
              "preprocessing": {"split": {"type": "random", "probabilities": [0.8, 0.1, 0.1], "seed": 1}},
              "publish": {"formats": ["npy"], "shard_rows": 128}}
    return run(config, write_csv(df, tmp / "d.csv"), tmp, npartitions=2).artifact["artifact_path"]


def start(job_file: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.loader_jobs", "train", str(job_file)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.parametrize("loader", [
    {"batch_size": 32, "seed": 11, "shuffle_block": 4, "prefetch": 4, "rank": 1, "world_size": 2},
    {"batch_size": 24, "seed": 3, "shuffle_window": 200, "prefetch": 2, "rank": 0, "world_size": 3},
], ids=["block shuffle, rank 1 of 2", "shard-aware order, rank 0 of 3"])
def test_a_killed_training_loop_resumes_without_repeating_or_skipping_a_row(artifact, tmp_path, loader):
    epochs = 3
    job = {"artifact": artifact, "epochs": epochs, "step_s": 0.01, "rank": loader.pop("rank"),
           "world_size": loader.pop("world_size"), "loader": loader}
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / "job.json").write_text(json.dumps({**job, "log": str(whole / "log"), "checkpoint": str(whole / "ckpt")}))
    ref = start(whole / "job.json")
    assert ref.wait(timeout=300) == 0, ref.stderr.read().decode()
    expected = [json.loads(line) for line in (whole / "log").read_text().splitlines()]
    per_epoch = len(expected) // epochs
    assert per_epoch == len(Artifact.open(artifact).batches("train", world_size=job["world_size"], rank=job["rank"],
                                                            **loader)) > 10

    killed = tmp_path / "killed"
    killed.mkdir()
    log = killed / "log"
    (killed / "job.json").write_text(json.dumps({**job, "log": str(log), "checkpoint": str(killed / "ckpt")}))
    rng = np.random.default_rng(0)  # where the kills fall: mid epoch 0, mid epoch 1, and late in epoch 2
    targets = [int(rng.integers(2, per_epoch - 2)), per_epoch + per_epoch // 2, 3 * per_epoch - 3]
    kills = 0
    for target in targets:
        proc = start(killed / "job.json")
        deadline = time.monotonic() + 300
        while lines(log) < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, proc.stderr.read().decode()  # still mid-run: kill it
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        kills += 1
    final = start(killed / "job.json")
    assert final.wait(timeout=300) == 0, final.stderr.read().decode()
    got = [json.loads(line) for line in log.read_text().splitlines()]
    assert kills == 3 and got == expected  # batch for batch: no row repeated or skipped
    for epoch in range(epochs):  # and within an epoch no row twice (the check above is against this too)
        rows = [r for e, batch in got if e == epoch for r in batch]
        assert len(rows) == len(set(rows)) > 0
