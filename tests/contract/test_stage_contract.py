"""The contract every stage passes (STYLE.md): rerun gives identical bytes, output independent of
npartitions, fitted state round-trips through JSON, moved data hits the cache, one byte misses it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from tasks.graph import STAGES
from tests.helpers import artifact_files, run, without_created_at, write_csv

CONFIG = {
    "input_features": [
        {"name": "x", "type": "number", "preprocessing": {"normalization": "zscore"}},
        {"name": "y", "type": "number", "preprocessing": {"normalization": "iq", "missing_value_strategy": "ffill"}},
        {"name": "c", "type": "category", "preprocessing": {"most_common": 5}},
        {"name": "d", "type": "category", "preprocessing": {"missing_value_strategy": "fill_with_mode"}},
        {"name": "b", "type": "binary"},
    ],
    "output_features": [{"name": "label", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 7},
                      "oversample_minority": 0.8},
    "publish": {"formats": ["parquet", "npy"], "shard_rows": 700, "row_group_rows": 128},
}


def make_frame(n: int = 2000, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "x": rng.normal(10, 3, n) * rng.choice([1e-3, 1, 1e6], n),
        "y": rng.exponential(2, n),
        "c": rng.choice([f"v{i}" for i in range(12)], n),
        "d": rng.choice(["a", "b", "c"], n),
        "b": rng.choice(["yes", "no"], n),
        "label": (rng.random(n) < 0.2).astype(int),
    })
    for col, frac in (("x", 0.05), ("y", 0.1), ("c", 0.03), ("d", 0.05), ("b", 0.02), ("label", 0.01)):
        df.loc[rng.random(n) < frac, col] = None
    df.loc[0, "y"] = None  # a leading gap: ffill falls back to bfill
    return df


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_csv(make_frame(), tmp_path_factory.mktemp("data") / "data.csv")


@pytest.fixture(scope="module")
def reference(dataset, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    result = run(CONFIG, dataset, tmp, npartitions=1)
    return result, artifact_files(result.artifact["artifact_path"])


@pytest.mark.parametrize("npartitions", [3, 7])
def test_artifact_is_byte_identical_for_any_partition_count(dataset, reference, tmp_path, npartitions,
                                                            monkeypatch):
    ref_result, ref_files = reference
    result = run(CONFIG, dataset, tmp_path, npartitions=npartitions)
    assert result.artifact["artifact_id"] == ref_result.artifact["artifact_id"]
    assert without_created_at(artifact_files(result.artifact["artifact_path"])) == without_created_at(ref_files)


def test_source_date_epoch_makes_the_whole_artifact_identical(dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    a = run(CONFIG, dataset, tmp_path / "a", npartitions=2)
    b = run(CONFIG, dataset, tmp_path / "b", npartitions=5)
    assert artifact_files(a.artifact["artifact_path"]) == artifact_files(b.artifact["artifact_path"])


def test_rerun_recomputes_nothing_and_keeps_bytes(dataset, tmp_path):
    first = run(CONFIG, dataset, tmp_path, npartitions=3)
    before = artifact_files(first.artifact["artifact_path"])
    second = run(CONFIG, dataset, tmp_path, npartitions=3)
    assert [s.stage for s in second.stages] == list(STAGES)
    assert all(s.cached for s in second.stages)
    assert artifact_files(second.artifact["artifact_path"]) == before


def test_moved_dataset_hits_the_cache_and_one_changed_byte_misses(dataset, tmp_path):
    run(CONFIG, dataset, tmp_path, npartitions=2)
    moved = tmp_path / "elsewhere" / "renamed.csv"
    moved.parent.mkdir()
    shutil.copy(dataset, moved)
    again = run(CONFIG, moved, tmp_path, npartitions=2)
    assert all(s.cached for s in again.stages)

    data = bytearray(moved.read_bytes())
    pos = data.index(b"v3")
    data[pos + 1: pos + 2] = b"4"  # one byte: a v3 becomes v4
    moved.write_bytes(bytes(data))
    changed = run(CONFIG, moved, tmp_path, npartitions=2)
    assert not any(s.cached for s in changed.stages)
    assert changed.artifact["artifact_id"] != again.artifact["artifact_id"]


def test_changing_one_feature_recomputes_only_what_depends_on_it(dataset, tmp_path):
    run(CONFIG, dataset, tmp_path)
    config = json.loads(json.dumps(CONFIG))
    config["input_features"][0]["preprocessing"]["normalization"] = "minmax"
    result = run(config, dataset, tmp_path)
    cached = {s.stage: s.cached for s in result.stages}
    assert cached["ingest"] and cached["split"]
    assert not cached["vocab"] and not cached["encode"] and not cached["publish"]


def test_fitted_state_round_trips_through_json(dataset, tmp_path):
    result = run(CONFIG, dataset, tmp_path)
    path = result.artifact["artifact_path"]
    from storage.artifact import Artifact

    metadata = Artifact.open(path).metadata
    assert json.loads(json.dumps(metadata)) == metadata
    for stage in result.stages:
        assert json.loads(json.dumps(stage.to_json())) == stage.to_json()
    # the fitted state alone re-encodes the data: re-encoding the train split matches the artifact
    from tasks.config.loader import parse_config
    from tasks.features import build_all

    features = build_all(parse_config(CONFIG))
    values = {"x": pd.Series([1.5, -2.0]), "c": pd.Series(["v1", "never-seen"], dtype="string")}
    for f in features:
        if f.name in values:
            out = f.encode(values[f.name], metadata[f.name])[f.name]
            if f.name == "x":
                m = metadata["x"]
                assert np.array_equal(out, ((np.array([1.5, -2.0]) - m["mean"]) / m["std"]).astype(np.float32))
            else:
                assert out[1] == 0 and out[0] == metadata["c"]["str2idx"].get("v1", 0)


def test_transform_before_fit_raises_a_clear_error():
    from core.errors import NotFittedError
    from tasks.config.loader import parse_config
    from tasks.features import build_all

    feature = build_all(parse_config(CONFIG))[2]
    with pytest.raises(NotFittedError, match=rf"^category feature '{feature.name}': no fitted metadata \(vocab_size\)"):
        feature.encode(pd.Series(["a"], dtype="string"), {})
