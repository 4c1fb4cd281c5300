"""``prepflow.apply`` with a DataFrame dataset, and an ARTIFACT that is not a complete artifact (issue 39)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import prepflow
from core.errors import ConfigError, DataError
from storage.artifact import Artifact
from tasks.serving.preprocessor import Preprocessor
from tests.helpers import run, write_csv
from tests.unit.serving.test_apply import CONFIG, frame


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
    assert summary["rows"] == {"test": 250}
    art = Artifact.open(summary["artifact_path"], verify=True)
    assert art.manifest["fitted_from"] == {"artifact_id": fitted.name, "path": str(fitted.resolve())}
    got = art.read_split("test")
    expected = Preprocessor.load(fitted).transform(rows)
    assert set(expected) >= {"price", "color", "tags", "note", "label"}
    for name, want in expected.items():
        np.testing.assert_array_equal(np.asarray(got[name]), want, err_msg=name)
    assert Path(summary["report_path"]).is_file()


def test_apply_a_list_of_files(fitted, tmp_path):
    """A dataset given as a list of files: encoded in name order, row for row as ``transform`` of their rows."""
    first, second = frame(120, 4, unseen=0.2), frame(90, 5)
    paths = [str(write_csv(second, tmp_path / "new" / "b.csv")), str(write_csv(first, tmp_path / "new" / "a.csv"))]
    summary = prepflow.apply(fitted, paths, tmp_path / "applied", cache_dir=tmp_path / "cache")
    assert summary["rows"]["test"] == 210
    got = Artifact.open(summary["artifact_path"], verify=True).read_split("test")
    expected = Preprocessor.load(fitted).transform(pd.concat([first, second], ignore_index=True))
    for name, want in expected.items():
        np.testing.assert_array_equal(np.asarray(got[name]), want, err_msg=name)


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


# ---- an ARTIFACT that is not a complete artifact --------------------------------------------------

def _copy(fitted: Path, tmp: Path) -> Path:
    """``tmp/root/<id>`` with ``tmp/root/LATEST`` naming it: an output root as ``prepflow run`` leaves it."""
    art = tmp / "root" / fitted.name
    shutil.copytree(fitted, art)
    (tmp / "root" / "LATEST").write_text(fitted.name + "\n")
    return art


def _edit_manifest(art: Path, edit) -> None:
    manifest = json.loads((art / "manifest.json").read_text())
    edit(manifest)
    (art / "manifest.json").write_text(json.dumps(manifest))


def _no_latest(art: Path) -> Path:
    (art.parent / "LATEST").unlink()
    return art.parent


def _latest_names_nothing(art: Path) -> Path:
    (art.parent / "LATEST").write_text("0123456789abcdef\n")
    return art.parent


def _truncated(art: Path) -> Path:
    part = art / "train" / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[:-10])
    return art


# (how the ARTIFACT is damaged, what the one error line must say)
INCOMPLETE = {
    "a listed file missing": (lambda art: (art / "feature_spec.yaml").unlink() or art,
                              r"not a complete prepflow artifact: .*feature_spec\.yaml: missing"),
    "a listed split file missing": (lambda art: (art / "train" / "part-00000.parquet").unlink() or art,
                                    r"not a complete prepflow artifact: .*train/part-00000\.parquet: missing"),
    "a listed file cut short": (_truncated, r"train/part-00000\.parquet: \d+ bytes, expected \d+"),
    "no artifact id in the manifest": (lambda art: _edit_manifest(art, lambda m: m.pop("artifact_id")) or art,
                                       r"manifest\.json: artifact id None is not one plain folder name"),
    "no manifest": (lambda art: (art / "manifest.json").unlink() or art, r"manifest\.json: missing"),
    "an output root without LATEST": (_no_latest, r"root/manifest\.json: missing; .* not a complete prepflow artifact"),
    "a LATEST naming no artifact": (_latest_names_nothing, r"0123456789abcdef: not a complete artifact"),
}


@pytest.mark.parametrize("case", sorted(INCOMPLETE))
def test_an_incomplete_artifact_is_one_line_and_nothing_is_written(fitted, tmp_path, case):
    damage, message = INCOMPLETE[case]
    target = damage(_copy(fitted, tmp_path))
    data = write_csv(frame(40, 4), tmp_path / "new.csv")
    with pytest.raises(DataError, match=message) as info:
        prepflow.apply(target, data, tmp_path / "applied", cache_dir=tmp_path / "cache")
    assert "\n" not in str(info.value).strip()
    assert not (tmp_path / "applied").exists()  # nothing published, not even an empty output folder
    assert not (tmp_path / "cache").exists()  # no stage ran: the stage cache is untouched


def test_apply_runs_the_artifact_it_checked_when_the_root_s_latest_moves_on(fitted, tmp_path, monkeypatch):
    """Given an output root, apply resolves its LATEST once: a run published meanwhile (LATEST moved on) does
    not change which artifact is applied."""
    from flows import apply as apply_flow

    root = tmp_path / "root"
    shutil.copytree(fitted, root / fitted.name)
    (root / "LATEST").write_text(fitted.name)
    real, applied = apply_flow.apply_in_process, []

    def moved_on_then_apply(artifact, *args, **kwargs):
        (root / "LATEST").write_text("0" * 24)  # another run's artifact id, published after the check
        applied.append(artifact)
        return real(artifact, *args, **kwargs)

    monkeypatch.setattr(apply_flow, "apply_in_process", moved_on_then_apply)
    summary = prepflow.apply(root, frame(50, 3), tmp_path / "applied", cache_dir=tmp_path / "cache")
    assert applied == [str((root / fitted.name).resolve())]
    assert Artifact.open(summary["artifact_path"]).manifest["fitted_from"]["artifact_id"] == fitted.name
