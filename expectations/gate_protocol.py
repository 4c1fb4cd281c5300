"""The gate server's wire format and a run's side of a request (see ``expectations.gate_server``).

A message is an 8-byte big-endian length, then that many bytes of UTF-8 JSON (an object); never a
pickle. ``request`` never fails a run because of the server: when the server cannot be started, does
not come up within ``START_WAIT`` seconds while its process lives, dies, or answers anything but a
well-formed reply, it logs why at INFO and returns None, and the caller validates in-process. Only a
prepflow error the server raised (``ConfigError``, ...) is raised again, with its class and message.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
import time

MAX_MESSAGE = 1 << 31  # a longer length prefix is garbage, not a message
START_WAIT = 60.0  # seconds to wait for a starting server's socket
_HEADER = struct.Struct(">Q")
_SUITE_KEYS = {"name", "source", "success", "evaluated", "failed", "results"}

log = logging.getLogger("prepflow.validate")


def send(sock: socket.socket, message: dict) -> None:
    data = json.dumps(message, default=str).encode()
    sock.sendall(_HEADER.pack(len(data)) + data)


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ConnectionError(f"connection closed after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket) -> dict:
    """One message; ``ConnectionError`` on a short read, ``ValueError`` on anything but a JSON object."""
    (n,) = _HEADER.unpack(_exactly(sock, _HEADER.size))
    if n > MAX_MESSAGE:
        raise ValueError(f"message length {n} exceeds {MAX_MESSAGE}")
    message = json.loads(_exactly(sock, n))
    if not isinstance(message, dict):
        raise ValueError(f"expected a JSON object, got {type(message).__name__}")
    return message


def _connect(state: dict, wait: float) -> socket.socket | None:
    """A connection to the server, waiting up to ``wait`` s while its process lives; None otherwise."""
    from expectations.gate_server import alive

    deadline = time.monotonic() + wait
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(state["socket"])
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if not alive(state["pid"]) or time.monotonic() > deadline:
                return None
            time.sleep(0.05)


def _peer_uid(sock: socket.socket) -> int | None:
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    return struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]


def _well_formed(reply: dict) -> bool:
    suites = reply.get("suites")
    return (reply.get("ok") is True and isinstance(reply.get("rows"), int) and isinstance(suites, list)
            and all(isinstance(s, dict) and _SUITE_KEYS <= s.keys() for s in suites))


def _prepflow_error(name) -> type | None:
    from core import errors

    cls = getattr(errors, name, None) if isinstance(name, str) else None
    return cls if isinstance(cls, type) and issubclass(cls, errors.PrepflowError) else None


def request(named: list, view: str, args: list) -> dict | None:
    """The server's ``{"suites": run_suites(...), "rows": N}`` for ``VIEWS[view](*args)``, or None
    (then validate in-process)."""
    from expectations import gate_server

    try:
        state = gate_server.ensure_started()
        if state is None:  # why is logged
            log.info("validating in-process")
            return None
        sock = _connect(state, START_WAIT)
        if sock is None:
            log.info("gate server %s did not come up (see %s); validating in-process", state["pid"],
                     gate_server.home() / "gate-server.log")
            return None
        with sock:
            uid = _peer_uid(sock)
            if uid is not None and uid != os.getuid():
                log.info("gate server socket %s belongs to uid %s; validating in-process", state["socket"], uid)
                return None
            send(sock, {"fingerprint": state["fingerprint"], "named": [list(n) for n in named], "view": view,
                        "args": list(args), "scheduler_free": True})
            reply = receive(sock)
    except (OSError, ValueError) as exc:
        log.info("gate server unusable (%s: %s); validating in-process", type(exc).__name__, exc)
        return None
    if _well_formed(reply):
        return reply
    cls = _prepflow_error(reply.get("error_type")) if reply.get("ok") is False else None
    if cls is not None:
        raise cls(str(reply.get("message")))
    log.info("gate server answered %s: %s; validating in-process", reply.get("error_type", "a malformed reply"),
             reply.get("message"))
    return None
