"""storage.npy.load reads what np.save wrote, in every layout, from many threads at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from storage import npy


@pytest.mark.parametrize("array", [np.arange(12, dtype=np.int64).reshape(3, 4), np.asfortranarray(np.ones((3, 2))),
                                   np.array([], dtype=np.int8), np.array([True, False]), np.float32(2.5) * np.ones(5)])
@pytest.mark.parametrize("mmap_mode", [None, "r"])
def test_load_equals_np_load(tmp_path, array, mmap_mode):
    path = tmp_path / "a.npy"
    np.save(path, array)
    got = npy.load(path, mmap_mode=mmap_mode)
    want = np.load(path, mmap_mode=mmap_mode)
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def test_many_threads_load_at_once(tmp_path):
    paths = []
    for i in range(16):
        paths.append(tmp_path / f"{i}.npy")
        np.save(paths[-1], np.arange(i, i + 100, dtype=np.int64))
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda p: npy.load(p).sum(), paths * 50))
    assert results == [np.arange(i, i + 100).sum() for i in range(16)] * 50
