"""BYO FeatureSpec input (storage.featurespec, `prepflow transcode`): an NVIDIA DeepLearningExamples
dataset of headerless CSV chunks becomes a prepflow artifact with the same channels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from storage import Artifact
from storage.featurespec import FeatureSpecInput
from core.errors import ConfigError, DataError
from tests.helpers import run

SIZES = {"train": 300, "validation": 40, "test": 60}
CARDS = {"cat_0.bin": 7, "cat_1.bin": "auto"}


def make_dataset(root: Path, seed: int = 0) -> Path:
    """DLRM-style: numerical features in one file, label and each categorical in their own, per split."""
    rng = np.random.default_rng(seed)
    spec = {
        "feature_spec": {"num_0": {"dtype": "torch.float16"}, "num_1": {"dtype": "torch.float16"},
                         "cat_0.bin": {"dtype": "torch.int8", "cardinality": 7},
                         "cat_1.bin": {"dtype": "torch.int32", "cardinality": "auto"},
                         "label": {"dtype": "torch.bool"}},
        "channel_spec": {"numerical": ["num_0", "num_1"], "categorical": ["cat_0.bin", "cat_1.bin"],
                         "label": ["label"]},
        "source_spec": {},
        "metadata": {},
    }
    for split, n in SIZES.items():
        (root / split).mkdir(parents=True)
        num = np.round(rng.random((n, 2)) * 10, 4)
        np.savetxt(root / split / "numerical.csv", num, delimiter=",", fmt="%.4f")
        np.savetxt(root / split / "label.csv", rng.integers(0, 2, n), fmt="%d")
        np.savetxt(root / split / "cat_0.csv", rng.integers(0, 7, n), fmt="%d")
        cat1 = rng.integers(0, 50, n)  # written as two files, one after the other
        np.savetxt(root / split / "cat_1a.csv", cat1[: n // 3], fmt="%d")
        np.savetxt(root / split / "cat_1b.csv", cat1[n // 3:], fmt="%d")
        spec["source_spec"][split] = [
            {"type": "csv", "features": ["num_0", "num_1"], "files": [f"{split}/numerical.csv"]},
            {"type": "csv", "features": ["label"], "files": [f"{split}/label.csv"]},
            {"type": "csv", "features": ["cat_0.bin"], "files": [f"{split}/cat_0.csv"]},
            {"type": "csv", "features": ["cat_1.bin"], "files": [f"{split}/cat_1a.csv", f"{split}/cat_1b.csv"]},
        ]
    path = root / "feature_spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_transcoded_artifact_keeps_values_rows_and_channels(tmp_path):
    spec_path = make_dataset(tmp_path / "data")
    dataset, config = FeatureSpecInput.load(spec_path).prepare(tmp_path / "work")
    kinds = {f["name"]: f["type"] for f in config["input_features"] + config["output_features"]}
    assert kinds == {"num_0": "number", "num_1": "number", "cat_0.bin": "category", "cat_1.bin": "category",
                     "label": "binary"}
    art = Artifact.open(run(config, dataset, tmp_path).artifact["artifact_path"])
    assert art.manifest["rows"] == SIZES
    spec = art.feature_spec
    assert spec["channel_spec"] == {"numerical": ["num_0", "num_1"], "categorical": ["cat_0.bin", "cat_1.bin"],
                                    "label": ["label"]}
    assert spec["feature_spec"]["cat_0.bin"]["cardinality"] <= 8  # 7 ids + <UNK>
    for split in SIZES:
        got = art.read_split(split)
        num = np.loadtxt(tmp_path / "data" / split / "numerical.csv", delimiter=",")
        assert np.array_equal(got["num_0"], num[:, 0].astype(np.float32))  # normalization none: values kept
        assert np.array_equal(got["label"], np.loadtxt(tmp_path / "data" / split / "label.csv").astype(bool))
        cat1 = np.concatenate([np.loadtxt(tmp_path / "data" / split / f, dtype=np.int64, ndmin=1)
                               for f in ("cat_1a.csv", "cat_1b.csv")])
        idx2str = art.metadata["cat_1.bin"]["idx2str"]
        decoded = np.array([int(idx2str[i]) if i else -1 for i in got["cat_1.bin"]])
        assert np.array_equal(decoded[decoded >= 0], cat1[decoded >= 0])  # ids unseen in train -> <UNK>
        if split == "train":
            assert (decoded >= 0).all()
    batch = next(iter(art.batches("train", batch_size=32, shuffle=False)))
    assert set(batch) == {"numerical", "categorical", "label"} and batch["categorical"].shape == (32, 2)


def test_bad_specs_are_rejected_with_the_key(tmp_path):
    spec_path = make_dataset(tmp_path / "data")
    spec = yaml.safe_load(spec_path.read_text())
    spec["source_spec"]["train"][0]["type"] = "split_binary"
    with pytest.raises(ConfigError, match=r"source_spec.train\[0\].type: only 'csv'"):
        FeatureSpecInput(spec_path, spec)
    spec = yaml.safe_load(spec_path.read_text())
    spec["source_spec"]["holdout"] = spec["source_spec"].pop("test")
    with pytest.raises(ConfigError, match="source_spec.holdout: unknown split"):
        FeatureSpecInput(spec_path, spec)
    spec = yaml.safe_load(spec_path.read_text())
    spec["source_spec"]["test"].pop()
    with pytest.raises(ConfigError, match=r"feature\(s\) \['cat_1.bin'\] are in no chunk"):
        FeatureSpecInput(spec_path, spec)


def test_data_errors_name_the_file(tmp_path):
    spec_path = make_dataset(tmp_path / "data")
    (tmp_path / "data" / "test" / "label.csv").write_text("1\n0\n")
    with pytest.raises(DataError, match="chunks must be row-aligned"):
        FeatureSpecInput.load(spec_path).prepare(tmp_path / "work")
    spec_path = make_dataset(tmp_path / "data2")
    (tmp_path / "data2" / "train" / "cat_0.csv").write_text("\n".join(["9"] * SIZES["train"]) + "\n")
    with pytest.raises(DataError, match="feature 'cat_0.bin' has id 9, outside its declared cardinality 7"):
        FeatureSpecInput.load(spec_path).prepare(tmp_path / "work2")


@pytest.mark.integration
def test_prepflow_transcode_cli(cli, tmp_path):
    spec_path = make_dataset(tmp_path / "data")
    result = cli("transcode", spec_path, "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--json")
    assert result.returncode == 0, result.stderr
    summary = result.json()
    assert summary["rows"] == SIZES
    art = Artifact.open(tmp_path / "out", verify=True)
    assert art.artifact_id == summary["artifact_id"]
    assert art.feature_spec["channel_spec"]["categorical"] == ["cat_0.bin", "cat_1.bin"]
    bad = cli("transcode", tmp_path / "nope.yaml", "--output", tmp_path / "out")
    assert bad.returncode == 2 and "FeatureSpec file not found" in bad.stderr
