"""CPU seconds of ingest's CSV read (tasks.ingest.stage.read_batches + write_parts) on the flights-like table of
benchmarks/tabular.py, for the code of the repository in the working directory (so a worktree of an older
commit can be measured with this same script).

    cd REPO && python /path/to/benchmarks/csv_ingest.py DATA.csv [ROWS]   # writes DATA.csv first if missing

Prints one line: rows, the read's CPU seconds (user+sys of this process, all threads) and wall seconds.
Compare two commits side by side with farm-bench (whole-process CPU, alternated runs), e.g.
    farm-bench -n 5 --timeout 900 -- sh -c 'cd /work/main && exec .venv/bin/python benchmarks/csv_ingest.py F' \
        --vs "sh -c 'cd /tmp/base && exec /work/main/.venv/bin/python /work/main/benchmarks/csv_ingest.py F'"
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from pathlib import Path


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    sys.path.insert(0, os.getcwd())  # the repository under test
    path = Path(sys.argv[1])
    if not path.exists():
        sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
        from benchmarks.tabular import generate

        generate(int(sys.argv[2]) if len(sys.argv) > 2 else 3_400_000, path)
    from benchmarks.tabular import CATS, FLOATS, INTS, LABEL
    from tasks.ingest import spec as ingest_spec
    from tasks.ingest import stage as ingest

    columns = {**{c: "float64" for c in [*INTS, *FLOATS, LABEL]}, **{c: "string" for c in CATS}}
    spec = ingest_spec.IngestSpec(columns=columns, format="csv")
    with tempfile.TemporaryDirectory(prefix="csv-ingest-") as tmp:
        c0, w0 = cpu(), time.perf_counter()
        rows = ingest_spec.write_parts(ingest.read_batches(str(path), spec), spec, Path(tmp) / "data", str(path))
        c1, w1 = cpu(), time.perf_counter()
    print(f"rows {rows} cpu_s {c1 - c0:.3f} wall_s {w1 - w0:.3f}")


if __name__ == "__main__":
    main()
