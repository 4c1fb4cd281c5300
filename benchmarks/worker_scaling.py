"""Per-row CPU against the number of workers (issue 19): does the Criteo-shaped run cost the same CPU per row
on 2 workers as on 14? ``benchmarks/SCALING.md`` assumes so when it turns one machine's figure into a core
count for Criteo 1TB; this measures it on a machine with more cores.

The same table and config as ``benchmarks/criteo_like.py`` (generated once under ``--work``). For each
worker count, a fresh ``LocalCluster`` (worker processes of 1 thread each, with ``criteo_like.WORKER_ENV``,
the README's worker settings) and a fresh stage cache; the run is ``flows.without_prefect.run`` (the stage
graph without Prefect's API, as ``PREPFLOW_PREFECT=off`` runs it) in a child process. Records the workers'
CPU seconds (read from the workers before and after), the child's CPU (``wait4``), wall time, the stage
seconds and the artifact's sha256. One JSON line per run, then one line per worker count with the medians.

    python benchmarks/worker_scaling.py --rows 20000000 --workers 14,8,4,2 [--repeat 1] [--work /tmp/scaling]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import criteo_like  # noqa: E402  (the table, its config, the workers' settings, the artifact's digest)

RUN = ("import json, sys; from flows.without_prefect import run; "
       "print(json.dumps(run(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], None, sys.argv[5])))")


def run_once(workers: int, cfg: Path, data: Path, work: Path, memory_limit: str) -> dict:
    from distributed import Client, LocalCluster

    cache, out = work / f"cache_w{workers}", work / f"out_w{workers}"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    with mock.patch.dict(os.environ, criteo_like.WORKER_ENV):  # the worker processes inherit it, this one not
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                               dashboard_address=None)
    with cluster, Client(cluster) as client:
        client.wait_for_workers(workers, timeout=300)
        idle = client.run(criteo_like._worker_usage)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        cmd = [sys.executable, "-c", RUN, str(cfg), str(data), str(out), str(cache), cluster.scheduler_address]
        flow_cpu, wall, flow_peak, _load = criteo_like._run_child(cmd, ROOT, env, work)
        used = client.run(criteo_like._worker_usage)
    summary = json.loads((work / "stdout.txt").read_text().strip().splitlines()[-1])
    worker_cpu = sum(v["cpu_s"] for v in used.values()) - sum(v["cpu_s"] for v in idle.values())
    rows = sum(summary["rows"].values())
    return {"workers": workers, "wall_s": round(wall, 1), "worker_cpu_s": round(worker_cpu, 1),
            "flow_cpu_s": round(flow_cpu, 1), "flow_peak_rss_mb": round(flow_peak),
            "worker_peak_rss_mb": max(round(v["peak_rss_mb"]) for v in used.values()),
            "worker_us_per_row": round(worker_cpu / rows * 1e6, 2),
            "all_us_per_row": round((worker_cpu + flow_cpu) / rows * 1e6, 2),
            "stages": {s["name"]: round(s["seconds"], 1) for s in summary["stages"]},
            "artifact_sha256": criteo_like._artifact_digest(Path(summary["artifact_path"]))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--workers", default="14,8,4,2", help="worker processes per run, comma-separated")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--work", default="/tmp/prepflow-scaling")
    parser.add_argument("--memory-limit", default="6GB", help="per worker")
    parser.add_argument("--row-group-rows", type=int, default=1 << 18)
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    data = work / f"criteo_like_{args.rows}_rg{args.row_group_rows}.parquet"
    if not data.exists():
        start = time.perf_counter()
        criteo_like.generate(args.rows, data, row_group_rows=args.row_group_rows)
        print(json.dumps({"generated_rows": args.rows, "seconds": round(time.perf_counter() - start, 1)}), flush=True)
    cfg = work / "config.yaml"
    cfg.write_text(yaml.safe_dump(criteo_like.config()))
    results: dict[int, list[dict]] = {}
    for _ in range(args.repeat):
        for workers in (int(w) for w in args.workers.split(",")):
            result = run_once(workers, cfg, data, work, args.memory_limit)
            results.setdefault(workers, []).append(result)
            print(json.dumps({**result, "cores": os.cpu_count()}), flush=True)
            shutil.rmtree(work / f"cache_w{workers}", ignore_errors=True)
            shutil.rmtree(work / f"out_w{workers}", ignore_errors=True)
    for workers, runs in results.items():
        print(json.dumps({"summary_workers": workers, "runs": len(runs),
                          **{k: float(np.median([r[k] for r in runs]))
                             for k in ("wall_s", "worker_us_per_row", "all_us_per_row", "flow_cpu_s")}}))


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    sys.path.insert(0, str(ROOT))
    main()
