"""A Prefect server kept alive between ``prepflow run`` calls (the embedded default).

Why: Prefect's temporary server costs 5-17 s per process (measured in README "Start-up"), more
than the whole job on a 336k-row table. prepflow instead starts one local server on first use,
records it in ``$PREPFLOW_HOME/server.json`` and reuses it; the server stops by itself after
``PREPFLOW_SERVER_IDLE_SECONDS`` (default 1800) without a run. Every run "touches" the server's
activity file, which the server's watchdog reads.

Choices (see README): ``PREPFLOW_PREFECT=ephemeral`` falls back to Prefect's own temporary
server; an explicit ``PREFECT_API_URL`` always wins and nothing is started.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from core.errors import PrepflowError

QUIET_SETTINGS = {
    # Telemetry would try the network (none here) and costs time.
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    # Ship logs to the API every 0.25 s instead of 2 s so a flow does not wait for a flush at exit.
    "PREFECT_LOGGING_TO_API_BATCH_INTERVAL": "0.25",
    "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
}


def home() -> Path:
    path = Path(os.environ.get("PREPFLOW_HOME", Path.home() / ".prepflow"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _healthy(url: str, timeout: float = 0.5) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(base: Path) -> dict:
    env = dict(os.environ)
    env.update(QUIET_SETTINGS)
    env["PREFECT_HOME"] = str(base / "prefect")
    env.pop("PREFECT_API_URL", None)
    return env


def ensure_server(start_timeout: float = 60.0) -> str:
    """URL of a healthy local Prefect API, starting one if needed."""
    base = home()
    state_file = base / "server.json"
    with open(base / "server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if state_file.exists():
            state = json.loads(state_file.read_text())
            if _healthy(state["url"]):
                (base / "server.activity").touch()
                return state["url"]
        port = _free_port()
        url = f"http://127.0.0.1:{port}/api"
        log = open(base / "server.log", "ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "flows.local_server", "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=server_env(base), start_new_session=True, cwd=str(Path(__file__).resolve().parent.parent))
        (base / "server.activity").touch()
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise PrepflowError(f"the local Prefect server exited at start-up (code {proc.returncode}); "
                                    f"see {base / 'server.log'}")
            if _healthy(url):
                state_file.write_text(json.dumps({"url": url, "pid": proc.pid, "port": port}))
                return url
            time.sleep(0.2)
        proc.terminate()
        raise PrepflowError(f"the local Prefect server did not answer within {start_timeout:.0f} s; "
                            f"see {base / 'server.log'}")


def stop_server() -> bool:
    """Stop the recorded local server (used by tests and ``prepflow server stop``)."""
    state_file = home() / "server.json"
    if not state_file.exists():
        return False
    state = json.loads(state_file.read_text())
    try:
        os.killpg(state["pid"], 15)
    except (ProcessLookupError, PermissionError):
        pass
    state_file.unlink(missing_ok=True)
    return True


def configure_prefect() -> None:
    """Point this process at the right Prefect API before Prefect is imported."""
    for key, value in QUIET_SETTINGS.items():
        os.environ.setdefault(key, value)
    if os.environ.get("PREFECT_API_URL"):
        return
    if os.environ.get("PREPFLOW_PREFECT", "local-server") == "ephemeral":
        os.environ.setdefault("PREFECT_HOME", str(home() / "prefect"))
        return
    os.environ["PREFECT_API_URL"] = ensure_server()


# The server's bookkeeping (it records task runs from their events, ~0.3-0.5 s CPU while a 336k-row run's
# stages compute) yields the CPU to the runs it serves: a run's stage time fell by 0.07 s on average
# (9 of 12 alternated runs, 2 cores) with the server at lower priority. A run waiting on the API leaves
# the cores idle, so the server then gets them anyway.
SERVER_NICE = 10


def lower_priority(increment: int = SERVER_NICE) -> None:
    """Lower this process's CPU priority, also against other sessions: with Linux's autogroup scheduling a
    process's nice value only ranks it within its own session (the server runs in its own)."""
    try:
        os.nice(increment)
    except OSError:
        pass
    try:
        Path("/proc/self/autogroup").write_text(str(increment))
    except OSError:  # not Linux, or autogroup scheduling off
        pass


def _serve(port: int) -> None:
    """Entry point of the server process: uvicorn + an idle watchdog, at a lower CPU priority."""
    import threading

    lower_priority()

    import uvicorn
    from prefect.server.api.server import create_app

    idle = float(os.environ.get("PREPFLOW_SERVER_IDLE_SECONDS", "1800"))
    activity = home() / "server.activity"

    def watchdog() -> None:
        while True:
            time.sleep(min(10.0, idle / 4))
            try:
                last = activity.stat().st_mtime
            except OSError:
                last = 0
            if time.time() - last > idle:
                os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    uvicorn.run(create_app(final=True), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    _serve(parser.parse_args().port)
