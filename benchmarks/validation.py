"""CPU cost of the data-quality gates in a ``prepflow`` pipeline run, for two checkouts side by side.

Builds (once, under ``--workdir``) a Titanic-shaped CSV of ``--rows`` rows (9 columns: an id, 3
numbers, 4 categories, a binary label) and a user suite of 10 expectations over it: 6 row-wise
(between x2, in_set x3, not_null with ``mostly``), 3 global (row count, unique id, mean) and a
column-exists. For each ``--roots`` checkout (default: this one; e.g. a ``git worktree`` of an older
commit first) and each variant, in a fresh process (so GX's import is paid the way a real run pays it),
``tasks.graph.run_pipeline`` (default partitioning) runs once cold and ``--repeat`` times warm
(fresh caches, every module imported):

* ``generated``: prepflow's generated raw and encoded suites only (no user suite);
* ``suite10``: the 10-expectation user suite on the raw table only (``generated: false``); since issue 18
  every one of its expectations runs on prepflow's kernels (``expectations.kernels.USER_KERNELS``);
* ``suite11``: the same plus a median (no kernel: GX runs it on the ``age`` column), what a suite that
  needs GX pays (its import included, in the cold run).

Per stage the process CPU seconds (user+sys of every thread, ``time.process_time``) are recorded
around the runner's cached step (``tasks.runtime.cached.run_node``; ``run_cached`` in older checkouts). Printed per root and variant: the gates' CPU seconds (``validate_raw`` +
``validate_encoded``) cold and warm (median), the other stages' warm CPU seconds, and whether the
process imported ``great_expectations``. The roots alternate variant by variant, so that load from
other jobs on a shared machine hits both alike. ``PREPFLOW_GATE_SERVER=off`` is set for old
checkouts that had a gate server (their gates then run in the measured process).

Usage: ``.venv/bin/python benchmarks/validation.py [--rows 1000000] [--repeat 3] [--roots DIR,DIR]``
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


SUITES = {"suite10": SUITE, "suite11": {"name": "bench-11", "expectations": SUITE["expectations"] + [
    {"type": "expect_column_median_to_be_between", "kwargs": {"column": "age", "min_value": 20, "max_value": 40}}]}}


def config(suite: str | None, generated: bool) -> dict:
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
        "validation": {"raw": suite, "generated": generated} if suite else {"generated": generated},
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


def one_process(dataset: str, suite: str | None, generated: bool, workdir: str, repeat: int) -> dict:
    """Runs in a fresh interpreter: a cold pipeline run (GX imported on the way), then ``repeat`` runs
    on fresh caches with every module already imported. Per stage: wall seconds and process CPU
    seconds (all threads), recorded around the runner's cached step."""
    import tasks.graph as graph
    import tasks.runtime.context as context
    from storage.cache import StageCache
    from tasks.graph import run_pipeline
    from tasks.runtime.context import RunContext

    try:
        from tasks.config.loader import parse_config
    except ImportError:  # checkouts before the config loader was split out
        from tasks.config.loader import parse_config

    cpu: dict[str, float] = {}
    # the runner's step (graph.run_node: a node, its context and inputs), or an older checkout's run_cached
    owner, name = (graph, "run_node") if hasattr(graph, "run_node") else (context, "run_cached")
    original = getattr(owner, name)

    def timed(first, ctx, *args, **kwargs):
        stage = first.name if owner is graph else ctx  # run_node(node, ctx, ...) or run_cached(ctx, stage, ...)
        start = time.process_time()
        try:
            return original(first, ctx, *args, **kwargs)
        finally:
            cpu[stage] = cpu.get(stage, 0.0) + time.process_time() - start

    setattr(owner, name, timed)

    walls: list[float] = []

    def run(tag: str) -> dict:
        cache, out = Path(workdir) / f"cache-{tag}", Path(workdir) / f"out-{tag}"
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        cpu.clear()
        start = time.perf_counter()
        ctx = RunContext(parse_config(config(suite, generated)), dataset, StageCache(cache), None, str(out))
        stages = {s.stage: [s.seconds, cpu.get(s.stage)] for s in run_pipeline(ctx).stages}
        walls.append(time.perf_counter() - start)
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        return stages

    cold = run("cold")
    return {"cold": cold, "cold_run": walls[0], "warm": [run(f"warm{i}") for i in range(repeat)],
            "gx_imported": "great_expectations" in sys.modules}


def measure(root: Path, dataset: Path, workdir: Path, generated: bool, suite: str | None, repeat: int) -> dict:
    suite_path = workdir / f"{suite}.json"
    if suite:
        suite_path.write_text(json.dumps(SUITES[suite]))
    # this script's one_process, the measured checkout's modules (its root first on sys.path)
    code = "\n".join([
        "import json, sys",
        f"sys.path[:0] = [{str(ROOT)!r}]",
        "from benchmarks.validation import one_process",
        f"sys.path[0] = {str(root)!r}",
        f"print(json.dumps(one_process({str(dataset)!r}, {str(suite_path) if suite else None!r}, {generated}, "
        f"{str(workdir)!r}, {repeat})))"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={**os.environ, "PYTHONWARNINGS": "ignore", "PREPFLOW_GATE_SERVER": "off",
                              "PYTHONPATH": str(root)})
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def gx_import_seconds() -> float:
    code = ("import time, pandas, dask.dataframe; t = time.process_time(); import great_expectations; "
            "print(time.process_time() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--roots", default=str(ROOT), help="comma-separated checkouts to measure")
    parser.add_argument("--variants", default="generated,suite10")
    parser.add_argument("--workdir", default=str(ROOT / "benchmarks" / "data" / "validation"))
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    dataset = workdir / f"table-{args.rows}.csv"
    if not dataset.exists():
        make_dataset(dataset, args.rows)
    os.environ["PREPFLOW_HOME"] = str(workdir / "home")
    print(f"GX import alone (pandas, dask already imported): {gx_import_seconds():.2f} s CPU")

    def cpu(stages: dict, gates: bool) -> float:
        return sum(v[1] or 0.0 for k, v in stages.items() if k.startswith("validate_") == gates)

    lines = []
    for variant in args.variants.split(","):
        for root in [Path(r) for r in args.roots.split(",")]:
            result = measure(root, dataset, workdir, generated=variant == "generated", suite=variant if variant in SUITES else None,
                             repeat=args.repeat)
            cold = cpu(result["cold"], True)
            warm = statistics.median(cpu(w, True) for w in result["warm"])
            others = statistics.median(cpu(w, False) for w in result["warm"])
            line = (f"| {variant} | {root} | {args.rows:,} | {cold:.2f} | {warm:.2f} | {others:.2f} | "
                    f"{100 * warm / others:.1f}% | {'yes' if result['gx_imported'] else 'no'} |")
            print(line, flush=True)
            lines.append(line)
    print("\n| gates | checkout | rows | gates cold CPU s | gates warm CPU s (median) | other stages warm CPU s | "
          "warm share | GX imported |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
