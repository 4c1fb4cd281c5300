"""One Prefect server per prepflow installation, kept alive between ``prepflow run`` calls.

Why: Prefect's temporary server costs seconds per process (README "Start-up"), more than the whole job
on a mid-sized table. The first run starts a local server, later runs reuse it, and it exits by itself
after ``PREPFLOW_SERVER_IDLE_SECONDS`` (default 1800) without a run; it never exits while a run that it
records is alive (``flows/run_registry.py``).

One server per installation, by design: its state lives in ``$PREPFLOW_HOME/servers/<key>/`` (default
``~/.prepflow``), where the key hashes this interpreter's prefix (the virtualenv) and this checkout.
Two checkouts or two virtualenvs therefore run two servers (each with its own Prefect version, database
and code) and never reuse, replace or stop each other's. The folder holds ``server.json`` (url, pid,
port), ``server.log``, ``prefect/`` (Prefect's home: the SQLite database), ``reports/`` (the data
reports the server serves) and ``runs/`` (one lock file per live CLI run). ``prepflow server status``
shows it, ``prepflow server stop`` stops it.

The server is this module run as a process (``python -m flows.local_server``), not ``prefect server
start --background``: besides Prefect's API and UI, it serves the reports folder on the same port
(``/prepflow/reports/``, so a report link in the UI is an http link), marks runs whose process died as
Crashed, stays alive while a run is in progress and exits when idle. Prefect's background server can do
none of these (it runs until ``prefect server stop``).

It runs at the normal CPU priority: at a lower priority (which would yield a little stage time to a run)
it starves on a loaded machine, where bookkeeping then times out or answers 503.

The UI is told where its API is (``PREFECT_UI_API_URL``, read by the UI from ``/ui-settings``): the
server's own address, port 4200 when it is free (``PREPFLOW_SERVER_PORT`` chooses another; 0: any free
port), else a free port.

``PREFECT_API_URL`` set: that server is used and nothing is started. ``PREPFLOW_PREFECT=ephemeral``:
Prefect's own temporary server.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from core.errors import PrepflowError
from flows import run_registry

ROOT = Path(__file__).resolve().parent.parent
PREFERRED_PORT = 4200
REPORTS_PATH = "/prepflow/reports"
SWEEP_SECONDS = 20.0  # how often the server looks for runs whose process is gone

QUIET_SETTINGS = {
    # Telemetry would try the network (none here) and costs time.
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    # Ship logs to the API every 0.25 s instead of 2 s so a flow does not wait for a flush at exit.
    "PREFECT_LOGGING_TO_API_BATCH_INTERVAL": "0.25",
    "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
}

# Bookkeeping must not fail a data run. Prefect's client retries 408/429/502/503 and dropped or timed out
# connections with exponential backoff (2, 4, 8, ... s): 6 retries wait up to ~2 minutes in all; 504 (a
# proxy's timeout) is retried too. A user's own values win.
CLIENT_SETTINGS = {
    "PREFECT_CLIENT_MAX_RETRIES": "6",
    "PREFECT_CLIENT_RETRY_EXTRA_CODES": "504",
}


def home() -> Path:
    path = Path(os.environ.get("PREPFLOW_HOME", Path.home() / ".prepflow"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def installation_key() -> str:
    """This installation: the interpreter's prefix (its virtualenv) and the checkout the code runs from."""
    where = f"{os.path.realpath(sys.prefix)}\n{ROOT}"
    return hashlib.sha256(where.encode()).hexdigest()[:12]


def state_dir() -> Path:
    path = home() / "servers" / installation_key()
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir(state: Path | None = None) -> Path:
    return (state or state_dir()) / "runs"


def reports_dir(state: Path | None = None) -> Path:
    return (state or state_dir()) / "reports"


def _healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _choose_port() -> int:
    wanted = int(os.environ.get("PREPFLOW_SERVER_PORT", PREFERRED_PORT))
    if wanted and _port_free(wanted):
        return wanted
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    """True when ``pid`` is a live local server process (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True  # no /proc: trust the pid
    return b"flows.local_server" in cmdline


def server_env(state: Path, port: int) -> dict:
    env = dict(os.environ)
    env.update(QUIET_SETTINGS)
    env["PREFECT_HOME"] = str(state / "prefect")
    env.pop("PREFECT_API_URL", None)
    # The UI asks /ui-settings where its API is: this server, not Prefect's default port.
    env["PREFECT_SERVER_API_HOST"] = "127.0.0.1"
    env["PREFECT_SERVER_API_PORT"] = str(port)
    env["PREFECT_UI_API_URL"] = f"http://127.0.0.1:{port}/api"
    # Log the "database is locked" errors it answers with 503 (the client retries them): see server.log.
    env.setdefault("PREFECT_API_LOG_RETRYABLE_ERRORS", "true")
    return env


def read_state(state: Path | None = None) -> dict | None:
    try:
        return json.loads(((state or state_dir()) / "server.json").read_text())
    except (OSError, ValueError):
        return None


def _wait_healthy(url: str, proc: subprocess.Popen | None, pid: int, timeout: float, state: Path) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        if proc is None and not _alive(pid):
            return False
        if _healthy(url):
            return True
        time.sleep(0.2)
    return False


def ensure_server(start_timeout: float = 90.0) -> str:
    """URL of this installation's healthy local Prefect API, starting the server if none runs.

    A live server that is slow to answer (a loaded machine) is waited for, never replaced."""
    state = state_dir()
    with open(state / "server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        recorded = read_state(state)
        if recorded and _alive(recorded["pid"]):
            (state / "server.activity").touch()
            if _wait_healthy(recorded["url"], None, recorded["pid"], start_timeout, state):
                return recorded["url"]
            raise PrepflowError(f"the local Prefect server (pid {recorded['pid']}) did not answer within "
                                f"{start_timeout:.0f} s; see {state / 'server.log'}")
        for attempt in range(2):  # a second try on another port if the chosen one was taken meanwhile
            port = _choose_port() if attempt == 0 else _choose_port_any()
            url = f"http://127.0.0.1:{port}/api"
            with open(state / "server.log", "ab") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "flows.local_server", "--port", str(port), "--state", str(state)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=server_env(state, port),
                    start_new_session=True, cwd=str(ROOT))
            (state / "server.activity").touch()
            if _wait_healthy(url, proc, proc.pid, start_timeout, state):
                (state / "server.json").write_text(json.dumps({
                    "url": url, "ui": ui_url(url), "pid": proc.pid, "port": port, "python": sys.executable,
                    "checkout": str(ROOT)}))
                print(f"prepflow: started a local Prefect server, UI at {ui_url(url)} (state in {state}; "
                      "`prepflow server stop` stops it)", file=sys.stderr)
                return url
            if proc.poll() is None:  # slow (a loaded machine): left starting for the next run, never killed
                (state / "server.json").write_text(json.dumps({
                    "url": url, "ui": ui_url(url), "pid": proc.pid, "port": port, "python": sys.executable,
                    "checkout": str(ROOT)}))
                raise PrepflowError(f"the local Prefect server did not answer within {start_timeout:.0f} s "
                                    f"(still starting; see {state / 'server.log'})")
        raise PrepflowError(f"the local Prefect server exited at start-up (code {proc.returncode}); "
                            f"see {state / 'server.log'}")


def _choose_port_any() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ui_url(api_url: str) -> str:
    return api_url.removesuffix("/").removesuffix("/api")


def stop_server(state: Path | None = None) -> bool:
    """Stop this installation's server (``prepflow server stop``, tests); False when none runs."""
    state = state or state_dir()
    recorded = read_state(state)
    (state / "server.json").unlink(missing_ok=True)
    if not recorded or not _alive(recorded["pid"]):
        return False
    try:
        os.killpg(recorded["pid"], 15)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def status() -> dict:
    """What ``prepflow server status`` prints."""
    state = state_dir()
    recorded = read_state(state) or {}
    running = bool(recorded) and _alive(recorded["pid"])
    return {"running": running, "healthy": running and _healthy(recorded["url"]), "state_dir": str(state),
            "url": recorded.get("url") if running else None, "ui": recorded.get("ui") if running else None,
            "pid": recorded.get("pid") if running else None,
            "live_runs": run_registry.live_runs(runs_dir(state))}


def is_local_api(api_url: str | None) -> bool:
    """True when ``api_url`` is this installation's local server."""
    recorded = read_state()
    return bool(api_url and recorded and recorded.get("url") == api_url.rstrip("/"))


def publish_report(path: str) -> str | None:
    """Copy a report into the folder the local server serves; its http URL, or None when this process does
    not use the local server (or the copy fails)."""
    api = os.environ.get("PREFECT_API_URL")
    if not is_local_api(api):
        return None
    folder = reports_dir()
    folder.mkdir(exist_ok=True)
    name = Path(path).name
    tmp = folder / f".{name}.{os.getpid()}.tmp"
    try:
        shutil.copyfile(path, tmp)
        os.replace(tmp, folder / name)
    except OSError:
        tmp.unlink(missing_ok=True)
        return None
    return f"{ui_url(api)}{REPORTS_PATH}/{name}"


def configure_prefect() -> str:
    """Point this process at the right Prefect API before Prefect is imported; returns which one:
    ``"remote"`` (``PREFECT_API_URL`` set), ``"ephemeral"`` or ``"local"`` (this installation's server)."""
    for key, value in {**QUIET_SETTINGS, **CLIENT_SETTINGS}.items():
        os.environ.setdefault(key, value)
    if os.environ.get("PREFECT_API_URL"):
        _sweep(os.environ["PREFECT_API_URL"])
        return "remote"
    if os.environ.get("PREPFLOW_PREFECT", "local-server") == "ephemeral":
        os.environ.setdefault("PREFECT_HOME", str(home() / "prefect"))
        return "ephemeral"
    url = ensure_server()
    os.environ["PREFECT_API_URL"] = url
    _sweep(url)
    return "local"


def _sweep(api_url: str) -> None:
    """Earlier CLI runs against ``api_url`` whose process died: Crashed (flows/run_registry.py). Best effort:
    an API that fails here is the run's to notice (and survive), not the sweep's."""
    try:
        run_registry.sweep(runs_dir(), api_url.rstrip("/"))
    except Exception as exc:
        print(f"prepflow: warning: could not mark crashed runs: {type(exc).__name__}: {exc}", file=sys.stderr)


def _housekeeping(state: Path, api_url: str, idle: float) -> None:
    """The server's own loop: mark runs whose process is gone as Crashed; exit after ``idle`` seconds
    without a new run, unless a run is still alive."""
    activity = state / "server.activity"
    while True:
        time.sleep(min(SWEEP_SECONDS, max(idle / 4, 0.5)))
        try:
            run_registry.sweep(runs_dir(state), api_url)
        except Exception as exc:  # keep serving; the next sweep tries again
            print(f"prepflow: crashed-run sweep failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        try:
            last = activity.stat().st_mtime
        except OSError:
            last = 0
        if time.time() - last > idle and not run_registry.live_runs(runs_dir(state)):
            os._exit(0)


def _serve(port: int, state: Path) -> None:
    """Entry point of the server process: Prefect's API and UI, the reports folder, housekeeping."""
    # heavy (Prefect's whole server app, uvicorn, starlette): imported only in the server process
    import uvicorn
    from prefect.server.api.server import create_app
    from starlette.routing import Mount
    from starlette.staticfiles import StaticFiles

    reports_dir(state).mkdir(exist_ok=True)
    app = create_app(final=True)
    # Before the UI's catch-all mount at "/": the reports, as static files (html=False: no listing).
    app.router.routes.insert(0, Mount(REPORTS_PATH, app=StaticFiles(directory=reports_dir(state)), name="reports"))
    idle = float(os.environ.get("PREPFLOW_SERVER_IDLE_SECONDS", "1800"))
    threading.Thread(target=_housekeeping, args=(state, f"http://127.0.0.1:{port}/api", idle),
                     daemon=True, name="prepflow-housekeeping").start()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", required=True)
    args = parser.parse_args()
    _serve(args.port, Path(args.state))
