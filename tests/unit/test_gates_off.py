"""Without a user suite a run never imports Great Expectations: the generated suites run on prepflow's
kernels (and with them off there is nothing to check at all). No helper process is left behind."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

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


@pytest.mark.parametrize("generated", [True, False])
def test_runs_without_a_user_suite_do_not_import_gx(tmp_path, generated):
    data = write_csv(pd.DataFrame({"x": [1.0, 2.0, None, 4.0] * 5, "y": [0, 1] * 10}), tmp_path / "d.csv")
    config = write_config({"input_features": [{"name": "x", "type": "number"}],
                           "output_features": [{"name": "y", "type": "binary"}],
                           "validation": {"generated": generated}}, tmp_path / "c.yaml")
    home = tmp_path / "home"
    env = {"PATH": "/usr/bin:/bin", "PREPFLOW_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(config), str(data), str(tmp_path / "cache"),
                           str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    imported, raw_s, encoded_s = proc.stdout.split()
    assert imported == "False"
    assert not home.exists() or not list(home.iterdir())  # no helper process state
    assert float(raw_s) < 1.0 and float(encoded_s) < 1.0, proc.stdout
