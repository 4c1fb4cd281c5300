"""Settings for a ``prepflow`` CLI process, a batch job: only the CLI applies them, never the library
functions (tasks/, storage/) another program imports.

``tune_malloc``: glibc keeps freed memory for the next stage. glibc serves large blocks (above a
threshold that starts at 128 KiB and only grows once such blocks are freed) with fresh ``mmap``s and
gives them back on ``free``; it also trims the heap's free top above 128 KiB. A stage's column arrays
(1-30 MB each) are freed at the end of the stage, so the next stage maps and page-faults the same amount
again. On this machine's VM a page fault is expensive: a fresh ``prepflow run`` of the 336k-row flights
table took 91,000-95,000 minor faults in its stages against 33,000-35,000 with the settings below, and
0.2-0.3 s less system time (benchmarks/RESULTS.md). A warm process reaches about the same state by
itself (glibc raises the threshold as big blocks are freed); this sets it from the start.

The settings: blocks up to 32 MiB (glibc's own ceiling for the dynamic threshold) come from the heap,
and up to 128 MiB of free heap top is kept. Freed memory is reused by later allocations, so the peak
RSS of a run moves little (measured in benchmarks/RESULTS.md at 3.4M rows); the process ends after the
run anyway (Dask sets ``MALLOC_TRIM_THRESHOLD_`` for its workers for the same reason).

Left alone when the user set glibc's own knobs (``GLIBC_TUNABLES`` with ``glibc.malloc``, or
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``), or with ``PREPFLOW_MALLOC_TUNING=off``; a
libc without ``mallopt`` (musl, macOS) is left alone too.

``freeze_imports``: the ~160,000 objects that importing Prefect, pandas, pyarrow and Dask creates live
until the process ends, yet Python's cyclic garbage collector walks them all in every full collection:
one such collection (~0.12 s) fell inside the stages of a 336k-row ``prepflow run``. ``gc.freeze()``
after the imports moves them out of the collector's sight (as CPython's docs suggest for long-lived
start-up objects); objects made later are collected as before.
"""

from __future__ import annotations

import ctypes
import gc
import os

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 128 << 20


def user_configured() -> bool:
    return (os.environ.get("PREPFLOW_MALLOC_TUNING", "").lower() in ("off", "0", "false", "no")
            or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")
            or any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")))


def tune_malloc() -> bool:
    """Apply the settings to this process; True if glibc took them."""
    if user_configured():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def freeze_imports() -> None:
    """Exclude every object alive now (the imported modules' objects) from later garbage collections."""
    gc.collect()  # what is garbage already goes first, rather than staying frozen
    gc.freeze()
