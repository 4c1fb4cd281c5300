"""Shared fixtures: an isolated PREPFLOW_HOME (its own local Prefect server), CLI runner, datasets."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "titanic"


@pytest.fixture(scope="session", autouse=True)
def prepflow_home(tmp_path_factory):
    """Every test session gets its own PREPFLOW_HOME; its local Prefect server is stopped at the end."""
    home = tmp_path_factory.mktemp("prepflow-home")
    old = {k: os.environ.get(k) for k in ("PREPFLOW_HOME", "PREPFLOW_SERVER_IDLE_SECONDS", "PREFECT_API_URL")}
    os.environ["PREPFLOW_HOME"] = str(home)
    os.environ["PREPFLOW_SERVER_IDLE_SECONDS"] = "900"  # bounded lifetime even if the test run is killed
    os.environ.pop("PREFECT_API_URL", None)
    yield home
    from flows.local_server import stop_server

    stop_server()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


class CliResult:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def json(self) -> dict:
        return json.loads(self.stdout.strip().splitlines()[-1])


def run_cli(*args: str, env: dict | None = None, timeout: float = 300) -> CliResult:
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "flows.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=full_env, timeout=timeout)
    return CliResult(proc)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="module")
def cluster():
    """A 2-worker Dask LocalCluster (processes, one thread each) shared by a test module's tests."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, worker_dashboard_address=None) as c:
        yield c


@pytest.fixture
def titanic_csv() -> Path:
    return EXAMPLE / "titanic.csv"


@pytest.fixture
def titanic_config() -> Path:
    return EXAMPLE / "config.yaml"


@pytest.fixture
def prefect_console(monkeypatch):
    """For an in-process ``prepflow run`` (``tests.helpers.InProcess``), which quiets Prefect's console for
    the process (``flows.console.quiet_prefect_console``: an environment variable and Prefect's logging
    settings): both are put back after the test."""
    from flows import console

    monkeypatch.setenv(console.CONSOLE_LEVEL_ENV, "CRITICAL")
    yield
    monkeypatch.delenv(console.CONSOLE_LEVEL_ENV, raising=False)
    from prefect.logging.configuration import setup_logging  # heavy optional dependency: prefect

    setup_logging()
    logging.captureWarnings(False)
