"""storage.Preprocessor: raw rows -> exactly the columns the pipeline published for them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from core.errors import DataError
from prepflow import Artifact, Preprocessor
from tasks.config.constants import SPLIT_NAMES
from tests.helpers import run

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "titanic"


@pytest.fixture(scope="module")
def titanic(tmp_path_factory):
    """The example pipeline run in-process; returns (artifact, split array of the input rows)."""
    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    result = run(config, EXAMPLE / "titanic.csv", tmp_path_factory.mktemp("titanic"), npartitions=2)
    split = next(s for s in result.stages if s.stage == "split")
    assign = np.load(Path(split.path) / "split.npy")
    return Artifact.open(result.artifact["artifact_path"]), assign


def assert_bit_identical(got: dict, ref: dict) -> None:
    ref = {k: v for k, v in ref.items() if k != "__row__"}  # the published input position: no serving output
    assert list(got) == list(ref)
    for name in ref:
        assert got[name].dtype == ref[name].dtype, name
        assert got[name].shape == ref[name].shape, name
        assert got[name].tobytes() == ref[name].tobytes(), name


@pytest.mark.parametrize("split_id", [0, 1, 2])
def test_raw_rows_of_every_split_encode_bit_for_bit(titanic, split_id):
    art, assign = titanic
    raw = pd.read_csv(EXAMPLE / "titanic.csv", dtype=str, keep_default_na=False)  # the file's text, as is
    rows = raw.iloc[np.flatnonzero(assign == split_id)]  # a split keeps input order
    assert rows["Age"].eq("").any()  # missing values are filled the same way
    got = Preprocessor.load(art.path).transform(rows)
    assert_bit_identical(got, art.read_split(SPLIT_NAMES[split_id]))


def test_list_of_dicts_with_python_types(titanic):
    art, assign = titanic
    frame = pd.read_csv(EXAMPLE / "titanic.csv")  # pandas' own types: ints, floats with NaN, strings
    records = frame.iloc[np.flatnonzero(assign == 2)].to_dict("records")
    got = Preprocessor.load(art.path).transform(records)
    assert_bit_identical(got, art.read_split("test"))


def test_outputs_are_optional_and_unseen_categories_are_unk(titanic):
    art, _ = titanic
    pre = Preprocessor.load(art.path)
    row = {"Pclass": 9, "Sex": "unknown", "Age": None, "SibSp": 1, "Parch": 0, "Fare": 7.25, "Embarked": ""}
    out = pre.transform([row])
    assert "Survived" not in out
    assert out["Pclass"].tolist() == [0] and out["Sex"].tolist() == [0]  # <UNK>
    assert out["Embarked"].tolist() == [art.metadata["Embarked"]["str2idx"]["S"]]  # "" is missing -> the mode
    assert out["Age"].tolist() == [0.0]  # filled with the fitted mean, then z-scored
    with pytest.raises(DataError, match="output column"):
        pre.transform([row], outputs=True)


def test_clear_errors(titanic):
    art, _ = titanic
    pre = Preprocessor.load(art.path)
    good = {"Pclass": 1, "Sex": "male", "Age": 30, "SibSp": 0, "Parch": 0, "Fare": 7.25, "Embarked": "S"}
    with pytest.raises(DataError, match=r"'Age' .*missing"):
        pre.transform([{k: v for k, v in good.items() if k != "Age"}])
    with pytest.raises(DataError, match=r"row 1, column 'Age': number feature 'Age' expects a number, got 'old'"):
        pre.transform([good, {**good, "Age": "old"}])
    with pytest.raises(DataError, match=r"row 0, column 'Pclass': expected a number, string or boolean"):
        pre.transform([{**good, "Pclass": [1]}])
    with pytest.raises(DataError, match=r"column 'Survived'.*'maybe'"):
        pre.transform([{**good, "Survived": "maybe"}])
    with pytest.raises(DataError, match=r"row 0, column 'Survived'.*drop_row"):
        pre.transform([{**good, "Survived": None}], outputs=True)
    with pytest.raises(DataError, match="expected a pandas DataFrame"):
        pre.transform("Age=3")


def test_moved_artifact_still_loads(titanic, tmp_path):
    art, assign = titanic
    moved = tmp_path / "elsewhere" / art.path.name
    shutil.copytree(art.path, moved)
    raw = pd.read_csv(EXAMPLE / "titanic.csv", dtype=str, keep_default_na=False).iloc[np.flatnonzero(assign == 1)]
    assert_bit_identical(Preprocessor.load(moved).transform(raw), art.read_split("validation"))


def test_scripted_number_module_matches_the_preprocessor(titanic):
    art, assign = titanic
    pre = Preprocessor.load(art.path)
    module = torch.jit.script(pre.torch_module())
    assert module.features == ["Age", "SibSp", "Parch", "Fare"]
    frame = pd.read_csv(EXAMPLE / "titanic.csv")
    for split_id, name in enumerate(SPLIT_NAMES):
        rows = frame.iloc[np.flatnonzero(assign == split_id)]
        x = torch.tensor(rows[module.features].to_numpy(dtype="float64"))  # NaN = missing
        out = module(x).numpy()
        ref = pre.transform(rows)
        for j, feature in enumerate(module.features):
            # zscore/minmax are exact IEEE ops in both libraries; log1p (Fare) may differ by one float32 ulp
            ulps = np.abs(out[:, j].view(np.int32).astype(np.int64) - ref[feature].view(np.int32))
            assert ulps.max() <= (1 if feature == "Fare" else 0), (name, feature)
            assert np.array_equal(ref[feature], art.read_split(name)[feature])
    with pytest.raises(DataError, match="not a number feature"):
        pre.torch_module(["Sex"])


def test_scripted_modules_for_every_normalization_and_bins(tmp_path):
    rng = np.random.default_rng(11)
    n = 400
    df = pd.DataFrame({"a": rng.normal(5, 2, n), "b": rng.exponential(3, n), "c": rng.normal(0, 1, n),
                       "d": rng.gamma(2, 2, n), "y": rng.integers(0, 2, n)})
    df.loc[rng.random(n) < 0.1, ["a", "d"]] = np.nan
    config = {"input_features": [
        {"name": "a", "type": "number", "preprocessing": {"normalization": "minmax"}},
        {"name": "b", "type": "number", "preprocessing": {"normalization": "iq"}},
        {"name": "c", "type": "number", "preprocessing": {"normalization": "none", "missing_value_strategy":
                                                         "fill_with_const", "fill_value": 1.5}},
        {"name": "d", "type": "number", "preprocessing": {"normalization": "bins", "num_bins": 5}}],
        "output_features": [{"name": "y", "type": "binary"}], "publish": {"formats": ["npy"]}}
    path = tmp_path / "data.csv"
    df.to_csv(path, index=False)
    result = run(config, path, tmp_path)
    art = Artifact.open(result.artifact["artifact_path"])
    assign = np.load(Path(next(s for s in result.stages if s.stage == "split").path) / "split.npy")
    pre = Preprocessor.load(art.path)
    assert pre.number_features() == ["a", "b", "c"] and pre.number_features(discretized=True) == ["d"]
    normalizer = torch.jit.script(pre.torch_module())
    binner = torch.jit.script(pre.torch_discretizer("d"))
    for split_id, name in enumerate(SPLIT_NAMES):
        rows = df.iloc[np.flatnonzero(assign == split_id)]
        ref = art.read_split(name)
        assert_bit_identical(pre.transform(rows), ref)
        out = normalizer(torch.tensor(rows[["a", "b", "c"]].to_numpy())).numpy()
        for j, feature in enumerate("abc"):
            assert out[:, j].tobytes() == ref[feature].tobytes(), (name, feature)
        bins = binner(torch.tensor(rows["d"].to_numpy()))
        assert bins.dtype == torch.int32 and bins.numpy().tobytes() == ref["d"].tobytes()
    with pytest.raises(DataError, match="torch_discretizer"):
        pre.torch_module(["d"])
    with pytest.raises(DataError, match="not discretized"):
        pre.torch_discretizer("a")


def test_every_non_media_feature_type_serves_bit_for_bit(tmp_path):
    """set, bag, sequence, text (int and tfidf), timeseries, vector, date, binned number: the
    contract test's dataset, its raw CSV text per split through the Preprocessor."""
    from tests.contract.test_feature_types_contract import CONFIG as ALL_TYPES
    from tests.contract.test_feature_types_contract import make_frame
    from tests.helpers import write_csv

    path = write_csv(make_frame(), tmp_path / "data.csv")
    result = run(ALL_TYPES, path, tmp_path, npartitions=2)
    art = Artifact.open(result.artifact["artifact_path"])
    assign = np.load(Path(next(s for s in result.stages if s.stage == "split").path) / "split.npy")
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    pre = Preprocessor.load(art.path)
    for split_id, name in enumerate(SPLIT_NAMES):
        assert_bit_identical(pre.transform(raw.iloc[np.flatnonzero(assign == split_id)]), art.read_split(name))


def test_from_json_reads_a_published_metadata_file_with_its_row_id_entry(tmp_path):
    """training_set_metadata.json also describes __row__ (no feature): serving from the file skips it."""
    from tests.helpers import write_csv

    df = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "c": ["a", "b", "a", "c"]})
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
              "preprocessing": {"split": {"type": "random", "probabilities": [1.0, 0.0, 0.0]}}}
    art = Path(run(config, write_csv(df, tmp_path / "d.csv"), tmp_path).artifact["artifact_path"])
    assert "__row__" in json.loads((art / "training_set_metadata.json").read_text())
    served = Preprocessor.from_json(art / "training_set_metadata.json").transform(df)
    assert set(served) == {"x", "c"} and served["c"].tolist() == [1, 2, 1, 3]
