"""Cost of the data-quality gates next to the rest of a ``prepflow run`` on the same table.

Builds (once, under ``--workdir``) a Titanic-shaped CSV of ``--rows`` rows (9 columns: an id, 3
numbers, 4 categories, a binary label) and a user suite of 10 expectations over it: 6 row-wise
(between x2, in_set x3, not_null with ``mostly``), 3 global (row count, unique id, mean) and a
column-exists. Then, in fresh processes (so GX's import is paid the way a real run pays it):

* ``suite10``: the pipeline (``tasks.pipeline.run_pipeline``, default partitioning) on a fresh cache
  with ``validation: {raw: suite10.json, generated: false}``: the raw gate runs exactly the 10
  expectations (the encoded gate has nothing to run and costs ~0). The gates' share is
  ``validate_* seconds / seconds of every other stage``, for the first run in a fresh process
  (``cold``: GX's one-time import, ~3-5 s, lands in the first gate as far as the background import
  started at the beginning of the run has not finished it) and for ``--repeat`` further runs on fresh
  caches in the same process (``warm``: every stage computes, nothing is imported), also in process
  CPU seconds, which the other engineers' jobs on a shared machine disturb less than wall time.
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
    """Runs in a fresh interpreter: a cold pipeline run (GX imported on the way), then ``repeat`` runs
    on fresh caches with every module already imported. Per stage: wall seconds and process CPU
    seconds (all threads), recorded around ``run_cached``."""
    import tasks.context as context
    from storage.cache import StageCache
    from tasks.config import parse_config
    from tasks.context import RunContext
    from tasks.pipeline import run_pipeline

    cpu: dict[str, float] = {}
    original = context.run_cached

    def timed(ctx, stage, *args, **kwargs):
        start = time.process_time()
        try:
            return original(ctx, stage, *args, **kwargs)
        finally:
            cpu[stage] = cpu.get(stage, 0.0) + time.process_time() - start

    context.run_cached = timed

    def run(tag: str) -> dict:
        cache, out = Path(workdir) / f"cache-{tag}", Path(workdir) / f"out-{tag}"
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        cpu.clear()
        ctx = RunContext(parse_config(config(suite, generated)), dataset, StageCache(cache), None, str(out))
        stages = {s.stage: [s.seconds, cpu.get(s.stage)] for s in run_pipeline(ctx).stages}
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        return stages

    return {"cold": run("cold"), "warm": [run(f"warm{i}") for i in range(repeat)]}


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

    def split_up(stages: dict, field: int) -> tuple[float, float]:
        gates = sum(v[field] or 0.0 for k, v in stages.items() if k.startswith("validate_"))
        return gates, sum(v[field] or 0.0 for k, v in stages.items() if not k.startswith("validate_"))

    for label, generated in (("suite10", False), ("default+suite10", True)):
        start = time.perf_counter()
        result = measure(dataset, workdir, generated, args.repeat)
        cold_gates, cold_others = split_up(result["cold"], 0)
        warm = [split_up(w, 0) for w in result["warm"]]
        warm_cpu = [split_up(w, 1) for w in result["warm"]]
        share = statistics.median(g / o for g, o in warm)
        share_cpu = statistics.median(g / o for g, o in warm_cpu)
        gates, others = statistics.median(g for g, _ in warm), statistics.median(o for _, o in warm)
        gates_cpu, others_cpu = statistics.median(g for g, _ in warm_cpu), statistics.median(o for _, o in warm_cpu)
        print(f"{label:>16}: cold process: gates {cold_gates:.2f} s / other stages {cold_others:.2f} s "
              f"({100 * cold_gates / cold_others:.1f}%); warm (median of {args.repeat}): gates {gates:.2f} s / "
              f"{others:.2f} s wall ({100 * share:.1f}%), {gates_cpu:.2f} / {others_cpu:.2f} CPU s "
              f"({100 * share_cpu:.1f}%)   [{time.perf_counter() - start:.0f} s]")
        print("                  warm wall: " + ", ".join(f"{k} {v[0]:.2f}" for k, v in result["warm"][0].items()))
        lines.append(f"| {label} | {args.rows:,} | {cold_others:.2f} | {cold_gates:.2f} "
                     f"({100 * cold_gates / cold_others:.0f}%) | {others:.2f} | {gates:.2f} ({100 * share:.1f}%) | "
                     f"{others_cpu:.2f} | {gates_cpu:.2f} ({100 * share_cpu:.1f}%) |")
    print("\n| gates | rows | cold: other stages s | cold: gates s (share) | warm: other stages s | "
          "warm: gates s (share) | warm CPU: other stages s | warm CPU: gates s (share) |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
