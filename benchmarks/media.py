"""Media throughput: decoding images in the media_cache stage vs a plain sequential Pillow loop.

Builds (once, under ``--workdir``) ``--n`` pictures of about 256 x 256 (sizes 224-288, half JPEG
quality 90, half PNG; gradients, shapes and noise, seeded) and a CSV naming them. Then, with the
files in the page cache:

* ``sequential``: a plain loop ``Image.open -> convert("RGB") -> resize((64, 64), BILINEAR) ->
  np.asarray -> CHW`` over every file (the median of ``--repeat`` passes);
* ``eager`` and ``lazy_cached first pass``: the pipeline (``tasks.graph.run_pipeline``) on a
  fresh cache and output with an image feature ``height: 64, width: 64, num_channels: 3``; images/s
  is ``n`` over the ``media_cache`` stage's seconds (which includes hashing every file, decoding
  in the thread pool, and writing the tensors or the memmaps), and the whole run's seconds are
  reported too;
* ``memmap batches``: ``Artifact.batches(batch_size=256)`` over the complete lazy_cached memmap of
  the training split, in order and shuffled, median ms per batch (prefetch=0, so the consumer
  times the reads themselves), next to a bare ``np.array(memmap[i:i + 256])``;
* ``lazy RSS``: in a fresh subprocess per size, the lazy pipeline on the first 1,000 and on all
  ``n`` images followed by one pass of ``Artifact.batches(batch_size=256)`` decoding every image;
  peak RSS (``ru_maxrss``) of that process.

``--decode-only`` measures the codec alone instead: ``ImageCodec(64, 64, 3).decode`` over every
file's bytes (already read) in one thread, ``--repeat`` passes, CPU seconds (user + sys) per pass;
``--code DIR`` imports ``storage`` from another checkout (e.g. a ``git worktree`` of an older commit),
so two versions compare under ``farm-bench --vs``. ``--size LO,HI`` picks the pictures' side lengths.

Usage: ``.venv/bin/python benchmarks/media.py [--n 5000] [--repeat 3] [--threads N] [--cpus 0,1]
[--jpeg-draft] [--no-rss] [--decode-only [--code DIR]] [--size 224,288]``
(``--threads`` sets ``PREPFLOW_MEDIA_THREADS``, default the CPU count + 1; ``--cpus`` pins the run
to those cores). The sequential loop and the two pipelines run interleaved, ``--repeat`` rounds, so
a shared machine's changing load hits them alike; ratios are medians of the per-round ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUT = 64


def make_pictures(folder: Path, n: int, size: tuple[int, int] = (224, 288)) -> Path:
    """``n`` pictures and ``data.csv`` (path, label); reused when already there."""
    import pandas as pd
    from PIL import Image, ImageDraw

    csv = folder / "data.csv"
    if csv.is_file() and len(pd.read_csv(csv)) == n:
        return csv
    (folder / "img").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        h, w = (int(v) for v in rng.integers(size[0], size[1] + 1, 2))
        y, x = np.mgrid[0:h, 0:w]
        base = np.stack([(x * 255 // w), (y * 255 // h), ((x + y) * 127 // (w + h))], axis=2).astype(np.int16)
        base += rng.integers(-20, 21, (h, w, 3), dtype=np.int16)
        im = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
        draw = ImageDraw.Draw(im)
        for _ in range(4):
            x0, y0 = int(rng.integers(0, max(1, w - 20))), int(rng.integers(0, max(1, h - 20)))
            draw.rectangle([x0, y0, x0 + int(rng.integers(10, 80)), y0 + int(rng.integers(10, 80))],
                           fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
        name = f"img/{i:05d}.{'jpg' if i % 2 == 0 else 'png'}"
        if name.endswith(".jpg"):
            im.save(folder / name, quality=90)
        else:
            im.save(folder / name)
        paths.append(name)
    pd.DataFrame({"image": paths, "label": rng.integers(0, 2, n)}).to_csv(csv, index=False)
    return csv


def warm(paths: list[Path]) -> int:
    return sum(len(p.read_bytes()) for p in paths)


def sequential(paths: list[Path]) -> float:
    from PIL import Image

    start = time.perf_counter()
    for p in paths:
        im = Image.open(p).convert("RGB").resize((OUT, OUT), Image.Resampling.BILINEAR)
        np.ascontiguousarray(np.asarray(im).transpose(2, 0, 1))
    return time.perf_counter() - start


def two_processes(pool, paths: list[Path]) -> float:
    """The machine's ceiling for this work: the sequential loop over each half of the files in two
    already-started processes at once (no GIL, no shared state), wall seconds. On 2 real cores this is
    about half of ``sequential``; on 2 vCPUs that share a physical core or a busy host, it is not."""
    start = time.perf_counter()
    pool.map(sequential, [paths[0::2], paths[1::2]])
    return time.perf_counter() - start


def decode_only(paths: list[Path], repeat: int, jpeg_draft: bool) -> None:
    """The codec alone, one thread: CPU seconds per pass over every file's bytes (read beforehand)."""
    from storage.media_image import ImageCodec

    codec = ImageCodec(OUT, OUT, 3, jpeg_draft=jpeg_draft)
    data = [p.read_bytes() for p in paths]
    passes = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_SELF)
        for d in data:
            codec.decode(d)
        after = resource.getrusage(resource.RUSAGE_SELF)
        passes.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    import storage.media_image

    cpu = statistics.median(passes)
    print(f"decode only ({storage.media_image.__file__}): {len(data)} pictures, CPU s per pass min {min(passes):.3f} "
          f"median {cpu:.3f} max {max(passes):.3f}; {len(data) / cpu:.0f} images per CPU second")


JPEG_DRAFT = os.environ.get("PREPFLOW_BENCH_JPEG_DRAFT") == "1"


def config(mode: str) -> dict:
    options = {"height": OUT, "width": OUT, "num_channels": 3, "mode": mode, "jpeg_draft": JPEG_DRAFT}
    return {"input_features": [{"name": "image", "type": "image", "preprocessing": options}],
            "output_features": [{"name": "label", "type": "binary"}],
            "preprocessing": {"split": {"type": "random", "probabilities": [0.8, 0.1, 0.1], "seed": 1}},
            "publish": {"formats": ["npy"]}}


def pipeline(csv: Path, workdir: Path, mode: str) -> tuple[dict, dict]:
    from storage.cache import StageCache
    from tasks.config.loader import parse_config
    from tasks.graph import run_pipeline
    from tasks.runtime.context import RunContext

    shutil.rmtree(workdir, ignore_errors=True)
    ctx = RunContext(parse_config(config(mode)), str(csv), StageCache(workdir / "cache"), None, str(workdir / "out"))
    start = time.perf_counter()
    result = run_pipeline(ctx)
    total = time.perf_counter() - start
    stages = {s.stage: s.seconds for s in result.stages}
    return result.artifact, {"media_cache_s": stages["media_cache"], "total_s": total}


def memmap_batches(artifact_path: str, repeat: int) -> dict:
    import torch  # noqa: F401  (imported by the loader's first batch: ~3 s that no batch should be timed with)

    from storage.artifact import Artifact

    art = Artifact.open(artifact_path)
    out = {}
    for label, shuffle in (("in order", False), ("shuffled", True)):
        times = []
        for epoch in range(repeat):
            loader = art.batches("train", batch_size=256, shuffle=shuffle, seed=0, epoch=epoch, prefetch=0)
            it = iter(loader)
            while True:
                start = time.perf_counter()
                try:
                    next(it)
                except StopIteration:
                    break
                times.append(time.perf_counter() - start)
        out[label] = 1000 * statistics.median(times)
    chunk = next(c for c in art.chunks("train") if c["type"] == "media")
    mm = np.load(Path(art.path).parent / "media" / chunk["memmap"], mmap_mode="r")
    times = []
    for _ in range(repeat):
        for i in range(0, len(mm), 256):
            start = time.perf_counter()
            np.array(mm[i:i + 256])
            times.append(time.perf_counter() - start)
    out["bare memmap slice"] = 1000 * statistics.median(times)
    return out


def rss_child(csv: Path, n: int, workdir: Path) -> None:
    """Run in a fresh process: lazy pipeline on the first ``n`` rows + one loader pass; print peak RSS."""
    import pandas as pd

    from storage.artifact import Artifact

    df = pd.read_csv(csv).head(n)
    sub = csv.parent / f"data_{n}.csv"
    df.to_csv(sub, index=False)
    artifact, times = pipeline(sub, workdir, "lazy")
    art = Artifact.open(artifact["artifact_path"])
    decoded = 0
    for split in art.splits:
        for batch in art.batches(split, batch_size=256, shuffle=True, seed=0):
            decoded += len(batch["image"])
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"n": n, "decoded": decoded, "peak_rss_mib": round(peak_mib, 1), **times}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cpus", default=None, help="CPU ids to pin to, e.g. 0,1")
    parser.add_argument("--no-rss", action="store_true", help="skip the lazy-mode peak RSS runs")
    parser.add_argument("--jpeg-draft", action="store_true", help="image option jpeg_draft: true")
    parser.add_argument("--workdir", default=str(ROOT / "benchmarks" / "data" / "media"))
    parser.add_argument("--rss-child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--decode-only", action="store_true", help="time ImageCodec.decode alone (CPU seconds)")
    parser.add_argument("--code", default=None, help="import storage from this checkout (with --decode-only)")
    parser.add_argument("--size", default="224,288", help="pictures' side lengths LO,HI (default 224,288)")
    args = parser.parse_args()
    if args.code:
        sys.path.insert(0, str(Path(args.code).resolve()))
    if args.threads:
        os.environ["PREPFLOW_MEDIA_THREADS"] = str(args.threads)
    if args.jpeg_draft:  # read by config() here and in the RSS subprocesses
        global JPEG_DRAFT
        JPEG_DRAFT = True
        os.environ["PREPFLOW_BENCH_JPEG_DRAFT"] = "1"
    if args.cpus:  # e.g. "0,1": measure on two cores of a larger machine (inherited by the subprocesses)
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
        os.environ.setdefault("PREPFLOW_MEDIA_THREADS", str(len(os.sched_getaffinity(0)) + 1))
    workdir = Path(args.workdir)
    size = tuple(int(v) for v in args.size.split(","))
    folder = workdir / (f"pictures_{args.n}" if size == (224, 288) else f"pictures_{args.n}_{size[0]}-{size[1]}")
    csv = make_pictures(folder, args.n, size)
    if args.decode_only:
        import pandas as pd

        decode_only([csv.parent / p for p in pd.read_csv(csv)["image"]], args.repeat, args.jpeg_draft)
        return
    if args.rss_child:
        rss_child(csv, args.rss_child, workdir / f"rss_{args.rss_child}")
        return
    import pandas as pd

    from storage.media import default_threads

    paths = [csv.parent / p for p in pd.read_csv(csv)["image"]]
    size = warm(paths)
    print(f"{args.n} pictures, {size / 2**20:.1f} MiB, {len(os.sched_getaffinity(0))} CPUs, {default_threads()} decode "
          f"threads, jpeg_draft {JPEG_DRAFT}, load average {os.getloadavg()[0]:.2f}")
    # rounds interleave the three measurements, so a change in the machine's load hits them alike
    rounds, ceilings = [], []
    import multiprocessing

    pool = multiprocessing.get_context("spawn").Pool(2)
    pool.map(sequential, [paths[:10], paths[10:20]])  # start both processes and import Pillow there
    for r in range(args.repeat):
        seq = sequential(paths)
        ceilings.append(seq / two_processes(pool, paths))
        eager = pipeline(csv, workdir / "run_eager", "eager")
        runs = pipeline(csv, workdir / "run_lazy_cached", "lazy_cached")
        rounds.append((seq, eager[1], runs[1]))
        print(f"  round {r + 1}: sequential {args.n / seq:.0f}/s, eager {args.n / eager[1]['media_cache_s']:.0f}/s, "
              f"lazy_cached {args.n / runs[1]['media_cache_s']:.0f}/s, two processes {ceilings[-1]:.2f}x sequential "
              f"(load {os.getloadavg()[0]:.2f})", flush=True)
    pool.close()
    seq = statistics.median(r[0] for r in rounds)
    print(f"sequential Pillow loop: {args.n / seq:8.0f} images/s ({seq:.2f} s)")
    print(f"machine ceiling: the same loop in two processes at once, median {statistics.median(ceilings):.2f}x "
          "sequential")
    for i, label in ((1, "eager"), (2, "lazy_cached first pass")):
        media_s = statistics.median(r[i]["media_cache_s"] for r in rounds)
        total_s = statistics.median(r[i]["total_s"] for r in rounds)
        ratio = statistics.median(r[0] / r[i]["media_cache_s"] for r in rounds)
        print(f"{label}: {args.n / media_s:8.0f} images/s in media_cache ({media_s:.2f} s; median per-round ratio "
              f"{ratio:.2f}x sequential); whole run {total_s:.2f} s")
    artifact = runs[0]
    for label, ms in memmap_batches(artifact["artifact_path"], args.repeat).items():
        print(f"lazy_cached memmap, batches of 256, {label}: {ms:.3f} ms median per batch")
    for n in [] if args.no_rss else sorted({min(1000, args.n), args.n}):
        proc = subprocess.run([sys.executable, __file__, "--n", str(args.n), "--workdir", str(workdir),
                               "--rss-child", str(n)], capture_output=True, text=True, check=True)
        line = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"lazy mode, {n} images (pipeline + one loader pass decoding {line['decoded']}): peak RSS "
              f"{line['peak_rss_mib']:.0f} MiB; media_cache {line['media_cache_s']:.2f} s")


if __name__ == "__main__":
    main()
