"""A ``prepflow run`` parses its config once (``tasks.config.loader.parse_config``, which ``load_config`` calls
too): the CLI parses it for its early errors and hands the parsed ``Config`` on to the runner, the run's
labels and the artifact-reuse check; nothing downstream reads the file or validates the mapping again."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.cli_inprocess import runner
from tests.helpers import config_parses, write_config, write_csv

CONFIG = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
          "output_features": [{"name": "y", "type": "binary"}]}


@pytest.fixture
def prepflow_cli(capfd, monkeypatch):
    yield from runner(capfd, monkeypatch)


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    return config_parses(monkeypatch)

def test_one_prepflow_run_parses_its_config_once(prepflow_cli, parses, tmp_path):
    frame = pd.DataFrame({"x": [float(i) for i in range(40)], "c": ["a", "b"] * 20, "y": [0, 1, 1, 0] * 10})
    csv = write_csv(frame, tmp_path / "d.csv")
    config = write_config(CONFIG, tmp_path / "c.yaml")
    result = prepflow_cli("run", config, "--dataset", csv, "--output", tmp_path / "out",
                          "--cache-dir", tmp_path / "cache", "--always-run-flow")
    assert result.code == 0, result.text
    assert parses == [f"load_config:{config}"]

