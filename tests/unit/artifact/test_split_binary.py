"""publish ``split_binary``: NVIDIA DeepLearningExamples' DLRM layout (storage/split_binary.py).

``nvidia_rules`` and ``nvidia_read`` restate, in our own words, what NVIDIA's code requires and does
(PyTorch/Recommendation/DLRM/dlrm/data/feature_spec.py ``check_feature_spec`` and datasets.py
``ParametricDataset``; TensorFlow2/Recommendation/DLRM_and_DCNv2/dataloading/feature_spec.py and
raw_binary_dataset.py), so the artifact is checked against those rules here without their code.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ConfigError, DataError
from prepflow import Artifact
from storage import split_binary
from tests.helpers import artifact_files, run, without_created_at

# ---- NVIDIA's rules, restated --------------------------------------------------------------------


def nvidia_rules(spec: dict) -> list[str]:
    """Every rule of NVIDIA's check_feature_spec (PyTorch DLRM and TF2 DLRM_and_DCNv2) that ``spec``
    breaks; [] when both would accept it."""
    bad = []
    fs, ss, cs = spec.get("feature_spec", {}), spec.get("source_spec", {}), spec.get("channel_spec", {})
    if sorted(ss) != ["test", "train"]:
        bad.append(f"mappings must be exactly train and test, got {sorted(ss)}")
    if sorted(cs) != ["categorical", "label", "numerical"]:
        return bad + [f"channels must be exactly categorical, numerical, label, got {sorted(cs)}"]
    cats, nums, labels = cs["categorical"], cs["numerical"], cs["label"]
    if len(labels) != 1:
        bad.append("exactly one label feature")
    if len(set(cats)) != len(cats) or len(set(nums)) != len(nums):
        bad.append("channel lists hold unique names")
    if sorted(fs) != sorted(set(cats) | set(nums) | set(labels)):
        bad.append(f"feature_spec lists exactly the channels' features: {sorted(fs)}")
    for name, info in fs.items():
        try:
            np.dtype(info["dtype"])
        except (KeyError, TypeError):
            bad.append(f"{name}: dtype missing or not a numpy name")
    for name in cats:
        if not isinstance(fs.get(name, {}).get("cardinality"), int):
            bad.append(f"{name}: categorical needs an int cardinality")
        if fs.get(name, {}).get("dtype") not in {"int8", "int16", "int32"}:  # TF2's reader: these three only
            bad.append(f"{name}: categorical dtype must be int8/int16/int32")
    for mapping in ("train", "test"):
        seen: list[str] = []
        for chunk in ss.get(mapping, []):
            feats = chunk["features"]
            if chunk["type"] != "split_binary":
                bad.append(f"{mapping}: chunk type {chunk['type']}")
            if len(chunk["files"]) != 1 or not feats:
                bad.append(f"{mapping}: a chunk has one file and at least one feature")
            seen += feats
            first = feats[0]
            if first in cats and len(feats) != 1:
                bad.append(f"{mapping}: one categorical per chunk")
            elif first in nums:
                if feats != nums:
                    bad.append(f"{mapping}: numerical chunk must hold every numerical feature in channel order")
                if any(np.dtype(fs[f]["dtype"]) != np.float16 for f in feats):
                    bad.append(f"{mapping}: numerical dtype must be float16")
            elif first in labels:
                if len(feats) != 1 or np.dtype(fs[first]["dtype"]) != bool:
                    bad.append(f"{mapping}: label alone in its chunk, dtype bool")
            elif first not in cats:
                bad.append(f"{mapping}: feature of unknown type {first}")
        if len(seen) != len(set(seen)) or sorted(seen) != sorted(fs):
            bad.append(f"{mapping}: every feature exactly once")
    return bad


def nvidia_read(root: Path, spec: dict, mapping: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(numerical n x k float16, categorical n x c int64, label n float32) as NVIDIA's loader reads
    them: raw files, the declared dtypes, numerical row-major."""
    fs, cs = spec["feature_spec"], spec["channel_spec"]
    files = {chunk["features"][0]: root / chunk["files"][0] for chunk in spec["source_spec"][mapping]}
    nums = cs["numerical"]
    numerical = np.fromfile(files[nums[0]], dtype=np.float16).reshape(-1, len(nums))
    label = np.fromfile(files[cs["label"][0]], dtype=bool).astype(np.float32)
    cats = [np.fromfile(files[c], dtype=fs[c]["dtype"]).astype(np.int64) for c in cs["categorical"]]
    categorical = np.stack(cats, axis=1) if cats else np.empty((len(label), 0), np.int64)
    return numerical, categorical, label


# ---- the artifact --------------------------------------------------------------------------------

def dataset(tmp: Path, n: int = 400, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "age": rng.normal(40, 12, n).round(3), "fare": rng.exponential(30, n).round(4),
        "sex": rng.choice(["m", "f"], n), "city": rng.choice([f"c{i}" for i in range(400)], n),
        "vip": rng.integers(0, 2, n), "tags": rng.choice(["a b", "b c d", "e", ""], n),
        "y": rng.integers(0, 2, n)})
    df.loc[::17, "age"] = np.nan
    path = tmp / "d.csv"
    df.to_csv(path, index=False)
    return path


def config(formats: list[str], probabilities=(0.7, 0.1, 0.2)) -> dict:
    return {"input_features": [{"name": "age", "type": "number"}, {"name": "fare", "type": "number",
                                                                   "preprocessing": {"normalization": "zscore"}},
                               {"name": "sex", "type": "category"}, {"name": "city", "type": "category"},
                               {"name": "vip", "type": "binary"}, {"name": "tags", "type": "set"}],
            "output_features": [{"name": "y", "type": "binary"}],
            "preprocessing": {"split": {"type": "random", "probabilities": list(probabilities), "seed": 3}},
            "publish": {"formats": formats}}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split_binary")
    data = dataset(tmp)
    both = run(config(["split_binary", "npy"]), data, tmp / "a", npartitions=3).artifact["artifact_path"]
    alone = run(config(["split_binary"]), data, tmp / "b", npartitions=1).artifact["artifact_path"]
    return Path(both), Path(alone)


def test_feature_specs_pass_nvidias_rules(built):
    both, _ = built
    nvidia = yaml.safe_load((both / "feature_spec.yaml").read_text())
    assert nvidia_rules(nvidia) == []
    assert nvidia["channel_spec"] == {"categorical": ["sex", "city"], "numerical": ["age", "fare", "vip"],
                                      "label": ["y"]}
    assert nvidia["feature_spec"]["sex"] == {"dtype": "int8", "cardinality": 3}  # <UNK>, f, m
    assert nvidia["feature_spec"]["city"]["dtype"] == "int16"  # cardinality above 126
    validation = yaml.safe_load((both / "feature_spec_validation.yaml").read_text())
    assert nvidia_rules(validation) == []
    assert validation["source_spec"]["test"][0]["files"] == ["validation/numerical.bin"]
    # NVIDIA's own list of checks catches a broken spec
    broken = {**nvidia, "source_spec": {**nvidia["source_spec"], "validation": nvidia["source_spec"]["test"]}}
    assert nvidia_rules(broken) and nvidia_rules({**nvidia, "feature_spec": {**nvidia["feature_spec"], "x": {}}})


def test_nvidia_batches_equal_read_split(built):
    both, alone = built
    for root in (both, alone):
        spec = yaml.safe_load((root / "feature_spec.yaml").read_text())
        art = Artifact.open(root, verify=True)
        for mapping, split in (("train", "train"), ("test", "test")):
            ref = art.read_split(split)
            numerical, categorical, label = nvidia_read(root, spec, mapping)
            assert numerical.shape == (art.num_rows(split), 3)
            assert np.array_equal(numerical, np.stack([ref[c].astype(np.float16) for c in ("age", "fare", "vip")], 1))
            assert np.array_equal(categorical, np.stack([ref["sex"], ref["city"]], 1).astype(np.int64))
            assert np.array_equal(label, ref["y"].astype(np.float32))


def test_split_binary_alone_keeps_every_column(built):
    both, alone = built
    lossless, binary = Artifact.open(both), Artifact.open(alone)
    assert binary.feature_spec["source_spec"]["validation"]  # prepflow's view: every split
    for split in ("train", "validation", "test"):
        a, b = lossless.read_split(split), binary.read_split(split)
        assert set(b) == set(a)
        assert b["age"].dtype == np.float16 and np.array_equal(b["age"], a["age"].astype(np.float16))
        for name in ("sex", "city", "y", "tags"):
            assert np.array_equal(b[name], a[name]), name
    batch = next(iter(binary.batches("train", batch_size=16, shuffle=False)))
    ref = lossless.read_split("train")
    assert np.array_equal(batch["categorical"].numpy(), np.stack([ref["sex"][:16], ref["city"][:16]], 1))
    assert np.array_equal(batch["numerical"].numpy()[:, 0], ref["age"][:16].astype(np.float16).astype(np.float32))


def test_bytes_do_not_depend_on_partitioning(tmp_path):
    data = dataset(tmp_path)
    arts = [run(config(["split_binary"]), data, tmp_path / f"p{n}", npartitions=n).artifact["artifact_path"]
            for n in (1, 4)]
    a, b = (without_created_at(artifact_files(p)) for p in arts)
    assert a == b and any(k.endswith("numerical.bin") for k in a)


def test_empty_validation_split_gives_one_spec(tmp_path):
    art = run(config(["split_binary"], (0.8, 0.0, 0.2)), dataset(tmp_path), tmp_path).artifact["artifact_path"]
    assert not (Path(art) / "feature_spec_validation.yaml").exists()
    assert nvidia_rules(yaml.safe_load((Path(art) / "feature_spec.yaml").read_text())) == []


# ---- layout rules and writer -------------------------------------------------------------------

@pytest.mark.parametrize("cardinality, dtype", [(2, "int8"), (126, "int8"), (127, "int16"), (32766, "int16"),
                                                (32767, "int32"), (2**31 - 2, "int32")])
def test_categorical_dtype_follows_nvidias_rule(cardinality, dtype):
    assert split_binary.categorical_dtype(cardinality).name == dtype


def columns_spec() -> dict:
    return {"x": {"dtype": "torch.float32", "shape": []}, "c": {"dtype": "torch.int32", "shape": [], "cardinality": 300},
            "y": {"dtype": "torch.bool", "shape": []}, "m": {"dtype": "torch.int8", "shape": [4]}}


def test_plan_rejects_what_nvidia_cannot_read():
    cols = columns_spec()
    good = {"numerical": ["x"], "categorical": ["c"], "label": ["y"], "m": ["m"]}
    layout = split_binary.plan(cols, good)
    assert [t.file for t in layout.targets] == ["numerical.bin", "label.bin", "cat_c.bin", "col_m.bin"]
    with pytest.raises(ConfigError, match="label 'x' must be one bool per row"):
        split_binary.plan(cols, {**good, "label": ["x"], "numerical": ["y"]})
    with pytest.raises(ConfigError, match="exactly one column in the 'label' channel"):
        split_binary.plan(cols, {**good, "label": []})
    with pytest.raises(ConfigError, match="at least one column in the 'numerical' channel"):
        split_binary.plan(cols, {**good, "numerical": []})
    with pytest.raises(ConfigError, match="categorical column 'm' must be one integer id"):
        split_binary.plan(cols, {**good, "categorical": ["c", "m"]})


def write_parts(tmp: Path, table: pa.Table, cuts: list[int], layout, name: str) -> dict[str, bytes]:
    folder = tmp / name
    folder.mkdir()
    targets = split_binary.create(folder, layout, table.num_rows)
    bounds = [0, *cuts, table.num_rows]
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        part = tmp / f"{name}-{i}.arrow"
        feather.write_feather(table.slice(lo, hi - lo), part)
        split_binary.write_rows(str(part), lo, targets, "train")
    return {os.path.basename(p): Path(p).read_bytes() for p in targets}


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 60), cuts=st.lists(st.integers(0, 60), max_size=5), seed=st.integers(0, 2**16))
def test_writer_bytes_are_the_rows_whatever_the_parts(tmp_path_factory, n, cuts, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 100, n).astype(np.float32)
    table = pa.table({"x": x, "c": rng.integers(0, 300, n).astype(np.int32), "y": rng.integers(0, 2, n).astype(bool),
                      "m": pa.FixedSizeListArray.from_arrays(rng.integers(0, 2, n * 4).astype(np.int8), 4)})
    layout = split_binary.plan(columns_spec(), {"numerical": ["x"], "categorical": ["c"], "label": ["y"]})
    tmp = tmp_path_factory.mktemp("w")
    one = write_parts(tmp, table, [], layout, "one")
    many = write_parts(tmp, table, sorted(c for c in set(cuts) if 0 < c < n), layout, "many")
    assert one == many
    assert one["numerical.bin"] == x.astype(np.float16).tobytes()
    assert one["cat_c.bin"] == table["c"].to_numpy().astype(np.int16).tobytes()
    assert one["label.bin"] == table["y"].to_numpy(zero_copy_only=False).tobytes()


def test_float16_overflow_names_split_row_and_column(tmp_path):
    table = pa.table({"x": np.array([1.0, 70000.0], np.float32), "c": np.array([1, 2], np.int32),
                      "y": np.array([True, False]), "m": pa.FixedSizeListArray.from_arrays(np.zeros(8, np.int8), 4)})
    layout = split_binary.plan(columns_spec(), {"numerical": ["x"], "categorical": ["c"], "label": ["y"]})
    targets = split_binary.create(tmp_path, layout, 12)
    part = tmp_path / "p.arrow"
    feather.write_feather(table, part)
    with pytest.raises(DataError, match=r"train row 11, column 'x': 70000.0 does not fit float16"):
        split_binary.write_rows(str(part), 10, targets, "train")


@pytest.mark.parametrize(("change", "error"), [
    ({"output_features": [{"name": "y", "type": "category"}]}, "the 'label' channel takes binary features; 'y' is category"),
    ({"publish": {"formats": ["split_binary"], "channels": {"label": ["y"], "numerical": ["age", "tags"]}}},
     "the 'numerical' channel takes number or numerical or binary features; 'tags' is set"),
    ({"publish": {"formats": ["split_binary"], "channels": {"label": ["y"], "numerical": ["age"],
                                                            "categorical": ["sex", "age"]}}},
     "feature 'age' is in two of the label/numerical/categorical channels"),
    ({"publish": {"formats": ["split_binary"], "channels": {"label": ["y"], "categorical": ["sex"]}}},
     "at least one column in the 'numerical' channel"),
])
def test_what_nvidia_cannot_read_fails_before_any_stage(tmp_path, change, error):
    """The channel rules that the feature types decide fail in preflight: no stage ran, nothing cached."""
    with pytest.raises(ConfigError, match=error):
        run({**config(["split_binary"]), **change}, dataset(tmp_path), tmp_path)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.json"))
    assert not (tmp_path / "out").exists()
