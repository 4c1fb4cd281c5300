"""``prepflow apply`` through the CLI with a real local Prefect server and a Dask LocalCluster (issue 39): the
flow run named ``apply`` is recorded, the rows are encoded on the workers, and the artifact equals the one
the in-process runner publishes without a cluster (byte for byte) and ``Preprocessor.transform``'s rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from storage.artifact import Artifact
from tasks.serving.preprocessor import Preprocessor
from tests.helpers import artifact_files, run, without_created_at, write_csv
from tests.unit.serving.test_apply import CONFIG, frame

pytestmark = pytest.mark.integration


def _recorded(api: str, flow_run_id: str):
    """The flow run of that id on the local server at ``api``, its flow's name and its drift tables."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey
    from prefect.settings import PREFECT_API_URL, temporary_settings

    # the API of the server the CLI used, named explicitly: this process may have imported Prefect's
    # settings before (an environment variable set now would not be read)
    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
        flow = client.read_flow(run.flow_id)
        tables = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["prepflow-drift"]), flow_run_id=ArtifactFilterFlowRunId(any_=[run.id])))
    return run, flow.name, tables


def test_apply_on_a_cluster_through_a_prefect_flow(tmp_path, cli, cluster, monkeypatch):
    import prepflow

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    fitted = Path(run(CONFIG, write_csv(frame(800, 1), tmp_path / "train.csv"), tmp_path).artifact["artifact_path"])
    data = write_csv(frame(700, 2, unseen=0.2), tmp_path / "new.csv")
    out = cli("apply", fitted, "--dataset", data, "--output", tmp_path / "applied", "--cache-dir", tmp_path / "cache2",
              "--dask-address", cluster.scheduler_address, "--npartitions", "3", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    summary = out.json()
    assert summary["rows"]["test"] == 700 and "ui_record_incomplete" not in summary
    assert {"price", "color", "tags", "note"} <= set(summary["drift"])

    from flows import local_server

    api = local_server.ensure_server(start_timeout=600)  # the one the CLI started (a loaded machine: slowly)
    run_, flow_name, tables = _recorded(api, summary["flow_run_url"].rstrip("/").rsplit("/", 1)[-1])
    assert flow_name == "apply" and run_.state.is_completed(), (flow_name, run_.state)
    assert run_.name == "apply · new.csv · " + fitted.name
    assert {"prepflow", "apply", "dataset:new.csv", f"artifact:{summary['artifact_id']}"} <= set(run_.tags)
    assert tables and tables[0].type == "table" and "color" in str(tables[0].data)

    local = prepflow.apply(fitted, data, tmp_path / "local", cache_dir=tmp_path / "local-cache")
    assert local["artifact_id"] == summary["artifact_id"]
    assert without_created_at(artifact_files(summary["artifact_path"])) == \
        without_created_at(artifact_files(local["artifact_path"]))
    got = Artifact.open(summary["artifact_path"], verify=True).read_split("test")
    for name, want in Preprocessor.load(fitted).transform(pd.read_csv(data)).items():
        np.testing.assert_array_equal(np.asarray(got[name]), want, err_msg=name)
