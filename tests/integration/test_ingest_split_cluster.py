"""CSV byte ranges and the split on a 2-worker process cluster (issue 19): the range tasks, the in-place
row numbering, the split's histogram/bucket/write tasks and the ``MappedArray`` handle run in other
processes and give the bytes of the single reader and of the in-process split."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pytest

from storage.npy import MappedArray
from tasks.ingest import csv_ranges as ingest_csv
from tasks.ingest import spec as ingest_spec
from tasks.ingest import stage as ingest
from tasks.ingest.spec import IngestSpec
from tasks.runtime import dask_run
from tasks.split import stage as split

pytestmark = pytest.mark.integration

SPEC = IngestSpec(columns={"x": "float64", "c": "string"}, format="csv")


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      worker_dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def _table(out) -> pa.Table:
    return pa.concat_tables(feather.read_table(p) for p in sorted(out.glob("part-*.arrow"))).combine_chunks()


def _pid() -> int:
    import os

    return os.getpid()


def test_csv_ranges_on_workers_equal_the_single_reader(tmp_path, client):
    rng = np.random.default_rng(1)
    lines = ["x,c,w"] + [f"{'' if rng.random() < 0.1 else round(rng.normal(), 4)},{rng.choice(['a', 'bb', ''])},{i}"
                         for i in range(5000)]
    path = tmp_path / "d.csv"
    path.write_text("\r\n".join(lines) + "\r\n")
    ingest_spec.write_parts(ingest.read_batches(str(path), SPEC), SPEC, tmp_path / "one", str(path))
    rows = ingest_csv.write_parts(str(path), SPEC, tmp_path / "ranges", ingest.read_batches, 4096)
    assert rows == 5000 and len(ingest_csv.plan([str(path)], SPEC, 4096)) > 10
    assert _table(tmp_path / "ranges").equals(_table(tmp_path / "one"))


def test_random_split_on_workers_equals_the_in_process_split(tmp_path, client):
    from dask import delayed

    n = 300_001
    old = dask_run.CHUNK_ROWS
    dask_run.CHUNK_ROWS = 50_000  # seven tasks (the workers import the module: their own default)
    try:
        split.random_on_workers(n, [0.7, 0.2, 0.1], 5, 0.5, None, 9, tmp_path / "split.npy")
    finally:
        dask_run.CHUNK_ROWS = old
    keep = split.sample_mask(n, 0.5, None, 9)
    expected = np.full(n, -1, dtype=np.int8)
    active = np.flatnonzero(keep)
    expected[active] = split.random_split(active, [0.7, 0.2, 0.1], 5)
    np.save(tmp_path / "expected.npy", expected)
    assert (tmp_path / "split.npy").read_bytes() == (tmp_path / "expected.npy").read_bytes()
    handle = MappedArray(tmp_path / "split.npy")
    picked = delayed(lambda a, rows: (a[rows], _pid()))(delayed(handle, traverse=False), np.arange(0, n, 1000))
    values, pid = client.compute(picked).result()
    assert pid != _pid()  # read on a worker, from the path
    np.testing.assert_array_equal(values, expected[::1000])


def test_stratified_split_on_workers_equals_the_in_process_split(tmp_path, client):
    from types import SimpleNamespace

    import pandas as pd

    from tasks.config.constants import ROW
    from tasks.split.stratify import stratify_on_workers, stratify_split

    n = 40_000
    rng = np.random.default_rng(3)
    labels = pd.Series(rng.choice(["no", "yes", "maybe", None], n, p=[0.6, 0.3, 0.09, 0.01]), dtype=object)
    frame = pd.DataFrame({"y": labels, ROW: np.arange(n, dtype=np.int64)})
    parts = [frame.iloc[a:a + 7_000] for a in range(0, n, 7_000)]  # plain frames: shipped to the workers
    keep, sample = split._sample_on_workers(n, 0.8, None, 2)
    cfg = SimpleNamespace(column="y", probabilities=[0.7, 0.2, 0.1], seed=8)
    counts = stratify_on_workers(parts, n, cfg, sample, tmp_path / "split.npy", None)
    mask = split.sample_mask(n, 0.8, None, 2)
    expected = np.full(n, -1, dtype=np.int8)
    rows = np.flatnonzero(mask)
    expected[rows] = stratify_split(labels[mask].reset_index(drop=True), rows, cfg.probabilities, cfg.seed, None, "y")
    np.save(tmp_path / "expected.npy", expected)
    assert (tmp_path / "split.npy").read_bytes() == (tmp_path / "expected.npy").read_bytes()
    assert sum(counts) == keep == int(mask.sum())
    prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert {"class_sizes", "histogram", "in_cells", "write"} <= set(prefixes), prefixes


def test_datetime_split_on_workers_equals_the_in_process_split(tmp_path, client):
    from types import SimpleNamespace

    import pandas as pd

    from tasks.config.constants import ROW
    from tasks.split.dates import datetime_on_workers, datetime_split

    n = 30_000
    rng = np.random.default_rng(6)
    dates = pd.Series((pd.Timestamp("2023-01-01") + pd.to_timedelta(rng.integers(0, 200, n), unit="D"))
                      .strftime("%Y-%m-%d"), dtype=object)  # ISO strings, runs of equal dates
    frame = pd.DataFrame({"d": dates, ROW: np.arange(n, dtype=np.int64)})
    parts = [frame.iloc[a:a + 6_000] for a in range(0, n, 6_000)]
    keep, sample = split._sample_on_workers(n, 0.9, None, 4)
    cfg = SimpleNamespace(column="d", probabilities=[0.7, 0.2, 0.1])
    datetime_on_workers(parts, n, cfg, sample, tmp_path / "split.npy", None)
    mask = split.sample_mask(n, 0.9, None, 4)
    expected = np.full(n, -1, dtype=np.int8)
    rows = np.flatnonzero(mask)
    expected[rows] = datetime_split(dates[mask].reset_index(drop=True), rows, cfg.probabilities, "d")
    np.save(tmp_path / "expected.npy", expected)
    assert (tmp_path / "split.npy").read_bytes() == (tmp_path / "expected.npy").read_bytes()
    prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert {"parse_part", "histogram", "between", "count_up_to", "write"} <= set(prefixes), prefixes
