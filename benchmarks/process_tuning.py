"""What the removed process tuning of the CLI gave (issue 18): one in-process ``run_pipeline`` of the
3.4M-row flights table (``benchmarks/tabular.py``'s generator and config, no gates), with or without
``--tuned``: glibc ``mallopt`` (M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 128 MiB) and ``gc.freeze()``
after the imports, the calls ``flows/process_tuning.py`` made before it was removed. Same code, same
data either way, so a pair run alternately compares exactly the tuning. Prints one JSON line: CPU
seconds (user + sys of the process, ``resource.getrusage``), minor faults and peak RSS.

    python benchmarks/process_tuning.py --data /tmp/flights_3367760.csv [--tuned] [--generate]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.tabular import config, generate  # noqa: E402
from storage.cache import StageCache  # noqa: E402
from tasks.config.loader import parse_config  # noqa: E402
from tasks.graph import run_pipeline  # noqa: E402
from tasks.runtime.context import RunContext  # noqa: E402

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc malloc.h


def tune() -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
    libc.mallopt(M_TRIM_THRESHOLD, 128 << 20)
    gc.freeze()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--rows", type=int, default=3_367_760)
    ap.add_argument("--tuned", action="store_true")
    ap.add_argument("--generate", action="store_true", help="write the table to --data and exit")
    args = ap.parse_args()
    if args.generate:
        generate(args.rows, args.data)
        return
    if args.tuned:
        tune()
    with tempfile.TemporaryDirectory() as tmp:
        ctx = RunContext(parse_config(config(gates=False)), str(args.data), StageCache(Path(tmp) / "cache"),
                         None, str(Path(tmp) / "out"))
        run_pipeline(ctx)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"tuned": args.tuned, "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
                      "user_s": round(ru.ru_utime, 2), "sys_s": round(ru.ru_stime, 2),
                      "minor_faults": ru.ru_minflt, "peak_rss_mb": round(ru.ru_maxrss / 1024)}))


if __name__ == "__main__":
    main()
