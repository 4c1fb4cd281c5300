"""A category input filled with ``<UNK>`` is left missing in the stages' own partitions (tasks.runtime.frame,
``normalize_and_fill(lazy=True)``): fit and encode read a missing value as ``<UNK>``, so the artifact must
be byte for byte the one a written fill gives, with OOV buckets, hash buckets and cuts too."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tasks.config.loader import parse_config
from tasks.runtime import frame
from tasks.runtime.context import RunContext
from tests.helpers import artifact_files, run, without_created_at, write_csv


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    n = 300
    c = rng.choice(["a", "b", "c", "d", "e", "<UNK>"], n, p=[0.3, 0.25, 0.2, 0.1, 0.05, 0.1]).astype(object)
    c[rng.random(n) < 0.2] = None
    return pd.DataFrame({"c": c, "x": rng.normal(size=n), "y": rng.choice([0, 1], n)})


def _config(preprocessing: dict) -> dict:
    return {"input_features": [{"name": "c", "type": "category", "preprocessing": preprocessing},
                               {"name": "x", "type": "number"}],
            "output_features": [{"name": "y", "type": "binary"}]}


def _eager(pdf, features, assign, states, carry):
    return frame.normalize_and_fill(frame.cast_partition(pdf, features, assign), features, states, carry)


@pytest.mark.parametrize("preprocessing", [{}, {"num_oov_buckets": 2}, {"hash_buckets": 7}, {"most_common": 2},
                                           {"min_frequency": 40, "num_oov_buckets": 1}])
def test_a_category_left_missing_gives_the_artifact_of_a_written_fill(tmp_path, monkeypatch, preprocessing):
    data = write_csv(_table(), tmp_path / "data.csv")
    lazy = run(_config(preprocessing), data, tmp_path / "lazy", npartitions=3).artifact["artifact_path"]
    monkeypatch.setattr(frame, "_prepare", _eager)
    eager = run(_config(preprocessing), data, tmp_path / "eager", npartitions=3).artifact["artifact_path"]
    assert without_created_at(artifact_files(lazy)) == without_created_at(artifact_files(eager))


def test_only_unk_filled_category_inputs_are_left_missing(tmp_path):
    config = parse_config({
        "input_features": [{"name": "c", "type": "category"},
                           {"name": "k", "column": "c", "type": "category", "preprocessing": {"fill_value": "zz"}},
                           {"name": "l", "column": "c", "type": "category", "preprocessing": {"symbols": "ludwig"}}],
        "output_features": [{"name": "y", "type": "category"}]})
    ctx = RunContext(config, "unused", None)
    pdf = pd.DataFrame({"c": pd.array(["a", None, "b"], dtype="string"), "y": pd.array(["p", "q", "p"], dtype="string"),
                        "__row__": np.arange(3)})
    states = {f.name: {"missing_value_strategy": f.missing_strategy, "computed_fill_value": v}
              for f, v in zip(ctx.features, ["<UNK>", "zz", "<UNK>", None], strict=True)}
    prepared = frame._prepare(pdf, ctx.features, np.zeros(3, np.int8), states, None)
    assert prepared.frame["c"].isna().tolist() == [False, True, False]  # left missing
    assert prepared.filled["c"] == 1  # and counted as filled
    assert prepared.frame["k"].tolist() == ["a", "zz", "b"] and prepared.frame["l"].tolist() == ["a", "<UNK>", "b"]
