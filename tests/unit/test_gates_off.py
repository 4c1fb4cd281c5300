"""With no expectation to check (generated suites off, no user suite), a run neither imports Great
Expectations nor starts or waits for the gate server."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd

from tests.conftest import ROOT
from tests.helpers import write_config, write_csv

SCRIPT = """
import sys, time
from storage.cache import StageCache
from tasks.config_loader import load_config
from tasks.context import RunContext
from tasks.pipeline import run_pipeline
ctx = RunContext(load_config(sys.argv[1]), sys.argv[2], StageCache(sys.argv[3]), None, sys.argv[4])
seconds = {s.stage: s.seconds for s in run_pipeline(ctx).stages}
print("great_expectations" in sys.modules, seconds["validate_raw"], seconds["validate_encoded"])
"""


def test_gates_off_touch_neither_gx_nor_the_gate_server(tmp_path):
    data = write_csv(pd.DataFrame({"x": [1.0, 2.0, None, 4.0] * 5, "y": [0, 1] * 10}), tmp_path / "d.csv")
    config = write_config({"input_features": [{"name": "x", "type": "number"}],
                           "output_features": [{"name": "y", "type": "binary"}],
                           "validation": {"generated": False}}, tmp_path / "c.yaml")
    home = tmp_path / "home"
    env = {"PATH": "/usr/bin:/bin", "PREPFLOW_HOME": str(home), "PREPFLOW_GATE_SERVER": "auto"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(config), str(data), str(tmp_path / "cache"),
                           str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    imported, raw_s, encoded_s = proc.stdout.split()
    assert imported == "False"
    assert not list(home.glob("gate-server*")) if home.exists() else True
    assert float(raw_s) < 1.0 and float(encoded_s) < 1.0, proc.stdout
