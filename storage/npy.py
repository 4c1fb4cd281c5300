"""``.npy`` files read safely from many threads at once.

``numpy.load`` parses an ``.npy`` header with ``ast.literal_eval``, and CPython 3.11's parser is not
thread-safe: two Dask worker threads loading ``.npy`` files at the same moment can fail with
``SystemError: AST constructor recursion depth mismatch`` (CPython issue gh-106905, fixed in later
releases). ``load`` parses the header under one lock per process and reads (or memory-maps) the data
outside it, with numpy's public ``numpy.lib.format`` header readers.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

_HEADER_LOCK = threading.Lock()


def load(path: str | Path, mmap_mode: str | None = None) -> np.ndarray:
    """``np.load(path, mmap_mode=mmap_mode)`` for a plain (not pickled) ``.npy`` array."""
    with open(path, "rb") as fh:
        with _HEADER_LOCK:
            version = npy_format.read_magic(fh)
            read_header = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
            shape, fortran_order, dtype = read_header(fh)
        offset = fh.tell()
        order = "F" if fortran_order else "C"
        count = int(np.prod(shape, dtype=np.int64))
        if mmap_mode is not None:
            if count == 0:  # numpy cannot map an empty file region
                return np.empty(shape, dtype=dtype, order=order)
            return np.memmap(fh, dtype=dtype, mode=mmap_mode, offset=offset, shape=shape, order=order)
        data = np.fromfile(fh, dtype=dtype, count=count)
    return data.reshape(shape, order=order)


class MappedArray:
    """An ``.npy`` file where it is used: indexing, ``len``, comparisons and ``np.asarray`` memory-map the
    file (in the process that does it); pickled, it is its path. So a stage that hands one to its Dask tasks
    (the split of every input row, the balance multiplicities) sends a path, not bytes per row, and the flow
    process reads it only where it asks for the array."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._array: np.ndarray | None = None

    def _load(self) -> np.ndarray:
        if self._array is None:
            self._array = load(self.path, mmap_mode="r")
        return self._array

    def __reduce__(self):
        return (MappedArray, (self.path,))

    def __len__(self) -> int:
        return len(self._load())

    def __getitem__(self, key):
        return self._load()[key]

    def __array__(self, dtype=None, copy=None):
        array = self._load()
        if copy:
            return np.array(array, dtype=dtype, copy=True)
        return array if dtype is None else array.astype(dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._load().shape

    @property
    def dtype(self) -> np.dtype:
        return self._load().dtype

    def __eq__(self, other):
        return self._load() == other

    def __ne__(self, other):
        return self._load() != other

    def __lt__(self, other):
        return self._load() < other

    def __le__(self, other):
        return self._load() <= other

    def __gt__(self, other):
        return self._load() > other

    def __ge__(self, other):
        return self._load() >= other

    __hash__ = None
