"""A hand-written polars pass doing what prepflow does with ``criteo_like.config()`` (issue 19's reference).

Reads the Criteo-shaped Parquet file, assigns a seeded random split 0.8/0.1/0.1, fits on the training
rows (number mean and std, mean fill; category vocabularies by count desc, value asc, every value kept,
id 0 for null and unseen), encodes (float32 z-scores, int32 ids, bool label) and writes one zstd Parquet
file per split. Not byte-compatible with prepflow (another split RNG); the same work per row.

    python benchmarks/polars_reference.py DATA.parquet OUT_DIR      # polars is a benchmark-only extra
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl

NUMERIC = [f"I{i}" for i in range(1, 14)]
CATEGORICAL = [f"C{i}" for i in range(1, 27)]


def run(data: Path, out: Path) -> dict[str, int]:
    df = pl.read_parquet(data, columns=["label", *NUMERIC, *CATEGORICAL])
    split = np.searchsorted(np.cumsum([0.8, 0.1]), np.random.default_rng(1).random(df.height), side="right")
    df = df.with_columns(pl.Series("__split__", split.astype(np.int8)))
    train = df.filter(pl.col("__split__") == 0)
    stats = train.select([pl.col(c).mean().alias(f"{c}_mean") for c in NUMERIC]
                         + [pl.col(c).std(ddof=0).alias(f"{c}_std") for c in NUMERIC]).row(0, named=True)
    encoded = []
    for c in NUMERIC:
        mean, std = stats[f"{c}_mean"], stats[f"{c}_std"] or 1.0
        encoded.append(((pl.col(c).fill_null(mean) - mean) / std).cast(pl.Float32).alias(c))
    for c in CATEGORICAL:
        vocab = (train.group_by(c).len().drop_nulls().sort(["len", c], descending=[True, False])
                 .with_row_index("id", offset=1))
        encoded.append(pl.col(c).replace_strict(vocab[c], vocab["id"].cast(pl.Int32), default=0,
                                                return_dtype=pl.Int32).alias(c))
    encoded.append((pl.col("label") != 0).alias("label"))
    result = df.select([*encoded, pl.col("__split__")])
    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    for k, name in enumerate(("train", "validation", "test")):
        part = result.filter(pl.col("__split__") == k).drop("__split__")
        part.write_parquet(out / f"{name}.parquet", compression="zstd")
        rows[name] = part.height
    return rows


if __name__ == "__main__":
    print(run(Path(sys.argv[1]), Path(sys.argv[2])))
