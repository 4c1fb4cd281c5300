"""``prepflow run --extend`` through the CLI with a real local Prefect server and a Dask LocalCluster: the flow
run is recorded and completed, and the child equals the one the in-process runner publishes without a cluster
(byte for byte, the parent's path aside)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers import artifact_files, write_config, write_csv
from tests.integration.test_apply_flow import _recorded
from tests.unit.serving.test_extend import CONFIG, day

pytestmark = pytest.mark.integration


def test_extend_on_a_cluster_through_a_prefect_flow(tmp_path, cli, cluster, monkeypatch):
    import prepflow

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    data = tmp_path / "data"
    write_csv(day(0), data / "day_0.csv")
    write_csv(day(1), data / "day_1.csv")
    prepflow.run(CONFIG, data, tmp_path / "out", cache_dir=tmp_path / "cache")
    shutil.copytree(tmp_path / "out", tmp_path / "local")
    write_csv(day(2, extra={"e": 40}), data / "day_2.csv")
    config = write_config(CONFIG, tmp_path / "config.yaml")
    out = cli("run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache2",
              "--dask-address", cluster.scheduler_address, "--npartitions", "3", "--extend", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    summary = out.json()
    assert summary["mode"] == "extend" and summary["new_rows"] and "ui_record_incomplete" not in summary

    from flows import local_server

    api = local_server.ensure_server(start_timeout=600)
    run_, flow_name, _tables = _recorded(api, summary["flow_run_url"].rstrip("/").rsplit("/", 1)[-1])
    assert flow_name == "preprocess" and run_.state.is_completed(), (flow_name, run_.state)

    local = prepflow.run(CONFIG, data, tmp_path / "local", cache_dir=tmp_path / "local-cache", extend=True)
    assert local["artifact_id"] == summary["artifact_id"]
    remote_files, local_files = artifact_files(summary["artifact_path"]), artifact_files(local["artifact_path"])
    manifests = [json.loads(f.pop("manifest.json")) for f in (remote_files, local_files)]
    for m in manifests:
        m.pop("parent")
    assert remote_files == local_files and manifests[0] == manifests[1]
