"""Flow runs of ``prepflow run`` processes, so that a run whose process died shows as Crashed.

A CLI run on the local server turns Prefect's flow heartbeat off (it adds wall time to every run). Prefect's server
does not detect a killed run by itself either way: heartbeats only feed an automation that a user must create,
which marks the run ~90 s after its process died (``benchmarks/results/mechanisms.md``); without one the run
stays "Running" for ever. Instead, the run's process
holds an ``flock`` on ``runs/<flow_run_id>.lock`` from the moment its flow run is Running until it ends;
the kernel drops the lock when the process dies, even by SIGKILL. ``sweep`` (run by the local server
every 20 s and by the next ``prepflow run`` before its own flow) takes each lock it can get: its run's
process is gone, so a flow run still Pending or Running, and its unfinished task runs, are set to
Crashed through the API.

The flow run's id is known only once it is Running (the ``on_running`` hook); a process killed before
that (while Prefect creates the run) would leave a Pending or Running run no lock names. So the CLI
first holds a *pending* lock, ``runs/pending-<token>.lock``, and runs the flow tagged
``prepflow-run:<token>``; the hook takes the run's own lock and drops the pending one. A sweep that gets
a pending lock marks the unfinished flow runs carrying its tag Crashed.

With a remote server (``PREFECT_API_URL``) Prefect's own heartbeat stays on, and the next ``prepflow run``
on this machine against the same API sweeps too (no local server sweeps for it). Runs started by a
Prefect worker are the worker's: it reports a flow run whose process exited without a final state.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

UNFINISHED = ("PENDING", "RUNNING", "SCHEDULED", "PAUSED")
CRASHED_MESSAGE = "the prepflow process running this flow run ended without reporting a final state (killed?)"

_held: dict[str, tuple[int, Path]] = {}  # flow run id -> (open fd holding the lock, lock path)


PENDING_PREFIX = "pending-"
TAG_PREFIX = "prepflow-run:"


def register(folder: Path, flow_run_id: str, api_url: str) -> None:
    """Hold this process's lock for ``flow_run_id`` until ``release`` or the process ends."""
    _hold(folder, flow_run_id, {"flow_run_id": flow_run_id, "api_url": api_url})


def register_pending(folder: Path, token: str, api_url: str) -> str:
    """Hold a lock for a flow run not created yet; returns the tag to run the flow with. ``release(token)``
    drops it (the run's own lock, ``register``, has taken over)."""
    tag = TAG_PREFIX + token
    _hold(folder, PENDING_PREFIX + token, {"tag": tag, "api_url": api_url}, key=token)
    return tag


def _hold(folder: Path, name: str, record: dict, key: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.lock"
    tmp = folder / f".{name}.{os.getpid()}.tmp"  # locked and written before a sweep can see it
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, json.dumps({**record, "pid": os.getpid(), "started": time.time()}).encode())
    os.replace(tmp, path)
    _held[key or name] = (fd, path)


def release(flow_run_id: str) -> None:
    """The run ended in this process (whatever its state), or a pending lock's run is registered: forget it."""
    held = _held.pop(flow_run_id, None)
    if held:
        fd, path = held
        path.unlink(missing_ok=True)
        os.close(fd)


def abandon(flow_run_id: str) -> None:
    """The run's final state did not reach the API: drop the lock but keep the file, so that the next
    sweep marks the run Crashed instead of leaving it Running."""
    held = _held.pop(flow_run_id, None)
    if held:
        os.close(held[0])


def live_runs(folder: Path) -> list[str]:
    """Flow run ids whose process still holds its lock."""
    live = []
    for path in sorted(folder.glob("*.lock")) if folder.is_dir() else []:
        if path.name.startswith(PENDING_PREFIX):
            continue
        fd = _try_lock(path)
        if fd is None:
            live.append(path.stem)
        else:
            os.close(fd)
    return live


def _try_lock(path: Path) -> int | None:
    """An fd holding ``path``'s lock, or None when a live process holds it (or the file is gone)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _api(method: str, url: str, body: dict | None = None, timeout: float = 10.0):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        return json.loads(resp.read() or b"null")


def _crash(api_url: str, kind: str, run_id: str) -> None:
    state = {"type": "CRASHED", "name": "Crashed", "message": CRASHED_MESSAGE}
    _api("POST", f"{api_url}/{kind}/{run_id}/set_state", {"state": state, "force": True})


def mark_crashed(api_url: str, flow_run_id: str) -> bool:
    """Set the flow run and its unfinished task runs to Crashed; False when it had finished already."""
    try:
        run = _api("GET", f"{api_url}/flow_runs/{flow_run_id}")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # deleted, or recorded by another server's database
            return False
        raise
    if not run.get("state") or run["state"]["type"] not in UNFINISHED:
        return False
    tasks = _api("POST", f"{api_url}/task_runs/filter", {
        "flow_runs": {"id": {"any_": [flow_run_id]}}, "task_runs": {"state": {"type": {"any_": list(UNFINISHED)}}}})
    for task_run in tasks:
        _crash(api_url, "task_runs", task_run["id"])
    _crash(api_url, "flow_runs", flow_run_id)
    return True


def _unfinished_with_tag(api_url: str, tag: str | None) -> list[str]:
    if not tag:
        return []
    runs = _api("POST", f"{api_url}/flow_runs/filter", {
        "flow_runs": {"tags": {"all_": [tag]}, "state": {"type": {"any_": list(UNFINISHED)}}}})
    return [run["id"] for run in runs]


def sweep(folder: Path, api_url: str) -> list[str]:
    """Mark the runs of dead processes recorded in ``folder`` against ``api_url`` as Crashed; returns their
    ids. A run whose API call fails keeps its file, for the next sweep."""
    crashed = []
    for path in sorted(folder.glob("*.lock")) if folder.is_dir() else []:
        fd = _try_lock(path)
        if fd is None:
            continue
        try:
            try:
                record = json.loads(os.read(fd, 65536) or b"{}")
            except ValueError:
                record = {}
            if record.get("api_url", api_url).rstrip("/") != api_url.rstrip("/"):
                continue  # recorded against another server (should not happen): leave it
            if record.get("flow_run_id") and mark_crashed(api_url, record["flow_run_id"]):
                crashed.append(record["flow_run_id"])
            for run_id in _unfinished_with_tag(api_url, record.get("tag")):  # killed before it was Running
                if mark_crashed(api_url, run_id):
                    crashed.append(run_id)
            path.unlink(missing_ok=True)
        except OSError:
            pass  # API unreachable: try again next time
        finally:
            os.close(fd)
    return crashed
