"""The preprocess flow takes the ``Config`` that ``prepflow run`` parsed and runs on it as it is: no parse in the
flow or in the run's name; the same artifact as a run given the config's path."""

from __future__ import annotations

import pandas as pd
import pytest

from tasks.config import loader
from tests.helpers import config_parses, write_config, write_csv
from tests.integration.test_task_retries import prefect_api  # noqa: F401  (a fixture this module uses)
from tests.unit.cli.test_config_parsed_once import CONFIG

pytestmark = pytest.mark.integration  # the flow on the session's local Prefect server


def test_the_flow_runs_on_the_config_it_is_handed_without_parsing_it_again(monkeypatch, prefect_api,  # noqa: F811
                                                                            tmp_path):
    from flows.preprocess import preprocess

    frame = pd.DataFrame({"x": [float(i) for i in range(40)], "c": ["a", "b"] * 20, "y": [0, 1, 1, 0] * 10})
    csv = write_csv(frame, tmp_path / "d.csv")
    config = loader.load_config(write_config(CONFIG, tmp_path / "c.yaml"))
    parses = config_parses(monkeypatch)
    state = preprocess(config=config, dataset=str(csv), output=str(tmp_path / "out"),
                       cache_dir=str(tmp_path / "cache"), return_state=True)
    assert state.is_completed(), state
    assert parses == []
    by_path = preprocess(config=str(tmp_path / "c.yaml"), dataset=str(csv), output=str(tmp_path / "out2"),
                         cache_dir=str(tmp_path / "cache"))
    assert state.result()["artifact_id"] == by_path["artifact_id"]
