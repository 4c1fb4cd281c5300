"""Epoch timestamps as dates: `prepflow infer` writes `datetime_format: epoch_s` / `epoch_ms` for a
time-named column of seconds or milliseconds; the date feature reads those numbers as UTC instants."""

from __future__ import annotations

import numpy as np
import pandas as pd

from storage.artifact import Artifact
from tests.helpers import run, write_csv

INSTANTS = pd.to_datetime(["2023-11-14 22:13:20", "1999-12-31 23:59:59", "2024-02-29 00:00:01"], utc=True)


def published_dates(tmp_path, values, fmt):
    df = pd.DataFrame({"created_at": values})
    config = {"input_features": [{"name": "created_at", "type": "date", "preprocessing": {"datetime_format": fmt}}],
              "preprocessing": {"split": {"type": "random", "probabilities": [1.0, 0.0, 0.0]}}}
    result = run(config, write_csv(df, tmp_path / "d.csv"), tmp_path)
    return Artifact.open(result.artifact["artifact_path"]).read_split("train")["created_at"]


def expected():
    return np.array([[t.year, t.month, t.day, t.weekday(), t.dayofyear, t.hour, t.minute, t.second,
                      3600 * t.hour + 60 * t.minute + t.second] for t in INSTANTS], dtype=np.int32)


def test_epoch_seconds_and_milliseconds_read_as_the_same_dates(tmp_path):
    seconds = [int((t - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)) for t in INSTANTS]
    millis = [s * 1000 + 123 for s in seconds]  # fractions of a second are floored
    assert np.array_equal(published_dates(tmp_path / "s", seconds, "epoch_s"), expected())
    assert np.array_equal(published_dates(tmp_path / "ms", millis, "epoch_ms"), expected())
