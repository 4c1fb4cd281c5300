"""On a distributed cluster the category counts are merged in a tree when they are small next to the workers'
memory, and exchanged by value through files otherwise (``tasks.vocab.category.fit_tasks``): both give the
vocabulary a local run gives, for every feature, with ties cut by ``most_common``, OOV buckets and
``symbols: ludwig``.

``test_category_scale`` covers the exchange under a memory limit the tree could not meet; here the same small
counts take each path in turn (``TREE_MEMORY_SHARE`` 0 forces the exchange), and the number of reducers shows
which one ran: one for the tree, one per partition for the exchange (``REDUCER_MEMORY_SHARE`` 0). The workers
are threads of this process (``processes=False``), so that the patched ``INLINE_MAX`` reaches them; the tasks
still go through the scheduler and the Futures.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.integration

PARTS, ROWS = 6, 30_000


def _write_parts(folder: Path) -> None:
    rng = np.random.default_rng(5)
    start = 0
    for i in range(PARTS):
        n = ROWS // PARTS + i  # uneven parts
        zipf = np.minimum(rng.zipf(1.2, n), 5_000)
        small = rng.integers(0, 7, n)
        table = pa.table({"big": pa.array([f"v{z}" for z in zipf]).cast(pa.string()),
                          "small": pa.array([["a", "b", "c", "d", None, "e", "f"][s] for s in small], pa.string()),
                          "__row__": np.arange(start, start + n, dtype=np.int64)})
        pq.write_table(table, folder / f"part-{i:02d}.parquet")
        start += n


def _read(path: str):
    from tasks.runtime.frame import Prepared

    table = pq.read_table(path)
    return Prepared(pd.DataFrame({name: pd.array(table.column(name), dtype=pd.StringDtype("pyarrow"))
                                  for name in ("big", "small")} | {"__row__": table.column("__row__").to_numpy()}))


def _fit(features, data: Path, out: Path) -> tuple[int, dict]:
    """(reducers, metadata with each Parquet vocabulary's rows read back) of ``fit_tasks`` + ``extract``."""
    from dask import delayed

    from storage import vocab_store
    from tasks.runtime import dask_run
    from tasks.vocab import category as category_vocab

    prepared = [delayed(_read)(str(p)) for p in sorted(data.glob("*.parquet"))]
    _, reducers = category_vocab.fit_tasks(prepared, features, "all", out / "_candidates")
    metadata = category_vocab.extract(features, dask_run.compute(reducers), out)
    for meta in metadata.values():
        if "vocab_file" in meta:
            meta["rows"] = vocab_store.read(out / meta["vocab_file"]["path"], meta["vocab_file"]["sha256"]).to_pydict()
    return len(reducers), metadata


def test_tree_and_shuffle_on_a_cluster_give_the_local_vocabulary(tmp_path, monkeypatch):
    import dask
    from distributed import Client, LocalCluster

    from tasks.config.loader import parse_config
    from tasks.features import build_all, category
    from tasks.vocab import category as category_vocab

    data = tmp_path / "data"
    data.mkdir()
    _write_parts(data)
    monkeypatch.setattr(category, "INLINE_MAX", 1_000)  # "big" gets a Parquet vocabulary, "small" an inline one
    config = {"input_features": [
        {"name": "big", "type": "category", "preprocessing": {"most_common": 1_500, "num_oov_buckets": 3}},
        {"name": "small", "type": "category", "preprocessing": {"symbols": "ludwig", "most_common": 4}}],
        "output_features": [{"name": "y", "type": "binary"}]}
    features = category_vocab.counted_features(build_all(parse_config(config)))
    assert [f.name for f in features] == ["big", "small"]

    with dask.config.set(scheduler="threads"):
        local = _fit(features, data, tmp_path / "local")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                         worker_dashboard_address=None) as cluster, Client(cluster):
        tree = _fit(features, data, tmp_path / "tree")
        monkeypatch.setattr(category_vocab, "TREE_MEMORY_SHARE", 0)
        monkeypatch.setattr(category_vocab, "REDUCER_MEMORY_SHARE", 0)
        shuffled = _fit(features, data, tmp_path / "shuffle")

    assert local[0] == 1 and tree[0] == 1 and shuffled[0] == PARTS
    assert "vocab_file" in local[1]["big"] and "vocab_file" not in local[1]["small"]
    assert local[1]["big"]["vocab_size"] == 1 + 3 + 1_500
    assert tree[1] == local[1] and shuffled[1] == local[1]
