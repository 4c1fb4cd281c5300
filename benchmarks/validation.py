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

Each is measured three ways (``PREPFLOW_HOME`` is ``--workdir``/home, so a user's servers are not
touched): ``off`` (``PREPFLOW_GATE_SERVER=off``: the gates in the run's process, GX imported by the
background thread), ``server, first run`` (gate server on, none running: the run starts it and its
first gate waits for it) and ``server, running`` (the server the previous process left). For each:
the cold and warm gate shares, and the whole cold run's wall time (``cold process``: from the
interpreter's start to the end of the first run, imports included; ``cold run``: ``run_pipeline``
alone). With the server, the warm CPU seconds count the run's process only (the gates' work is the
server's), and ``server starts`` counts the servers started during the measurement (more than one
on a first run, or any on ``running``, means prepflow's code changed meanwhile and the server was
replaced). The gate server's resident memory is printed at the end.

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
    from tasks.config_loader import parse_config
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
    cold_end = time.time()
    return {"cold": cold, "cold_end": cold_end, "cold_run": walls[0],
            "warm": [run(f"warm{i}") for i in range(repeat)]}


def measure(dataset: Path, workdir: Path, generated: bool, repeat: int, gate_server: str) -> dict:
    suite = workdir / "suite10.json"
    suite.write_text(json.dumps(SUITE))
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.validation import one_process; "
            f"print(json.dumps(one_process({str(dataset)!r}, {str(suite)!r}, {generated}, {str(workdir)!r}, "
            f"{repeat})))")
    start = time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONWARNINGS": "ignore", "PREPFLOW_GATE_SERVER": gate_server})
    if out.returncode:
        raise SystemExit(out.stderr)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["cold_process"] = result.pop("cold_end") - start
    return result


def server_starts(workdir: Path) -> int:
    log = workdir / "home" / "gate-server.log"
    return log.read_text().count(": ready in ") if log.exists() else 0


def server_rss_mb() -> float | None:
    from expectations import gate_server

    state = gate_server.read_state(gate_server.home())
    if state is None or not gate_server.alive(state["pid"]):
        return None
    for line in Path(f"/proc/{state['pid']}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


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

    os.environ["PREPFLOW_HOME"] = str(workdir / "home")  # the benchmark's own servers
    from expectations.gate_server import stop_gate_server

    modes = (("off", "off", False), ("server, first run", "auto", True), ("server, running", "auto", False))
    for label, generated in (("suite10", False), ("default+suite10", True)):
        for mode, gate_server, stop_first in modes:
            if stop_first:
                stop_gate_server()
            start, starts = time.perf_counter(), server_starts(workdir)
            result = measure(dataset, workdir, generated, args.repeat, gate_server)
            starts = server_starts(workdir) - starts
            cold_gates, cold_others = split_up(result["cold"], 0)
            warm = [split_up(w, 0) for w in result["warm"]]
            warm_cpu = [split_up(w, 1) for w in result["warm"]]
            share = statistics.median(g / o for g, o in warm)
            share_cpu = statistics.median(g / o for g, o in warm_cpu)
            gates, others = statistics.median(g for g, _ in warm), statistics.median(o for _, o in warm)
            gates_cpu = statistics.median(g for g, _ in warm_cpu)
            others_cpu = statistics.median(o for _, o in warm_cpu)
            print(f"{label:>16} [{mode}]: cold process {result['cold_process']:.2f} s (run {result['cold_run']:.2f} s): "
                  f"gates {cold_gates:.2f} s / other stages {cold_others:.2f} s ({100 * cold_gates / cold_others:.1f}%); "
                  f"warm (median of {args.repeat}): gates {gates:.2f} s / {others:.2f} s wall ({100 * share:.1f}%), "
                  f"{gates_cpu:.2f} / {others_cpu:.2f} CPU s ({100 * share_cpu:.1f}%); server starts {starts}   "
                  f"[{time.perf_counter() - start:.0f} s]")
            print("                  warm wall: " + ", ".join(f"{k} {v[0]:.2f}" for k, v in result["warm"][0].items()))
            lines.append(f"| {label} | {mode} | {args.rows:,} | {result['cold_process']:.2f} | {cold_others:.2f} | "
                         f"{cold_gates:.2f} ({100 * cold_gates / cold_others:.0f}%) | {others:.2f} | "
                         f"{gates:.2f} ({100 * share:.1f}%) | {others_cpu:.2f} | {gates_cpu:.2f} ({100 * share_cpu:.1f}%) |")
    rss = server_rss_mb()
    print(f"gate server resident memory after the runs: {rss:.0f} MB" if rss else "no gate server running")
    stop_gate_server()
    print("\n| gates | gate server | rows | cold process s | cold: other stages s | cold: gates s (share) | "
          "warm: other stages s | warm: gates s (share) | warm CPU: other stages s | warm CPU: gates s (share) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
