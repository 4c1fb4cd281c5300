"""Gates through the Prefect flow and the CLI (local Prefect server): a failing ``fail`` gate stops
``prepflow run`` before publish (exit 1, the gate named; with ``--json`` the last stdout line says
which gate), and gates run on a distributed Dask cluster (GX in worker processes) give the same
results as the local scheduler."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import run

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "titanic"


def failing_config(tmp_path: Path) -> Path:
    suite = tmp_path / "strict.json"
    suite.write_text(json.dumps({"name": "strict", "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "Age"}}]}))
    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    config["validation"] = {"raw": str(suite), "on_failure": "fail"}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_run_stops_at_a_failing_gate_and_names_it(cli, tmp_path):
    config = failing_config(tmp_path)
    out = tmp_path / "artifacts"
    result = cli("run", config, "--dataset", EXAMPLE / "titanic.csv", "--output", out,
                 "--cache-dir", tmp_path / "cache", "--json")
    assert result.returncode == 1, result.stderr
    assert "validation gate 'raw' failed" in result.stderr
    assert "expect_column_values_to_not_be_null on 'Age'" in result.stderr
    last = result.json()
    assert last["failed_gate"] == "raw"
    assert last["validation"]["failed"] == 1
    assert not out.exists() or not any(p.name != "LATEST" and not p.name.startswith(".") for p in out.iterdir())


def test_gates_on_a_distributed_cluster_match_the_local_scheduler(tmp_path):
    from distributed import Client, LocalCluster

    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    config["validation"] = {"raw": str(ROOT / "expectations" / "titanic_raw.json")}
    local = run(config, EXAMPLE / "titanic.csv", tmp_path / "local", npartitions=3)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster):
        remote = run(config, EXAMPLE / "titanic.csv", tmp_path / "remote", npartitions=3)
    read = lambda r: json.loads((Path(r.artifact["artifact_path"]) / "manifest.json").read_text())["validation"]  # noqa: E731
    assert read(remote) == read(local)
    assert read(local)["raw"]["success"] and read(local)["encoded"]["success"]
