"""Daily files (issue 39): a folder of Criteo-shaped Parquet files that grows by one file, rerun with the same
stage cache, against a cold run on the grown folder.

Per worker count (0 = local, no cluster; else a fresh ``LocalCluster`` per run, as ``criteo_like.py``):

1. ``prepflow run`` on ``--files`` daily files (``day_00.parquet`` ...) with a new stage cache;
2. one more file is added to the folder and the same command runs again with the same cache: the
   **incremental rerun**;
3. ``prepflow run`` on the grown folder with a new cache: the **cold run**.

Prints each run's CPU seconds (the prepflow process's, from ``wait4``, plus the workers' on a cluster), wall
seconds, the flow process's peak RSS, its stage seconds and cache hits, and the ratio rerun / cold; the
rerun must publish the cold run's artifact id. ``--grow-to N``: then add files up to N and rerun after each
(the flow's peak RSS against the number of files). The data: ``criteo_like.generate`` per file (its seed
the day), ``--rows`` rows each; the config: ``criteo_like.config`` with the split ``exact: false`` (each row's split from its own
hash, so the earlier files keep their fits: ``tasks.runtime.file_fits``); ``--exact-split``: the default exact
split, which moves a few rows of every file when rows are added (ingest is then the only reused stage).

    .venv/bin/python benchmarks/daily_files.py --rows 1000000 --files 8 --workers 0,2 --work /tmp/daily

``--extend``: the same first run, then ``prepflow run --extend`` after one more file (same cache) against the
cold run: CPU ratio, and the bytes the extend wrote against the new file's share of the artifact.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.criteo_like import (  # noqa: E402  (the repository root first: run as a script)
    ROOT,
    _cluster,
    _run_child,
    _worker_usage,
    config,
    generate,
)


def day(folder: Path, i: int) -> Path:
    return folder / f"day_{i:02d}.parquet"


def ensure_days(store: Path, rows: int, count: int) -> None:
    store.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        if not day(store, i).exists():
            generate(rows, day(store, i), seed=1000 + i)


def run(folder: Path, cfg: Path, cache: Path, out: Path, workers: int, work: Path, memory_limit: str,
        extra: tuple[str, ...] = ()) -> dict:
    """One ``prepflow run`` of ``folder``: CPU (prepflow process + workers), wall, peak RSS, stages."""
    from distributed import Client

    env = {**os.environ, "PYTHONPATH": str(ROOT), "PREPFLOW_HOME": str(work / "home")}
    cmd = [sys.executable, "-m", "flows.cli", "run", str(cfg), "--dataset", str(folder), "--output", str(out),
           "--cache-dir", str(cache), "--json", "--always-run-flow", *extra]
    with contextlib.ExitStack() as stack:
        client = None
        if workers:
            address = stack.enter_context(_cluster(workers, memory_limit, ROOT, work, {}))
            client = stack.enter_context(Client(address))
            client.wait_for_workers(workers, timeout=300)
            cmd += ["--dask-address", address]
            idle = client.run(_worker_usage)
        flow_cpu, wall, peak, _samples = _run_child(cmd, ROOT, env, work)
        used = client.run(_worker_usage) if client is not None else {}
    summary = json.loads((work / "stdout.txt").read_text().strip().splitlines()[-1])
    worker_cpu = sum(v["cpu_s"] for v in used.values()) - sum(v["cpu_s"] for v in idle.values()) if used else 0.0
    return {"cpu_s": round(flow_cpu + worker_cpu, 1), "flow_cpu_s": round(flow_cpu, 1),
            "worker_cpu_s": round(worker_cpu, 1), "wall_s": round(wall, 1), "flow_peak_rss_mb": round(peak),
            "artifact_id": summary["artifact_id"],
            "stages": {s["name"]: [round(s["seconds"], 1), s["cached"]] for s in summary["stages"]}}


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def written_bytes(artifact: Path, parent: Path) -> int:
    """The bytes of an artifact's files that are not hard links of its parent's (what an extend wrote: the new
    shards, the grown vocabularies, the metadata)."""
    shared = {p.stat().st_ino for p in parent.rglob("*") if p.is_file()}
    return sum(p.stat().st_size for p in artifact.rglob("*") if p.is_file() and p.stat().st_ino not in shared)


def day_folders(base: Path, store: Path, files: int) -> tuple[Path, Path]:
    """A fresh ``base`` with ``days`` (the first ``files`` days) and ``grown`` (one more), linked from ``store``."""
    shutil.rmtree(base, ignore_errors=True)
    folder, grown = base / "days", base / "grown"
    folder.mkdir(parents=True)
    grown.mkdir()
    for i in range(files):
        os.link(day(store, i), day(folder, i))
    for i in range(files + 1):
        os.link(day(store, i), day(grown, i))
    return folder, grown


def extend_case(args, store: Path, cfg: Path, work: Path, workers: int) -> dict:
    """``--extend``: a run on ``--files`` files, one more file added, ``prepflow run --extend`` (same cache),
    against a cold run on the grown folder: CPU, and the bytes the extend wrote (its artifact's files that
    are not links of the parent's, and its cache entries) against the new file's share of the artifact."""
    base = work / f"extend-w{workers}"
    folder, grown = day_folders(base, store, args.files)
    first = run(folder, cfg, base / "cache", base / "out", workers, base, args.memory_limit)
    os.link(day(store, args.files), day(folder, args.files))
    cache_before = tree_bytes(base / "cache")
    extended = run(folder, cfg, base / "cache", base / "out", workers, base, args.memory_limit, ("--extend",))
    cache_written = tree_bytes(base / "cache") - cache_before
    cold = run(grown, cfg, base / "cache_cold", base / "out_cold", workers, base, args.memory_limit)
    child = base / "out" / extended["artifact_id"]
    manifest = json.loads((child / "manifest.json").read_text())
    total_rows = sum(manifest["rows"].values())
    new_rows = manifest["dataset_files"][-1]["rows"]
    share = tree_bytes(child) * new_rows / total_rows
    artifact_written = written_bytes(child, base / "out" / first["artifact_id"])
    return {"workers": workers, "rows_per_file": args.rows, "files": args.files, "first": first,
            "extend_after_one_more_file": extended, "cold_on_grown": cold,
            "extend_over_cold_cpu": round(extended["cpu_s"] / cold["cpu_s"], 3),
            "artifact_bytes_written": artifact_written, "cache_bytes_written": cache_written,
            "new_file_share_bytes": round(share),
            "artifact_written_over_share": round(artifact_written / share, 3),
            "artifact_and_cache_written_over_share": round((artifact_written + cache_written) / share, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per daily file")
    parser.add_argument("--files", type=int, default=8, help="files before the one that is added")
    parser.add_argument("--workers", default="0,2", help="worker counts, 0 = local (comma-separated)")
    parser.add_argument("--grow-to", type=int, default=0, help="then add files up to this many, rerunning")
    parser.add_argument("--memory-limit", default="8GB")
    parser.add_argument("--exact-split", action="store_true", help="the default exact random split")
    parser.add_argument("--work", type=Path, default=Path("/tmp/prepflow-daily"))
    parser.add_argument("--extend", action="store_true",
                        help="measure `prepflow run --extend` after one more file instead of the incremental rerun")
    args = parser.parse_args()

    work = args.work
    store = work / "store"
    ensure_days(store, args.rows, max(args.files + 1, args.grow_to))
    cfg = work / "config.yaml"
    cfg_dict = config()
    if not args.exact_split:
        cfg_dict["preprocessing"]["split"]["exact"] = False
    cfg.write_text(yaml.safe_dump(cfg_dict))
    for workers in [int(w) for w in args.workers.split(",")]:
        if args.extend:
            print(json.dumps(extend_case(args, store, cfg, work, workers)), flush=True)
            continue
        base = work / f"w{workers}"
        folder, grown = day_folders(base, store, args.files)
        first = run(folder, cfg, base / "cache", base / "out", workers, base, args.memory_limit)
        os.link(day(store, args.files), day(folder, args.files))
        rerun = run(folder, cfg, base / "cache", base / "out", workers, base, args.memory_limit)
        cold = run(grown, cfg, base / "cache_cold", base / "out_cold", workers, base, args.memory_limit)
        print(json.dumps({"workers": workers, "rows_per_file": args.rows, "files": args.files, "first": first,
                          "rerun_after_one_more_file": rerun, "cold_on_grown": cold,
                          "rerun_over_cold_cpu": round(rerun["cpu_s"] / cold["cpu_s"], 3),
                          "same_artifact_id": rerun["artifact_id"] == cold["artifact_id"]}), flush=True)
        for n in range(args.files + 2, args.grow_to + 1):
            os.link(day(store, n - 1), day(folder, n - 1))
            grown_run = run(folder, cfg, base / "cache", base / "out", workers, base, args.memory_limit)
            print(json.dumps({"workers": workers, "files_now": n, "rerun": grown_run}), flush=True)


if __name__ == "__main__":
    main()
