"""``.npy`` files read safely from many threads at once.

``numpy.load`` parses an ``.npy`` header with ``ast.literal_eval``, and CPython 3.11's parser is not
thread-safe: two Dask worker threads loading ``.npy`` files at the same moment can fail with
``SystemError: AST constructor recursion depth mismatch`` (CPython issue gh-106905, fixed in later
releases). ``load`` parses the header under one lock per process and reads (or memory-maps) the data
outside it, with numpy's public ``numpy.lib.format`` header readers.

The header is checked before anything is allocated or mapped: its dtype must have a size (not ``V0`` or
``<U0``), its shape and dtype must give exactly the file's size (a header claiming more rows than the file
holds, or a file cut short), and, when the caller knows them, ``rows`` (the manifest's row count of the
split) and ``row_shape`` (``feature_spec.yaml``'s); a mismatch is one ``IntegrityError`` naming the file and
the feature. ``check_file`` does the same checks reading the header only.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from core.errors import IntegrityError

_HEADER_LOCK = threading.Lock()


def load(path: str | Path, mmap_mode: str | None = None, rows: int | None = None,
         row_shape: list | tuple | None = None, feature: str | None = None) -> np.ndarray:
    """``np.load(path, mmap_mode=mmap_mode)`` for a plain (not pickled) ``.npy`` array, its header checked
    against the file's size (and ``rows``, ``row_shape`` when given: see the module docstring)."""
    label = f"{path}" + (f" (feature '{feature}')" if feature else "")
    with open(path, "rb") as fh:
        shape, fortran_order, dtype = _read_header(fh, label)
        offset = fh.tell()
        order = "F" if fortran_order else "C"
        check_header(label, shape, dtype, os.fstat(fh.fileno()).st_size - offset, rows, row_shape)
        count = math.prod(shape)
        if mmap_mode is not None:
            if count == 0:  # numpy cannot map an empty file region
                return np.empty(shape, dtype=dtype, order=order)
            return np.memmap(fh, dtype=dtype, mode=mmap_mode, offset=offset, shape=shape, order=order)
        data = np.fromfile(fh, dtype=dtype, count=count)
    return data.reshape(shape, order=order)


def check_file(path: str | Path, rows: int | None = None, row_shape: list | tuple | None = None,
               feature: str | None = None) -> tuple:
    """The shape an ``.npy`` file's header declares, checked as ``load`` checks it (its dtype, its size, ``rows``
    and ``row_shape``), reading the header only."""
    label = f"{path}" + (f" (feature '{feature}')" if feature else "")
    with open(path, "rb") as fh:
        shape, _, dtype = _read_header(fh, label)
        check_header(label, shape, dtype, os.fstat(fh.fileno()).st_size - fh.tell(), rows, row_shape)
    return shape


def _read_header(fh, label: str) -> tuple:
    with _HEADER_LOCK:
        try:
            version = npy_format.read_magic(fh)
            read_header = npy_format.read_array_header_1_0 if version == (1, 0) \
                else npy_format.read_array_header_2_0
            return read_header(fh)
        except ValueError as exc:
            raise IntegrityError(f"{label}: not a readable .npy header ({exc})") from None


def check_header(label: str, shape: tuple, dtype: np.dtype, data_bytes: int, rows: int | None = None,
                 row_shape: list | tuple | None = None) -> None:
    """An ``.npy`` header's shape agrees with the caller's row count and row shape and with the bytes after it."""
    if dtype.hasobject:
        raise IntegrityError(f"{label}: the header declares Python objects ({dtype}); refused")
    if dtype.itemsize <= 0:  # a zero-byte dtype would let any shape match an empty file
        raise IntegrityError(f"{label}: the header declares {dtype!s}, a dtype of {dtype.itemsize} bytes per value; "
                             f"refused")
    if rows is not None and (not shape or shape[0] != rows):
        raise IntegrityError(f"{label}: the header declares {shape[0] if shape else 'no'} rows, the manifest "
                             f"{rows}; the artifact is damaged or was edited")
    if row_shape is not None and shape and list(shape[1:]) != [int(d) for d in row_shape]:
        raise IntegrityError(f"{label}: the header declares rows of shape {list(shape[1:])}, feature_spec.yaml "
                             f"{list(row_shape)}; the artifact is damaged or was edited")
    expected = math.prod(shape) * dtype.itemsize
    if expected != data_bytes:
        raise IntegrityError(f"{label}: the header declares shape {list(shape)} of {dtype} ({expected} bytes), the "
                             f"file holds {data_bytes}; the artifact is damaged or was edited")


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
