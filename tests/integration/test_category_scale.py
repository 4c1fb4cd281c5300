"""A vocabulary of 10^6 distinct values fitted by workers that could not count the column alone (issue 11).

The column: 1,300,000 rows, 1,000,000 distinct 256-byte values (the distinct values alone are 256 MB;
1,000 of them repeat with Zipf counts), in 24 Parquet parts. Counting it in one process needs
~400 MB above the interpreter (a streaming ``collections.Counter``; pyarrow's ``value_counts`` over
the whole column ~900 MB, pandas ~1,080 MB: measured on this machine), while each of the 2 workers
has ``memory_limit=500MB``, of which ~180 MB is the interpreter with pandas, pyarrow and distributed
loaded. ``tasks.vocab.category`` counts per partition, exchanges the counts by value through files and reduces,
so a reducer holds at most 1/32 of a worker's memory limit of counts. The fitted vocabulary (``most_common`` cuts inside the
count-1 values, so the tie order matters; 4 OOV buckets) must equal the exact one computed here in
one process. Workers run with the compose file's memory settings (README, scaling out):
``ARROW_DEFAULT_MEMORY_POOL=system`` (Arrow's default allocator keeps freed memory, which Dask counts as
unmanaged and pauses the worker for) and ``MALLOC_MMAP_THRESHOLD_`` (glibc's heap for blocks up to 4 MiB),
which must hold within the memory limit too (at 32 MiB the workers paused for good: the heap kept freed blocks).
"""

from __future__ import annotations

import resource
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.helpers import worker_memory_env

pytestmark = pytest.mark.integration

DISTINCT, REPEATS, PARTS, WIDTH = 1_000_000, 300_000, 24, 256
MEMORY_LIMIT = "500MB"
MOST_COMMON, BUCKETS = 900_000, 4


def _values(ids: np.ndarray) -> pa.Array:
    return pc.utf8_rpad(pc.cast(pa.array(ids * 7919 % 10_000_019), pa.string()), WIDTH, padding="~")


def _write_parts(folder: Path) -> None:
    rng = np.random.default_rng(11)
    ids = np.concatenate([np.arange(DISTINCT), np.minimum(rng.zipf(1.3, REPEATS), 1000) - 1])
    rng.shuffle(ids)
    start = 0
    for i, chunk in enumerate(np.array_split(ids, PARTS)):  # with each row's input position, as ingest's parts
        rows = np.arange(start, start + len(chunk), dtype=np.int64)
        pq.write_table(pa.table({"c": _values(chunk), "__row__": rows}), folder / f"part-{i:02d}.parquet")
        start += len(chunk)


def _read(path: str):
    from tasks.runtime.frame import Prepared

    table = pq.read_table(path)
    return Prepared(pd.DataFrame({"c": pd.array(table.column("c"), dtype=pd.StringDtype("pyarrow")),
                                  "__row__": table.column("__row__").to_numpy()}))


def _peak_rss_mb() -> float:
    """Peak RSS of this worker's own address space (VmHWM). ru_maxrss is not used: Linux carries it
    over fork+exec, so a worker spawned by a large pytest process would report the parent's peak."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _expected(folder: Path):
    """The exact vocabulary, in one (unlimited) process: all counts, sorted, cut."""
    from storage import string_hash

    column = pa.concat_arrays([pq.read_table(p).column("c").combine_chunks() for p in sorted(folder.glob("*.parquet"))])
    vc = pc.value_counts(column)
    table = pa.table({"value": vc.field("values"), "count": vc.field("counts").cast(pa.int64())})
    table = table.take(pc.sort_indices(table, [("count", "descending"), ("value", "ascending")]))
    cut = table.slice(MOST_COMMON)
    buckets = string_hash.buckets(string_hash.hash_strings(cut.column("value")), BUCKETS)
    oov = np.bincount(buckets, weights=cut.column("count").to_numpy(), minlength=BUCKETS).astype(np.int64)
    return table.slice(0, MOST_COMMON), oov, len(column)


def _memory_env() -> dict:
    """A worker's memory settings, as its process sees them."""
    import os

    return {name: os.environ.get(name) for name in worker_memory_env()}


def test_million_distinct_values_fit_on_memory_limited_workers(tmp_path, monkeypatch):
    from dask import delayed
    from distributed import Client, LocalCluster

    from storage import vocab_store
    from tasks.config.loader import parse_config
    from tasks.features import build_all
    from tasks.runtime import dask_run
    from tasks.vocab import category as category_vocab

    data = tmp_path / "data"
    data.mkdir()
    _write_parts(data)
    config = {"input_features": [{"name": "c", "type": "category",
                                  "preprocessing": {"most_common": MOST_COMMON, "num_oov_buckets": BUCKETS}}],
              "output_features": [{"name": "y", "type": "binary"}]}
    features = category_vocab.counted_features(build_all(parse_config(config)))
    assert [f.name for f in features] == ["c"]
    out = tmp_path / "out"
    for name, value in worker_memory_env().items():  # before the workers are spawned: glibc reads it at start
        monkeypatch.setenv(name, value)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=MEMORY_LIMIT,
                         host="127.0.0.1", dashboard_address=None, worker_dashboard_address=None) as cluster, \
            Client(cluster) as client:
        assert client.run(_memory_env) == {w: worker_memory_env() for w in client.scheduler_info()["workers"]}
        workers = set(client.scheduler_info()["workers"])
        prepared = [delayed(_read)(str(p)) for p in sorted(data.glob("*.parquet"))]
        _, reducers = category_vocab.fit_tasks(prepared, features, "all", out / "_candidates")
        reduced = dask_run.compute(reducers)
        assert set(client.scheduler_info()["workers"]) == workers  # no worker was killed and replaced
        peaks = client.run(_peak_rss_mb)
    limit_mb = 500e6 / 2**20
    assert all(peak < limit_mb for peak in peaks.values()), peaks
    # ~280 MB of counts, reducers of at most 1/32 of a worker's 500 MB: ~18 reducers, each reading all 24 files
    assert 2 <= len(reduced) < PARTS

    meta = category_vocab.extract(features, reduced, out)["c"]
    assert not (out / "_candidates").exists()  # the exchange's and the candidates' files are removed once merged
    assert meta["vocab_size"] == 1 + BUCKETS + MOST_COMMON and meta["num_oov_buckets"] == BUCKETS
    fitted = vocab_store.read(out / meta["vocab_file"]["path"], meta["vocab_file"]["sha256"])
    assert fitted.num_rows == meta["vocab_file"]["rows"] == meta["vocab_size"]
    expected, oov, total = _expected(data)
    assert fitted.column("value").slice(0, 1 + BUCKETS).to_pylist() == ["<UNK>"] + [f"<OOV_{b}>" for b in range(4)]
    assert fitted.column("count").slice(0, 1 + BUCKETS).to_pylist() == [0, *oov.tolist()]
    assert fitted.column("value").slice(1 + BUCKETS).equals(expected.column("value"))
    assert fitted.column("count").slice(1 + BUCKETS).equals(expected.column("count"))
    assert int(pc.sum(fitted.column("count")).as_py()) == total == DISTINCT + REPEATS
