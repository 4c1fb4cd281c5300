"""balance: class counts before/after (statistics and published rows), training split only, seeded,
and the config errors (mutually exclusive options, exactly one binary/category output)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.errors import ConfigError
from prepflow import Artifact
from tests.helpers import run, write_csv

N = 400


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    label = np.where(rng.random(N) < 0.15, "fraud", "ok")
    label[:3] = "weird"  # a third class: counted, never resampled
    return pd.DataFrame({"x": rng.normal(size=N), "label": label})


def _config(output_type: str = "category", **balance) -> dict:
    return {"input_features": [{"name": "x", "type": "number"}],
            "output_features": [{"name": "label", "type": output_type}],
            "preprocessing": {"split": {"type": "stratify", "column": "label", "probabilities": [0.6, 0.2, 0.2]},
                              **balance},
            "publish": {"formats": ["npy"]}}


def _counts(stats: dict, which: str) -> dict[str, int]:
    prefix = f"balance.class_count_{which}."
    return {k[len(prefix):]: v["count"] for k, v in stats.items() if k.startswith(prefix)}


def _published(result) -> dict[str, dict[str, int]]:
    art = Artifact.open(result.artifact["artifact_path"])
    idx2str = art.metadata["label"]["idx2str"]
    out = {}
    for split_name in ("train", "validation", "test"):
        ids, n = np.unique(art.read_split(split_name)["label"], return_counts=True)
        out[split_name] = {idx2str[i]: int(c) for i, c in zip(ids, n, strict=True)}
    return out


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_csv(_frame(), tmp_path_factory.mktemp("balance") / "data.csv")


@pytest.fixture(scope="module")
def plain(dataset, tmp_path_factory):
    return _published(run(_config(), dataset, tmp_path_factory.mktemp("plain")))


def _stage_stats(result) -> dict:
    return next(s for s in result.stages if s.stage == "balance").statistics


@pytest.mark.parametrize("option,ratio", [("oversample_minority", 0.5), ("oversample_minority", 1.0),
                                          ("undersample_majority", 0.5), ("undersample_majority", 1.0)])
def test_balance_counts_follow_ludwig_on_the_training_split_only(dataset, plain, tmp_path, option, ratio):
    result = run(_config(**{option: ratio}), dataset, tmp_path)
    before, after = _counts(_stage_stats(result), "before"), _counts(_stage_stats(result), "after")
    assert before == plain["train"]  # counted on the (filled) training rows
    minority, majority = min(before, key=lambda c: (before[c], c)), max(before, key=lambda c: (before[c], c))
    assert minority == "weird" and majority == "ok"
    expected = dict(before)
    if option == "oversample_minority":
        expected[minority] = max(before[minority], int(before[majority] * ratio))
    else:
        expected[majority] = min(before[majority], int(before[minority] / ratio))
    assert after == expected
    published = _published(result)
    assert published["train"] == expected
    assert published["validation"] == plain["validation"] and published["test"] == plain["test"]


def test_balance_is_seeded_and_independent_of_partitioning(dataset, tmp_path):
    cfg = _config(oversample_minority=0.6)
    a = run(cfg, dataset, tmp_path / "a", npartitions=1)
    b = run(cfg, dataset, tmp_path / "b", npartitions=4)
    art_a, art_b = Artifact.open(a.artifact["artifact_path"]), Artifact.open(b.artifact["artifact_path"])
    assert np.array_equal(art_a.read_split("train")["x"], art_b.read_split("train")["x"])
    cfg["preprocessing"]["split"]["seed"] = 43
    c = run(cfg, dataset, tmp_path / "c", npartitions=1)
    assert _counts(_stage_stats(c), "after")["weird"] == int(0.6 * _counts(_stage_stats(c), "before")["ok"])


def test_binary_output_and_ludwig_nested_spelling(dataset, tmp_path):
    df = _frame()
    df["label"] = np.where(df["label"] == "fraud", "yes", "no")
    data = write_csv(df, tmp_path / "binary.csv")
    cfg = _config("binary")
    cfg["preprocessing"]["balance"] = {"undersample_majority": 0.25}
    stats = _stage_stats(run(cfg, data, tmp_path))
    before, after = _counts(stats, "before"), _counts(stats, "after")
    assert after == {"False": min(before["False"], int(before["True"] / 0.25)), "True": before["True"]}


@pytest.mark.parametrize("outputs,message", [
    ([], r"exactly one output feature"),
    ([{"name": "x2", "column": "x", "type": "number"}], r"exactly one output feature of type binary or category"),
    ([{"name": "label", "type": "category"}, {"name": "x2", "column": "x", "type": "number"}],
     r"exactly one output feature"),
])
def test_balance_needs_exactly_one_binary_or_category_output(dataset, tmp_path, outputs, message):
    cfg = _config(oversample_minority=0.5)
    cfg["output_features"] = outputs
    cfg["preprocessing"]["split"] = {"type": "random"}
    with pytest.raises(ConfigError, match=message):
        run(cfg, dataset, tmp_path)


def test_oversample_and_undersample_are_mutually_exclusive(dataset, tmp_path):
    with pytest.raises(ConfigError, match="mutually exclusive"):
        run(_config(oversample_minority=0.5, undersample_majority=0.5), dataset, tmp_path)
    cfg = _config(oversample_minority=0.5)
    cfg["preprocessing"]["balance"] = {"undersample_majority": 0.5}
    with pytest.raises(ConfigError, match="mutually exclusive"):
        run(cfg, dataset, tmp_path)
