"""``prepflow apply`` through the CLI (in-process runner: PREPFLOW_PREFECT=off), issue 39."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import run, write_csv
from tests.unit.serving.test_apply import CONFIG, frame

OFF = {"PREPFLOW_PREFECT": "off"}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("fit")
    return Path(run(CONFIG, write_csv(frame(500, 1), tmp / "train.csv"), tmp).artifact["artifact_path"])


def test_apply_json_summary(cli, fitted, tmp_path):
    data = write_csv(frame(200, 2), tmp_path / "new.csv")
    out = cli("apply", fitted, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache",
              "--split", "validation", "--json", env=OFF)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = out.json()
    assert summary["rows"] == {"validation": 200}
    assert {"artifact_path", "artifact_id", "rows", "drift"} <= set(summary)
    assert summary["drift"]["price"]["status"] == "ok"
    manifest = json.loads((Path(summary["artifact_path"]) / "manifest.json").read_text())
    assert manifest["fitted_from"]["artifact_id"] == fitted.name
    shown = cli("inspect", summary["artifact_path"], env=OFF)  # the lineage a user reads
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert f"fitted from {fitted.name}  ({manifest['fitted_from']['path']})" in shown.stdout


def test_drift_fail_exits_1_and_publishes_nothing(cli, fitted, tmp_path):
    data = write_csv(frame(200, 3, shift=3.0), tmp_path / "new.csv")
    config = tmp_path / "drift.yaml"
    config.write_text(yaml.safe_dump({"validation": {"drift": {"action": "fail"}}}))
    out = cli("apply", fitted, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache",
              "--config", config, "--json", env=OFF)
    assert out.returncode == 1
    assert "drift gate failed" in out.stderr and "price" in out.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*/manifest.json"))


def test_bad_artifact_and_missing_column_are_one_line(cli, fitted, tmp_path):
    (tmp_path / "empty").mkdir()
    data = write_csv(frame(20, 4).drop(columns=["price"]), tmp_path / "new.csv")
    bad = cli("apply", tmp_path / "empty", "--dataset", data, "--output", tmp_path / "out", env=OFF)
    assert bad.returncode == 1
    errors = [line for line in bad.stderr.splitlines() if line.startswith("prepflow: error:")]
    assert len(errors) == 1 and "manifest.json: missing" in errors[0]
    column = cli("apply", fitted, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "c",
                 env=OFF)
    assert column.returncode == 1
    errors = [line for line in column.stderr.splitlines() if line.startswith("prepflow: error:")]
    assert len(errors) == 1 and "price" in errors[0], column.stderr[-2000:]
    assert not list((tmp_path / "out").glob("*/manifest.json"))


@pytest.mark.parametrize("case", ["a listed file missing", "an output root without LATEST"])
def test_an_incomplete_artifact_exits_1_with_one_line_and_writes_nothing(cli, fitted, tmp_path, case):
    """The documented exit of a refused ARTIFACT (docs/apply-and-drift.md): 1, one line, nothing published,
    the stage cache untouched."""
    import shutil

    art = tmp_path / "root" / fitted.name
    shutil.copytree(fitted, art)
    if case == "a listed file missing":
        (art / "feature_spec.yaml").unlink()
        target, said = art, "feature_spec.yaml: missing"
    else:
        target, said = art.parent, "root/manifest.json: missing"
    data = write_csv(frame(20, 5), tmp_path / "new.csv")
    out = cli("apply", target, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache",
              "--json", env=OFF)
    assert out.returncode == 1
    errors = [line for line in out.stderr.splitlines() if line.startswith("prepflow: error:")]
    assert len(errors) == 1 and said in errors[0] and "not a complete prepflow artifact" in errors[0], out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
