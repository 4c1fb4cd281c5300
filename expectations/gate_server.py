"""A local process with Great Expectations imported that runs the data-quality gates between runs.

Why: every ``prepflow run`` is a new process and ``import great_expectations`` costs ~2.6-2.8 s
(altair, scipy.stats, sqlalchemy, ...). Warm, the gates cost 11-14% of the other stages on 1M rows;
cold, the import lands in the first gate (78-90% of the other stages). A background import thread
competes with ingest for the GIL and only ingest's ~0.6 s covers it. So, like the local Prefect server
(``flows/local_server.py``), the first run starts this server and later runs reuse it:

* ``ensure_started()`` (non-blocking, under an flock on ``$PREPFLOW_HOME/gate-server.lock``): when
  ``gate-server.json`` names a live server of the same code fingerprint, touch its activity file;
  else start ``python -m expectations.gate_server --socket PATH`` detached (log in
  ``gate-server.log``). It imports GX on the other core while the run starts Prefect and ingests.
* Fingerprint: the content of prepflow's ``expectations/``, ``tasks/`` and ``storage/`` sources,
  ``sys.executable`` and GX's version. A server of other code is replaced, never used.
* The server imports GX, runs a tiny suite (first-use costs), then answers on a Unix socket in
  ``$PREPFLOW_HOME`` (mode 0600; the directory must belong to the user), one request per connection,
  one at a time. It exits after ``PREPFLOW_SERVER_IDLE_SECONDS`` (default 1800) without a request or
  a run's touch, and on SIGTERM; it removes its socket and state when it exits.
* Protocol (``expectations.gate_protocol``): an 8-byte big-endian length, then UTF-8 JSON, both
  ways; no pickle. Request ``{"fingerprint", "named": [[source, suite JSON], ...], "view": NAME,
  "args": [...], "scheduler_free": true}``: the server builds the partitions with
  ``tasks.validate.VIEWS[view](*args)`` (the function the run would call itself) and runs
  ``tasks.validate.run_suites``. Reply ``{"ok": true, "suites": [...], "rows": N}`` or ``{"ok": false,
  "error_type": NAME, "message": TEXT}``; a prepflow error is raised again in the run with its class
  and message, anything else (a dead or stale server, garbage) makes the run validate in-process.
  ``scheduler_free``: the run's Dask is local and idle while it waits, so the server runs the
  partitions on its threaded scheduler (false: on one thread).

``PREPFLOW_GATE_SERVER``: ``auto`` (default) uses the server when Dask runs locally
(``tasks.frame.local_only``); ``off`` validates in the run's own process (GX imported by a background
thread, ``expectations.engine.preload``). With a distributed Client the gates run on the cluster.
The server process itself: ``expectations.gate_process``.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("expectations", "tasks", "storage")
MODES = ("auto", "off")
_SPAWNED: dict[int, subprocess.Popen] = {}  # servers this process started (poll() sees their exit)

log = logging.getLogger("prepflow.validate")


def home() -> Path:
    from flows.local_server import home as prepflow_home

    return prepflow_home()


def enabled() -> bool:
    """``PREPFLOW_GATE_SERVER``: ``auto`` (default) or ``off``."""
    mode = os.environ.get("PREPFLOW_GATE_SERVER", "auto").strip().lower()
    if mode not in MODES:
        from core.errors import ConfigError

        raise ConfigError(f"The environment variable PREPFLOW_GATE_SERVER must be one of {', '.join(MODES)}. "
                          f"Got {mode!r} instead.")
    return mode == "auto"


@functools.lru_cache(maxsize=None)
def fingerprint(root: Path = ROOT) -> str:
    """sha256 of prepflow's gate code (every ``*.py`` under ``SOURCES``, by relative path), the
    interpreter and GX's installed version (its dist-info folder's name: ``importlib.metadata`` scans
    every installed distribution, 20-50 ms of each run, where this costs well under 1 ms)."""
    digest = hashlib.sha256()
    for name in SOURCES:
        for path in sorted((root / name).rglob("*.py")):
            digest.update(f"{path.relative_to(root).as_posix()}\0".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    digest.update(f"{sys.executable}\0{_gx_install()}".encode())
    return digest.hexdigest()


def _gx_install() -> str:
    """Where GX is installed and which version (no import): the package folder and its dist-info."""
    import importlib.util

    spec = importlib.util.find_spec("great_expectations")
    if spec is None or spec.origin is None:
        return "great_expectations: not installed"
    package = Path(spec.origin).parent
    return f"{package}\0{sorted(p.name for p in package.parent.glob('great_expectations-*.dist-info'))}"


# ---- the server's lifecycle, seen from a run -----------------------------------------------------

def private(base: Path) -> bool:
    """The socket's directory belongs to this user (the client also checks the peer's uid)."""
    return base.stat().st_uid == os.getuid()


def read_state(base: Path) -> dict | None:
    try:
        state = json.loads((base / "gate-server.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    if not (isinstance(state, dict) and isinstance(state.get("pid"), int) and isinstance(state.get("socket"), str)
            and isinstance(state.get("fingerprint"), str)):
        return None  # not a state this code wrote: treated as no server
    return state


def alive(pid: int) -> bool:
    """``pid`` is a running gate server (not a zombie, not a reused pid of another program)."""
    proc = _SPAWNED.get(pid)
    if proc is not None:
        return proc.poll() is None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    return b"expectations.gate_server" in cmdline


@contextlib.contextmanager
def locked(base: Path):
    with open(base / "gate-server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _socket_path(base: Path) -> str:
    path = str(base / f"gate-server-{secrets.token_hex(4)}.sock")
    if len(path.encode()) < 100:  # sun_path holds 108 bytes
        return path
    import tempfile

    return os.path.join(tempfile.mkdtemp(prefix="prepflow-gate-"), "gate.sock")  # mode 0700, ours


def ensure_started() -> dict | None:
    """The state (``pid``, ``socket``, ``fingerprint``) of a server of this code, started if needed;
    returns at once (the server may still be importing GX). None when the server cannot be used
    (``$PREPFLOW_HOME`` not this user's, or not writable, or no process could be started; logged)."""
    try:
        base = home()
        if not private(base):
            log.info("gate server not used: %s does not belong to this user", base)
            return None
        return _ensure_started(base)
    except OSError as exc:
        log.info("gate server not started (%s: %s)", type(exc).__name__, exc)
        return None


def _ensure_started(base: Path) -> dict:
    with locked(base):
        state = read_state(base)
        if state and state["fingerprint"] == fingerprint() and alive(state["pid"]):
            (base / "gate-server.activity").touch()
            return state
        if state:
            _terminate(state)
        sock = _socket_path(base)
        with open(base / "gate-server.log", "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "expectations.gate_server", "--socket", sock],
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=str(ROOT))
        _SPAWNED[proc.pid] = proc
        state = {"pid": proc.pid, "socket": sock, "fingerprint": fingerprint()}
        (base / "gate-server.activity").touch()
        (base / "gate-server.json").write_text(json.dumps(state))
        return state


def _terminate(state: dict) -> None:
    if alive(state["pid"]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(state["pid"], signal.SIGTERM)
    (home() / "gate-server.json").unlink(missing_ok=True)


def stop_gate_server(timeout: float = 10.0) -> bool:
    """Stop the recorded server and wait for it to exit (tests, ``prepflow`` housekeeping)."""
    base = home()
    with locked(base):
        state = read_state(base)
        if state is None:
            return False
        _terminate(state)
    deadline = time.monotonic() + timeout
    while alive(state["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc = _SPAWNED.pop(state["pid"], None)
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    return True


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="prepflow's gate server (started by ensure_started)")
    parser.add_argument("--socket", required=True)
    from expectations.gate_process import serve

    serve(parser.parse_args().socket)
