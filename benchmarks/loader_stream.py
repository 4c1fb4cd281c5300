"""Per-rank streaming of an ``s3://`` artifact (``Artifact.open(url, stream=True)``) from a local S3 endpoint,
next to the local loader reading the same order from ``.npy`` files.

Builds (once, under ``--workdir``, with ``benchmarks/loader.py``'s ``build``: the real publisher) a
Criteo-shaped artifact of ``--rows`` training rows (13 number, 26 category, 1 binary column) in Parquet
shards of ``--shard-rows`` rows and ``.npy`` files, starts the S3 endpoint the integration tests use
(moto's server mode, on loopback), uploads the artifact, and then, for each rank of ``--world-size``
in turn (each with its own cache folder, as on its own node, bounded to ``--cache-fraction`` of the
split's shard bytes), reads ``--epochs`` epochs of the training split. For each rank and epoch it prints:

* ``stream``: batches/s of ``Artifact.batches`` over the streamed artifact (the shard-aware order,
  default window of two shards), wall time of the whole epoch, first window's wait included;
* ``local``: batches/s of the local artifact's loader in the same order (``shuffle_window`` of the
  stream, the same batches), its files in the page cache;
* ``downloaded``: bytes the rank downloaded that epoch / the split's shard bytes; cache hits;
* ``warm``: the stream's batches/s from its first batch on (the first window's wait left out);
* CPU seconds of the epoch: the stream's (this process, all threads), the endpoint's (it runs on the same
  machine), the local loader's;
* the load average before and after (the machine may be shared).

The endpoint is a Python process on the same machine: it shares the CPUs with the reader, and serves far
below a real S3 bucket; read the stream's rate as a floor. Recorded figures: ``benchmarks/results/loader.md``.

Usage: ``.venv/bin/python benchmarks/loader_stream.py [--rows 2000000] [--shard-rows 65536]
[--batch-size 4096] [--epochs 3] [--world-size 2] [--cache-fraction 0.25]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUCKET = "prepflow-bench"


def start_endpoint() -> tuple[subprocess.Popen, str]:
    server = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which("moto_server")
    if server is None:
        raise SystemExit("moto_server is not installed (the dev extra: moto[server])")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["timeout", "3600", server, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1).read()
            return proc, endpoint
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise SystemExit(f"moto_server did not start on {endpoint}") from None
            time.sleep(0.2)


def epoch_pass(loader, epoch: int) -> tuple[int, float, float, float]:
    """(batches, seconds for the epoch, seconds from its first batch on: the rate once warm, CPU seconds of
    this process: every thread's, the stream's downloads, checks and decodes included)."""
    loader.set_epoch(epoch)
    cpu = time.process_time()
    start = time.perf_counter()
    first = None
    batches = 0
    for _ in loader:
        batches += 1
        if first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    return batches, end - start, end - (first or end), time.process_time() - cpu


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its children (the endpoint runs under ``timeout``)."""
    total = 0.0
    for task in [pid, *map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]:
        fields = Path(f"/proc/{task}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--shard-rows", type=int, default=65_536)
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--cache-fraction", type=float, default=0.25)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default="/tmp/prepflow-bench-loader")
    args = p.parse_args(argv)

    from benchmarks.loader import build

    path = build(Path(args.workdir), args.rows, formats=("npy", "parquet"), shard_rows=args.shard_rows)
    proc, endpoint = start_endpoint()
    scratch = Path(tempfile.mkdtemp(prefix="prepflow-bench-stream-"))
    try:
        os.environ.update({"S3_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                           "PREPFLOW_ARTIFACT_CACHE": str(scratch / "artifacts")})
        import boto3
        import torch

        from prepflow import Artifact
        from storage.fs import filesystem

        torch.set_num_threads(1)
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        local = Artifact.open(path)
        url = f"s3://{BUCKET}/bench/{local.artifact_id}"
        start = time.perf_counter()
        filesystem(url).put(str(path) + "/", url, recursive=True)
        split_bytes = sum(local.manifest["files"][f]["bytes"] for f in local.chunks("train")[0]["files"])
        limit = int(split_bytes * args.cache_fraction)
        print(f"{args.rows} rows, {len(local.chunks('train')[0]['files'])} shards of {args.shard_rows} rows, "
              f"{split_bytes / 1e6:.1f} MB of train shards, uploaded in {time.perf_counter() - start:.1f} s; "
              f"batch {args.batch_size}, {args.world_size} ranks, cache limit {limit / 1e6:.1f} MB "
              f"({args.cache_fraction:g} of the split) per rank")
        kw = {"batch_size": args.batch_size, "seed": args.seed, "world_size": args.world_size}
        load = f"{os.getloadavg()[0]:.1f}"
        ratios, shares = [], []
        for rank in range(args.world_size):
            streamed = Artifact.open(url, stream=True, cache_limit=limit, cache_dir=scratch / f"cache-{rank}")
            stream = streamed.batches("train", rank=rank, **kw)
            reference = local.batches("train", rank=rank, shuffle_window=stream.shuffle_window, **kw)
            epoch_pass(reference, 0)  # the page cache and the memory maps, before the first timed epoch
            for epoch in range(args.epochs):
                cache = stream.stream.cache
                before, hits, served = cache.downloaded_bytes, cache.hits, cpu_seconds(proc.pid)
                batches, seconds, warm_seconds, cpu = epoch_pass(stream, epoch)
                downloaded, served = cache.downloaded_bytes - before, cpu_seconds(proc.pid) - served
                local_batches, local_seconds, _, local_cpu = epoch_pass(reference, epoch)
                rate, local_rate = batches / seconds, local_batches / local_seconds
                warm = (batches - 1) / warm_seconds if warm_seconds else float("nan")
                share = downloaded / split_bytes
                ratios.append((rate / local_rate, warm / local_rate))
                shares.append(share)
                print(f"  rank {rank} epoch {epoch}: stream {rate:6.1f} batches/s ({seconds:5.2f} s; warm {warm:6.1f}), "
                      f"local {local_rate:6.1f} batches/s: stream/local {rate / local_rate:.2f} (warm "
                      f"{warm / local_rate:.2f}); downloaded {downloaded / 1e6:6.1f} MB = {share:.2f} of the split, "
                      f"{cache.hits - hits} cache hits, cached {cache.stats()['cached_bytes'] / 1e6:.1f} MB; "
                      f"CPU s: stream {cpu:.2f} + endpoint {served:.2f}, local {local_cpu:.2f}")
        print(f"downloaded per rank per epoch: max {max(shares):.2f}, median {statistics.median(shares):.2f} of the "
              f"split; stream/local batches/s per epoch: median {statistics.median(r for r, _ in ratios):.2f}, "
              f"once warm: median {statistics.median(w for _, w in ratios):.2f}, min {min(w for _, w in ratios):.2f}; "
              f"load average {load}, then {os.getloadavg()[0]:.1f}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
