"""The gate server's process (``python -m expectations.gate_server --socket PATH``; why and how it is
started: ``expectations.gate_server``): import GX and warm it up, then answer gate requests on a Unix
socket, one at a time, until ``PREPFLOW_SERVER_IDLE_SECONDS`` pass without a request or a run's touch,
or a SIGTERM. Wire format: ``expectations.gate_protocol``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path

from expectations.gate_protocol import receive, send
from expectations.gate_server import fingerprint, home, locked, read_state


def _warm() -> None:
    """Import GX and what the views read with, pay GX's first-use costs on a tiny suite, then freeze
    what is loaded out of the garbage collector's reach (else the first request pays a ~0.15 s full
    collection of GX's objects, and every later one scans them again)."""
    import gc

    import dask.threaded
    import pandas as pd
    import pyarrow.feather  # noqa: F401

    from expectations import engine
    from tasks import encode, frame, ingest, validate  # noqa: F401 (what the views import)

    engine._gx_context()
    suite = {"name": "warmup", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "x", "min_value": 0}},
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "s", "value_set": ["a"]}},
        {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "x", "min_value": 0}},
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "x"}}]}
    table = pd.DataFrame({"x": [1.0, 2.0], "s": pd.array(["a", "b"], dtype=pd.StringDtype("pyarrow"))})
    validate.run_suites([("warmup", suite)], [table, table.set_axis([2, 3])], ["x", "s"], scheduler=dask.threaded.get)
    gc.collect()
    gc.freeze()


def _answer(request: dict, own: str) -> dict:
    import dask.local
    import dask.threaded

    from tasks import validate
    from core.errors import PrepflowError

    try:
        if request.get("fingerprint") != own:
            return {"ok": False, "error_type": "StaleServer", "message": "the server runs other code"}
        # a scheduler function, not its name: a name makes Dask import distributed to look for a Client
        scheduler = dask.threaded.get if request.get("scheduler_free") else dask.local.get_sync
        parts, columns, rows = validate.VIEWS[request["view"]](*request["args"])
        suites = validate.run_suites([tuple(n) for n in request["named"]], parts, columns, scheduler=scheduler)
        return {"ok": True, "suites": suites, "rows": rows}
    except PrepflowError as exc:
        return {"ok": False, "error_type": type(exc).__name__, "message": str(exc)}
    except Exception as exc:  # the client validates in-process, which raises it with its traceback
        import traceback

        traceback.print_exc()
        return {"ok": False, "error_type": type(exc).__name__, "message": str(exc)}


def serve(socket_path: str) -> None:
    """The server process: warm up, then answer until idle or SIGTERM."""
    os.umask(0o077)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    base = home()
    own = fingerprint()
    idle = float(os.environ.get("PREPFLOW_SERVER_IDLE_SECONDS", "1800"))
    activity = base / "gate-server.activity"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        start = time.perf_counter()
        _warm()
        server.bind(socket_path)
        os.chmod(socket_path, 0o600)
        server.listen(16)
        server.settimeout(max(0.05, min(5.0, idle / 4)))
        print(f"gate server {os.getpid()}: ready in {time.perf_counter() - start:.2f} s on {socket_path}",
              flush=True)
        last = time.time()
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                last = max(last, _touched(activity))
                if time.time() - last > idle:
                    with locked(base):  # a run's ensure_started touches under this lock
                        if time.time() - max(last, _touched(activity)) > idle:
                            _forget(base)
                            return
                continue
            with conn:
                conn.settimeout(60.0)
                try:
                    request = receive(conn)
                    conn.settimeout(None)
                    began = time.perf_counter()
                    reply = _answer(request, own)
                    print(f"gate server: {request.get('view')} view, {'ok' if reply['ok'] else reply['error_type']} "
                          f"in {time.perf_counter() - began:.3f} s", flush=True)
                    send(conn, reply)
                except (OSError, ValueError) as exc:
                    print(f"gate server: bad request ({exc})", flush=True)
            last = time.time()
    finally:
        server.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
        if Path(socket_path).parent.name.startswith("prepflow-gate-"):  # a long $PREPFLOW_HOME's socket
            with contextlib.suppress(OSError):
                os.rmdir(Path(socket_path).parent)
        with locked(base):
            _forget(base)


def _touched(activity: Path) -> float:
    try:
        return activity.stat().st_mtime
    except OSError:
        return 0.0


def _forget(base: Path) -> None:
    """Remove the state file if it names this process (call under the lock)."""
    state = read_state(base)
    if state and state["pid"] == os.getpid():
        (base / "gate-server.json").unlink(missing_ok=True)


