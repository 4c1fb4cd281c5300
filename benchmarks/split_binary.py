"""Cost of publishing one encoded part as NVIDIA's split_binary layout against prepflow's .npy columns.

A Criteo-shaped encoded part (13 float32 numerical columns, 26 int32 category ids with cardinalities
from 3 to 10^6, a bool label) is made once (``--rows``, seeded) as an Arrow IPC file like encode's
parts; each run writes it in one format with that format's per-part writer, as a publish task does:

    farm-bench -n 7 -- .venv/bin/python benchmarks/split_binary.py --format split_binary \\
        --vs '.venv/bin/python benchmarks/split_binary.py --format npy'
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage import split_binary  # noqa: E402
from tasks.publish import shards as publish_shards  # noqa: E402

CARDS = [3, 10, 100, 127, 500, 1000, 4000, 20000, 32766, 40000, 10**5, 10**6] * 2 + [7, 300]


def make_part(path: Path, rows: int) -> dict[str, dict]:
    rng = np.random.default_rng(0)
    cols: dict[str, np.ndarray] = {f"num_{i}": rng.normal(0, 1, rows).astype(np.float32) for i in range(13)}
    cols |= {f"cat_{i}": rng.integers(0, c, rows).astype(np.int32) for i, c in enumerate(CARDS)}
    cols["label"] = rng.integers(0, 2, rows).astype(bool)
    if not path.exists():
        feather.write_feather(pa.table(cols), path)
    specs = {n: {"dtype": f"torch.{a.dtype.name}", "shape": []} for n, a in cols.items()}
    for i, c in enumerate(CARDS):
        specs[f"cat_{i}"]["cardinality"] = c
    return specs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", choices=["split_binary", "npy"], required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    part = Path(tempfile.gettempdir()) / f"prepflow-bench-split-binary-{args.rows}.arrow"
    specs = make_part(part, args.rows)
    out = Path(tempfile.mkdtemp(prefix="prepflow-bench-"))
    try:
        if args.format == "split_binary":
            channels = {"numerical": [f"num_{i}" for i in range(13)],
                        "categorical": [f"cat_{i}" for i in range(len(CARDS))], "label": ["label"]}
            targets = split_binary.create(out, split_binary.plan(specs, channels), args.rows)
            split_binary.write_rows(str(part), 0, targets, "train")
        else:
            targets = {}
            for name, spec in specs.items():
                dtype = publish_shards.npy_dtype(spec)
                start = publish_shards.create_npy(out / f"{name}.npy", dtype, (args.rows,))
                targets[name] = (str(out / f"{name}.npy"), dtype.str, start, dtype.itemsize)
            publish_shards.write_npy_rows(str(part), 0, targets)
        print(sum(p.stat().st_size for p in out.iterdir()), "bytes")
    finally:
        shutil.rmtree(out)


if __name__ == "__main__":
    main()
