"""A growing folder on a distributed Dask cluster (a 2-worker ``LocalCluster`` of processes): ``prepflow run
--dask-address`` after a file was added reads and fits only that file, on the workers, and publishes the
artifact a cold local run on the same files publishes (byte-identical); the category counts of the files
are reduced by the exchange when forced (the path a cluster takes for counts larger than its workers hold).
"""

from __future__ import annotations

import pytest

from tests.helpers import artifact_files, run, without_created_at, write_config
from tests.unit.dataset.test_incremental_files import STABLE, rich_day, write_day

pytestmark = pytest.mark.integration


def test_a_file_added_is_the_only_one_read_and_fitted_on_a_cluster(tmp_path, cli, cluster, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i, rich_day(i))
    config = write_config(STABLE, tmp_path / "config.yaml")
    args = ["--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--dask-address",
            cluster.scheduler_address, "--json", "--always-run-flow"]
    first = cli("run", config, "--dataset", folder, *args)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.json()["files"] == {"total": 3, "new": 3}

    write_day(folder, 3, rich_day(3))
    grown = cli("run", config, "--dataset", folder, *args)
    assert grown.returncode == 0, grown.stderr[-3000:]
    summary = grown.json()
    assert summary["files"] == {"total": 4, "new": 1}
    cache = tmp_path / "cache"
    for stage in ("fill_missing", "validate_raw", "vocab"):  # one entry per file: the first three reused, one new
        assert len([p for p in (cache / f"{stage}_file").iterdir() if not p.name.startswith(".")]) == 4

    cold = run(STABLE, folder, tmp_path / "cold")  # local, in process, a new cache
    assert summary["artifact_id"] == cold.artifact["artifact_id"]
    assert without_created_at(artifact_files(summary["artifact_path"])) == \
        without_created_at(artifact_files(cold.artifact["artifact_path"]))


def test_the_files_counts_reduced_by_the_exchange_give_the_same_vocabulary(tmp_path, cluster, monkeypatch):
    """With a tree budget too small for the files' counts, the cluster's reduction goes through the exchange."""
    from tasks.runtime import dask_run
    from tasks.vocab import category_files

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    folder = tmp_path / "days"
    for i in range(4):
        write_day(folder, i, rich_day(i))
    reducers = []
    real = category_files.reducer_count
    monkeypatch.setattr(category_files, "TREE_MEMORY_SHARE", 1e-12)
    monkeypatch.setattr(category_files, "REDUCER_MEMORY_SHARE", 1e-12)
    monkeypatch.setattr(category_files, "reducer_count", lambda *a: reducers.append(real(*a)) or reducers[-1])
    with dask_run.client(cluster.scheduler_address):
        exchanged = run(STABLE, folder, tmp_path / "exchanged")
    assert reducers and reducers[-1] > 1
    local = run(STABLE, folder, tmp_path / "local")
    assert without_created_at(artifact_files(exchanged.artifact["artifact_path"])) == \
        without_created_at(artifact_files(local.artifact["artifact_path"]))
