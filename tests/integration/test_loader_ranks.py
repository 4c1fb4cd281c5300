"""Ranks under real ``torch.distributed`` (gloo, 2 and 3 processes on the CPU): each epoch's rows are
disjoint across the ranks and all read, every rank takes the same number of steps (a step is an
``all_reduce`` all ranks join, so an extra batch on one rank would hang the job until gloo's timeout),
and a job stopped mid-epoch and restarted from its saved state reads the same order (issue 41 item 3).
The ranks are ``tests/loader_jobs.py dist``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prepflow import Artifact
from tests.helpers import run, write_csv

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
N = 1000


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("ranks")
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"x": rng.normal(size=N), "c": rng.choice(list("abcd"), N), "y": rng.integers(0, 2, N)})
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}],
              "preprocessing": {"split": {"type": "random", "probabilities": [0.8, 0.1, 0.1], "seed": 1}},
              "publish": {"formats": ["npy", "parquet"], "shard_rows": 64}}
    return run(config, write_csv(df, tmp / "d.csv"), tmp, npartitions=2).artifact["artifact_path"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(job: dict, world: int, tmp: Path, name: str) -> dict:
    job = {**job, "port": free_port(), "out": str(tmp / f"{name}.json")}
    (tmp / f"{name}-job.json").write_text(json.dumps(job))
    procs = [subprocess.Popen([sys.executable, "-m", "tests.loader_jobs", "dist", str(tmp / f"{name}-job.json")],
                              cwd=ROOT, env={**os.environ, "RANK": str(r), "WORLD_SIZE": str(world)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(world)]
    outputs = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:  # a hang: kill every rank, then fail
            for p in procs:
                p.kill()
            pytest.fail(f"{name}: the ranks did not finish (a hang at a collective)")
        outputs.append(out.decode(errors="replace"))
    assert [p.returncode for p in procs] == [0] * world, "\n".join(o[-3000:] for o in outputs)
    return json.loads(Path(job["out"]).read_text())


@pytest.mark.parametrize("world, loader", [
    (2, {"batch_size": 32, "seed": 3, "prefetch": 2}),
    # the shard-aware order of a streamed artifact, shuffled by blocks of 4 rows inside windows of 100+ rows
    (3, {"batch_size": 40, "seed": 5, "shuffle_block": 4, "shuffle_window": 100}),
], ids=["2 ranks", "3 ranks"])
def test_ranks_read_disjoint_rows_in_step_and_resume_in_the_same_order(artifact, tmp_path, world, loader):
    epochs = 2
    job = {"artifact": artifact, "epochs": epochs, "loader": loader, "state": str(tmp_path / "state")}
    whole = launch(job, world, tmp_path, "whole")
    ids = Artifact.open(artifact).read_split("train")["__row__"]
    for epoch in map(str, range(epochs)):
        ranks = whole[epoch]
        assert [r["rank"] for r in ranks] == list(range(world))
        steps = {r["steps"] for r in ranks}
        assert steps == {r["batches"] for r in ranks} and len(steps) == 1  # the same steps on every rank
        rows = [x for r in ranks for batch in r["rows"] for x in batch]
        assert len(rows) == len(set(rows)) and sorted(rows) == sorted(ids.tolist())  # disjoint, complete
    assert whole["0"][0]["rows"] != whole["1"][0]["rows"]  # a new shuffle each epoch

    stop = [1, whole["1"][0]["steps"] // 2]
    stopped = launch({**job, "stop_at": stop}, world, tmp_path, "stopped")
    resumed = launch({**job, "resume": True}, world, tmp_path, "resumed")
    assert set(resumed) == {"1"}
    for rank in range(world):
        head = stopped["1"][rank]["rows"]
        assert len(head) == stop[1]
        assert head + resumed["1"][rank]["rows"] == whole["1"][rank]["rows"]  # the same order, nothing twice
        assert stopped["0"][rank]["rows"] == whole["0"][rank]["rows"]
