"""flows.process_tuning: a freed stage's memory is reused by the next one instead of faulted in again; objects
alive after the imports are left out of garbage collections."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

# Faults of touching a 3 MiB array (below numpy's 4 MiB huge-page threshold: 768 pages of 4 KiB), twice
# (allocated, filled, freed each time), in a fresh process.
PROBE = """
import resource, sys
import numpy as np
sys.path.insert(0, {root!r})
from flows import process_tuning
tuned = process_tuning.tune_malloc() if sys.argv[1] == "tune" else False
faults = []
for _ in range(2):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a = np.ones(3 << 17)
    del a
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(tuned, *faults)
"""


def probe(mode: str, **env: str) -> tuple[bool, int, int]:
    # without the test process's own malloc settings (a Dask cluster test sets MALLOC_TRIM_THRESHOLD_ here)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES", "PREPFLOW_MALLOC_TUNING")}
    out = subprocess.run([sys.executable, "-c", PROBE.format(root=ROOT), mode], capture_output=True, text=True,
                         check=True, env={**base, **env}).stdout.split()
    return out[0] == "True", int(out[1]), int(out[2])


@glibc_only
def test_a_freed_block_is_reused_without_faulting_again():
    tuned, first, second = probe("tune")
    assert tuned
    assert first > 500 and second < first // 10  # touched once, then reused
    untuned, first, second = probe("plain")
    assert not untuned and second > 500  # glibc's default: mapped and unmapped each time


@glibc_only
@pytest.mark.parametrize("env", [{"PREPFLOW_MALLOC_TUNING": "off"}, {"MALLOC_TRIM_THRESHOLD_": "0"},
                                 {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}])
def test_the_users_own_settings_win(env):
    tuned, _first, second = probe("tune", **env)
    assert not tuned and second > 500



def test_imports_are_frozen_out_of_garbage_collection():
    code = ("import gc, sys; sys.path.insert(0, %r); import pandas; from flows import process_tuning; "
            "before = gc.get_freeze_count(); process_tuning.freeze_imports(); "
            "import collections; x = [collections.OrderedDict() for _ in range(10)]; "
            "print(before, gc.get_freeze_count(), all(gc.is_tracked(o) for o in x))" % ROOT)
    before, frozen, tracked = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                             check=True).stdout.split()
    assert before == "0" and int(frozen) > 10_000 and tracked == "True"
