"""Issue 19: with a distributed Client as the scheduler, the files of a cache entry or an artifact are
hashed by the cluster's workers, not the flow process, and the digests are the same."""

from __future__ import annotations

import os

import pytest
from distributed import Client, LocalCluster

from storage import cache
from storage.hashing import file_digest, sha256_file

pytestmark = pytest.mark.integration


def test_large_entries_are_hashed_on_the_workers(tmp_path):
    paths = []
    for i in range(3):  # 3 x 4 MB: above PARALLEL_HASH_BYTES together
        path = tmp_path / f"part-{i}.bin"
        path.write_bytes(os.urandom(1 << 22))
        paths.append(str(path))
    expected = [sha256_file(p) for p in paths]
    assert sum(os.path.getsize(p) for p in paths) >= cache.PARALLEL_HASH_BYTES
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, worker_dashboard_address=None) as lc, Client(lc) as client:
        assert cache.sha256_files(paths) == expected
        # one task for the 12 MB (HASH_TASK_BYTES per task), not one per file
        tasks = client.run_on_scheduler(lambda dask_scheduler: {  # tasks that finished, per name
            name: p.state_counts["memory"] for name, p in dask_scheduler.task_prefixes.items()})
        assert tasks.get("file_digest_group") == 1, tasks
        assert cache.describe_files(tmp_path) == {  # a cache entry's listing: XXH3-128
            os.path.basename(p): {"xxh3_128": file_digest(p, "xxh3_128"), "bytes": 1 << 22} for p in paths}
    assert cache.sha256_files(paths) == expected  # the Client closed: threads of this process again
