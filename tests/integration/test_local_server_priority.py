"""The local Prefect server runs at a lower CPU priority than the runs it serves (flows/local_server.py)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import pytest

from flows import local_server

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(platform.system() != "Linux", reason="reads /proc")]


def test_the_server_yields_the_cpu_to_runs():
    local_server.ensure_server()
    pid = json.loads((Path(os.environ["PREPFLOW_HOME"]) / "server.json").read_text())["pid"]
    nice = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])  # field 19: nice
    assert nice >= local_server.SERVER_NICE
    autogroup = Path(f"/proc/{pid}/autogroup")
    if autogroup.exists():  # autogroup scheduling: the server's session is ranked lower too
        assert autogroup.read_text().split()[-1] == str(local_server.SERVER_NICE)
