"""``prepflow.apply`` with a DataFrame dataset (issue 39)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import prepflow
from core.errors import ConfigError, DataError
from storage.artifact import Artifact
from tasks.serving.preprocessor import Preprocessor
from tests.helpers import run, write_csv
from tests.unit.test_apply import CONFIG, frame


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("fit")
    return Path(run(CONFIG, write_csv(frame(600, 1), tmp / "train.csv"), tmp).artifact["artifact_path"])


def dask_frame(df: pd.DataFrame):
    import dask.dataframe as dd

    return dd.from_pandas(df, npartitions=3)


@pytest.mark.parametrize("kind", ["pandas", "dask"])
def test_apply_a_dataframe(fitted, tmp_path, kind):
    rows = frame(250, 2, unseen=0.2)
    dataset = rows if kind == "pandas" else dask_frame(rows)
    summary = prepflow.apply(fitted, dataset, tmp_path / "applied", cache_dir=tmp_path / "cache")
    assert summary["rows"] == {"train": 0, "validation": 0, "test": 250}
    art = Artifact.open(summary["artifact_path"], verify=True)
    assert art.manifest["fitted_from"] == {"artifact_id": fitted.name, "path": str(fitted.resolve())}
    got = art.read_split("test")
    expected = Preprocessor.load(fitted).transform(rows)
    assert set(expected) >= {"price", "color", "tags", "note", "label"}
    for name, want in expected.items():
        np.testing.assert_array_equal(np.asarray(got[name]), want, err_msg=name)
    assert Path(summary["report_path"]).is_file()


def test_apply_summary_carries_the_warnings_as_run_does(fitted, tmp_path):
    """``prepflow.apply`` returns ``prepflow apply --json``'s summary, whose ``warnings`` hold the drift
    warnings (as ``prepflow.run``'s)."""
    summary = prepflow.apply(fitted, frame(300, 3, shift=3.0), tmp_path / "applied", cache_dir=tmp_path / "cache")
    assert summary["drift"]["price"]["status"] == "fail"  # action warn (the default): published, warned
    assert any(line.startswith("drift: ") and "price: psi" in line for line in summary["warnings"])


def test_the_artifact_is_judged_before_the_output_and_cache_folders_are_made(tmp_path):
    """As the CLI (``cmd_apply``): a bad ARTIFACT, split or npartitions makes no folder."""
    with pytest.raises(DataError, match="no such artifact folder"):
        prepflow.apply(tmp_path / "nope", tmp_path / "x.csv", tmp_path / "applied", cache_dir=tmp_path / "cache")
    with pytest.raises(ConfigError, match="--split must be one of"):
        prepflow.apply(tmp_path / "nope", tmp_path / "x.csv", tmp_path / "applied", cache_dir=tmp_path / "cache",
                       split="holdout")
    with pytest.raises(ConfigError, match="npartitions must be at least 1"):
        prepflow.apply(tmp_path / "nope", tmp_path / "x.csv", tmp_path / "applied", cache_dir=tmp_path / "cache",
                       npartitions=0)
    assert not (tmp_path / "applied").exists() and not (tmp_path / "cache").exists()
