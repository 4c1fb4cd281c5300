"""What Prefect's flow-run heartbeat costs a ``prepflow run``: the CLI on the local server turns it off
(``flows.cli.flow_runs.run_settings``) unless ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` is set; this runs the same cold run
with it set to Prefect's default (180 s) and without, alternated, and prints each run's wall seconds and the
CPU seconds of its process (``wait4``), then the medians per variant.

Prefect 3.8 sends the heartbeat from a thread that sleeps in 1 s steps; the flow's end sets its stop event
and joins it (``prefect.flow_engine._send_heartbeats``), and the first heartbeat starts Prefect's events
client.

    .venv/bin/python benchmarks/flow_heartbeat.py --repeat 5 [--home /tmp/prepflow-hb]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "titanic"


def run_once(work: Path, heartbeat: bool, env: dict) -> dict:
    out, cache = work / "out", work / "cache"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(env)
    if heartbeat:
        env["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] = "180"  # Prefect's default; set, the CLI keeps it on
    else:
        env.pop("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", None)  # the CLI's default on the local server: off
    cmd = [sys.executable, "-m", "flows.cli", "run", str(EXAMPLE / "config.yaml"), "--dataset",
           str(EXAMPLE / "titanic.csv"), "--output", str(out), "--cache-dir", str(cache), "--json"]
    start = time.perf_counter()
    with open(work / "stdout.txt", "w") as stdout, open(work / "stderr.txt", "w") as stderr:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"prepflow run failed:\n{(work / 'stderr.txt').read_text()[-3000:]}")
    return {"heartbeat": heartbeat, "wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5, help="runs of each variant, alternated")
    parser.add_argument("--work", type=Path, default=Path("/tmp/prepflow-heartbeat"))
    parser.add_argument("--home", type=Path, help="PREPFLOW_HOME (its local server); default WORK/home")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PREPFLOW_HOME": str(args.home or args.work / "home"),
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    env.pop("PREFECT_API_URL", None)  # the local server's, as a plain prepflow run
    run_once(args.work, False, env)  # warm-up: starts the local server if none runs, byte-compiles
    results: dict[bool, list[dict]] = {True: [], False: []}
    for i in range(args.repeat):
        for heartbeat in ((False, True) if i % 2 == 0 else (True, False)):
            r = run_once(args.work, heartbeat, env)
            results[heartbeat].append(r)
            print(json.dumps(r), flush=True)
    for heartbeat, runs in results.items():
        print(json.dumps({"summary": "heartbeat 180 s" if heartbeat else "heartbeat off", "runs": len(runs),
                          "wall_s_median": round(statistics.median(r["wall_s"] for r in runs), 2),
                          "cpu_s_median": round(statistics.median(r["cpu_s"] for r in runs), 2)}), flush=True)


if __name__ == "__main__":
    main()
