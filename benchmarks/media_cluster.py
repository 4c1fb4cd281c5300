"""Media on a Dask cluster: how much of the media_cache stage's CPU the flow process spends (issue 19 item 5).

Builds ``--n`` pictures with ``benchmarks/media.py``'s generator (about 256 x 256, half JPEG, half PNG),
then, per variant, runs the pipeline in a fresh process (``tasks.graph.run_pipeline``, eager mode,
64 x 64 x 3) with a fresh 2-worker ``LocalCluster`` (processes, 1 thread each) as Dask's scheduler,
and reports the CPU seconds of the process that runs the flow (this process's rusage, the pipeline
only) and of the workers (their rusage before and after, read through ``client.run``), and the
media_cache stage's seconds. ``--code DIR`` runs another checkout (a ``git worktree`` of an older
commit) alternately with this one, so the two compare in one invocation.

    .venv/bin/python benchmarks/media_cluster.py --n 2000 --repeat 2 --code /tmp/media-base
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(csv: Path, workdir: Path) -> dict:
    """One run in this process (whose ``sys.path`` starts with the checkout to measure)."""
    from distributed import Client, LocalCluster

    from storage.cache import StageCache  # first: benchmarks/media.py puts this checkout first on sys.path
    from tasks.config.loader import parse_config
    from tasks.graph import run_pipeline
    from tasks.runtime.context import RunContext

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from media import config  # the same config as benchmarks/media.py

    import tasks

    assert Path(tasks.__file__).resolve().parent.parent == Path.cwd().resolve(), (tasks.__file__, Path.cwd())

    shutil.rmtree(workdir, ignore_errors=True)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      worker_dashboard_address=None) as cluster, Client(cluster) as client:
        before = client.run(_cpu)
        ctx = RunContext(parse_config(config("eager")), str(csv), StageCache(workdir / "cache"), None,
                         str(workdir / "out"))
        start_cpu, start = _cpu(), time.perf_counter()
        result = run_pipeline(ctx)
        flow_cpu, wall = _cpu() - start_cpu, time.perf_counter() - start
        after = client.run(_cpu)
    stages = {s.stage: round(s.seconds, 2) for s in result.stages}
    workers = sum(after[w] - before[w] for w in after)
    return {"flow_cpu_s": round(flow_cpu, 2), "workers_cpu_s": round(workers, 2),
            "flow_share": round(flow_cpu / (flow_cpu + workers), 3), "wall_s": round(wall, 1),
            "media_cache_s": stages["media_cache"], "artifact": Path(result.artifact["artifact_path"]).name}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--code", type=Path, help="another checkout, run alternately with this one")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/prepflow-bench-media-cluster"))
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.workdir / "pictures" / "data.csv", args.child)))
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from media import make_pictures

    csv = make_pictures(args.workdir / "pictures", args.n)
    trees = [("this", ROOT)] + ([("baseline", args.code.resolve())] if args.code else [])
    for _ in range(args.repeat):
        for name, tree in trees:
            env = {**os.environ, "PYTHONPATH": str(tree), "PREPFLOW_PREFECT": "off"}
            proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--workdir", str(args.workdir),
                                   "--child", str(args.workdir / f"run-{name}")], cwd=tree, env=env,
                                  capture_output=True, text=True, check=True)
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            print(json.dumps({"variant": name, "tree": str(tree), "n": args.n, **result}), flush=True)
    assert csv.is_file()


if __name__ == "__main__":
    main()
