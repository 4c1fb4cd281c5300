"""Real Ludwig 0.11 on its own forecasting example (tests/data/ludwig_configs/forecasting.yaml, unchanged):
``ludwig preprocess`` of a temperature table with missing values gives the same window_size/horizon tensors
as prepflow's artifact, row for row (Ludwig's splits concatenated in its datetime order = input order), and
the same ``max_timeseries_length``. Ludwig runs in its cached virtualenv (tests/ludwig_venv.py) as a subprocess;
a venv that cannot be built fails the test."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from storage.artifact import Artifact
from tests.helpers import run, write_csv
from tests.ludwig_venv import LudwigVenvError, ensure_venv

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).resolve().parents[1] / "data" / "ludwig_configs" / "forecasting.yaml"
READ_BACK = Path(__file__).resolve().parents[1] / "ludwig_read_back.py"
FEATURES = ["Seattle", "Seattle_next"]


def temperatures(n: int = 400, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    values = np.round(285 + 8 * np.sin(np.arange(n) / 24 * 2 * np.pi) + rng.normal(0, 1, n), 3).astype(object)
    values[rng.random(n) < 0.05] = None
    values[0] = None  # as in the Kaggle table the example reads: the first hour has no reading
    return pd.DataFrame({"datetime": pd.date_range("2012-10-01 12:00", periods=n, freq="h").astype(str),
                         "Seattle": values})


def ludwig_preprocess(venv: Path, csv: Path, work: Path, config: Path = CONFIG, features: tuple[str, ...] =
                      tuple(FEATURES), metadata: Path | None = None) -> tuple[dict, dict[str, np.ndarray]]:
    work.mkdir()
    data = work / "temperature.csv"
    data.write_bytes(csv.read_bytes())
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(venv / "bin" / "ludwig"), "preprocess", "--dataset", str(data),
                           "--preprocessing_config", str(config), "--random_seed", "42", "--logging_level", "warning",
                           *(["--training_set_metadata", str(metadata)] if metadata else [])],
                          cwd=work, env=env, capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        pytest.fail(f"ludwig preprocess exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    splits = ["training", "validation", "test"]
    files = [str(work / f"temperature.{s}.hdf5") for s in splits]
    subprocess.run([str(venv / "bin" / "python"), str(READ_BACK), str(work), ",".join(features), *files], check=True)
    parts = [dict(np.load(work / f"{s}.npz")) for s in splits]
    return (json.loads((work / "temperature.meta.json").read_text()),
            {name: np.concatenate([p[name] for p in parts]) for name in features})


@pytest.fixture(scope="module")
def venv() -> Path:
    try:
        return ensure_venv()
    except LudwigVenvError as exc:
        pytest.fail(f"cannot build the Ludwig virtualenv: {exc}")


def test_ludwig_preprocess_gives_prepflows_forecasting_windows(venv, tmp_path):
    df = temperatures()
    csv = write_csv(df, tmp_path / "temperature.csv")
    result = run(yaml.safe_load(CONFIG.read_text()), csv, tmp_path, npartitions=3)  # the example, unchanged
    art = Artifact.open(result.artifact["artifact_path"])
    ours = {name: np.zeros((len(df), w), np.float32) for name, w in (("Seattle", 10), ("Seattle_next", 2))}
    for split in art.splits:
        got = art.read_split(split)
        for name in FEATURES:
            ours[name][got["__row__"]] = got[name]
    meta, theirs = ludwig_preprocess(venv, csv, tmp_path / "ludwig")
    for name in FEATURES:
        assert meta[name]["max_timeseries_length"] == art.metadata[name]["max_timeseries_length"]
        np.testing.assert_array_equal(ours[name], theirs[name].astype(np.float32), err_msg=name)
    # Ludwig reading prepflow's metadata (window_size, horizon, padding_value from its preprocessing) builds the same
    _, again = ludwig_preprocess(venv, csv, tmp_path / "ludwig-with-prepflow-metadata",
                                 metadata=art.path / "training_set_metadata.json")
    for name in FEATURES:
        np.testing.assert_array_equal(ours[name], again[name].astype(np.float32), err_msg=name)


def test_an_output_alone_on_its_column_drops_missing_rows_and_skips_them_as_ludwig(venv, tmp_path):
    # Ludwig's output default drop_row: the missing rows leave the series before it is shifted, then the dataset
    config = {"input_features": [{"name": "hour", "type": "number"}],
              "output_features": [{"name": "ahead", "type": "timeseries", "column": "Seattle",
                                   "preprocessing": {"horizon": 3}}],
              "preprocessing": {"split": {"type": "datetime", "column": "datetime"}}}
    path = tmp_path / "ahead.yaml"
    path.write_text(yaml.safe_dump(config))
    df = temperatures(seed=6)
    df["hour"] = np.arange(len(df)) % 24
    csv = write_csv(df, tmp_path / "temperature.csv")
    art = Artifact.open(run(config, csv, tmp_path, npartitions=3).artifact["artifact_path"])
    rows = np.concatenate([art.read_split(s)["__row__"] for s in art.splits])
    ahead = np.concatenate([art.read_split(s)["ahead"] for s in art.splits])[np.argsort(rows)]
    assert len(rows) == int(df["Seattle"].notna().sum())
    _, theirs = ludwig_preprocess(venv, csv, tmp_path / "ludwig", path, ("hour", "ahead"))
    np.testing.assert_array_equal(ahead, theirs["ahead"].astype(np.float32))
