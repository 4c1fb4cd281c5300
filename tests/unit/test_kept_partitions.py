"""Prepared partitions kept between stages (tasks/frame.py): encode takes vocab's instead of preparing them
again, with the same artifact bytes, and lets them go."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tasks import frame
from tests.helpers import artifact_files, run, without_created_at, write_csv

CONFIG = {
    "input_features": [{"name": "x", "type": "number"},
                       {"name": "c", "type": "category"},
                       {"name": "f", "type": "number", "preprocessing": {"missing_value_strategy": "ffill"}}],
    "output_features": [{"name": "y", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.7, 0.2, 0.1], "seed": 3}},
}


@pytest.fixture(autouse=True)
def local_scheduler(monkeypatch):
    """Partitions are kept only on Dask's local scheduler; ``local_only`` also reads False once any earlier
    test imported ``distributed``, though no Client exists."""
    monkeypatch.setattr(frame, "local_only", lambda: True)


@pytest.fixture
def dataset(tmp_path):
    rng = np.random.default_rng(7)
    n = 3000
    df = pd.DataFrame({"x": np.where(rng.random(n) < 0.05, np.nan, rng.normal(size=n)),
                       "c": rng.choice(["a", "b", "c", None], size=n),
                       "f": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
                       "y": rng.choice(["yes", "no"], size=n)})
    return write_csv(df, tmp_path / "d.csv")


@pytest.mark.parametrize("npartitions", [1, 3])
def test_encode_takes_the_partitions_vocab_prepared(dataset, tmp_path, monkeypatch, npartitions):
    calls = []
    real = frame._prepare
    monkeypatch.setattr(frame, "_prepare", lambda *a: calls.append(1) or real(*a))
    kept = run(CONFIG, dataset, tmp_path, npartitions, cache="kept", output="kept-out")
    assert len(calls) == npartitions  # once per partition, by vocab (balance is off); encode took them
    assert frame._kept == {}  # released after encode

    calls.clear()
    monkeypatch.setattr(frame, "KEEP_ROWS", 0)  # nothing kept: vocab and encode each prepare
    fresh = run(CONFIG, dataset, tmp_path, npartitions, cache="fresh", output="fresh-out")
    assert len(calls) == 2 * npartitions
    assert without_created_at(artifact_files(kept.artifact["artifact_path"])) == \
        without_created_at(artifact_files(fresh.artifact["artifact_path"]))


def test_kept_partitions_are_keyed_by_content(dataset, tmp_path):
    """Another split (seed) is another key: nothing is taken from a run on different content."""
    run(CONFIG, dataset, tmp_path, 2, cache="a", output="a-out")
    other = {**CONFIG, "preprocessing": {"split": {**CONFIG["preprocessing"]["split"], "seed": 4}}}
    frame._kept["stale"] = {0: None, 1: None}  # what an unrelated earlier stage left
    result = run(other, dataset, tmp_path, 2, cache="b", output="b-out")
    expected = run(other, dataset, tmp_path, 2, cache="c", output="c-out")
    assert without_created_at(artifact_files(result.artifact["artifact_path"])) == \
        without_created_at(artifact_files(expected.artifact["artifact_path"]))
    assert frame._kept == {}
