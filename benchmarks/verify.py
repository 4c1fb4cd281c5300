"""What ``Artifact.open(path, verify=True)`` costs (issue 40): this checkout against another, alternating.

Builds once (in ``--work``) a Criteo-shaped artifact of ``--rows`` rows: ``criteo_like.generate``'s table
and ``criteo_like.config()`` with both formats (``parquet`` and ``npy``: more files, so the per-file checks
issue 40 added count), published by ``prepflow run`` (``PREPFLOW_PREFECT=off``). Then, ``--rounds`` times, each
checkout (this one, then ``--baseline``'s, then the other way round in the next round) opens and verifies it
in a fresh interpreter of this checkout's ``.venv`` whose ``sys.path`` starts with that checkout; the child
prints the CPU seconds (``time.process_time``: every thread of the process) and the wall seconds of the
``Artifact.open(..., verify=True)`` call alone, imports excluded. Prints each run and the medians.

    git worktree add /work/wt-40-before ea29a1c
    .venv/bin/python benchmarks/verify.py --rows 2000000 --baseline /work/wt-40-before --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = """
import sys, time, json
sys.path.insert(0, {tree!r})
import storage.artifact
assert storage.artifact.__file__.startswith({tree!r}), storage.artifact.__file__
from storage.artifact import Artifact
cpu, wall = time.process_time(), time.perf_counter()
art = Artifact.open({path!r}, verify=True)
print(json.dumps({{"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall,
                  "files": len(art.manifest["files"])}}))
"""


def build(rows: int, work: Path) -> Path:
    from benchmarks.criteo_like import config, generate

    out = work / "out"
    if (out / "LATEST").is_file():
        return out / (out / "LATEST").read_text().strip()
    work.mkdir(parents=True, exist_ok=True)
    data = work / "data.parquet"
    if not data.is_file():
        generate(rows, data)
    cfg = config()
    cfg["publish"] = {"formats": ["parquet", "npy"]}
    (work / "config.json").write_text(json.dumps(cfg))
    subprocess.run([sys.executable, "-m", "flows.cli", "run", str(work / "config.json"), "--dataset", str(data),
                    "--output", str(out), "--cache-dir", str(work / "cache")], cwd=ROOT, check=True,
                   env={**os.environ, "PREPFLOW_PREFECT": "off"})
    return out / (out / "LATEST").read_text().strip()


def measure(tree: Path, path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD.format(tree=str(tree), path=str(path))], cwd=tree,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)})
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: {proc.stderr.strip().splitlines()[-1]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/prepflow-verify-bench"))
    parser.add_argument("--baseline", type=Path, required=True, help="another checkout (the code before)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    start = time.perf_counter()
    path = build(args.rows, args.work)
    print(f"artifact {path} ({sum(f.stat().st_size for f in path.rglob('*') if f.is_file()) / 1e6:.0f} MB), "
          f"built or found in {time.perf_counter() - start:.0f} s")
    trees = {"new": ROOT, "before": args.baseline.resolve()}
    for tree in trees.values():  # warm-up: the page cache, byte-compiled modules
        measure(tree, path)
    results: dict[str, list[dict]] = {name: [] for name in trees}
    for i in range(args.rounds):
        order = list(trees) if i % 2 == 0 else list(reversed(trees))
        for name in order:
            r = measure(trees[name], path)
            results[name].append(r)
            print(f"round {i + 1} {name:<6} cpu {r['cpu']:.3f} s  wall {r['wall']:.3f} s  ({r['files']} files)")
    med = {name: (statistics.median(r["cpu"] for r in rs), statistics.median(r["wall"] for r in rs))
           for name, rs in results.items()}
    ratios = [n["cpu"] / b["cpu"] for n, b in zip(results["new"], results["before"], strict=True)]
    print(f"median cpu: new {med['new'][0]:.3f} s, before {med['before'][0]:.3f} s, new/before "
          f"{med['new'][0] / med['before'][0]:.3f} (per round: {min(ratios):.3f}-{max(ratios):.3f}); median wall: "
          f"new {med['new'][1]:.3f} s, before {med['before'][1]:.3f} s")


if __name__ == "__main__":
    main()
