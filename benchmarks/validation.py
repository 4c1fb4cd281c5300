"""Cost of the data-quality gates next to the rest of a ``prepflow run`` on the same table.

Builds (once, under ``--workdir``) a Titanic-shaped CSV of ``--rows`` rows (9 columns: an id, 3
numbers, 4 categories, a binary label) and a user suite of 10 expectations over it: 6 row-wise
(between x2, in_set x3, not_null with ``mostly``), 3 global (row count, unique id, mean) and a
column-exists. Then, in fresh processes (so GX's import is paid the way a real run pays it):

* ``suite10``: the pipeline (``tasks.pipeline.run_pipeline``, default partitioning) on a fresh cache
  with ``validation: {raw: suite10.json, generated: false}``: the raw gate runs exactly the 10
  expectations (the encoded gate has nothing to run and costs ~0). The gate's share is
  ``validate_raw seconds / seconds of every other stage``. ``gate warm`` reruns only the gate
  (its cache entry removed) in the same process, GX already imported: the validation work itself.
* ``default+suite10``: the same with prepflow's generated raw and encoded suites on as well
  (both gates, ``--rows`` x (10 + generated) expectations).

Usage: ``.venv/bin/python benchmarks/validation.py [--rows 1000000] [--repeat 3] [--workdir DIR]``
Prints one line per measurement (median over ``--repeat`` warm reruns) and a Markdown table to
append to ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SUITE = {"name": "bench-10", "expectations": [
    {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1}},
    {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "id"}},
    {"type": "expect_column_to_exist", "kwargs": {"column": "cabin"}},
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "age", "min_value": -40, "max_value": 120}},
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "age", "mostly": 0.85}},
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "fare", "min_value": 0}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "sex", "value_set": ["male", "female"]}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "embarked", "value_set": ["S", "C", "Q"]}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "pclass", "value_set": ["1", "2", "3"]}},
    {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "age", "min_value": 20, "max_value": 40}},
]}


def config(suite: str, generated: bool) -> dict:
    return {
        "input_features": [
            {"name": "age", "type": "number"},
            {"name": "fare", "type": "number", "preprocessing": {"normalization": "log1p"}},
            {"name": "sibsp", "type": "number"},
            {"name": "pclass", "type": "category"},
            {"name": "sex", "type": "category"},
            {"name": "embarked", "type": "category", "preprocessing": {"missing_value_strategy": "fill_with_mode"}},
            {"name": "cabin", "type": "category"},
        ],
        "output_features": [{"name": "label", "type": "binary"}],
        "validation": {"raw": suite, "generated": generated},
    }


def make_dataset(path: Path, n: int) -> None:
    import pandas as pd

    rng = np.random.default_rng(0)
    df = pd.DataFrame({
        "id": np.arange(n), "age": np.round(rng.normal(30, 12, n), 1), "fare": np.round(rng.exponential(30, n), 3),
        "sibsp": rng.integers(0, 6, n), "pclass": rng.choice(["1", "2", "3"], n),
        "sex": rng.choice(["male", "female"], n), "embarked": rng.choice(["S", "C", "Q"], n),
        "cabin": rng.choice([f"C{i}" for i in range(300)], n), "label": rng.integers(0, 2, n)})
    df.loc[rng.random(n) < 0.1, "age"] = np.nan
    df.loc[rng.random(n) < 0.01, "embarked"] = None
    df.to_csv(path, index=False)


def one_process(dataset: str, suite: str, generated: bool, workdir: str, repeat: int) -> dict:
    """Runs in a fresh interpreter: a cold pipeline run, then ``repeat`` warm gate-only reruns."""
    from storage.cache import StageCache
    from tasks.config import parse_config
    from tasks.context import RunContext
    from tasks.pipeline import run_pipeline

    cache = Path(workdir) / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(Path(workdir) / "out", ignore_errors=True)

    def run() -> dict:
        ctx = RunContext(parse_config(config(suite, generated)), dataset, StageCache(cache), None,
                         str(Path(workdir) / "out"))
        return {s.stage: (s.seconds, s.cached) for s in run_pipeline(ctx).stages}

    cold = run()
    warm = []
    for _ in range(repeat):
        for gate in ("validate_raw", "validate_encoded"):
            shutil.rmtree(cache / gate, ignore_errors=True)
        shutil.rmtree(Path(workdir) / "out", ignore_errors=True)
        again = run()
        warm.append(again["validate_raw"][0] + again["validate_encoded"][0])
    return {"cold": cold, "warm_gates": warm}


def measure(dataset: Path, workdir: Path, generated: bool, repeat: int) -> dict:
    suite = workdir / "suite10.json"
    suite.write_text(json.dumps(SUITE))
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.validation import one_process; "
            f"print(json.dumps(one_process({str(dataset)!r}, {str(suite)!r}, {generated}, {str(workdir)!r}, "
            f"{repeat})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def gx_import_seconds() -> float:
    code = ("import time, pandas, dask.dataframe; t = time.perf_counter(); import great_expectations; "
            "print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", default=str(ROOT / "benchmarks" / "data" / "validation"))
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    dataset = workdir / f"table-{args.rows}.csv"
    if not dataset.exists():
        make_dataset(dataset, args.rows)

    lines = []
    print(f"GX import alone (pandas, dask already imported): {gx_import_seconds():.2f} s")
    for label, generated in (("suite10", False), ("default+suite10", True)):
        start = time.perf_counter()
        result = measure(dataset, workdir, generated, args.repeat)
        cold = result["cold"]
        gates = cold["validate_raw"][0] + cold["validate_encoded"][0]
        others = sum(s for name, (s, _c) in cold.items() if not name.startswith("validate_"))
        warm = statistics.median(result["warm_gates"])
        print(f"{label:>16}: other stages {others:.2f} s; gates cold {gates:.2f} s ({100 * gates / others:.1f}%), "
              f"gates warm {warm:.2f} s ({100 * warm / others:.1f}%)   [{time.perf_counter() - start:.0f} s]")
        print("                  " + ", ".join(f"{k} {v[0]:.2f}" for k, v in cold.items()))
        lines.append(f"| {label} | {args.rows:,} | {others:.2f} | {gates:.2f} ({100 * gates / others:.1f}%) | "
                     f"{warm:.2f} ({100 * warm / others:.1f}%) |")
    print("\n| gates | rows | other stages (s) | gates, cold process (s, share) | gates, GX imported (s, share) |")
    print("|---|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
