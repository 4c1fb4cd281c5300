"""Bookkeeping never fails a data run (issue 22): four ``prepflow run`` at once on the local SQLite-backed
Prefect server, while two busy loops keep both cores loaded, all succeed; no 503 reaches the user and
every run's UI record is complete (four Completed flow runs, found by their dataset tag)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid

import pytest

from flows import local_server
from tests.conftest import EXAMPLE, ROOT

pytestmark = pytest.mark.integration

RUNS = 4
BUSY = 2


def test_four_concurrent_runs_on_busy_cores_all_succeed(tmp_path):
    api = local_server.ensure_server(start_timeout=600)  # a loaded machine starts it slowly
    dataset = tmp_path / f"concurrent-{uuid.uuid4().hex[:8]}.csv"  # its name tags this test's runs
    shutil.copyfile(EXAMPLE / "titanic.csv", dataset)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PREFECT_API_URL", None)
    busy = [subprocess.Popen(["timeout", "900", sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(BUSY)]
    runs = []
    try:
        for i in range(RUNS):
            out = open(tmp_path / f"run{i}.out", "wb")
            err = open(tmp_path / f"run{i}.err", "wb")
            runs.append(subprocess.Popen(
                ["timeout", "-k", "10", "1200", sys.executable, "-m", "flows.cli", "run", str(EXAMPLE / "config.yaml"),
                 "--dataset", str(dataset), "--output", str(tmp_path / f"out{i}"), "--cache-dir",
                 str(tmp_path / f"cache{i}"), "--json"], cwd=ROOT, env=env, stdout=out, stderr=err))
            out.close()
            err.close()
        codes = [run.wait() for run in runs]
    finally:
        for proc in busy:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    errs = [(tmp_path / f"run{i}.err").read_text() for i in range(RUNS)]
    assert codes == [0] * RUNS, "\n---\n".join(e[-2000:] for e in errs)
    for err in errs:
        assert "503" not in err and "Service Unavailable" not in err, err[-3000:]
    summaries = [json.loads((tmp_path / f"run{i}.out").read_text().strip().splitlines()[-1]) for i in range(RUNS)]
    assert all("ui_record_incomplete" not in s for s in summaries), summaries
    assert len({s["artifact_id"] for s in summaries}) == 1  # same data and config: one artifact id

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        flow_runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=[f"dataset:{dataset.name}"])))
    assert len(flow_runs) == RUNS and all(r.state.is_completed() for r in flow_runs), [
        (r.name, r.state) for r in flow_runs]
