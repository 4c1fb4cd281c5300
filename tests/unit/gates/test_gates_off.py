"""Without a user suite a run never imports Great Expectations: the generated suites run on prepflow's
kernels (and with them off there is nothing to check at all); neither does a run whose user suite the
kernels cover. No helper process is left behind."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd

from tests.conftest import ROOT
from tests.helpers import write_config, write_csv

SCRIPT = """
import sys, time
from storage.cache import StageCache
from tasks.config.loader import load_config
from tasks.runtime.context import RunContext
from tasks.graph import run_pipeline
data, root = sys.argv[1], sys.argv[2]
for name in sys.argv[3:]:
    ctx = RunContext(load_config(f"{root}/{name}.yaml"), data, StageCache(f"{root}/cache-{name}"), None,
                     f"{root}/out-{name}")
    seconds = {s.stage: s.seconds for s in run_pipeline(ctx).stages}
    print(name, "great_expectations" in sys.modules, seconds["validate_raw"], seconds["validate_encoded"])
"""

# a user suite whose every expectation runs on prepflow's kernels (expectations.kernels.USER_KERNELS)
KERNEL_SUITE = {"name": "k", "expectations": [
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "x", "min_value": 0, "mostly": 0.5}},
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "x", "mostly": 0.5}},
    {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "x", "min_value": 0}},
    {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1}}]}


def test_runs_without_a_suite_gx_runs_do_not_import_gx(tmp_path):
    """Generated suites on and off, and a user suite the kernels cover: one process, GX never imported."""
    data = write_csv(pd.DataFrame({"x": [1.0, 2.0, None, 4.0] * 5, "y": [0, 1] * 10}), tmp_path / "d.csv")
    (tmp_path / "k.json").write_text(json.dumps(KERNEL_SUITE))
    validations = {"generated": {"generated": True}, "off": {"generated": False},
                   "kernel_suite": {"generated": True, "raw": str(tmp_path / "k.json")}}
    for name, validation in validations.items():
        write_config({"input_features": [{"name": "x", "type": "number"}],
                      "output_features": [{"name": "y", "type": "binary"}],
                      "validation": validation}, tmp_path / f"{name}.yaml")
    home = tmp_path / "home"
    env = {"PATH": "/usr/bin:/bin", "PREPFLOW_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(data), str(tmp_path), *validations],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line.split() for line in proc.stdout.splitlines()]
    assert [line[0] for line in lines] == list(validations)
    for _name, imported, raw_s, encoded_s in lines:
        assert imported == "False"
        assert float(raw_s) < 1.0 and float(encoded_s) < 1.0, proc.stdout
    assert not home.exists() or not list(home.iterdir())  # no helper process state
