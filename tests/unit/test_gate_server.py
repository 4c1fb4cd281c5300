"""The gate server (expectations/gate_server.py): real server processes, real GX.

Results through the server equal the in-process results byte for byte (raw and encoded gate, with
failing expectations so unexpected values and indices are compared); a prepflow error raised in the
server reaches the run with its class and message; a server that cannot answer (closes, garbage, a
malformed reply, a dead pid) leaves the run to validate in-process; a server of other code is
replaced; the server stops when idle and on stop, leaving no process, socket or state behind.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from expectations import gate_protocol, gate_server
from tasks import frame as frame_mod
from tasks import validate
from core.errors import ConfigError
from tests.helpers import run, write_csv

CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 1},
                      "oversample_minority": 0.9},
}
RAW_SUITE = {"name": "raw-user", "expectations": [
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "x", "min_value": 3, "max_value": 7}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "c", "value_set": ["a", "b", "c"]}},
    {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "c"}},
    {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "x", "min_value": 4, "max_value": 6}}]}
ENCODED_SUITE = {"name": "encoded-user", "expectations": [
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "x", "min_value": -1, "max_value": 1}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "__split__", "value_set": [0, 1, 2]}}]}


def _dump(suites) -> str:
    return json.dumps(suites, sort_keys=True, indent=1, default=str)


def _config(tmp: Path) -> dict:
    paths = {}
    for name, suite in (("raw", RAW_SUITE), ("encoded", ENCODED_SUITE)):
        paths[name] = tmp / f"{name}.json"
        paths[name].write_text(json.dumps(suite))
    return {**CONFIG, "validation": {"raw": str(paths["raw"]), "encoded": str(paths["encoded"]),
                                     "on_failure": "warn"}}


def _dataset(tmp: Path) -> Path:
    rng = np.random.default_rng(5)
    n = 600
    df = pd.DataFrame({"x": rng.normal(5, 2, n), "c": rng.choice(["a", "b", "c"], n),
                       "y": (rng.random(n) < 0.25).astype(int)})
    df.loc[rng.random(n) < 0.05, "x"] = None
    return write_csv(df, tmp / "data.csv")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A PREPFLOW_HOME of this module's own (short path: the socket's name must fit 108 bytes)."""
    path = tmp_path_factory.mktemp("gh")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PREPFLOW_HOME", str(path))
        mp.setenv("PREPFLOW_GATE_SERVER", "auto")
        # the server serves local runs only; an earlier test of the session may have imported
        # distributed, after which tasks.frame.local_only() cannot tell there is no Client
        mp.setattr(frame_mod, "local_only", lambda: True)
        yield path
        gate_server.stop_gate_server()


@pytest.fixture(scope="module")
def gates(home, tmp_path_factory):
    """Each gate's ``(named, view, args)`` and in-process ``(suites, rows)``, from a run with the server off."""
    tmp = tmp_path_factory.mktemp("gates")
    recorded = {}
    original = validate.validate_view

    def record(named, view, args):
        recorded[view] = (named, view, args, original(named, view, args))
        return recorded[view][3]

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PREPFLOW_GATE_SERVER", "off")
        mp.setattr(validate, "validate_view", record)
        run(_config(tmp), _dataset(tmp), tmp, npartitions=3)
    assert set(recorded) == {"raw", "encoded"}
    return recorded


def test_a_dead_pid_in_the_state_file_starts_a_new_server_and_the_gate_succeeds(home, gates):
    gate_server.stop_gate_server()  # a live server the state file names would be left running
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (home / "gate-server.json").write_text(json.dumps({"pid": dead.pid, "socket": str(home / "nothing.sock"),
                                                       "fingerprint": gate_server.fingerprint()}))
    named, view, args, (suites, rows) = gates["raw"]
    assert validate.validate_view(named, view, args) == (suites, rows)
    state = gate_server.read_state(home)
    assert state["pid"] != dead.pid and gate_server.alive(state["pid"])


@pytest.mark.parametrize("view", ["raw", "encoded"])
def test_results_through_the_server_are_byte_identical(home, gates, view):
    named, view, args, (suites, rows) = gates[view]
    assert any(not r["success"] and r["result"].get("partial_unexpected_index_list")
               for s in suites for r in s["results"])  # unexpected values and indices are compared
    assert any(r["success"] for s in suites for r in s["results"])
    reply = gate_protocol.request(named, view, args)
    assert reply is not None and reply["rows"] == rows
    assert _dump(reply["suites"]) == _dump(suites)


def test_a_config_error_in_the_server_reaches_the_run_with_its_class_and_message(home, gates):
    _named, view, args, _result = gates["raw"]
    bad = [("bad.json", {"name": "bad", "expectations": [
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "c"}}]})]  # no value_set
    with pytest.raises(ConfigError) as local:
        validate.run_suites(bad, *validate.VIEWS[view](*args)[:2])
    with pytest.raises(ConfigError) as served:
        gate_protocol.request(bad, view, args)
    assert type(served.value) is type(local.value) and str(served.value) == str(local.value)


def test_a_pipeline_run_through_the_server_equals_one_without_it(home, tmp_path, monkeypatch):
    answered = []
    original = gate_protocol.request

    def spy(*args):
        reply = original(*args)
        answered.append(reply is not None)
        return reply

    manifests = {}
    for mode in ("off", "auto"):
        monkeypatch.setenv("PREPFLOW_GATE_SERVER", mode)
        monkeypatch.setattr(gate_protocol, "request", spy)
        result = run(_config(tmp_path), _dataset(tmp_path), tmp_path, npartitions=2, cache=f"cache-{mode}",
                     output=f"out-{mode}")
        manifests[mode] = json.loads((Path(result.artifact["artifact_path"]) / "manifest.json").read_text())
    if "distributed" not in sys.modules:  # a Client could exist: the gates stay in-process
        assert answered == [True, True]
    assert _dump(manifests["auto"]["validation"]) == _dump(manifests["off"]["validation"])
    assert not manifests["auto"]["validation"]["raw"]["success"]


FAKE_SERVER = r"""
import json, socket, struct, sys
mode, path = sys.argv[2], sys.argv[3]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(4)
server.settimeout(120)
while True:
    conn, _ = server.accept()
    if mode == "garbage":
        conn.recv(1 << 20)
        conn.sendall(struct.pack(">Q", 5) + b"{{{{{")
    elif mode == "malformed":
        conn.recv(1 << 20)
        data = json.dumps({"ok": True, "suites": "nope", "rows": 1}).encode()
        conn.sendall(struct.pack(">Q", len(data)) + data)
    conn.close()
"""


@pytest.mark.parametrize("mode", ["close", "garbage", "malformed"])
def test_a_server_that_cannot_answer_leaves_the_gate_to_this_process(gates, mode, tmp_path_factory, monkeypatch,
                                                                     caplog):
    fake_home = tmp_path_factory.mktemp("fk")
    monkeypatch.setenv("PREPFLOW_HOME", str(fake_home))
    sock = str(fake_home / "fake.sock")
    fake = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, "expectations.gate_server", mode, sock])
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.02)
        (fake_home / "gate-server.json").write_text(json.dumps({"pid": fake.pid, "socket": sock,
                                                                "fingerprint": gate_server.fingerprint()}))
        named, view, args, expected = gates["encoded"]
        with caplog.at_level(logging.INFO, logger="prepflow.validate"):
            assert gate_protocol.request(named, view, args) is None
            suites, rows = validate.validate_view(named, view, args)
        assert "validating in-process" in caplog.text
        assert gate_server.read_state(fake_home)["pid"] == fake.pid  # the fake was the server asked
        assert (_dump(suites), rows) == (_dump(expected[0]), expected[1])
    finally:
        fake.kill()
        fake.wait()


def test_a_server_of_other_code_is_replaced_and_never_used(home, gates):
    old = gate_server.ensure_started()
    (home / "gate-server.json").write_text(json.dumps({**old, "fingerprint": "other code"}))
    new = gate_server.ensure_started()
    assert new["pid"] != old["pid"] and new["socket"] != old["socket"]
    deadline = time.monotonic() + 30
    while gate_server.alive(old["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not gate_server.alive(old["pid"]) and not os.path.exists(old["socket"])
    named, view, args, (suites, rows) = gates["raw"]
    reply = gate_protocol.request(named, view, args)
    assert reply is not None and _dump(reply["suites"]) == _dump(suites)
    # and a server refuses a request made for other code
    import socket

    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(new["socket"])
        gate_protocol.send(conn, {"fingerprint": "other code", "named": named, "view": view, "args": args,
                                  "scheduler_free": True})
        assert gate_protocol.receive(conn)["error_type"] == "StaleServer"


def test_stop_leaves_no_process_socket_or_state(home):
    state = gate_server.ensure_started()
    assert gate_server.stop_gate_server()
    assert not gate_server.alive(state["pid"]) and not Path(f"/proc/{state['pid']}").exists()
    assert not os.path.exists(state["socket"]) and gate_server.read_state(home) is None
    assert not gate_server.stop_gate_server()


def test_an_idle_server_exits_and_cleans_up(tmp_path_factory, monkeypatch):
    idle_home = tmp_path_factory.mktemp("ih")
    monkeypatch.setenv("PREPFLOW_HOME", str(idle_home))
    monkeypatch.setenv("PREPFLOW_SERVER_IDLE_SECONDS", "1")
    state = gate_server.ensure_started()
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(state["socket"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.stat(state["socket"]).st_mode & 0o777 == 0o600
        while gate_server.alive(state["pid"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not gate_server.alive(state["pid"]) and not Path(f"/proc/{state['pid']}").exists()
        assert not os.path.exists(state["socket"]) and gate_server.read_state(idle_home) is None
    finally:
        gate_server.stop_gate_server()


def test_fingerprint_follows_the_gate_code(tmp_path):
    for name in gate_server.SOURCES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.py").write_text("x = 1\n")
    before = gate_server.fingerprint(tmp_path)
    (tmp_path / "tasks" / "m.py").write_text("x = 2\n")
    gate_server.fingerprint.cache_clear()
    assert gate_server.fingerprint(tmp_path) != before
    (tmp_path / "flows").mkdir()  # not gate code
    (tmp_path / "flows" / "m.py").write_text("y = 1\n")
    after = gate_server.fingerprint(tmp_path)
    gate_server.fingerprint.cache_clear()
    assert gate_server.fingerprint(tmp_path) == after


def test_the_mode_is_checked(monkeypatch):
    monkeypatch.setenv("PREPFLOW_GATE_SERVER", "sometimes")
    with pytest.raises(ConfigError, match="PREPFLOW_GATE_SERVER must be one of auto, off. Got 'sometimes'"):
        gate_server.enabled()


def test_a_home_that_cannot_hold_the_server_leaves_the_gate_to_this_process(gates, tmp_path, monkeypatch, caplog):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("PREPFLOW_HOME", str(tmp_path / "file" / "home"))  # mkdir fails: not a directory
    named, view, args, expected = gates["raw"]
    with caplog.at_level(logging.INFO, logger="prepflow.validate"):
        assert gate_server.ensure_started() is None
        suites, rows = validate.validate_view(named, view, args)
    assert "gate server not started (NotADirectoryError" in caplog.text
    assert (_dump(suites), rows) == (_dump(expected[0]), expected[1])


@pytest.mark.parametrize("state", ['{"pid": "1", "socket": "s", "fingerprint": "f"}', '{"pid": 1, "socket": null}',
                                   "[1, 2]", "{not json"])
def test_a_state_file_this_code_did_not_write_names_no_server(tmp_path, state):
    (tmp_path / "gate-server.json").write_text(state)
    assert gate_server.read_state(tmp_path) is None
