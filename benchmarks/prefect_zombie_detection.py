"""How long after a SIGKILL of the flow's process a run shows Crashed: Prefect's own detection against
``flows/run_registry.py``.

Prefect 3.8's server has no detection of its own: a flow run emits ``prefect.flow-run.heartbeat`` events
(``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``, at least 30 s) and an automation must mark the runs whose heartbeats
stop (Prefect's "Detect zombie flows" guide: a proactive trigger expecting the next heartbeat or a final state
within 90 s of each heartbeat, action Crashed). This script creates that automation on a local server
(``flows.local_server``, in its own ``PREPFLOW_HOME``), then each round starts two flow runs that block in a
task and SIGKILLs both at once:

- ``heartbeat``: a plain Prefect flow with heartbeats every ``--frequency`` seconds (no run_registry lock);
- ``run_registry``: ``tests/crash_probe.py``, a flow run started as ``prepflow run`` starts one (its lock in
  ``runs/``), found by the server's sweep (every ``local_server.SWEEP_SECONDS``).

It polls both runs' states every second and prints, per run, the seconds from the kill to Crashed (or
``null`` after ``--timeout``). The kill comes ``--after`` seconds after the task started.

    .venv/bin/python benchmarks/prefect_zombie_detection.py --rounds 2 [--frequency 30] [--work /tmp/zombie]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AUTOMATION = "prepflow-bench: crash zombie flows"

HEARTBEAT_CHILD = """
import os, sys, time
from prefect import flow, task
from prefect.runtime import flow_run

@task
def block(marker):
    with open(marker + ".tmp", "w") as f:
        f.write(flow_run.id)
    os.replace(marker + ".tmp", marker)
    time.sleep(900)

@flow(name="zombie-probe")
def probe(marker):
    block(marker)

probe(sys.argv[1])
"""


def _create_automation() -> None:
    """Prefect's "Detect zombie flows" automation (docs.prefect.io/v3/advanced/detect-zombie-flows), once."""
    from datetime import timedelta

    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    try:
        Automation.read(name=AUTOMATION)
        return
    except Exception:  # not there yet (ValueError or ObjectNotFound, by Prefect version)
        pass
    Automation(
        name=AUTOMATION,
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", "prefect.flow-run.Completed", "prefect.flow-run.Failed",
                    "prefect.flow-run.Cancelled", "prefect.flow-run.Crashed"},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=90),
        ),
        actions=[ChangeFlowRunState(state=StateType.CRASHED, message="missing heartbeats")],
    ).create()


def _wait_for(marker: Path, child: subprocess.Popen, log: Path, timeout: float = 600) -> str:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the probe did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    return marker.read_text()


def one_round(api: str, work: Path, frequency: int, after: float, timeout: float) -> dict:
    from flows import local_server, run_registry

    for p in work.glob("marker-*"):
        p.unlink()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "PREFECT_API_URL": api,
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    children = {}
    hb_env = {**env, "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(frequency)}
    children["heartbeat"] = subprocess.Popen(
        [sys.executable, "-c", HEARTBEAT_CHILD, str(work / "marker-heartbeat")], cwd=ROOT, env=hb_env,
        stdout=open(work / "heartbeat.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    rr_env = dict(env)
    rr_env.pop("PREFECT_API_URL")  # crash_probe takes the local server's URL as prepflow run does
    children["run_registry"] = subprocess.Popen(
        [sys.executable, "-m", "tests.crash_probe", str(work / "marker-run_registry")], cwd=ROOT, env=rr_env,
        stdout=open(work / "run_registry.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        ids = {"heartbeat": _wait_for(work / "marker-heartbeat", children["heartbeat"], work / "heartbeat.log")}
        _wait_for(work / "marker-run_registry", children["run_registry"], work / "run_registry.log")
        (ids["run_registry"],) = run_registry.live_runs(local_server.runs_dir())  # this home's only run
        time.sleep(after)
    finally:
        for child in children.values():
            os.killpg(child.pid, signal.SIGKILL)
    killed = time.monotonic()
    for child in children.values():
        child.wait()
    seconds: dict[str, float | None] = {name: None for name in ids}
    while any(v is None for v in seconds.values()) and time.monotonic() - killed < timeout:
        for name, run_id in ids.items():
            if seconds[name] is None:
                state = run_registry._api("GET", f"{api}/flow_runs/{run_id}")["state"]["type"]
                if state == "CRASHED":
                    seconds[name] = round(time.monotonic() - killed, 1)
        time.sleep(1.0)
    return {"frequency_s": frequency, "killed_after_task_start_s": after, "seconds_to_crashed": seconds,
            "timeout_s": timeout}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--frequency", type=int, default=30, help="PREFECT_FLOWS_HEARTBEAT_FREQUENCY (min 30)")
    parser.add_argument("--after", type=float, default=5.0, help="seconds from the task's start to the kill")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--work", type=Path, default=Path("/tmp/prepflow-zombie"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ["PREPFLOW_HOME"] = str(args.work / "home")
    sys.path.insert(0, str(ROOT))
    from flows import local_server

    api = local_server.ensure_server(start_timeout=600)
    os.environ["PREFECT_API_URL"] = api
    _create_automation()
    print(json.dumps({"api": api, "automation": AUTOMATION, "sweep_seconds": local_server.SWEEP_SECONDS}),
          flush=True)
    for _ in range(args.rounds):
        print(json.dumps(one_round(api, args.work, args.frequency, args.after, args.timeout)), flush=True)


if __name__ == "__main__":
    main()
