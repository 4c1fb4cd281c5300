"""Crash safety and concurrency of ``prepflow run`` (issue 9).

A run is SIGKILLed while a stage's output is half-written (``PREPFLOW_TEST_PAUSE_AT``, the hook in
``core/pause.py:pause_point``): during ingest, during encode, during publish. The rerun completes,
reuses every finished stage and publishes the same artifact id and bytes as an uninterrupted run;
in between, no reader sees an artifact without its manifest. Two runs started together on the same
config, cache and output both succeed and leave one artifact and an intact cache.

A Dask worker killed during encode is covered by
``tests/integration/test_dask_cluster.py::test_worker_killed_during_encode_does_not_change_the_artifact``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.errors import DataError
from storage.artifact import Artifact
from storage.cache import StageCache
from tests.conftest import EXAMPLE, ROOT, run_cli
from tests.helpers import artifact_files

pytestmark = pytest.mark.integration

CONFIG = EXAMPLE / "config.yaml"
DATASET = EXAMPLE / "titanic.csv"
ENV = {"SOURCE_DATE_EPOCH": "1700000000"}  # created_at pinned: runs are byte-comparable


def _args(tmp: Path) -> list[str]:
    return ["run", str(CONFIG), "--dataset", str(DATASET), "--output", str(tmp / "out"),
            "--cache-dir", str(tmp / "cache"), "--json"]


def _popen(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **ENV, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """An uninterrupted run: its summary and artifact bytes."""
    tmp = tmp_path_factory.mktemp("reference")
    result = run_cli(*_args(tmp), env=ENV)
    assert result.returncode == 0, result.stderr
    summary = result.json()
    return {"summary": summary, "files": artifact_files(summary["artifact_path"])}


def untrusted_views(out: Path) -> list[str]:
    """What a reader could wrongly see in an output root: a visible folder without its manifest, or
    LATEST naming an artifact that is not complete."""
    bad = [p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")
           and not (p / "manifest.json").is_file()] if out.exists() else []
    latest = out / "LATEST"
    if latest.exists() and not (out / latest.read_text().strip() / "manifest.json").is_file():
        bad.append("LATEST -> " + latest.read_text().strip())
    return bad


def invalid_entries(cache: Path) -> list[str]:
    """Cache entries (not temporary folders) that do not verify against their _entry.json."""
    store = StageCache(cache)
    bad = []
    for stage_dir in sorted(p for p in cache.iterdir() if p.is_dir()) if cache.exists() else []:
        for entry in sorted(stage_dir.iterdir()):
            if entry.is_dir() and not entry.name.startswith(".") and store.get(stage_dir.name, entry.name) is None:
                bad.append(f"{stage_dir.name}/{entry.name}")
    return bad


@pytest.mark.parametrize(("stage", "pause"), [("ingest", "ingest"), ("encode", "encode"), ("publish", "publish"),
                                              ("publish", "publish_shard")])  # a shard's writer task, half-way
def test_sigkill_mid_stage_then_rerun_reuses_finished_stages(stage, pause, reference, tmp_path):
    marker = tmp_path / "paused"
    proc = _popen(_args(tmp_path), {"PREPFLOW_TEST_PAUSE_AT": pause, "PREPFLOW_TEST_PAUSE_FILE": str(marker)})
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert proc.poll() is None, f"run ended before reaching {stage}: {proc.communicate()[1][-3000:]}"
            assert time.monotonic() < deadline, f"run never reached {stage}"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL

    out, cache = tmp_path / "out", tmp_path / "cache"
    assert untrusted_views(out) == []
    with pytest.raises(DataError, match="not a complete artifact"):
        Artifact.open(out)
    assert invalid_entries(cache) == []
    assert any(p.name.startswith(".tmp-") for p in (out if stage == "publish" else cache / stage).iterdir()), \
        "the kill did not land while the stage's output was half-written"

    rerun = run_cli(*_args(tmp_path), env=ENV)
    assert rerun.returncode == 0, rerun.stderr
    summary = rerun.json()
    ref = reference["summary"]
    assert summary["artifact_id"] == ref["artifact_id"]
    assert artifact_files(summary["artifact_path"]) == reference["files"]
    names = [s["name"] for s in summary["stages"]]
    killed = names.index(stage)
    assert all(s["cached"] for s in summary["stages"][:killed]), summary["stages"]
    assert not summary["stages"][killed]["cached"], summary["stages"]
    assert untrusted_views(out) == [] and invalid_entries(cache) == []
    # the killed run's temporary folder (and its lock file) went when the rerun wrote there again
    assert not [p.name for p in (out if stage == "publish" else cache / stage).iterdir() if p.name.startswith(".tmp-")]
    Artifact.open(out, verify=True)  # LATEST -> the complete artifact


def test_two_runs_started_together_both_succeed_with_one_identical_artifact(reference, tmp_path):
    procs = [_popen(_args(tmp_path), {}) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (_stdout, stderr) in zip(procs, results, strict=True):
        assert proc.returncode == 0, stderr[-3000:]
    summaries = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in results]
    assert {s["artifact_id"] for s in summaries} == {reference["summary"]["artifact_id"]}
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert [p.name for p in out.iterdir() if p.is_dir()] == [reference["summary"]["artifact_id"]]  # no staging left
    assert artifact_files(summaries[0]["artifact_path"]) == reference["files"]
    assert untrusted_views(out) == [] and invalid_entries(cache) == []
    assert not [p for p in cache.rglob(".tmp-*")], "a temporary cache folder was left behind"
    rerun = run_cli(*_args(tmp_path), "--always-run-flow", env=ENV)  # the cache both runs wrote is all hits
    assert rerun.returncode == 0, rerun.stderr
    assert all(s["cached"] for s in rerun.json()["stages"]), rerun.json()["stages"]
