"""prepflow apply (issue 39): applying a fitted artifact to one new Criteo-shaped file against a cold run.

1. ``prepflow run`` cold (new stage cache) on ``--files`` daily files (``daily_files.ensure_days``, 1,000,000
   rows each by default, the config ``criteo_like.config`` with ``split: {exact: false}``): the fitted artifact;
2. ``prepflow apply`` of that artifact to one more file (``day_<files>``), with a new stage cache.

Prints each command's CPU seconds (its process, from ``wait4``; local, no cluster), wall seconds, peak RSS,
its stage seconds, the ratio apply / cold run, and the drift stage's share of apply: by stage seconds (wall,
under the machine's load) and by CPU (the drift stage run again in this process on the apply's cached parts,
``drift_cpu``, over the apply's CPU seconds). Both commands run in-process (``PREPFLOW_PREFECT=off``): the
Prefect bookkeeping is the same for both and not what is measured.

    .venv/bin/python benchmarks/apply.py --rows 1000000 --files 9 --work /tmp/apply-bench
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.criteo_like import ROOT, _run_child, config  # noqa: E402  (the repository root first)
from benchmarks.daily_files import day, ensure_days  # noqa: E402


def _command(args: list[str], work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PREPFLOW_HOME": str(work / "home"), "PREPFLOW_PREFECT": "off"}
    cpu, wall, peak, _samples = _run_child([sys.executable, "-m", "flows.cli", *args, "--json"], ROOT, env, work)
    summary = json.loads((work / "stdout.txt").read_text().strip().splitlines()[-1])
    return {"cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "peak_rss_mb": round(peak),
            "artifact_path": summary["artifact_path"], "rows": summary["rows"],
            "stages": {s["name"]: round(s["seconds"], 2) for s in summary["stages"]},
            "drift": {f: e["status"] for f, e in (summary.get("drift") or {}).items()}}


def drift_cpu(artifact: str, dataset: str, output: Path, cache: Path, repeats: int = 3) -> float:
    """The drift stage's CPU seconds (median of ``repeats``; this process, ``time.process_time``) on the
    apply's cached encoded parts: the drift entry removed and computed again."""
    import statistics
    import time

    from flows.apply import apply_context, with_references
    from tasks.drift import stage as drift
    from tasks.graph import execute, expand_apply, run_graph

    ctx = with_references(apply_context(artifact, dataset, str(output), "test", None, str(cache)))
    results = run_graph(ctx, nodes=expand_apply())  # every stage a cache hit
    seconds = []
    for _ in range(repeats):
        shutil.rmtree(results["drift"].path)
        start = time.process_time()
        results["drift"] = execute(drift.NODE, ctx, [results["encode"], results["vocab"]])
        seconds.append(time.process_time() - start)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per daily file")
    parser.add_argument("--files", type=int, default=9, help="files the cold run fits on")
    parser.add_argument("--work", type=Path, default=Path("/tmp/prepflow-apply"))
    args = parser.parse_args()

    work, store = args.work, args.work / "store"
    ensure_days(store, args.rows, args.files + 1)
    cfg = work / "config.yaml"
    cfg_dict = config()
    cfg_dict["preprocessing"]["split"]["exact"] = False
    cfg.write_text(yaml.safe_dump(cfg_dict))
    base = work / f"f{args.files}"
    shutil.rmtree(base, ignore_errors=True)
    folder = base / "days"
    folder.mkdir(parents=True)
    for i in range(args.files):
        os.link(day(store, i), day(folder, i))
    dataset = str(folder) if args.files > 1 else str(day(folder, 0))
    cold = _command(["run", str(cfg), "--dataset", dataset, "--output", str(base / "out"),
                     "--cache-dir", str(base / "cache"), "--always-run-flow"], base)
    applied = _command(["apply", cold["artifact_path"], "--dataset", str(day(store, args.files)),
                        "--output", str(base / "applied"), "--cache-dir", str(base / "cache_apply")], base)
    stage_total = sum(applied["stages"].values())
    drift_s = drift_cpu(cold["artifact_path"], str(day(store, args.files)), base / "applied", base / "cache_apply")
    print(json.dumps({"rows_per_file": args.rows, "files_fitted": args.files, "cold_run": cold, "apply": applied,
                      "apply_over_cold_cpu": round(applied["cpu_s"] / cold["cpu_s"], 3),
                      "drift_share_of_apply_stages": round(applied["stages"].get("drift", 0.0) / stage_total, 3),
                      "drift_cpu_s": round(drift_s, 2), "drift_cpu_share_of_apply": round(drift_s / applied["cpu_s"], 3),
                      "skew_share_of_cold_stages": round(cold["stages"].get("drift", 0.0)
                                                         / sum(cold["stages"].values()), 3)}), flush=True)


if __name__ == "__main__":
    main()
