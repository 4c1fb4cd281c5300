"""A run whose process is SIGKILLed shows CRASHED through the API (issue 22), on a real local server.

The child (``tests/crash_probe.py``) is a flow run started the way ``prepflow run`` starts one
(``flows.bookkeeping.RunRecord`` as its ``on_running`` hook, on this session's local server); it blocks
inside a task until killed. Nothing
tells the server: its housekeeping (every ``SWEEP_SECONDS``) finds the run's lock free and marks the
flow run, and its unfinished task run, Crashed. The next ``prepflow run`` sweeps the same way before its
own flow (``local_server.configure_prefect``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from flows import local_server, run_registry
from tests.conftest import ROOT

pytestmark = pytest.mark.integration



def _state(api: str, kind: str, run_id: str) -> str:
    return run_registry._api("GET", f"{api}/{kind}/{run_id}")["state"]["type"]


def test_a_killed_run_is_marked_crashed_by_the_local_server(tmp_path):
    api = local_server.ensure_server(start_timeout=600)  # a loaded machine starts it slowly
    marker = tmp_path / "running"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PREFECT_API_URL", None)
    log = open(tmp_path / "child.log", "wb")
    child = subprocess.Popen([sys.executable, "-m", "tests.crash_probe", str(marker)], cwd=ROOT, env=env, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    try:
        deadline = time.monotonic() + 600
        while not marker.exists():
            assert child.poll() is None, (tmp_path / "child.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the child's flow never started"
            time.sleep(0.5)
        assert marker.read_text() == "local"
        (flow_run_id,) = run_registry.live_runs(local_server.runs_dir())
        assert _state(api, "flow_runs", flow_run_id) == "RUNNING"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    killed = time.monotonic()
    while _state(api, "flow_runs", flow_run_id) != "CRASHED":
        assert time.monotonic() - killed < 120, "still not Crashed 2 minutes after the kill"
        time.sleep(2)
    print(f"Crashed {time.monotonic() - killed:.1f} s after SIGKILL")
    tasks = run_registry._api("POST", f"{api}/task_runs/filter",
                              {"flow_runs": {"id": {"any_": [flow_run_id]}}})
    assert all(t["state"]["type"] == "CRASHED" for t in tasks), [t["state"]["type"] for t in tasks]
    assert not (local_server.runs_dir() / f"{flow_run_id}.lock").exists()
    assert run_registry.sweep(local_server.runs_dir(), api) == []  # nothing left to mark


CHILD_BEFORE_RUNNING = """
import json, sys, time
from pathlib import Path
from flows import run_registry
folder, api, marker = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
tag = run_registry.register_pending(folder, "killedbeforerun", api)  # what prepflow run holds first
flow = run_registry._api("POST", f"{api}/flows/", {"name": "prepflow-crash-probe"})
run = run_registry._api("POST", f"{api}/flow_runs/", {"flow_id": flow["id"], "tags": [tag],
                                                     "state": {"type": "PENDING", "name": "Pending"}})
marker.write_text(run["id"])  # created, as Prefect creates it, and not Running yet: no on_running hook
time.sleep(600)
"""


def test_a_run_killed_before_it_was_running_is_marked_crashed_by_the_next_sweep(tmp_path):
    """The window before the on_running hook: the pending lock's tag finds the flow run."""
    api = local_server.ensure_server(start_timeout=600)
    folder, marker = tmp_path / "runs", tmp_path / "created"
    child = subprocess.Popen([sys.executable, "-c", CHILD_BEFORE_RUNNING, str(folder), api, str(marker)], cwd=ROOT,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() or not marker.read_text():
            assert child.poll() is None and time.monotonic() < deadline, "the child never created its run"
            time.sleep(0.2)
        flow_run_id = marker.read_text()
        assert run_registry.sweep(folder, api) == []  # alive: its lock is held, nothing is marked
        assert _state(api, "flow_runs", flow_run_id) == "PENDING"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert run_registry.sweep(folder, api) == [flow_run_id]
    assert _state(api, "flow_runs", flow_run_id) == "CRASHED"
    assert list(folder.glob("*.lock")) == []
