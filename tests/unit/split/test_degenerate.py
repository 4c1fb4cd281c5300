"""Degenerate data is caught before anything is fitted or published: a feature with no value in its fit
rows is a warning naming it; a constant target, or a target class a stratified split leaves out of train,
is an error naming the feature."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from core.errors import DataError
from prepflow import Artifact
from tasks.split import degenerate, stratify
from tests.helpers import run, write_csv

N = 60


def table(**columns) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    base = {"x": rng.normal(size=N), "city": rng.choice(["a", "b", "c"], N), "label": rng.choice(["p", "q"], N)}
    return pd.DataFrame({**base, **columns})


CONFIG = {"input_features": [{"name": "x", "type": "number"}, {"name": "city", "type": "category"}],
          "output_features": [{"name": "label", "type": "category"}]}


def published(tmp_path) -> list:
    return [p for p in (tmp_path / "out").glob("*") if (p / "manifest.json").exists()] if (tmp_path / "out").exists() \
        else []


def test_a_feature_without_values_in_its_training_rows_is_a_warning_naming_it(tmp_path, caplog):
    df = table(city=[None] * (N - 6) + ["a", "b", "c", "a", "b", "c"], split=[0] * (N - 6) + [2] * 6)
    config = {**CONFIG, "preprocessing": {"split": {"type": "fixed", "column": "split"}}}
    with caplog.at_level(logging.WARNING, logger="prepflow.degenerate"):
        result = run(config, write_csv(df, tmp_path / "d.csv"), tmp_path)
    assert result.artifact is not None
    assert any(r.getMessage() == "feature 'city' (column 'city') has no value in any of its 54 training rows: "
               "every row will get its fill value" for r in caplog.records)
    assert not any("'x'" in r.getMessage() or "'label'" in r.getMessage() for r in caplog.records)


def test_an_all_missing_number_filled_with_its_mean_is_a_warning_and_zeros(tmp_path, caplog):
    """No value to average: the mean fill is 0.0 (Ludwig's constant fill), after the warning naming it."""
    config = {**CONFIG, "input_features": [{"name": "x", "type": "number",
                                            "preprocessing": {"missing_value_strategy": "fill_with_mean"}},
                                           {"name": "city", "type": "category"}]}
    with caplog.at_level(logging.WARNING, logger="prepflow.degenerate"):
        result = run(config, write_csv(table(x=[np.nan] * N), tmp_path / "d.csv"), tmp_path)
    assert any(r.getMessage().startswith("feature 'x' (column 'x') has no value in any of its") for r in caplog.records)
    art = Artifact.open(result.artifact["artifact_path"])
    assert art.metadata["x"]["preprocessing"]["computed_fill_value"] == 0.0
    assert all(not art.read_split(s)["x"].any() for s in art.splits)


def test_fit_on_all_looks_at_every_row(tmp_path, caplog):
    df = table(city=[None] * (N - 6) + ["a", "b", "c", "a", "b", "c"], split=[0] * (N - 6) + [2] * 6)
    config = {**CONFIG, "preprocessing": {"split": {"type": "fixed", "column": "split"}, "fit_on": "all"}}
    with caplog.at_level(logging.WARNING, logger="prepflow.degenerate"):
        run(config, write_csv(df, tmp_path / "d.csv"), tmp_path)
    assert not [r for r in caplog.records if r.name == "prepflow.degenerate"]


def test_a_constant_target_is_an_error_naming_it_and_nothing_is_published(tmp_path):
    df = table(label=["yes"] * N)
    with pytest.raises(DataError, match=r"^output feature 'label' \(column 'label'\) is constant: every row with a "
                                        r"value holds 'yes'; a model would learn one answer"):
        run(CONFIG, write_csv(df, tmp_path / "d.csv"), tmp_path)
    assert published(tmp_path) == []


def test_a_target_constant_in_the_training_rows_only_is_a_warning(tmp_path, caplog):
    df = table(label=["p"] * (N - 5) + ["q"] * 5, split=[0] * (N - 5) + [2] * 5)
    config = {**CONFIG, "preprocessing": {"split": {"type": "fixed", "column": "split"}}}
    with caplog.at_level(logging.WARNING, logger="prepflow.degenerate"):
        assert run(config, write_csv(df, tmp_path / "d.csv"), tmp_path).artifact is not None
    assert [r.getMessage() for r in caplog.records if r.name == "prepflow.degenerate"] == [
        "output feature 'label' (column 'label') holds one value, 'p', in all 55 training rows with a value (the "
        "others are in other splits): a model trained on them learns one answer"]


def test_an_all_missing_target_is_an_error(tmp_path):
    config = {**CONFIG, "validation": {"generated": False}}  # the raw gate's non-null check would stop it first
    with pytest.raises(DataError, match=r"^output feature 'label' \(column 'label'\) has no value in any row"):
        run(config, write_csv(table(label=[None] * N), tmp_path / "d.csv"), tmp_path)


def test_a_target_class_a_stratified_split_leaves_out_of_train_is_an_error(tmp_path):
    df = table(label=["common"] * (N - 3) + ["rare"] * 3)
    config = {**CONFIG, "preprocessing": {"split": {"type": "stratify", "column": "label",
                                                    "probabilities": [0.1, 0.45, 0.45]}}}
    with pytest.raises(DataError, match=r"output feature 'label' \(column 'label'\): class 'rare' \(3 row\(s\)\) gets "
                                        r"no training row in the stratified split \[0\.1, 0\.45, 0\.45\]"):
        run(config, write_csv(df, tmp_path / "d.csv"), tmp_path)
    assert published(tmp_path) == []
    # the same column as an input, not the target: its classes may miss train
    as_input = {"input_features": [*CONFIG["input_features"], {"name": "label", "type": "category"}],
                "output_features": [{"name": "x2", "column": "x", "type": "number"}],
                "preprocessing": config["preprocessing"]}
    assert run(as_input, write_csv(df, tmp_path / "d2.csv"), tmp_path / "b").artifact is not None


def test_filling_an_empty_split_takes_a_class_s_last_training_row_last():
    # three classes: 'a' (4 rows), 'b' and 'c' (1 row each, in train); validation is empty
    counts = np.array([[3, 0, 1], [1, 0, 0], [1, 0, 0]])
    sizes = np.array([4, 1, 1])
    stratify._fill_empty_splits(counts, sizes, [0.6, 0.2, 0.2])
    assert counts[:, 1].sum() == 1 and counts[1, 0] == 1 and counts[2, 0] == 1  # moved from 'a'
    values = pd.Series(["a"] * 4 + ["b", "c"])
    assign = stratify.stratify_split(values, np.arange(6), [0.6, 0.2, 0.2], 42, target="y", column="y")
    assert set(assign[values.to_numpy() != "a"]) == {0}


def test_findings_merge_parts_in_any_order():
    parts = [{"fit_rows": 4, "present": {"c": 0, "y": 2}, "values": {"y": ["1"]}, "values_all": {"y": ["1"]}},
             {"fit_rows": 5, "present": {"c": 0, "y": 3}, "values": {"y": ["2"]}, "values_all": {"y": ["2", "3"]}}]
    features = [("c", "c", False), ("y", "y", True)]
    for order in (parts, parts[::-1]):
        merged = degenerate.merge(order, ["c", "y"], ["y"])
        assert merged == {"fit_rows": 9, "present": {"c": 0, "y": 5}, "values": {"y": ["1", "2"]},
                          "values_all": {"y": ["1", "2"]}}
        assert degenerate.findings(features, merged, "train", merged["fit_rows"]) == [
            "feature 'c' (column 'c') has no value in any of its 9 training rows: every row will get its fill value"]
