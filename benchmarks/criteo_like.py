"""Criteo-shaped benchmark (issue 11): ``prepflow run --dask-address`` on 1 and 2 worker processes.

Generates a Criteo-1TB-shaped table: ``label`` (3.4 % positives), ``I1..I13`` (heavy-tailed
integer counts as float64, 0-45 % nulls per column), ``C1..C26`` (8-hex-digit strings like
Criteo's hashed ids, 0-40 % nulls per column). Each categorical column draws ranks from a
truncated Zipf (s = 1.05) over its value space, Criteo 1TB's cardinalities (DLRM's table) clipped to
[10, 10^7]; a rank becomes a string by a bijective 32-bit mix, so distinct ranks stay distinct. The
table is written as one Parquet file in row groups of ``--row-group-rows`` (262,144: 8 row groups at 2M
rows), generated 1M rows at a time.

Config: 13 number features (zscore, mean fill), 26 category features keeping every value
(``most_common`` 10^8, ``min_frequency`` 1: the largest vocabularies, several over 10^6 ids and so
stored as Parquet), binary label; random split 0.8/0.1/0.1; Parquet shards.

For each worker count a fresh ``LocalCluster`` (processes, 1 thread each, workers with
``WORKER_ENV``: Arrow on malloc, glibc's mmap threshold 4 MiB) and a fresh stage cache; records wall time, stage seconds,
peak RSS (VmHWM) and CPU seconds of each worker (read from the workers after the run), of the scheduler
(``scheduler_cpu_s``, not in the per-row figures) and of the
prepflow process (VmHWM polled every second; CPU from ``wait4``), and the load average before,
during (sampled every 10 s) and after. ``--shuffle-volume``: the shuffle volume of the vocabulary fit
(rows and bytes of the per-partition ``(feature, value, count)`` tables), computed afterwards from the
data, the run's split and the ingest partitioning. Worker count 0 is a local run (no cluster: Dask's
threads in the prepflow process). After each cluster run, ``benchmarks/flow_floor.py`` runs on the same
cluster and Prefect server (``--no-floor`` skips it): a flow with as many task runs and Dask computes that
does nothing. Its CPU (``floor_cpu_s``) is the part of the flow process's CPU no change to prepflow can
remove, and ``floor_share`` the flow's share of the run's CPU if prepflow cost nothing above it.

In the same invocation, ``benchmarks/polars_reference.py`` (a hand-written polars pass: the same fit,
encode, split and zstd Parquet write; ``pip install .[bench]``) runs on the same file once per round of
``--repeat``, and each run prints the flow process's share of all CPU, its peak RSS, the workers' CPU per
row and the ratio of the run's CPU (flow + workers) to the CPU of its round's polars pass; a last line
per variant and worker count gives the median, min and max of those ratios. ``--baseline DIR`` also runs
the prepflow of another checkout (e.g. ``git worktree add /tmp/h7-base 34adbce``, or ``git archive 34adbce | tar -x
-C DIR``) on the same file, alternating with this one; repeated, each checkout in turn.
``--csv``: prepflow reads the same table written as one CSV file (pyarrow's writer, no quotes: no value
needs one, so the file is read in byte ranges); polars still reads the Parquet file.

    python benchmarks/criteo_like.py --rows 2000000 --workers 0,1,2 [--baseline /tmp/h7-base] [--work /tmp/criteo]
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
PACKAGES = ("core", "storage", "expectations", "tasks", "flows")  # prepflow's code, byte-compiled before the runs
# Criteo 1TB cardinalities (DLRM's day_0..23 vocabulary sizes), clipped to [10, 10^7]
CRITEO_CARDINALITIES = [39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10,
                        2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36]
CARDINALITIES = [int(min(max(c, 10), 10**7)) for c in CRITEO_CARDINALITIES]
NUMERIC = [f"I{i}" for i in range(1, 14)]
CATEGORICAL = [f"C{i}" for i in range(1, 27)]
ZIPF_S = 1.05
CHUNK = 1_000_000
# the workers' environment, as README's "Scale out" and the compose file start them: Arrow on malloc, and
# glibc's heap for blocks up to 4 MiB (Dask's MALLOC_TRIM_THRESHOLD_ would pin mmap's threshold at 128 KiB)
WORKER_ENV = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_MMAP_THRESHOLD_": str(4 << 20)}
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


def generate(rows: int, path: Path, seed: int = 0, row_group_rows: int = 1 << 18) -> None:
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
        writer.write_table(table, row_group_size=row_group_rows)
    writer.close()
    os.replace(tmp, path)


def write_csv(parquet: Path, path: Path) -> None:
    """The Parquet table as one CSV file, a row group at a time, without quotes (no value here needs one)."""
    import pyarrow.csv as pacsv

    tmp = path.with_suffix(".tmp")
    pf = pq.ParquetFile(parquet)
    with pacsv.CSVWriter(tmp, pf.schema_arrow, write_options=pacsv.WriteOptions(quoting_style="none")) as writer:
        for i in range(pf.num_row_groups):
            writer.write_table(pf.read_row_group(i))
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


def _cpu(usage) -> float:
    return usage.ru_utime + usage.ru_stime


def _run_child(cmd: list[str], cwd: Path, env: dict, work: Path) -> tuple[float, float, float, list[float]]:
    """Run ``cmd``; its own CPU seconds (all its threads, from ``wait4``), wall seconds, peak RSS (MB) and
    the 1-minute load averages sampled meanwhile."""
    start = time.perf_counter()
    with LoadSampler() as load, open(work / "stdout.txt", "w") as stdout, open(work / "stderr.txt", "w") as stderr:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, cwd=cwd, env=env)
        load.pid = proc.pid
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own CPU time (not the workers')
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{cmd[:3]} failed:\n{(work / 'stderr.txt').read_text()[-4000:]}")
    return _cpu(usage), time.perf_counter() - start, load.peak_mb, load.samples


def run_polars(data: Path, work: Path) -> dict:
    out = work / "polars_out"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, str(ROOT / "benchmarks" / "polars_reference.py"), str(data), str(out)]
    cpu, wall, peak, _load = _run_child(cmd, ROOT, dict(os.environ), work)
    shutil.rmtree(out, ignore_errors=True)
    return {"variant": "polars", "cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "peak_rss_mb": round(peak)}


def run_once(workers: int, cfg: Path, data: Path, work: Path, memory_limit: str, tree: Path = ROOT,
             variant: str = "this", profile: Path | None = None, worker_env: dict[str, str] | None = None,
             floor: bool = True) -> dict:
    """One cold ``prepflow run`` of the checkout ``tree`` (its code in the flow process and the workers);
    ``workers`` 0: without a cluster."""
    import contextlib

    from distributed import Client

    cache, out = work / f"cache_{variant}_w{workers}", work / f"out_{variant}_w{workers}"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    # this checkout starts and keeps its own local Prefect server
    env = {**os.environ, "PYTHONPATH": str(tree), "PREPFLOW_HOME": str(work / f"home_{variant}")}
    started = _live_server(work)
    if variant != "this" and started:  # another checkout uses this one's server (a start can take > 60 s here)
        env["PREFECT_API_URL"] = started
    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        cmd = [sys.executable, "-m", "flows.cli", "run", str(cfg), "--dataset", str(data), "--output", str(out),
               "--cache-dir", str(cache), "--json"]
        if profile is not None:  # the flow process under cProfile (its CPU figures then include the profiler's)
            profile.mkdir(parents=True, exist_ok=True)
            cmd[1:1] = ["-m", "cProfile", "-o", str(profile / f"flow_{variant}_w{workers}.prof")]
        client = None
        if workers:
            address = stack.enter_context(_cluster(workers, memory_limit, tree, work, worker_env or {}))
            client = stack.enter_context(Client(address))
            client.wait_for_workers(workers, timeout=300)
            cmd += ["--dask-address", address]
            idle = client.run(_worker_usage)
            scheduler_idle = client.run_on_scheduler(_worker_usage)["cpu_s"]
        flow_cpu, wall, flow_peak, samples = _run_child(cmd, tree, env, work)
        used = client.run(_worker_usage) if client is not None else {}
        scheduler_cpu = client.run_on_scheduler(_worker_usage)["cpu_s"] - scheduler_idle if client is not None else 0.0
        summary = json.loads((work / "stdout.txt").read_text().strip().splitlines()[-1])
        floor_cpu = _floor(address, len(summary["stages"]) + 1, env, work, tree) if workers and floor else None
    load_after = os.getloadavg()
    stages = {s["name"]: round(s["seconds"], 1) for s in summary["stages"]}
    meta = json.loads((Path(summary["artifact_path"]) / "training_set_metadata.json").read_text())
    worker_cpu = sum(v["cpu_s"] for v in used.values()) - sum(v["cpu_s"] for v in idle.values()) if used else 0.0
    result = {
        "variant": variant, "tree": str(tree), "workers": workers, "command": " ".join(cmd[cmd.index("flows.cli") + 1:]),
        "wall_s": round(wall, 1), "stages": stages, "rows_published": sum(summary["rows"].values()),
        "client_cpu_s": round(flow_cpu, 1), "client_peak_rss_mb": round(flow_peak),
        "worker_peak_rss_mb": sorted(round(v["peak_rss_mb"]) for v in used.values()),
        "worker_cpu_s": round(worker_cpu, 1), "scheduler_cpu_s": round(scheduler_cpu, 1),
        "flow_cpu_share": round(flow_cpu / (flow_cpu + worker_cpu), 3),
        "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in load_after],
        "loadavg_1min_during": {"mean": round(float(np.mean(samples)), 2) if samples else None,
                                "max": round(max(samples), 2) if samples else None},
        "vocab_sizes": {c: meta[c]["vocab_size"] for c in CATEGORICAL},
        "parquet_vocabularies": sorted(c for c in CATEGORICAL if "vocab_file" in meta[c]),
        "artifact_mb": round(sum(p.stat().st_size for p in Path(summary["artifact_path"]).rglob("*")
                                 if p.is_file()) / 2**20),
        "artifact_sha256": _artifact_digest(Path(summary["artifact_path"])),
    }
    if floor_cpu is not None:  # benchmarks/flow_floor.py: a flow of as many task runs and computes, no work
        result["floor_cpu_s"] = round(floor_cpu, 2)
        result["floor_share"] = round(floor_cpu / (floor_cpu + worker_cpu), 3)
    result.update(written_bytes(cache, Path(summary["artifact_path"])))
    result["split_path"] = str(next((cache / "split").glob("*/split.npy")))
    result["ingest_parts"] = len(list((cache / "ingest").glob("*/data/part-*.arrow")))
    return result


def _file_bytes(folder: Path, seen: set[tuple[int, int]]) -> int:
    """The bytes of the files under ``folder`` not counted yet (a hard link counts once, by inode)."""
    total = 0
    for p in folder.rglob("*"):
        st = p.lstat()
        if p.is_file() and (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def written_bytes(cache: Path, artifact: Path) -> dict:
    """What a cold run left on disk: each stage's cache folder, the artifact, and their sum over the artifact's
    bytes (files hard-linked between the cache and the artifact count once)."""
    seen: set[tuple[int, int]] = set()
    art = _file_bytes(artifact, seen)
    stages = {d.name: _file_bytes(d, seen) for d in sorted(cache.iterdir()) if d.is_dir()}
    mb = 2**20
    return {"cache_mb": {k: round(v / mb, 1) for k, v in stages.items() if v >= mb / 10},
            "written_mb": round((art + sum(stages.values())) / mb, 1),
            "written_to_artifact": round((art + sum(stages.values())) / max(art, 1), 2)}


def _live_server(work: Path, tree: Path = ROOT) -> str | None:
    """The API URL of a running local Prefect server that this checkout's runs started (``home_this``),
    ``tree``'s own first (each checkout starts its own; one exits after 30 idle minutes)."""
    live = []
    for path in sorted((work / "home_this").glob("servers/*/server.json")):
        info = json.loads(path.read_text())
        try:
            os.kill(info["pid"], 0)
        except (OSError, KeyError):
            continue
        live.append((info.get("checkout") != str(tree), info["url"]))
    return min(live)[1] if live else None


def _floor(address: str, tasks: int, env: dict, work: Path, tree: Path) -> float:
    """CPU seconds of ``benchmarks/flow_floor.py`` on the same cluster and Prefect server as the run before it:
    a flow with as many task runs and computes as prepflow's, doing nothing (the part no change to prepflow
    removes)."""
    env = dict(env)
    if "PREFECT_API_URL" not in env:  # the server the run used (this checkout's, which it started)
        env["PREFECT_API_URL"] = _live_server(work, tree)
    cmd = [sys.executable, str(ROOT / "benchmarks" / "flow_floor.py"), "--dask-address", address, "--tasks",
           str(tasks)]
    cpu, _wall, _peak, _load = _run_child(cmd, ROOT, env, work)
    return cpu


def _cluster(workers: int, memory_limit: str, tree: Path, work: Path, worker_env: dict[str, str]):
    """A scheduler and ``workers`` worker processes (1 thread each) running the checkout ``tree``'s code,
    as separate processes (a scheduler in this process would unpickle task graphs with this checkout's
    modules); yields the scheduler's address."""
    import contextlib
    import signal

    @contextlib.contextmanager
    def cluster():
        env = {**os.environ, "PYTHONPATH": str(tree), **WORKER_ENV}
        for name, value in worker_env.items():  # --worker-env: NAME=VALUE, or NAME= to leave it unset
            if value:
                env[name] = value
            else:
                env.pop(name, None)
        scheduler_file = work / "scheduler.json"
        scheduler_file.unlink(missing_ok=True)
        dask = str(Path(sys.executable).parent / "dask")
        logs = open(work / "cluster.log", "w")
        procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                   "--scheduler-file", str(scheduler_file)], env=env, cwd=tree, stdout=logs,
                                  stderr=logs, start_new_session=True)]
        try:
            deadline = time.monotonic() + 300
            while not scheduler_file.exists():
                if time.monotonic() > deadline:
                    raise SystemExit("the Dask scheduler did not start")
                time.sleep(0.5)
            procs.append(subprocess.Popen(
                [dask, "worker", "--scheduler-file", str(scheduler_file), "--nworkers", str(workers), "--nthreads",
                 "1", "--memory-limit", memory_limit, "--no-dashboard", "--host", "127.0.0.1"],
                env=env, cwd=tree, stdout=logs, stderr=logs, start_new_session=True))
            yield json.loads(scheduler_file.read_text())["address"]
        finally:
            for proc in reversed(procs):
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            logs.close()

    return cluster()


def _artifact_digest(path: Path) -> str:
    """sha256 over the artifact's row files (names and bytes): equal for two checkouts that publish the
    same data (manifest and feature spec carry the artifact id, which changes with the code)."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file() and p.suffix in (".parquet", ".npy"):
            h.update(p.relative_to(path).as_posix().encode())
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


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


def per_row(result: dict, rows: int, polars_cpu: float | None) -> dict:
    total = result["client_cpu_s"] + result["worker_cpu_s"]
    out = {"cpu_s": round(total, 1), "us_per_row": round(total / rows * 1e6, 2),
           "worker_us_per_row": round(result["worker_cpu_s"] / rows * 1e6, 2),
           "flow_us_per_row": round(result["client_cpu_s"] / rows * 1e6, 2)}
    if polars_cpu:
        out["ratio_to_polars"] = round(total / polars_cpu, 2)
    return out


def _name_value(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE (or NAME= to leave NAME unset), got {text!r}")
    return name, value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--workers", default="1,2", help="worker processes per run, comma-separated; 0: local run")
    parser.add_argument("--work", default="/tmp/prepflow-criteo")
    parser.add_argument("--memory-limit", default="8GB", help="per worker")
    parser.add_argument("--row-group-rows", type=int, default=1 << 18)
    parser.add_argument("--baseline", type=Path, action="append", default=[], help="another checkout, run "
                        "alternately with this one (repeatable: variants baseline1, baseline2, ... in that order)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each variant and worker count")
    parser.add_argument("--no-polars", action="store_true")
    parser.add_argument("--shuffle-volume", action="store_true")
    parser.add_argument("--no-floor", action="store_true", help="skip benchmarks/flow_floor.py after each "
                        "cluster run (a Prefect flow of as many task runs, doing nothing: the flow's floor)")
    parser.add_argument("--keep", action="store_true", help="keep caches and artifacts")
    parser.add_argument("--csv", action="store_true", help="prepflow reads the table as one CSV file")
    parser.add_argument("--profile", type=Path, help="run the flow process under cProfile, writing "
                        "DIR/flow_<variant>_w<workers>.prof (read: python -m pstats FILE, sort cumulative)")
    parser.add_argument("--worker-env", action="append", default=[], metavar="NAME=VALUE", type=_name_value,
                        help="the workers' environment (both variants; NAME= leaves it unset): replaces WORKER_ENV's")
    parser.add_argument("--baseline-worker-env", action="append", default=[], metavar="NAME=VALUE", type=_name_value,
                        help="the same, for the baseline's workers only (after --worker-env)")
    args = parser.parse_args()
    common = dict(args.worker_env)
    worker_env = {"this": common, "baseline": {**common, **dict(args.baseline_worker_env)}}
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    data = work / f"criteo_like_{args.rows}_rg{args.row_group_rows}.parquet"
    if not data.exists():
        start = time.perf_counter()
        generate(args.rows, data, row_group_rows=args.row_group_rows)
        print(json.dumps({"generated_rows": args.rows, "seconds": round(time.perf_counter() - start, 1),
                          "parquet_mb": round(data.stat().st_size / 2**20)}), flush=True)
    parquet = data
    if args.csv:
        data = data.with_suffix(".csv")
        if not data.exists():
            write_csv(parquet, data)
    cfg = work / "config.yaml"
    cfg.write_text(yaml.safe_dump(config()))
    names = ["baseline"] if len(args.baseline) == 1 else [f"baseline{i}" for i in range(1, len(args.baseline) + 1)]
    variants = [("this", ROOT)] + [(name, tree.resolve()) for name, tree in zip(names, args.baseline, strict=True)]
    for _variant, tree in variants:  # bytecode, as an installed package has (PYTHONDONTWRITEBYTECODE may be set)
        subprocess.run([sys.executable, "-m", "compileall", "-q", *(str(tree / d) for d in PACKAGES)], check=True)
    volume = None
    ratios: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.repeat):
        polars_cpu = None
        if not args.no_polars:  # once per round: each run's ratio is to the polars pass next to it in time
            ref = run_polars(parquet, work)
            polars_cpu = ref["cpu_s"]
            print(json.dumps({**ref, "us_per_row": round(ref["cpu_s"] / args.rows * 1e6, 2)}), flush=True)
        for workers in (int(w) for w in args.workers.split(",")):
            for variant, tree in variants:
                result = run_once(workers, cfg, data, work, args.memory_limit, tree, variant, args.profile,
                                  worker_env.get(variant, worker_env["baseline"]), floor=not args.no_floor)
                result["cores"] = os.cpu_count()
                result["per_row"] = per_row(result, args.rows, polars_cpu)
                if polars_cpu:
                    ratios.setdefault((variant, workers), []).append(result["per_row"]["ratio_to_polars"])
                if args.shuffle_volume and volume is None and not args.csv:
                    from tasks.ingest.spec import PART_ROWS

                    volume = shuffle_volume(data, result["split_path"], PART_ROWS)
                result["shuffle"] = volume
                print(json.dumps(result), flush=True)
                if not args.keep:
                    shutil.rmtree(work / f"cache_{variant}_w{workers}", ignore_errors=True)
                    shutil.rmtree(work / f"out_{variant}_w{workers}", ignore_errors=True)
    for (variant, workers), values in ratios.items():  # polars' own CPU varies run to run (its page faults)
        print(json.dumps({"summary": variant, "workers": workers, "ratio_to_polars": {
            "median": round(float(np.median(values)), 2), "min": min(values), "max": max(values), "rounds": len(values)}}))


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    sys.path.insert(0, str(ROOT))
    main()
