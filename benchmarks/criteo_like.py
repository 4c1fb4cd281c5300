"""Criteo-shaped benchmark (issue 11): ``prepflow run --dask-address`` on 1 and 2 worker processes.

Generates a Criteo-1TB-shaped table: ``label`` (3.4 % positives), ``I1..I13`` (heavy-tailed
integer counts as float64, 0-45 % nulls per column), ``C1..C26`` (8-hex-digit strings like
Criteo's hashed ids, 0-40 % nulls per column). Each categorical column draws ranks from a
truncated Zipf (s = 1.05) over its value space, Criteo 1TB's cardinalities (DLRM's table) clipped to
[10, 10^7]; a rank becomes a string by a bijective 32-bit mix, so distinct ranks stay distinct. The
table is written as one Parquet file in row groups of 1M rows, generated 1M rows at a time.

Config: 13 number features (zscore, mean fill), 26 category features keeping every value
(``most_common`` 10^8, ``min_frequency`` 1: the largest vocabularies, several over 10^6 ids and so
stored as Parquet), binary label; random split 0.8/0.1/0.1; Parquet shards.

For each worker count a fresh ``LocalCluster`` (processes, 1 thread each, workers with
``ARROW_DEFAULT_MEMORY_POOL=system``) and a fresh stage cache; records wall time, stage seconds,
peak RSS (VmHWM) and CPU seconds of each worker (read from the workers after the run) and of the
prepflow process (VmHWM polled every second; CPU from ``wait4``), and the load average before,
during (sampled every 10 s) and after. The shuffle volume of the vocabulary fit (rows and
bytes of the per-partition ``(feature, value, count)`` tables) is computed afterwards from the data,
the run's split and the ingest partitioning.

    python benchmarks/criteo_like.py --rows 20000000 --workers 1,2 [--work /tmp/criteo] [--keep]
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parent.parent
# Criteo 1TB cardinalities (DLRM's day_0..23 vocabulary sizes), clipped to [10, 10^7]
CRITEO_CARDINALITIES = [39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10,
                        2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36]
CARDINALITIES = [int(min(max(c, 10), 10**7)) for c in CRITEO_CARDINALITIES]
NUMERIC = [f"I{i}" for i in range(1, 14)]
CATEGORICAL = [f"C{i}" for i in range(1, 27)]
ZIPF_S = 1.05
CHUNK = 1_000_000
HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _mix32(x: np.ndarray, salt: int) -> np.ndarray:
    """A bijection of uint32 (murmur3's fmix32 after xor with a salt)."""
    h = (x.astype(np.uint32) ^ np.uint32(salt)).astype(np.uint64)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(16)
    return h.astype(np.uint32)


def _hex8(x: np.ndarray) -> pa.Array:
    shifts = np.arange(28, -1, -4, dtype=np.uint32)
    digits = HEX[(x[:, None] >> shifts) & np.uint32(0xF)]
    return pa.array(np.ascontiguousarray(digits).view("S8").ravel(), type=pa.binary()).cast(pa.string())


def _zipf_ranks(rng: np.random.Generator, n: int, card: int) -> np.ndarray:
    """Truncated Zipf(s) over 1..card by inverting the continuous CDF (vectorized), 0-based."""
    u = rng.random(n)
    a = 1.0 - ZIPF_S
    x = (1.0 + u * (float(card + 1) ** a - 1.0)) ** (1.0 / a)
    return np.minimum(np.floor(x).astype(np.int64), card) - 1


def generate(rows: int, path: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    num_null = rng.uniform(0.0, 0.45, len(NUMERIC))
    cat_null = np.where(rng.random(len(CATEGORICAL)) < 0.5, 0.0, rng.uniform(0.0, 0.4, len(CATEGORICAL)))
    scales = rng.uniform(1, 500, len(NUMERIC))
    tmp = path.with_suffix(".tmp")
    writer = None
    for start in range(0, rows, CHUNK):
        n = min(CHUNK, rows - start)
        cols: dict[str, pa.Array] = {"label": pa.array((rng.random(n) < 0.034).astype(np.int8))}
        for i, name in enumerate(NUMERIC):
            values = np.floor(rng.pareto(1.5, n) * scales[i]) - (1 if i == 1 else 0)
            cols[name] = pa.array(values, mask=rng.random(n) < num_null[i])
        for i, name in enumerate(CATEGORICAL):
            ranks = _zipf_ranks(rng, n, CARDINALITIES[i])
            values = _hex8(_mix32(ranks, 0x9E3779B9 * (i + 1) & 0xFFFFFFFF))
            mask = rng.random(n) < cat_null[i]
            cols[name] = pc.if_else(pa.array(mask), pa.scalar(None, pa.string()), values) if mask.any() else values
        table = pa.table(cols)
        if writer is None:
            writer = pq.ParquetWriter(tmp, table.schema, compression="zstd")
        writer.write_table(table, row_group_size=CHUNK)
    writer.close()
    os.replace(tmp, path)


def config() -> dict:
    return {
        "input_features": [{"name": c, "type": "number"} for c in NUMERIC]
        + [{"name": c, "type": "category"} for c in CATEGORICAL],
        "output_features": [{"name": "label", "type": "binary"}],
        "defaults": {"category": {"preprocessing": {"most_common": 100_000_000, "min_frequency": 1}}},
        "preprocessing": {"split": {"type": "random", "probabilities": [0.8, 0.1, 0.1], "seed": 1}},
        "publish": {"formats": ["parquet"]},
    }


def peak_rss_mb(pid: int | str = "self") -> float:
    """VmHWM: the peak RSS of the process's own address space. Not ``ru_maxrss``: Linux carries that
    over fork+exec, so a process started by a large one reports at least the parent's peak."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _worker_usage() -> dict:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"peak_rss_mb": peak_rss_mb(), "cpu_s": usage.ru_utime + usage.ru_stime}


class LoadSampler:
    """The 1-minute load average every ``every`` seconds while a run lasts (the machine is shared), and
    the peak RSS of process ``pid`` (VmHWM only grows; read every second until the process exits)."""

    def __init__(self, every: float = 10.0):
        import threading

        self.samples: list[float] = []
        self.pid: int | None = None
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)

    def _run(self, every: float) -> None:
        ticks = 0
        while not self._stop.wait(1.0):
            ticks += 1
            if self.pid is not None:
                try:
                    self.peak_mb = max(self.peak_mb, peak_rss_mb(self.pid))
                except (OSError, ValueError):
                    pass
            if ticks % int(every) == 0:
                self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> "LoadSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run_once(workers: int, cfg: Path, data: Path, work: Path, memory_limit: str) -> dict:
    from distributed import Client, LocalCluster

    cache, out = work / f"cache_w{workers}", work / f"out_w{workers}"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    load_before = os.getloadavg()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                      host="127.0.0.1", dashboard_address=None, worker_dashboard_address=None,
                      env={"ARROW_DEFAULT_MEMORY_POOL": "system"}) as cluster, Client(cluster) as client:
        cmd = [str(Path(sys.executable).parent / "prepflow"), "run", str(cfg), "--dataset", str(data), "--output",
               str(out), "--cache-dir", str(cache), "--dask-address", cluster.scheduler_address, "--json"]
        idle = client.run(_worker_usage)
        start = time.perf_counter()
        with LoadSampler() as load, open(work / "stdout.txt", "w") as stdout, \
                open(work / "stderr.txt", "w") as stderr:
            proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, cwd=ROOT)
            load.pid = proc.pid
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own CPU time (not the workers')
            proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        if proc.returncode:
            raise SystemExit(f"prepflow failed ({proc.returncode}):\n{(work / 'stderr.txt').read_text()[-4000:]}")
        used = client.run(_worker_usage)
    load_after = os.getloadavg()
    summary = json.loads((work / "stdout.txt").read_text().strip().splitlines()[-1])
    stages = {s["name"]: round(s["seconds"], 1) for s in summary["stages"]}
    rows = sum(summary["rows"].values())
    meta = json.loads((Path(summary["artifact_path"]) / "training_set_metadata.json").read_text())
    result = {
        "workers": workers, "command": " ".join(cmd[1:]), "wall_s": round(wall, 1), "stages": stages,
        "rows_published": rows,
        "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "client_peak_rss_mb": round(load.peak_mb),
        "worker_peak_rss_mb": sorted(round(v["peak_rss_mb"]) for v in used.values()),
        "worker_cpu_s": round(sum(v["cpu_s"] for v in used.values()) - sum(v["cpu_s"] for v in idle.values()), 1),
        "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in load_after],
        "loadavg_1min_during": {"mean": round(float(np.mean(load.samples)), 2) if load.samples else None,
                                "max": round(max(load.samples), 2) if load.samples else None},
        "vocab_sizes": {c: meta[c]["vocab_size"] for c in CATEGORICAL},
        "parquet_vocabularies": sorted(c for c in CATEGORICAL if "vocab_file" in meta[c]),
        "artifact_mb": round(sum(p.stat().st_size for p in Path(summary["artifact_path"]).rglob("*")
                                 if p.is_file()) / 2**20),
    }
    result["split_path"] = str(next((cache / "split").glob("*/split.npy")))
    result["ingest_parts"] = len(list((cache / "ingest").glob("*/data/part-*.arrow")))
    return result


def shuffle_volume(data: Path, split_npy: str, part_rows: int) -> dict:
    """Rows and Arrow bytes of the per-partition (feature, value, count) tables the fit shuffles."""
    train = np.load(split_npy) == 0
    pf = pq.ParquetFile(data)
    rows = nbytes = 0
    offset = 0
    for batch in pf.iter_batches(batch_size=part_rows, columns=CATEGORICAL):
        keep = pa.array(train[offset: offset + batch.num_rows])
        offset += batch.num_rows
        for name in CATEGORICAL:
            vc = pc.value_counts(pc.filter(batch.column(name), keep).drop_null())
            values = vc.field("values")
            rows += len(values)
            nbytes += values.nbytes + 12 * len(values)  # + int32 feature + int64 count
    return {"rows": rows, "bytes": nbytes}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--work", default="/tmp/prepflow-criteo")
    parser.add_argument("--memory-limit", default="8GB", help="per worker")
    parser.add_argument("--keep", action="store_true", help="keep caches and artifacts")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    data = work / f"criteo_like_{args.rows}.parquet"
    if not data.exists():
        start = time.perf_counter()
        generate(args.rows, data)
        print(json.dumps({"generated_rows": args.rows, "seconds": round(time.perf_counter() - start, 1),
                          "parquet_mb": round(data.stat().st_size / 2**20)}), flush=True)
    cfg = work / "config.yaml"
    cfg.write_text(yaml.safe_dump(config()))
    volume = None
    for workers in (int(w) for w in args.workers.split(",")):
        result = run_once(workers, cfg, data, work, args.memory_limit)
        result["cores"] = os.cpu_count()
        if volume is None:
            from tasks.ingest import PART_ROWS

            volume = shuffle_volume(data, result["split_path"], PART_ROWS)
        result["shuffle"] = volume
        print(json.dumps(result), flush=True)
        if not args.keep:
            shutil.rmtree(work / f"cache_w{workers}", ignore_errors=True)
            shutil.rmtree(work / f"out_w{workers}", ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    sys.path.insert(0, str(ROOT))
    main()
