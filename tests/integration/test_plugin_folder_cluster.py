"""A plugin beside the config on Dask workers (issue 48, item 8; the flow process: tests/unit/config/test_plugin_folder.py).

The workers of a 2-process ``LocalCluster`` start before the config is loaded, so nothing tells them about
its folder at start. ``prepflow run --dask-address`` imports ``folderplug_cluster.py`` from the config's
folder in its own process and registers it with the cluster (``tasks.runtime.worker_plugins``): every
worker imports it from the same folder, and the custom stage's tasks run there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from distributed import Client

from tests.unit.config.test_plugin_folder import CONFIG, MODULE, PLUGIN, prepflow, project

pytestmark = pytest.mark.integration

CLUSTER_MODULE = "folderplug_cluster"


def _imported(name: str) -> bool:
    return name in sys.modules


def test_workers_import_a_plugin_beside_the_config(cluster, tmp_path):
    folder = project(tmp_path)
    (folder / f"{MODULE}.py").rename(folder / f"{CLUSTER_MODULE}.py")
    (folder / f"{CLUSTER_MODULE}.py").write_text(PLUGIN)
    config = yaml.safe_dump(CONFIG, sort_keys=False).replace(f"{MODULE}:", f"{CLUSTER_MODULE}:")
    (folder / "config.yaml").write_text(config)
    with Client(cluster.scheduler_address) as client:
        assert not any(client.run(_imported, CLUSTER_MODULE).values())
        ran = prepflow("run", folder / "config.yaml", "--dataset", folder / "data.csv", "--output", tmp_path / "out",
                       "--cache-dir", tmp_path / "cache", "--npartitions", 4, "--dask-address",
                       cluster.scheduler_address, "--json", cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert all(client.run(_imported, CLUSTER_MODULE).values())
    summary = json.loads(ran.stdout.splitlines()[-1])
    assert Path(summary["artifact_path"], "training_set_metadata.json").is_file()
