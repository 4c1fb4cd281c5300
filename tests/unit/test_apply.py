"""prepflow apply: an artifact's fitted state applied to new data (nothing refitted), issue 39."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import prepflow
from core.errors import ConfigError, DataError
from storage.artifact import Artifact
from tasks.serving.preprocessor import Preprocessor
from tests.helpers import artifact_files, run, without_created_at, write_csv

CONFIG = {
    "input_features": [
        {"name": "price", "type": "number"},
        {"name": "color", "type": "category"},
        {"name": "tags", "type": "set"},
        {"name": "note", "type": "text"},
    ],
    "output_features": [{"name": "label", "type": "binary"}],
}


def frame(n: int, seed: int, shift: float = 0.0, unseen: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    colors = rng.choice(["red", "green", "blue", "black"], n, p=[0.4, 0.3, 0.2, 0.1]).astype(object)
    colors[rng.random(n) < unseen] = "purple"
    price = rng.normal(10.0, 2.0, n) + shift * 2.0
    price[rng.random(n) < 0.05] = np.nan
    words = np.array(["cheap", "fast", "good", "new", "old", "rare"])
    tags = [" ".join(rng.choice(words, rng.integers(1, 3), replace=False)) for _ in range(n)]
    notes = [" ".join(rng.choice(words, rng.integers(1, 6))) for _ in range(n)]
    return pd.DataFrame({"price": price, "color": colors, "tags": tags, "note": notes,
                         "label": rng.integers(0, 2, n).astype(bool)})


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("fit")
    result = run(CONFIG, write_csv(frame(600, 1), tmp / "train.csv"), tmp)
    return Path(result.artifact["artifact_path"])


def apply(fitted: Path, rows: pd.DataFrame, tmp: Path, **kw) -> dict:
    data = write_csv(rows, tmp / "new.csv")
    return prepflow.apply(fitted, data, tmp / "applied", cache_dir=tmp / "cache", **kw)


def test_apply_equals_preprocessor_transform(fitted, tmp_path):
    rows = frame(300, 2, unseen=0.2)  # unseen categories too
    summary = apply(fitted, rows, tmp_path)
    art = Artifact.open(summary["artifact_path"], verify=True)
    assert summary["rows"] == {"train": 0, "validation": 0, "test": 300}
    expected = Preprocessor.load(fitted).transform(pd.read_csv(tmp_path / "new.csv"))
    got = art.read_split("test")
    for name, want in expected.items():
        np.testing.assert_array_equal(np.asarray(got[name]), want, err_msg=name)
    assert set(expected) >= {"price", "color", "tags", "note", "label"}


def test_manifest_names_the_fitted_artifact(fitted, tmp_path):
    summary = apply(fitted, frame(50, 3), tmp_path)
    manifest = json.loads((Path(summary["artifact_path"]) / "manifest.json").read_text())
    assert manifest["fitted_from"] == {"artifact_id": Artifact.open(fitted).artifact_id, "path": str(fitted.resolve())}
    assert Artifact.open(summary["artifact_path"]).feature_spec["channel_spec"] == \
        Artifact.open(fitted).feature_spec["channel_spec"]


def test_drift_entries_on_shifted_and_unseen_data(fitted, tmp_path):
    summary = apply(fitted, frame(400, 4, shift=3.0, unseen=0.4), tmp_path)  # price +3 std, 40% unseen colors
    drift = summary["drift"]
    assert drift["price"]["statistic"] == "psi" and drift["price"]["value"] > 0.25 and drift["price"]["status"] == "fail"
    color = {c["statistic"]: c for c in drift["color"]["checks"]}
    assert color["oov_rate"]["value"] == pytest.approx(0.4, abs=0.08) and color["oov_rate"]["status"] == "fail"
    assert drift["color"]["status"] == "fail"


def test_no_drift_on_data_like_the_train_split(fitted, tmp_path):
    summary = apply(fitted, frame(600, 5), tmp_path)
    assert {f: e["status"] for f, e in summary["drift"].items()} == dict.fromkeys(summary["drift"], "ok")
    assert {"price", "color", "tags", "note", "label"} <= set(summary["drift"])


def test_drift_action_fail_publishes_nothing(fitted, tmp_path):
    with pytest.raises(DataError, match="drift gate failed.*price"):
        apply(fitted, frame(300, 6, shift=3.0), tmp_path, config={"validation": {"drift": {"action": "fail"}}})
    assert not (tmp_path / "applied").exists() or not any((tmp_path / "applied").iterdir())
