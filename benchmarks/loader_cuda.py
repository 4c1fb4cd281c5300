"""The loader's CUDA path, checked and timed on a GPU machine: pinned memory, asynchronous copies, throughput.

Two steps, because the GPU machine has torch but not prepflow's pipeline (Dask, Prefect):

1. here (any machine with the virtualenv): publish a Criteo-shaped artifact with the real publisher,
   as ``.npy`` columns and NVIDIA's ``split_binary`` layout (``benchmarks/loader.py``'s generator)::

       .venv/bin/python benchmarks/loader_cuda.py build --rows 150000 --out .gpu/artifact

2. on the GPU machine (only ``core/``, ``storage/``, numpy, pyarrow, PyYAML and torch are imported)::

       python3 benchmarks/loader_cuda.py check --artifact .gpu/artifact [--dlrm .gpu/dlrm] --json out.json

``check`` asserts (exit 1 naming what failed):

* every batch copied to the GPU equals the CPU loader's batch, from pinned memory (asynchronous
  copies, the default for a CUDA device) and from pageable memory, while the consumer keeps the GPU
  busy with its own kernels between batches (so a copy that raced the consumer, or a pinned buffer
  reused before its copy ended, would show as a wrong checksum), and keeps each channel's layout;
* ``device="cuda"`` alone pins; ``pin_memory=True`` yields pinned host tensors; ``torch_dataset`` through ``torch.utils.data.DataLoader
  (pin_memory=True)`` gives the published rows;
* with ``--dlrm`` (the ``dlrm`` package folder of NVIDIA DeepLearningExamples'
  ``PyTorch/Recommendation/DLRM``, unmodified, not part of prepflow): NVIDIA's ``ParametricDataset``,
  ``collate_split_tensors`` and ``prefetcher`` read the artifact's ``split_binary`` files onto the GPU and
  give prepflow's rows (numbers as float16, as that layout stores them).

and times, with the files in the page cache:

* the host-to-device ceiling: one batch's bytes copied from pinned and from pageable memory;
* full passes of the loader: on the host only, to the GPU with each copy mode, and NVIDIA's loader;
* the same passes with a stand-in training step (bf16 matrix products, ``--step-ms`` long) per batch,
  against that step alone on one resident batch: the loader's cost left after overlapping.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def build(rows: int, out: Path, workdir: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import loader  # benchmarks/loader.py: the Criteo-shaped generator and the real publisher

    path = loader.build(workdir, rows, formats=("npy", "split_binary"))
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(path, out)
    print(f"artifact {path.name}: {rows} training rows -> {out}")


# ---- the GPU side ---------------------------------------------------------------------------------

class Failed(AssertionError):
    pass


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise Failed(what)


def tensors(batch: dict):
    for v in batch.values():
        yield from (tensors(v) if isinstance(v, dict) else (v,))


def nbytes(batch: dict) -> int:
    return sum(t.numel() * t.element_size() for t in tensors(batch))


def busy(torch, work, reps: int):
    """The stand-in training step: ``reps`` bf16 matrix products on the current stream."""
    x = work
    for _ in range(reps):
        x = x @ work
    return x


def checksums(torch, batch: dict):
    """Per channel, an exact GPU-side checksum (int64 sum of the raw bytes as int32/int16 words)."""
    out = {}
    for name, t in batch.items():
        if isinstance(t, dict):
            out |= {f"{name}.{k}": v for k, v in checksums(torch, t).items()}
            continue
        flat = t.contiguous().reshape(-1)
        if t.dtype == torch.bool:
            words = flat.to(torch.int64)
        else:
            words = flat.view(torch.uint8).to(torch.int64)
        out[name] = (words * (torch.arange(len(words), device=t.device) % 251 + 1)).sum()
    return out


def check_equal_under_load(torch, art, args, work, reps: int, **variant) -> int:
    """Every GPU batch equals the CPU loader's, with the consumer's kernels running between batches."""
    kw = dict(batch_size=args.batch_size, shuffle=True, seed=7)
    cpu = [checksums(torch, b) for b in art.batches("train", **kw)]
    gpu = []
    for batch in art.batches("train", device="cuda", **kw, **variant):
        expect(all(t.is_cuda for t in tensors(batch)), f"{variant}: a tensor is not on the GPU")
        busy(torch, work, reps)  # the consumer's step: the next copy is in flight meanwhile
        gpu.append(checksums(torch, batch))
    torch.cuda.synchronize()
    expect(len(cpu) == len(gpu), f"{variant}: {len(gpu)} GPU batches, {len(cpu)} CPU batches")
    for i, (a, b) in enumerate(zip(cpu, gpu, strict=True)):
        for ch in a:
            expect(int(a[ch]) == int(b[ch].item()), f"{variant}: batch {i} channel {ch} differs on the GPU")
    first_cpu = next(iter(art.batches("train", **kw)))
    first_gpu = next(iter(art.batches("train", device="cuda", **kw, **variant)))
    for ch, t in first_cpu.items():
        expect(torch.equal(first_gpu[ch].cpu(), t), f"{variant}: first batch channel {ch} differs")
        expect(first_gpu[ch].stride() == t.stride(), f"{variant}: channel {ch} lost its layout on the GPU")
    return len(gpu)


def timed(fn, repeat: int) -> list[float]:
    fn()  # warm-up: page cache, allocator pools, lazy imports
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def h2d_gbps(torch, size: int, pinned: bool, repeat: int) -> float:
    src = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
    src.fill_(1)
    dst = torch.empty(size, dtype=torch.uint8, device="cuda")

    def go():
        for _ in range(20):
            dst.copy_(src, non_blocking=pinned)
        torch.cuda.synchronize()

    return 20 * size / statistics.median(timed(go, repeat)) / 1e9


def dlrm_batches(torch, dlrm: Path, artifact: Path, batch_size: int):
    """NVIDIA's own reading of the split_binary files (dlrm/data), the way their main.py trains."""
    import functools

    sys.path.insert(0, str(dlrm.parent))
    from dlrm.data.datasets import ParametricDataset
    from dlrm.data.feature_spec import FeatureSpec
    from dlrm.data.utils import collate_split_tensors, prefetcher

    spec = FeatureSpec.from_yaml(str(artifact / "feature_spec.yaml"))
    spec.check_feature_spec()
    cats = spec.get_categorical_feature_names()
    dataset = ParametricDataset(spec, "train", batch_size=batch_size, numerical_features_enabled=True,
                                categorical_features_to_read=cats, prefetch_depth=10)
    collate = functools.partial(collate_split_tensors, device="cuda", orig_stream=torch.cuda.current_stream(),
                                numerical_type=torch.float32)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, collate_fn=collate, shuffle=False, num_workers=0,
                                         pin_memory=False)
    return spec, cats, lambda: prefetcher(iter(loader), torch.cuda.Stream())


def check(args) -> dict:
    import torch

    from storage.artifact import Artifact

    expect(torch.cuda.is_available(), "torch sees no CUDA device")
    art = Artifact.open(args.artifact, verify=True)
    B = args.batch_size
    n = art.num_rows("train")
    res: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": n, "batch_size": B}

    # the stand-in step: calibrate bf16 matmul repetitions to --step-ms
    work = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16) / 64
    busy(torch, work, 10)
    torch.cuda.synchronize()
    start = time.perf_counter()
    busy(torch, work, 200)
    torch.cuda.synchronize()
    per_rep = (time.perf_counter() - start) / 200
    reps = max(1, round(args.step_ms / 1000 / per_rep))
    res["step_reps"] = reps

    # 1. correctness
    expect(art.batches("train", device="cuda").pin_memory, "device='cuda' alone does not pin the batches")
    for variant in (dict(), dict(pin_memory=False)):
        batches = check_equal_under_load(torch, art, args, work, reps, **variant)
        print(f"equal on the GPU under load: {variant} ({batches} batches)", flush=True)
    pinned = next(iter(art.batches("train", batch_size=B, pin_memory=True)))
    expect(all(t.is_pinned() for t in tensors(pinned)), "pin_memory=True gave a pageable tensor")
    expect(not any(t.is_pinned() for t in tensors(next(iter(art.batches("train", batch_size=B))))),
           "pin_memory=False gave a pinned tensor")
    ref = art.read_split("train")
    dl = torch.utils.data.DataLoader(art.torch_dataset("train"), batch_size=4096, shuffle=False, pin_memory=True)
    first = next(iter(dl))
    expect(first["label"].is_pinned(), "DataLoader(pin_memory=True) over torch_dataset: label not pinned")
    expect(np.array_equal(first["label"].numpy(), ref["label"][:4096]), "torch_dataset rows differ")
    print("pinned batches, torch_dataset through DataLoader(pin_memory=True): ok", flush=True)

    bytes_per_batch = nbytes(pinned)
    res["bytes_per_batch"] = bytes_per_batch
    res["h2d_gbps"] = {"pinned": h2d_gbps(torch, bytes_per_batch, True, args.repeat),
                       "pageable": h2d_gbps(torch, bytes_per_batch, False, args.repeat)}

    dlrm = None
    if args.dlrm:
        spec, cats, dlrm = dlrm_batches(torch, Path(args.dlrm), Path(args.artifact), B)
        ours = art.batches("train", batch_size=B, shuffle=False)
        rows = 0
        for (num, cat, click), mine in zip(dlrm(), ours, strict=True):
            torch.cuda.current_stream().synchronize()
            expect(torch.equal(num.cpu(), mine["numerical"].to(torch.float16).to(torch.float32)),
                   f"NVIDIA's loader: numerical features differ at rows {rows}..")
            expect(torch.equal(cat.cpu(), mine["categorical"].to(torch.long)),
                   f"NVIDIA's loader: categorical features differ at rows {rows}..")
            expect(torch.equal(click.cpu(), mine["label"].to(torch.float32)),
                   f"NVIDIA's loader: labels differ at rows {rows}..")
            rows += len(click)
        expect(rows == n, f"NVIDIA's loader read {rows} rows of {n}")
        print(f"NVIDIA DLRM ParametricDataset + prefetcher on the GPU: {rows} rows equal to prepflow's", flush=True)

    # 2. throughput, then the overlap with a step
    modes = {
        "host only (no device)": dict(),
        "host only, pinned": dict(pin_memory=True),
        "cuda (default: pinned)": dict(device="cuda"),
        "cuda, pageable (pin_memory=False)": dict(device="cuda", pin_memory=False),
    }
    shuffles = {"sequential": dict(shuffle=False), "shuffle_block=8192": dict(shuffle=True, shuffle_block=8192),
                "row shuffle": dict(shuffle=True)}
    epochs = args.epochs

    def passes(kw, step: bool):
        def go():
            for e in range(epochs):
                for batch in art.batches("train", batch_size=B, epoch=e, **kw):
                    if step:
                        busy(torch, work, reps)
                        checksums(torch, batch)
            torch.cuda.synchronize()
        return go

    resident = {k: v.cuda() for k, v in pinned.items()}
    n_batches = len(art.batches("train", batch_size=B)) * epochs

    def step_alone():
        for _ in range(n_batches):
            busy(torch, work, reps)
            checksums(torch, resident)
        torch.cuda.synchronize()

    res["step_alone_s"] = statistics.median(timed(step_alone, args.repeat))
    res["loader"] = {}
    for sname, skw in shuffles.items():
        for mname, mkw in modes.items():
            t = statistics.median(timed(passes({**skw, **mkw}, False), args.repeat))
            ts = statistics.median(timed(passes({**skw, **mkw}, True), args.repeat)) if "cuda" in mname else None
            key = f"{sname} | {mname}"
            res["loader"][key] = {"rows_per_s": n * epochs / t, "gbps": bytes_per_batch * n_batches / t / 1e9,
                                  "with_step_s": ts}
            print(f"{key:<52} {n * epochs / t / 1e6:7.2f} M rows/s"
                  + (f"  with step {ts:.3f} s (step alone {res['step_alone_s']:.3f} s)" if ts else ""), flush=True)
    if dlrm is not None:
        def dlrm_pass(step: bool):
            def go():
                for _ in range(epochs):
                    for num, cat, click in dlrm():
                        if step:
                            busy(torch, work, reps)
                            checksums(torch, {"n": num, "c": cat, "l": click})
                torch.cuda.synchronize()
            return go
        t = statistics.median(timed(dlrm_pass(False), args.repeat))
        ts = statistics.median(timed(dlrm_pass(True), args.repeat))
        res["loader"]["sequential | NVIDIA DLRM ParametricDataset + prefetcher"] = {
            "rows_per_s": n * epochs / t, "with_step_s": ts}
        print(f"{'sequential | NVIDIA DLRM ParametricDataset':<52} {n * epochs / t / 1e6:7.2f} M rows/s"
              f"  with step {ts:.3f} s", flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--rows", type=int, default=150_000)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--workdir", type=Path, default=Path("/tmp/prepflow-bench-loader-cuda"))
    c = sub.add_parser("check")
    c.add_argument("--artifact", required=True)
    c.add_argument("--dlrm", help="the dlrm package folder of NVIDIA's PyTorch/Recommendation/DLRM")
    c.add_argument("--batch-size", type=int, default=32_768)
    c.add_argument("--epochs", type=int, default=8)
    c.add_argument("--repeat", type=int, default=3)
    c.add_argument("--step-ms", type=float, default=2.0)
    c.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "build":
        build(args.rows, args.out, args.workdir)
        return 0
    try:
        res = check(args)
    except Failed as exc:
        print(f"loader_cuda: FAILED: {exc}", file=sys.stderr)
        return 1
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
