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
