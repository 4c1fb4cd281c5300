"""A stage's reported seconds cover the whole stage call, not only its cached step: the work a stage
does before ``run_cached`` (reading the ingested parts, first imports of a process) is stage time."""

from __future__ import annotations

import time

import pandas as pd

from tasks.split import stage as split
from tests.helpers import run, write_csv


def test_stage_seconds_include_work_before_the_cached_step(tmp_path, monkeypatch):
    data = write_csv(pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0] * 5, "y": [0, 1] * 10}), tmp_path / "d.csv")
    config = {"input_features": [{"name": "x", "type": "number"}],
              "output_features": [{"name": "y", "type": "binary"}]}
    original = split.run

    def slow_split(ctx, ingest):
        time.sleep(0.3)  # e.g. a first import, before the stage reaches run_cached
        return original(ctx, ingest)

    monkeypatch.setattr(split, "run", slow_split)
    first = {s.stage: s for s in run(config, data, tmp_path).stages}
    assert first["split"].seconds >= 0.3 and not first["split"].cached
    again = {s.stage: s for s in run(config, data, tmp_path).stages}
    assert again["split"].cached and again["split"].seconds >= 0.3  # a cache hit's call is timed the same way
