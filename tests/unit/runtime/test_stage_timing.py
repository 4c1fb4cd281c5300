"""A stage's reported seconds cover the whole node call, not only its cached step: the work a node does
before its cache lookup (its ``prepare``: hashing media, reading the ingested parts' schema) is stage time."""

from __future__ import annotations

import dataclasses
import time

import pandas as pd

from tasks import graph
from tasks.split import stage as split
from tests.helpers import run, write_csv


def test_stage_seconds_include_work_before_the_cached_step(tmp_path, monkeypatch):
    data = write_csv(pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0] * 5, "y": [0, 1] * 10}), tmp_path / "d.csv")
    config = {"input_features": [{"name": "x", "type": "number"}],
              "output_features": [{"name": "y", "type": "binary"}]}

    def slow_prepare(ctx, ingest):
        time.sleep(0.3)  # e.g. hashing the media, before the cache lookup
        return None

    def compute(ctx, out, _prepared, ingest):
        return split.compute(ctx, out, ingest)

    compute.__module__ = split.compute.__module__  # versioned as the split stage's code
    nodes = tuple(dataclasses.replace(n, run=compute, prepare=slow_prepare) if n is split.NODE else n
                  for n in graph.NODES)
    monkeypatch.setattr(graph, "NODES", nodes)
    first = {s.stage: s for s in run(config, data, tmp_path).stages}
    assert first["split"].seconds >= 0.3 and not first["split"].cached
    again = {s.stage: s for s in run(config, data, tmp_path).stages}
    assert again["split"].cached and again["split"].seconds >= 0.3  # a cache hit's call is timed the same way
