"""What a Prefect user sees of a ``prepflow run`` on the local server (issue 22), against a real server.

* The UI served by the local server reaches that server's API: ``/ui-settings`` read from the UI's port
  names an API that answers, on the same port; the run's printed UI link is on that port too.
* The run is named ``titanic.csv · config.yaml · <hash>`` and tagged with the dataset, the config hash and
  the artifact id; its task runs carry no tags.
* The report artifact links the HTML report over http, served by the same server, and the link opens it.
* ``prepflow server status`` names the server and where its state lives.
"""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from flows import local_server
from flows.run_labels import config_hash
from tasks.config.loader import load_config
from tests.conftest import EXAMPLE

pytestmark = pytest.mark.integration


def _get(url: str, timeout: float = 30.0) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()


def test_a_run_is_findable_and_its_links_work(cli, tmp_path):
    result = cli("run", EXAMPLE / "config.yaml", "--dataset", EXAMPLE / "titanic.csv", "--output", tmp_path / "out",
                 "--cache-dir", tmp_path / "cache", "--json", "--always-run-flow", timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = result.json()
    assert "ui_record_incomplete" not in summary, summary
    assert "503" not in result.stderr

    api = local_server.ensure_server(start_timeout=600)  # a loaded machine starts it slowly
    base = local_server.ui_url(api)
    # 1. the UI's settings name this server's API, and that API answers
    status, _, body = _get(f"{base}/ui-settings")
    ui_api = json.loads(body)["api_url"]
    assert ui_api.rstrip("/") == api, (ui_api, api)
    assert _get(f"{ui_api}/health")[0] == 200
    # the run's UI link (the `prefect:` line; Prefect's own "View at" log line shows only with --verbose)
    assert summary.get("flow_run_url", "").startswith(f"{base}/runs/flow-run/"), summary
    assert "View at" not in result.stderr

    # 2. the run's name and tags
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterTags,
        TaskRunFilter,
        TaskRunFilterFlowRunId,
    )
    from prefect.settings import PREFECT_API_URL, temporary_settings

    digest = config_hash(load_config(EXAMPLE / "config.yaml"))
    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        # the run this CLI call made, by the id in its printed link: the artifact tag alone is shared with
        # other tests' runs of the same content under other file names (concurrent-*.csv), on the same server
        run = client.read_flow_run(summary["flow_run_url"].rstrip("/").rsplit("/", 1)[-1])
        tagged = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=[f"artifact:{summary['artifact_id']}"])))
        assert run.id in {r.id for r in tagged}
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[run.id])))
        task_runs = client.read_task_runs(task_run_filter=TaskRunFilter(
            flow_run_id=TaskRunFilterFlowRunId(any_=[run.id])))
    assert run.name == f"titanic.csv · config.yaml · {digest[:6]}"
    assert {"prepflow", "dataset:titanic.csv", f"config:{digest}", f"artifact:{summary['artifact_id']}"} <= set(
        run.tags)
    assert run.state.is_completed()
    # the stages' task runs carry no tags: a tagged task run costs two API requests for concurrency slots
    assert {"ingest", "vocab", "publish", "report"} <= {t.name.split("-")[0] for t in task_runs}, task_runs
    assert [t.tags for t in task_runs] == [[]] * len(task_runs)

    # 3. the report, over http from the same server
    (report,) = [a for a in artifacts if a.key == "prepflow-report"]
    links = re.findall(r"\[Open the data report\]\((http[^)]+)\)", report.data)
    assert links and links[0].startswith(f"{base}{local_server.REPORTS_PATH}/"), report.data
    status, content_type, page = _get(links[0])
    assert status == 200 and content_type.startswith("text/html")
    assert summary["artifact_id"] in page

    # 4. where it lives, and how to stop it
    status_out = cli("server", "status", "--json")
    info = json.loads(status_out.stdout.strip().splitlines()[-1])
    assert info["running"] and info["url"] == api and info["live_runs"] == []
    assert info["state_dir"] == str(local_server.state_dir())
