"""BYO FeatureSpec input (storage.featurespec, `prepflow transcode`): NVIDIA DeepLearningExamples datasets
(csv and split_binary chunks, WideAndDeep's multi-hot lists) become prepflow artifacts with the ids,
cardinalities, numbers, labels and channels kept.

The data is laid out as NVIDIA's own code writes it: ``dlrm/data/utils.py:write_dataset_to_disk`` (what
``prepare_synthetic_dataset`` runs for their test specs: numerical float16 row-major, label bool, each
categorical in its declared dtype), ``dlrm/scripts/gen_csv.py`` (headerless CSV per chunk) and
WideAndDeep's ``gen_csv.py`` (lists written by pandas as ``[1, 2, 3]``). The specs are NVIDIA's own test
specs (tests/data/nvidia_feature_specs/README.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ConfigError, DataError
from prepflow import Artifact
from storage.featurespec import SPLIT_COLUMN, SPLIT_IDS, FeatureSpecInput
from tests.helpers import run

SPECS = Path(__file__).resolve().parents[2] / "data" / "nvidia_feature_specs"
DLRM_SPECS = sorted(p.name for p in SPECS.glob("dlrm_*.yaml") if "transcoding" not in p.name)
ROWS = {"train": 64, "validation": 16, "test": 24}


def write_like_nvidia(spec_file: str, root: Path, seed: int = 0) -> tuple[Path, dict]:
    """NVIDIA's spec ``spec_file`` copied to ``root`` with data beside it as their scripts write it;
    returns the spec path and the values per split and feature."""
    spec_path = root / "feature_spec.yaml"
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(SPECS / spec_file, spec_path)
    spec = yaml.safe_load(spec_path.read_text())
    fs, cs = spec["feature_spec"], spec["channel_spec"]
    rng = np.random.default_rng(seed)
    values: dict[str, dict] = {}
    for mapping, chunks in spec["source_spec"].items():
        n = ROWS[mapping]
        v = {cs["label"][0]: rng.integers(0, 2, n)}
        for name in cs["numerical"]:
            v[name] = rng.random(n, dtype=np.float32)
        for name in cs.get("categorical", []) + cs.get("onehot_categorical", []):
            v[name] = rng.integers(0, fs[name]["cardinality"], n)
        for name in cs.get("multihot_categorical", []):
            lengths = rng.integers(1, fs[name]["max_hotness"] + 1, n)
            v[name] = [rng.integers(0, fs[name]["cardinality"], k).tolist() for k in lengths]
        for chunk in chunks:
            path = root / chunk["files"][0]
            path.parent.mkdir(parents=True, exist_ok=True)
            feats = chunk["features"]
            if chunk["type"] == "split_binary":  # write_dataset_to_disk: float16, bool, the declared int dtype
                if feats[0] in cs["numerical"]:
                    data = np.stack([v[f] for f in feats], axis=1).astype(np.float16)
                elif feats[0] in cs["label"]:
                    data = v[feats[0]].astype(bool)
                else:
                    data = v[feats[0]].astype(fs[feats[0]]["dtype"])
                path.write_bytes(data.tobytes())
            else:  # gen_csv: the chunk's columns, no header, no index
                pd.DataFrame({f: v[f] for f in feats}).to_csv(path, header=False, index=False)
        for name in cs["numerical"]:  # what was stored: float16 in split_binary files
            if any(c["type"] == "split_binary" for c in chunks):
                v[name] = v[name].astype(np.float16)
        values[mapping] = v
    return spec_path, values


@pytest.mark.parametrize("spec_file", [*DLRM_SPECS, "dlrm_transcoding_small_csv.yaml", "wideanddeep_fspec_csv.yaml"])
def test_nvidia_specs_are_read_with_ids_cardinalities_numbers_and_labels_kept(tmp_path, spec_file):
    spec_path, values = write_like_nvidia(spec_file, tmp_path / "data")
    spec = FeatureSpecInput.load(spec_path)
    dataset, config = spec.prepare(tmp_path / "work")
    table = pq.read_table(dataset)
    features = {f["name"]: f for f in config["input_features"] + config["output_features"]}
    cs, fs = spec.channels, spec.features
    label = cs["label"][0]
    assert features[label]["type"] == "binary" and config["output_features"] == [features[label]]
    for split, v in values.items():
        part = table.filter(table[SPLIT_COLUMN].to_numpy() == SPLIT_IDS[split])
        assert part.num_rows == ROWS[split]
        labels = part[label].to_pylist()
        assert [str(x).lower() in ("1", "true") for x in labels] == v[label].astype(bool).tolist()
        for name in cs["numerical"]:
            assert np.array_equal(part[name].to_numpy().astype(np.float32), v[name].astype(np.float32)), name
        for name in cs.get("categorical", []) + cs.get("onehot_categorical", []):
            assert np.array_equal(part[name].to_numpy(), v[name]), name  # ids as written, no re-indexing
            assert features[name]["type"] == "category"
            assert features[name]["preprocessing"]["cardinality"] == fs[name]["cardinality"]
        for name in cs.get("multihot_categorical", []):
            assert part[name].to_pylist() == [" ".join(map(str, ids)) for ids in v[name]]
            vocab = Path(features[name]["preprocessing"]["vocab_file"]).read_text().split()
            assert features[name]["type"] == "set" and vocab == [str(i) for i in range(fs[name]["cardinality"])]
    assert config["publish"]["channels"] == {c: n for c, n in cs.items() if n}


@settings(max_examples=6, deadline=None)
@given(cuts=st.lists(st.integers(1, ROWS["train"] - 1), min_size=1, max_size=4, unique=True),
       spec_file=st.sampled_from(["dlrm_13_num_10_cat.yaml", "dlrm_transcoding_small_csv.yaml"]))
def test_files_of_a_chunk_are_read_in_row_order(tmp_path_factory, cuts, spec_file):
    """A chunk's rows cut into several files (listed in order) read as the one file did."""
    tmp = tmp_path_factory.mktemp("cut")
    spec_path, _ = write_like_nvidia(spec_file, tmp / "data")
    whole = pq.read_table(FeatureSpecInput.load(spec_path).prepare(tmp / "w1")[0])
    spec = yaml.safe_load(spec_path.read_text())
    bounds = [0, *sorted(cuts), ROWS["train"]]
    for chunk in spec["source_spec"]["train"]:
        path = tmp / "data" / chunk["files"][0]
        if chunk["type"] == "csv":
            lines = path.read_text().splitlines(keepends=True)
            pieces = ["".join(lines[a:b]).encode() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        else:
            row = path.stat().st_size // ROWS["train"]
            data = path.read_bytes()
            pieces = [data[a * row:b * row] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        chunk["files"] = []
        for k, piece in enumerate(pieces):
            (path.parent / f"{path.name}.{k}").write_bytes(piece)
            chunk["files"].append(str((path.parent / f"{path.name}.{k}").relative_to(tmp / "data")))
    spec_path.write_text(yaml.safe_dump(spec))
    assert pq.read_table(FeatureSpecInput.load(spec_path).prepare(tmp / "w2")[0]).equals(whole)


def test_auto_cardinality_is_the_largest_id_plus_one(tmp_path):
    spec_path, values = write_like_nvidia("dlrm_transcoding_small_csv.yaml", tmp_path / "data")
    spec = yaml.safe_load(spec_path.read_text())
    spec["feature_spec"]["cat_3.bin"]["cardinality"] = "auto"
    spec_path.write_text(yaml.safe_dump(spec))
    _, config = FeatureSpecInput.load(spec_path).prepare(tmp_path / "work")
    card = next(f for f in config["input_features"] if f["name"] == "cat_3.bin")["preprocessing"]["cardinality"]
    assert card == max(int(v["cat_3.bin"].max()) for v in values.values()) + 1


# ---- bad input: one error naming the chunk and the file, nothing written ------------------------------

def prepared_error(spec_path: Path, work: Path) -> str:
    with pytest.raises(DataError) as info:
        FeatureSpecInput.load(spec_path).prepare(work)
    assert not (work / "dataset.parquet").exists()
    return str(info.value)


def test_missing_short_and_wrong_dtype_files_name_chunk_and_file(tmp_path):
    spec_path, _ = write_like_nvidia("dlrm_criteo_f15.yaml", tmp_path / "data")
    data = tmp_path / "data"
    spec = yaml.safe_load(spec_path.read_text())
    chunks = spec["source_spec"]["train"]
    i8 = next(i for i, c in enumerate(chunks) if spec["feature_spec"][c["features"][0]].get("dtype") == "int8")
    i32 = next(i for i, c in enumerate(chunks) if spec["feature_spec"][c["features"][0]].get("dtype") == "int32")
    name8, file8 = chunks[i8]["features"][0], chunks[i8]["files"][0]
    name32, file32 = chunks[i32]["features"][0], chunks[i32]["files"][0]
    original = (data / file8).read_bytes()

    (data / file8).unlink()
    msg = prepared_error(spec_path, tmp_path / "w1")
    assert f"source_spec.train[{i8}] ({name8})" in msg and f"file {file8} not found" in msg

    (data / file8).write_bytes(original[:-5])  # cut short: 5 rows fewer
    msg = prepared_error(spec_path, tmp_path / "w2")
    assert f"source_spec.train[{i8}] ({name8})" in msg and f"{file8} holds {ROWS['train'] - 5} rows" in msg

    (data / file8).write_bytes(np.frombuffer(original, np.int8).astype(np.int32).tobytes())  # int32 where int8
    msg = prepared_error(spec_path, tmp_path / "w3")
    assert f"({name8})" in msg and "4 bytes per value where the spec says int8" in msg

    (data / file8).write_bytes(original)
    (data / file32).write_bytes((data / file32).read_bytes()[:-2])  # half a row
    msg = prepared_error(spec_path, tmp_path / "w4")
    assert f"source_spec.train[{i32}] ({name32})" in msg and "not a whole number of rows of 1 x int32" in msg


def test_csv_chunks_missing_or_short_name_chunk_and_file(tmp_path):
    spec_path, _ = write_like_nvidia("dlrm_transcoding_small_csv.yaml", tmp_path / "data")
    label = tmp_path / "data" / "train" / "label.bin"  # NVIDIA's CSV spec names its CSV files *.bin
    lines = label.read_text().splitlines()
    label.write_text("\n".join(lines[:-2]) + "\n")
    msg = prepared_error(spec_path, tmp_path / "w1")
    assert f"source_spec.train[1] (label): train/label.bin holds {ROWS['train'] - 2} rows" in msg
    label.unlink()
    msg = prepared_error(spec_path, tmp_path / "w2")
    assert "source_spec.train[1] (label): file train/label.bin not found" in msg


def test_id_outside_its_cardinality_names_file_row_and_feature(tmp_path):
    spec_path, values = write_like_nvidia("dlrm_default.yaml", tmp_path / "data")
    spec = yaml.safe_load(spec_path.read_text())
    chunk = next(c for c in spec["source_spec"]["test"] if c["features"] == ["cat_4.bin"])
    ids = values["test"]["cat_4.bin"].astype(np.int32)
    ids[6] = spec["feature_spec"]["cat_4.bin"]["cardinality"]
    (tmp_path / "data" / chunk["files"][0]).write_bytes(ids.tobytes())
    msg = prepared_error(spec_path, tmp_path / "w")
    assert msg.startswith(str(tmp_path / "data" / chunk["files"][0]))
    assert "row 6, feature 'cat_4.bin': id 100000 is outside its cardinality 100000" in msg

    csv_path, _ = write_like_nvidia("dlrm_transcoding_small_csv.yaml", tmp_path / "csv")
    part = tmp_path / "csv" / "train" / "catpart1.bin"
    lines = part.read_text().splitlines()
    lines[2] = "1,-3,5"
    part.write_text("\n".join(lines) + "\n")
    msg = prepared_error(csv_path, tmp_path / "w2")
    assert "catpart1.bin: row 2, feature 'cat_4.bin': id -3 is outside its cardinality 50" in msg


def test_multihot_row_longer_than_max_hotness_is_an_error(tmp_path):
    spec_path, _ = write_like_nvidia("wideanddeep_fspec_csv.yaml", tmp_path / "data")
    frame = pd.read_csv(tmp_path / "data" / "valid.csv", header=None, dtype=str)
    col = yaml.safe_load(spec_path.read_text())["source_spec"]["test"][0]["features"].index("topic_id_list")
    frame.iloc[3, col] = "[1, 2, 3, 4]"
    frame.to_csv(tmp_path / "data" / "valid.csv", header=False, index=False)
    msg = prepared_error(spec_path, tmp_path / "w")
    assert "valid.csv: row 3, feature 'topic_id_list': 4 ids, more than its max_hotness 3" in msg


def test_bad_specs_are_rejected_with_the_key(tmp_path):
    spec_path, _ = write_like_nvidia("dlrm_default.yaml", tmp_path / "data")
    spec = yaml.safe_load(spec_path.read_text())
    spec["source_spec"]["train"][0]["type"] = "tfrecord"
    with pytest.raises(ConfigError, match=r"source_spec.train\[0\].type: 'tfrecord' cannot be transcoded"):
        FeatureSpecInput(spec_path, spec)
    spec = yaml.safe_load(spec_path.read_text())
    spec["source_spec"]["holdout"] = spec["source_spec"].pop("test")
    with pytest.raises(ConfigError, match="source_spec.holdout: unknown split"):
        FeatureSpecInput(spec_path, spec)
    spec = yaml.safe_load(spec_path.read_text())
    spec["source_spec"]["test"].pop()
    with pytest.raises(ConfigError, match=r"feature\(s\) \['cat_25.bin'\] are in no chunk"):
        FeatureSpecInput(spec_path, spec)
    spec = yaml.safe_load(spec_path.read_text())
    del spec["feature_spec"]["num_3"]["dtype"]
    with pytest.raises(ConfigError, match=r"split_binary chunk needs the dtype.*feature_spec.num_3.dtype"):
        FeatureSpecInput(spec_path, spec)
    spec = yaml.safe_load(spec_path.read_text())
    spec["feature_spec"]["cat_0.bin"]["dtype"] = "int33"
    with pytest.raises(ConfigError, match=r"feature_spec.cat_0.bin.dtype: 'int33' is not a numpy dtype"):
        FeatureSpecInput(spec_path, spec)


# ---- end to end: the pipeline keeps what was read ------------------------------------------------

def transcode(spec_file: str, tmp: Path, formats=("npy", "parquet")) -> tuple[Artifact, dict, FeatureSpecInput]:
    spec_path, values = write_like_nvidia(spec_file, tmp / "data")
    spec = FeatureSpecInput.load(spec_path)
    dataset, config = spec.prepare(tmp / "work", formats=formats)
    return Artifact.open(run(config, dataset, tmp).artifact["artifact_path"]), values, spec


def check_artifact(art: Artifact, values: dict, spec: FeatureSpecInput) -> None:
    cs, fs = spec.channels, spec.features
    published = art.feature_spec["feature_spec"]
    for split, v in values.items():
        got = art.read_split(split)
        for name in cs.get("categorical", []) + cs.get("onehot_categorical", []):
            assert np.array_equal(got[name], v[name]), name
            assert published[name]["cardinality"] == fs[name]["cardinality"]
        for name in cs["numerical"]:
            assert np.array_equal(got[name].astype(np.float32), v[name].astype(np.float32)), name
        assert np.array_equal(got[cs["label"][0]], v[cs["label"][0]].astype(bool))
        for name in cs.get("multihot_categorical", []):
            expected = np.zeros((len(v[name]), fs[name]["cardinality"] + 2), np.int8)
            for row, ids in enumerate(v[name]):
                expected[row, np.asarray(ids) + 2] = 1  # column id + 2: after <PAD>, <UNK>
            assert np.array_equal(got[name], expected)


def test_transcoded_dlrm_dataset_keeps_everything(tmp_path):
    art, values, spec = transcode("dlrm_criteo_f15.yaml", tmp_path)
    assert art.manifest["rows"] == {"train": ROWS["train"], "validation": 0, "test": ROWS["test"]}
    assert art.feature_spec["channel_spec"]["categorical"] == spec.channels["categorical"]
    check_artifact(art, values, spec)


@pytest.mark.integration
@pytest.mark.parametrize("spec_file", [*DLRM_SPECS, "dlrm_transcoding_small_csv.yaml", "wideanddeep_fspec_csv.yaml"])
def test_every_nvidia_spec_transcodes(tmp_path, spec_file):
    art, values, spec = transcode(spec_file, tmp_path)
    check_artifact(art, values, spec)


@pytest.mark.integration
def test_nvidia_dataset_transcoded_to_split_binary_has_the_same_bytes(tmp_path):
    """NVIDIA's files in, split_binary out (normalization none): every file of train and test has the
    bytes it had, and the published spec the same dtypes and cardinalities."""
    art, _, spec = transcode("dlrm_criteo_f15.yaml", tmp_path, formats=("split_binary",))
    published = yaml.safe_load((Path(art.path) / "feature_spec.yaml").read_text())
    assert {n: (f["dtype"], f.get("cardinality")) for n, f in published["feature_spec"].items()} == \
        {n: (np.dtype(f["dtype"]).name, f.get("cardinality")) for n, f in spec.features.items()}
    for mapping in ("train", "test"):
        ours = {c["features"][0]: c["files"][0] for c in published["source_spec"][mapping]}
        for chunk in spec.sources[mapping]:
            mine = (Path(art.path) / ours[chunk["features"][0]]).read_bytes()
            assert mine == (spec.base / chunk["files"][0]).read_bytes(), chunk["features"][0]


@pytest.mark.integration
def test_a_split_binary_artifact_transcodes_back(tmp_path):
    """prepflow's own split_binary artifact is an NVIDIA dataset: transcoded, its ids, cardinalities,
    float16 numbers and labels come back as they were published."""
    rng = np.random.default_rng(5)
    n = 300
    pd.DataFrame({"x": rng.normal(0, 1, n), "z": rng.exponential(2, n), "c": rng.choice(list("abcdefg"), n),
                  "y": rng.integers(0, 2, n)}).to_csv(tmp_path / "d.csv", index=False)
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "z", "type": "number"},
                                 {"name": "c", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}],
              "preprocessing": {"split": {"type": "random", "probabilities": [0.8, 0.0, 0.2], "seed": 1}},
              "publish": {"formats": ["split_binary"]}}
    first = Artifact.open(run(config, tmp_path / "d.csv", tmp_path / "a").artifact["artifact_path"])
    spec = FeatureSpecInput.load(Path(first.path) / "feature_spec.yaml")
    dataset, derived = spec.prepare(tmp_path / "work")
    second = Artifact.open(run(derived, dataset, tmp_path / "b").artifact["artifact_path"])
    assert second.feature_spec["feature_spec"]["c"]["cardinality"] == first.feature_spec["feature_spec"]["c"]["cardinality"]
    for split in ("train", "test"):
        a, b = first.read_split(split), second.read_split(split)
        assert np.array_equal(b["c"], a["c"]) and np.array_equal(b["y"], a["y"])
        assert np.array_equal(b["x"], a["x"].astype(np.float32))


@pytest.mark.integration
def test_prepflow_transcode_cli(cli, tmp_path):
    spec_path, _ = write_like_nvidia("dlrm_default.yaml", tmp_path / "data")
    result = cli("transcode", spec_path, "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--json",
                 "--formats", "split_binary")
    assert result.returncode == 0, result.stderr
    summary = result.json()
    assert summary["rows"] == {"train": ROWS["train"], "validation": 0, "test": ROWS["test"]}
    art = Artifact.open(tmp_path / "out", verify=True)
    assert art.artifact_id == summary["artifact_id"]
    published = yaml.safe_load((Path(art.path) / "feature_spec.yaml").read_text())
    original = yaml.safe_load(spec_path.read_text())
    assert published["channel_spec"] == original["channel_spec"]
    assert {n: f.get("cardinality") for n, f in published["feature_spec"].items()} == \
        {n: f.get("cardinality") for n, f in original["feature_spec"].items()}
    (tmp_path / "data" / "train" / "cat_3.bin").unlink()
    bad = cli("transcode", spec_path, "--output", tmp_path / "out2", "--cache-dir", tmp_path / "cache")
    assert bad.returncode == 1 and "source_spec.train[5] (cat_3.bin): file train/cat_3.bin not found" in bad.stderr
    assert not (tmp_path / "out2").exists()
    bad = cli("transcode", tmp_path / "nope.yaml", "--output", tmp_path / "out")
    assert bad.returncode == 2 and "FeatureSpec file not found" in bad.stderr
