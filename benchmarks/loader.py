"""Loader throughput: ``Artifact.batches`` vs a bare ``np.load(mmap_mode='r')`` slice loop.

Builds (once, under ``--workdir``) a Criteo-shaped tabular artifact with the real publisher
(``tasks.publish.stage.run``): ``--rows`` training rows of 13 number, 26 category and 1 binary column,
encoded values drawn from a seeded generator (as encode's Arrow IPC parts), written as per-feature ``.npy`` files and Parquet
shards. Then, with the files in the page cache, it times full passes over the training split:

* ``bare``: for each batch, ``torch.from_numpy(np.array(mm[col][i:i + B]))`` for every column
  (the floor: one copy per column out of the page cache, no channels);
* ``loader``: ``Artifact.batches`` without shuffling (channels stacked, prefetch thread);
* ``loader shuffled``: the same with a seeded per-epoch row shuffle (random gather), next to the
  bare floor for that (``np.take`` of sorted random positions per column);
* ``shuffle_block``: shuffled blocks of consecutive rows (DLRM-style), 1024 and 8192 rows;
* ``prefetch=0``: no background thread (the consumer here does no work, so the thread can only cost);
* ``loader parquet``: reading the Parquet shards instead (decoded into memory on the first pass);
* ``shuffle_window``: the shard-aware order a streamed artifact is read in (``storage.order``: shards
  permuted, rows shuffled within windows of two shards), read from the local ``.npy`` files;
* ``loader (..., __row__ + state_dict)``: the row id channel beside the training channels and a
  ``state_dict()`` after every batch, as a job that checkpoints each step would.

Usage: ``.venv/bin/python benchmarks/loader.py [--rows 3400000] [--batch-size 65536] [--repeat 3]``
Prints one line per mode (median rows/s and batches/s over ``--repeat`` passes) and the ratio to ``bare``.

``--only MODE --passes K`` runs K passes of one mode (``bare`` or ``loader``: no shuffle, as above) and
nothing else, for timing whole processes side by side (``/usr/bin/time -v``, or any harness that runs two
commands in turn): start-up is the same in both, so the ratio of their times is diluted towards 1 by it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

N_NUM, N_CAT = 13, 26
CARDINALITY = 100_000


def config(formats: list[str], shard_rows: int | None = None) -> dict:
    publish = {"formats": formats} | ({"shard_rows": shard_rows} if shard_rows else {})
    return {
        "input_features": [{"name": f"num_{i}", "type": "number"} for i in range(N_NUM)]
        + [{"name": f"cat_{i}", "type": "category"} for i in range(N_CAT)],
        "output_features": [{"name": "label", "type": "binary"}],
        "publish": publish,
    }


def build(workdir: Path, rows: int, seed: int = 0, formats: tuple[str, ...] = ("npy", "parquet"),
          shard_rows: int | None = None) -> Path:
    """Publish a synthetic artifact with the real publisher; returns its folder (reused if present).
    ``shard_rows``: rows per Parquet shard (the publisher's default when None)."""
    import pyarrow as pa

    from storage.cache import StageCache
    from tasks.config.loader import parse_config
    from tasks.publish import stage as publish
    from tasks.publish.rows import rows_path
    from tasks.runtime import fitted_metadata
    from tasks.runtime.context import RunContext
    from tasks.runtime.frame import write_ipc
    from tasks.runtime.outputs import Encoded, Fitted

    tag = f"{rows}-{'-'.join(formats)}" + (f"-{shard_rows}" if shard_rows else "")
    out = workdir / f"artifacts-{tag}"
    if (out / "LATEST").is_file():
        return out / (out / "LATEST").read_text().strip()
    ctx = RunContext(parse_config(config(list(formats), shard_rows)), "synthetic", StageCache(workdir / "cache"),
                     None, str(out))
    counts = {"train": rows, "validation": 1000, "test": 1000}
    encoded = workdir / f"encoded-{tag}"
    rng = np.random.default_rng(seed)
    part_rows = 1 << 20
    first_row = 0
    for split, n in counts.items():
        (encoded / split).mkdir(parents=True, exist_ok=True)
        for part, start in enumerate(range(0, n, part_rows)):
            m = min(part_rows, n - start)
            cols = {f"num_{i}": rng.standard_normal(m, dtype=np.float32) for i in range(N_NUM)}
            cols |= {f"cat_{i}": rng.integers(0, CARDINALITY, m, dtype=np.int32) for i in range(N_CAT)}
            cols["label"] = rng.random(m) < 0.25
            part_path = encoded / split / f"part-{part:05d}.arrow"
            write_ipc(pa.table(cols), part_path)  # what encode writes: the part and its input rows
            np.save(rows_path(part_path), np.arange(first_row, first_row + m, dtype=np.int64))
            first_row += m
    (encoded / "encode.json").write_text(json.dumps({"rows": counts, "parts": 0}))
    fitted = workdir / "fitted"
    fitted.mkdir(exist_ok=True)
    meta = {f"num_{i}": {"type": "number", "normalization": "zscore", "mean": 0.0, "std": 1.0}
            for i in range(N_NUM)}
    meta |= {f"cat_{i}": {"type": "category", "vocab_size": CARDINALITY} for i in range(N_CAT)}
    meta["label"] = {"type": "binary"}
    fitted_metadata.write(fitted, meta)
    start = time.perf_counter()
    art = publish.publish(ctx, {}, "synthetic-" + str(rows), Encoded.at(encoded), Fitted.at(fitted), {})
    print(f"published {rows} rows in {time.perf_counter() - start:.1f} s: {art['artifact_path']}")
    return Path(art["artifact_path"])


def open_npy(path: Path, split: str) -> list[np.ndarray]:
    return [np.load(f, mmap_mode="r") for f in sorted((path / split).glob("*.npy"))]


def bare_pass(arrays: list[np.ndarray], batch_size: int) -> int:
    import torch

    n = len(arrays[0])
    rows = 0
    for i in range(0, n, batch_size):
        batch = [torch.from_numpy(np.array(a[i:i + batch_size])) for a in arrays]
        rows += len(batch[0])
    return rows


def bare_gather_pass(arrays: list[np.ndarray], batch_size: int, seed: int = 0) -> int:
    """The floor for a row-level shuffle: sorted random positions, one np.take per column."""
    import torch

    n = len(arrays[0])
    perm = np.random.default_rng(seed).permutation(n)
    rows = 0
    for i in range(0, n, batch_size):
        idx = np.sort(perm[i:i + batch_size])
        batch = [torch.from_numpy(np.take(a, idx, axis=0)) for a in arrays]
        rows += len(batch[0])
    return rows


def loader_pass(art, split: str, batch_size: int, **kwargs) -> int:
    rows = 0
    for batch in art.batches(split, batch_size=batch_size, **kwargs):
        rows += len(batch["label"])
    return rows


def checkpointing_pass(art, split: str, batch_size: int, **kwargs) -> int:
    """Row ids beside the training channels, and the loader's state taken after every batch."""
    rows = 0
    loader = art.batches(split, batch_size=batch_size, channels=["numerical", "categorical", "label", "__row__"],
                         **kwargs)
    for batch in loader:
        rows += len(batch["__row__"])
        loader.state_dict()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=3_400_000)
    p.add_argument("--batch-size", type=int, default=65_536)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workdir", default="/tmp/prepflow-bench-loader")
    p.add_argument("--only", choices=["bare", "loader"], help="run this mode only, --passes times (no output)")
    p.add_argument("--passes", type=int, default=10)
    args = p.parse_args(argv)

    import torch

    from prepflow import Artifact

    torch.set_num_threads(1)
    path = build(Path(args.workdir), args.rows)
    art = Artifact.open(path)
    B = args.batch_size
    arrays = open_npy(path, "train")  # mapped once, as the loader maps once per artifact
    if args.only:
        for _ in range(args.passes):
            if args.only == "bare":
                bare_pass(arrays, B)
            else:
                loader_pass(art, "train", B, shuffle=False)
        return 0
    window = 2 * art.shard_rows if art.shard_rows else None
    modes = {
        "bare np.load(mmap) slices": lambda: bare_pass(arrays, B),
        "loader (npy, no shuffle)": lambda: loader_pass(art, "train", B, shuffle=False),
        "loader (npy, shuffle)": lambda: loader_pass(art, "train", B, shuffle=True, seed=0),
        "bare random gather (sorted np.take)": lambda: bare_gather_pass(arrays, B),
        "loader (npy, shuffle_block=1024)": lambda: loader_pass(art, "train", B, shuffle=True, shuffle_block=1024),
        "loader (npy, shuffle_block=8192)": lambda: loader_pass(art, "train", B, shuffle=True, shuffle_block=8192),
        "loader (npy, no shuffle, prefetch=0)": lambda: loader_pass(art, "train", B, shuffle=False, prefetch=0),
        "loader (parquet, no shuffle)": lambda: loader_pass(art, "train", B, shuffle=False, prefer="parquet"),
        "loader (npy, shuffle_window 2 shards)": lambda: loader_pass(art, "train", B, shuffle=True,
                                                                     shuffle_window=window),
        "loader (no shuffle, __row__ + state_dict)": lambda: checkpointing_pass(art, "train", B, shuffle=False),
    }
    for fn in modes.values():  # warm-up: page cache, lazy imports, Parquet decode
        fn()
    rates: dict[str, list[float]] = {name: [] for name in modes}
    rows = {}
    for _ in range(args.repeat):  # interleaved rounds, so a busy moment on a shared machine hits every mode
        for name, fn in modes.items():
            start = time.perf_counter()
            rows[name] = fn()
            rates[name].append(rows[name] / (time.perf_counter() - start))
    bare = statistics.median(rates["bare np.load(mmap) slices"])
    print(f"{args.rows} rows, batch {B}, {args.repeat} interleaved rounds, median rows/s:")
    for name, values in rates.items():
        rate = statistics.median(values)
        print(f"  {name:<42} {rate / 1e6:8.2f} M rows/s {rate / B:9.1f} batches/s  ({rows[name]} rows/pass, "
              f"bare/this = {bare / rate:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
