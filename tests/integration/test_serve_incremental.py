"""A scheduled deployment over a growing folder (``prepflow serve --cron`` on a folder of daily files): a file
added between two runs of the deployment is the only file the second run reads; every older file's ingest
entry is reused, the artifact is the one a cold run on the grown folder publishes, and the run's tags say
how many files it read. A real Prefect server (the session's local one), runs triggered as the UI does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.helpers import write_config
from tests.unit.dataset.test_incremental_files import CONFIG, write_day

pytestmark = pytest.mark.integration


def _tags(client, flow_run_id) -> set[str]:
    return set(client.read_flow_run(flow_run_id).tags)


def test_a_file_added_between_two_deployment_runs_is_the_only_file_read(tmp_path, cli):
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.local_server import ensure_server

    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i)
    config = write_config(CONFIG, tmp_path / "config.yaml")
    name = f"inc-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PREFECT_RUNNER_POLL_FREQUENCY": "1"}
    env.pop("PREFECT_API_URL", None)  # the local server of this session's PREPFLOW_HOME
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(
        ["timeout", "-k", "10", "400", sys.executable, "-m", "flows.cli", "serve", str(config), "--dataset",
         str(folder), "--output", "out", "--cache-dir", "cache", "--name", name, "--cron", "0 2 * * *"],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()

    def logs() -> str:
        return (tmp_path / "serve.log").read_text(errors="replace")[-4000:]

    def published_manifest() -> dict:
        latest = (tmp_path / "out" / "LATEST").read_text().strip()
        manifest = json.loads((tmp_path / "out" / latest / "manifest.json").read_text())
        return manifest

    try:
        with temporary_settings(updates={PREFECT_API_URL: ensure_server()}), get_client(sync_client=True) as client:
            deadline = time.monotonic() + 90
            while True:
                try:
                    client.read_deployment_by_name(f"preprocess/{name}")
                    break
                except ObjectNotFound:
                    assert proc.poll() is None, logs()
                    assert time.monotonic() < deadline, logs()
                    time.sleep(0.5)

            first = run_deployment(f"preprocess/{name}", timeout=200, poll_interval=1)
            assert first.state.is_completed(), f"{first.state}\n{logs()}"
            assert {"files:3", "new-files:3"} <= _tags(client, first.id)
            entries = sorted(p.name for p in (tmp_path / "cache" / "ingest_file").iterdir() if not p.name.startswith("."))
            stamps = {e: (tmp_path / "cache" / "ingest_file" / e / "_entry.json").stat().st_mtime_ns for e in entries}

            write_day(folder, 3)  # the next day's file arrives
            second = run_deployment(f"preprocess/{name}", timeout=200, poll_interval=1)
            assert second.state.is_completed(), f"{second.state}\n{logs()}"
            assert {"files:4", "new-files:1"} <= _tags(client, second.id)
            after = sorted(p.name for p in (tmp_path / "cache" / "ingest_file").iterdir() if not p.name.startswith("."))
            assert len(after) == 4 and set(entries) < set(after)  # one new entry; the old ones reused as they were
            assert all((tmp_path / "cache" / "ingest_file" / e / "_entry.json").stat().st_mtime_ns == stamps[e]
                       for e in entries)
            manifest = published_manifest()
            assert [f["name"] for f in manifest["dataset_files"]] == [f"day_{i:02d}.parquet" for i in range(4)]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    cold = cli("run", config, "--dataset", folder, "--output", tmp_path / "cold" / "out", "--cache-dir",
               tmp_path / "cold" / "cache", "--json")
    assert cold.returncode == 0, cold.stderr[-3000:]
    assert cold.json()["artifact_id"] == manifest["artifact_id"]

    # the same files as a list (the shell's expansion of day_*.parquet, here in reverse): the Prefect flow takes
    # it as its dataset parameter, finds every file's entries in the cache and publishes the same artifact
    listed = cli("run", config, "--dataset", *sorted(folder.iterdir(), reverse=True), "--output",
                 tmp_path / "listed" / "out", "--cache-dir", tmp_path / "cold" / "cache", "--json")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert listed.json()["artifact_id"] == manifest["artifact_id"]
    assert listed.json()["files"] == {"total": 4, "new": 0}
