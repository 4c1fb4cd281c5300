"""``__row__``: every published row maps back to its input row (issue 21 item 7).

The artifact's splits are joined back to the raw input by ``__row__`` and the published values are
checked against the raw values of those rows; every format holds the same ``__row__``; oversampled
copies repeat their source row's; several files number their rows in their concatenation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prepflow import Artifact
from storage.split_binary import read_chunk
from tests.helpers import artifact_files, run, without_created_at, write_csv

CONFIG = {
    "input_features": [
        {"name": "x", "type": "number", "preprocessing": {"normalization": "none",
                                                          "missing_value_strategy": "drop_row"}},
        {"name": "c", "type": "category"},
    ],
    "output_features": [{"name": "label", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 5},
                      "oversample_minority": 1.0},
    "publish": {"formats": ["parquet", "npy", "split_binary"], "shard_rows": 90, "row_group_rows": 32},
}


def make_frame(n: int = 300, seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x": np.round(rng.normal(0, 100, n), 2),
                       "c": rng.choice(["red", "green", "blue", "cyan"], n),
                       "label": (rng.random(n) < 0.25).astype(int)})
    df.loc[rng.random(n) < 0.1, "x"] = None  # dropped rows: __row__ keeps the input positions of the rest
    return df


def joined(art: Artifact, raw: pd.DataFrame, split: str) -> tuple[dict, pd.DataFrame]:
    data = art.read_split(split)
    return data, raw.iloc[data["__row__"]].reset_index(drop=True)


@pytest.mark.parametrize("npartitions", [1, 4])
def test_splits_join_back_to_the_raw_rows(tmp_path, npartitions):
    raw = make_frame()
    result = run(CONFIG, write_csv(raw, tmp_path / "data.csv"), tmp_path, npartitions=npartitions)
    art = Artifact.open(result.artifact["artifact_path"])
    idx2str = art.metadata["c"]["idx2str"]
    seen = []
    for split in ("train", "validation", "test"):
        data, rows = joined(art, raw, split)
        assert data["__row__"].dtype == np.int64
        assert len(data["__row__"]) == art.num_rows(split)
        np.testing.assert_array_equal(data["x"], rows["x"].to_numpy(dtype=np.float32))
        assert [idx2str[i] for i in data["c"]] == rows["c"].tolist()
        np.testing.assert_array_equal(data["label"], rows["label"].to_numpy().astype(bool))
        if split != "train":  # no oversampling outside train: rows in input order, each once
            assert (np.diff(data["__row__"]) > 0).all()
        seen.append(np.unique(data["__row__"]))
    # every kept input row is in exactly one split; the dropped ones (x missing) in none
    everything = np.concatenate(seen)
    assert len(everything) == len(np.unique(everything))
    np.testing.assert_array_equal(np.sort(everything), np.flatnonzero(raw["x"].notna().to_numpy()))
    # oversampling: the minority's copies repeat their source row's __row__ (and its values)
    train = art.read_split("train")
    rows, counts = np.unique(train["__row__"], return_counts=True)
    assert counts.max() > 1
    assert set(raw["label"].to_numpy()[rows[counts > 1]]) == {1}


def test_every_format_holds_the_same_row_ids(tmp_path):
    raw = make_frame()
    result = run(CONFIG, write_csv(raw, tmp_path / "data.csv"), tmp_path, npartitions=3)
    art = Artifact.open(result.artifact["artifact_path"])
    for split in ("train", "validation", "test"):
        from_parquet = art.read_split(split)["__row__"]
        from_npy = np.load(art.path / split / "__row__.npy")
        chunk = next(c for c in art.chunks(split) if c["type"] == "split_binary" and c["features"] == ["__row__"])
        from_binary = read_chunk(art.path, chunk, art.num_rows(split))["__row__"]
        np.testing.assert_array_equal(from_parquet, from_npy)
        np.testing.assert_array_equal(from_parquet, from_binary)
    assert art.feature_spec["feature_spec"]["__row__"] == {"dtype": "torch.int64", "shape": []}
    assert art.feature_spec["metadata"]["row_id"]["column"] == "__row__"
    # kept out of the training channels, and out of NVIDIA's spec
    assert all("__row__" not in cols for cols in art.feature_spec["channel_spec"].values())
    nvidia = (art.path / "feature_spec.yaml").read_text()
    assert "col___row__.bin" not in nvidia.split("prepflow:")[0]
    # described in training_set_metadata.json, which stays valid sorted-key JSON for the features
    on_disk = json.loads((art.path / "training_set_metadata.json").read_text())
    assert on_disk["__row__"]["dtype"] == "int64" and on_disk["__row__"]["column"] == "__row__"
    assert "__row__" not in art.metadata and art.row_id == on_disk["__row__"]


def test_row_ids_are_byte_identical_for_any_partitioning(tmp_path):
    dataset = write_csv(make_frame(), tmp_path / "data.csv")
    a = run(CONFIG, dataset, tmp_path / "a", npartitions=1)
    b = run(CONFIG, dataset, tmp_path / "b", npartitions=5)
    assert without_created_at(artifact_files(a.artifact["artifact_path"])) == \
        without_created_at(artifact_files(b.artifact["artifact_path"]))


def test_channels_carry_row_ids_only_when_asked(tmp_path):
    raw = make_frame()
    config = {**CONFIG, "publish": {"formats": ["npy"],
                                    "channels": {"numerical": ["x"], "categorical": ["c"], "label": ["label"],
                                                 "row": ["__row__"]}}}
    result = run(config, write_csv(raw, tmp_path / "data.csv"), tmp_path)
    art = Artifact.open(result.artifact["artifact_path"])
    assert art.feature_spec["channel_spec"]["row"] == ["__row__"]
    batch = next(iter(art.batches("test", batch_size=1000, shuffle=False, prefetch=0)))
    np.testing.assert_array_equal(batch["row"].numpy(), art.read_split("test")["__row__"])


def test_several_files_number_rows_in_their_concatenation(tmp_path):
    raw = make_frame(n=240)
    folder = tmp_path / "parts"
    folder.mkdir()
    for k in range(3):  # day_0 .. day_2, read in name order
        raw.iloc[k * 80:(k + 1) * 80].to_parquet(folder / f"day_{k}.parquet", index=False)
    result = run(CONFIG, Path(str(folder / "day_*.parquet")), tmp_path, npartitions=2)
    art = Artifact.open(result.artifact["artifact_path"])
    idx2str = art.metadata["c"]["idx2str"]
    for split in ("train", "validation", "test"):
        data, rows = joined(art, raw, split)
        np.testing.assert_array_equal(data["x"], rows["x"].to_numpy(dtype=np.float32))
        assert [idx2str[i] for i in data["c"]] == rows["c"].tolist()


@pytest.mark.parametrize("formats", [["npy"], ["split_binary"]])
def test_read_split_returns_row_ids_from_any_single_format(tmp_path, formats):
    raw = make_frame()
    dataset = write_csv(raw, tmp_path / "data.csv")
    config = {**CONFIG, "publish": {"formats": formats}}
    art = Artifact.open(run(config, dataset, tmp_path / "one", npartitions=2).artifact["artifact_path"])
    reference = Artifact.open(run(CONFIG, dataset, tmp_path / "ref", npartitions=3).artifact["artifact_path"])
    for split in ("train", "validation", "test"):
        got, want = art.read_split(split), reference.read_split(split)
        assert got["__row__"].dtype == np.int64
        np.testing.assert_array_equal(got["__row__"], want["__row__"])
        np.testing.assert_array_equal(got["c"], want["c"])
