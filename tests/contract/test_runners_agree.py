"""The stage graph is declared once (tasks/graph.py) and run by two runners: the in-process
``run_pipeline`` and the Prefect flow behind ``prepflow run``. Both must publish the same bytes, for a
config that uses every kind of node: an inferred feature (the retyping step), a custom stage (inserted
nodes), both gates and several feature types."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from tasks.config.loader import parse_config
from tasks.custom import plan as custom_plan
from tasks.graph import STAGES, expand
from tests.custom_stage_helpers import ensure_example_plugin
from tests.helpers import artifact_files, run, without_created_at, write_csv

CONFIG = {
    "stages": [{"uses": "prepflow_example_plugin.stages:FrequencyEncode", "after": "fill_missing",
                "params": {"column": "city"}}],
    "input_features": [
        {"name": "x", "type": "number", "preprocessing": {"normalization": "zscore"}},
        {"name": "city", "type": "category"},
        {"name": "city_freq", "type": "number", "preprocessing": {"normalization": "none"}},
        {"name": "tags", "type": "set"},
        {"name": "note", "type": "text", "preprocessing": {"max_sequence_length": 6}},
        {"name": "untyped"},  # typed by the infer_types node
    ],
    "output_features": [{"name": "label", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 11}},
    "publish": {"formats": ["parquet", "npy"], "shard_rows": 300, "row_group_rows": 64},
}


def frame(n: int = 900, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    words = np.array(["red", "green", "blue", "fast", "slow", "big"])
    return pd.DataFrame({
        "x": rng.normal(0, 2, n),
        "city": rng.choice(["oslo", "lima", "pune", "kyiv"], n),
        "tags": [" ".join(rng.choice(words, rng.integers(1, 4), replace=False)) for _ in range(n)],
        "note": [" ".join(rng.choice(words, rng.integers(1, 9))) for _ in range(n)],
        "untyped": rng.choice(["p", "q", "r"], n),
        "label": rng.integers(0, 2, n),
    })


@pytest.fixture(scope="module", autouse=True)
def example_plugin():
    ensure_example_plugin()


def test_expanded_graph_inserts_custom_stages_and_feeds_their_result_forward():
    nodes = {n.name: n for n in expand(["freq"])}
    assert list(nodes) == [*STAGES[:STAGES.index("fill_missing") + 1], "freq",
                           *STAGES[STAGES.index("fill_missing") + 1:]]
    assert nodes["freq"].inputs == ("ingest", "split", "fill_missing")
    assert nodes["balance"].inputs == ("ingest", "split", "freq")
    assert nodes["encode"].inputs == ("ingest", "split", "freq", "balance", "vocab")
    assert set(nodes["publish"].inputs) == set(nodes) - {"publish"}


@pytest.mark.integration  # real processes: prepflow run with its local Prefect server, or fresh interpreters
def test_prefect_flow_and_in_process_runner_publish_the_same_bytes(tmp_path, cli):
    data = write_csv(frame(), tmp_path / "data.csv")
    direct = run(CONFIG, data, tmp_path / "direct", npartitions=2)

    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(CONFIG))
    flow = cli("run", config_path, "--dataset", data, "--output", tmp_path / "flow" / "out",
               "--cache-dir", tmp_path / "flow" / "cache", "--npartitions", "3", "--json")
    assert flow.returncode == 0, flow.stderr[-3000:]
    summary = flow.json()

    assert summary["artifact_id"] == direct.artifact["artifact_id"]
    assert [s["name"] for s in summary["stages"]] == [s.stage for s in direct.stages]
    assert without_created_at(artifact_files(summary["artifact_path"])) == \
        without_created_at(artifact_files(direct.artifact["artifact_path"]))

    # The UI's graph: each stage's task run names its graph parents' task runs as its inputs, and only them
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows import local_server

    flow_run_id = summary["flow_run_url"].rstrip("/").rsplit("/", 1)[-1]
    with temporary_settings(updates={PREFECT_API_URL: local_server.ensure_server()}), \
            get_client(sync_client=True) as client:
        task_runs = client.read_task_runs(task_run_filter=TaskRunFilter(
            flow_run_id=TaskRunFilterFlowRunId(any_=[flow_run_id])))
    stage = {t.id: t.name.split("-")[0] for t in task_runs}
    inputs = {stage[t.id]: {stage[i.id] for inputs in t.task_inputs.values() for i in inputs} for t in task_runs}
    assert {name: inputs[name] for name in stage.values() if name != "report"} == \
        {n.name: set(n.inputs) for n in expand(custom_plan.names(parse_config(CONFIG)))}
