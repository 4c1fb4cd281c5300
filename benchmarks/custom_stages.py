"""What a custom stage costs: the same artifact with a derived column precomputed in the CSV vs made by
a custom stage (examples/plugin's ``haversine``, after fill_missing), plus a fitted stage
(``frequency_encode``, after ingest). Cold cache each run, in-process (``run_pipeline``, no Prefect).

    .venv/bin/python benchmarks/custom_stages.py [--rows 500000] [--npartitions 4]

Prints seconds per stage and in total for each variant, and checks the published distance column is
the same whichever way it was made.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prepflow import Artifact  # noqa: E402
from storage.cache import StageCache  # noqa: E402
from tasks.config.loader import parse_config  # noqa: E402
from tasks.graph import run_pipeline  # noqa: E402
from tasks.runtime.context import RunContext  # noqa: E402

FEATURES = [{"name": "carrier", "type": "category"}]
OUTPUTS = [{"name": "label", "type": "binary"}]
VARIANTS = {
    "precomputed": {"input_features": [{"name": "km", "column": "distance_km", "type": "number"}, *FEATURES]},
    "haversine stage": {"stages": [{"uses": "haversine", "after": "fill_missing", "params": {"output": "km"}}],
                        "input_features": [{"name": "km", "type": "number"}, *FEATURES]},
    "+ fitted stage": {"stages": [{"uses": "haversine", "after": "fill_missing", "params": {"output": "km"}},
                                  {"uses": "frequency_encode", "after": "ingest", "params": {"column": "carrier"}}],
                       "input_features": [{"name": "km", "type": "number"},
                                          {"name": "carrier_freq", "type": "number"}, *FEATURES]},
}


def make_data(rows: int, path: Path) -> None:
    from prepflow_example_plugin.stages import Haversine

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"lat1": rng.uniform(-60, 60, rows), "lon1": rng.uniform(-170, 170, rows),
                       "lat2": rng.uniform(-60, 60, rows), "lon2": rng.uniform(-170, 170, rows),
                       "carrier": rng.choice([f"c{i}" for i in range(20)], rows), "label": rng.integers(0, 2, rows)})
    df = df.round(6)  # what the CSV holds, so the stage and the precomputed column see the same inputs
    df["distance_km"] = Haversine().transform(df)["distance_km"]
    df.to_csv(path, index=False, float_format="%.17g")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--npartitions", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "trips.csv"
        make_data(args.rows, data)
        published = {}
        for name, variant in VARIANTS.items():
            config = parse_config({**variant, "output_features": OUTPUTS,
                                   "validation": {"generated": False}})
            ctx = RunContext(config, str(data), StageCache(Path(tmp) / name / "cache"), args.npartitions,
                             str(Path(tmp) / name / "out"))
            start = time.perf_counter()
            result = run_pipeline(ctx)
            total = time.perf_counter() - start
            stages = {s.stage: round(s.seconds, 2) for s in result.stages if s.seconds >= 0.005}
            print(json.dumps({"variant": name, "rows": args.rows, "seconds": round(total, 2), "stages": stages}))
            published[name] = Artifact.open(result.artifact["artifact_path"]).read_split("train")["km"]
        same = all(np.array_equal(published["precomputed"], v) for v in published.values())
        print(json.dumps({"published km identical across variants": same}))


if __name__ == "__main__":
    main()
