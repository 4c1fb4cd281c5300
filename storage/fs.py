"""Filesystem helpers over fsspec: local paths and URLs (s3://, file://, memory://) alike.

Failures are wrapped with the path in the message (Kedro style).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from contextlib import contextmanager
from typing import IO, Iterator

import fsspec

from core.errors import DataError


def is_url(path: str) -> bool:
    return "://" in str(path)


def strip_file_scheme(path: str) -> str:
    return path[len("file://"):] if str(path).startswith("file://") else str(path)


def common_folder(paths: list[str]) -> str:
    """The deepest folder holding every one of ``paths`` (local paths made absolute; URLs of one scheme keep
    it: ``s3://b/x/1.csv``, ``s3://b/y/2.csv`` -> ``s3://b``)."""
    if all(is_url(p) and not str(p).startswith("file://") for p in paths):
        scheme = str(paths[0]).split("://", 1)[0]
        rests = ["/" + str(p).split("://", 1)[1] for p in paths]
        return f"{scheme}://{posixpath.commonpath([posixpath.dirname(r) for r in rests]).lstrip('/')}"
    return os.path.commonpath([os.path.dirname(os.path.abspath(strip_file_scheme(p))) for p in paths])


def storage_options() -> dict:
    """S3 endpoint/credentials from the environment (AWS_* and S3_ENDPOINT_URL / AWS_ENDPOINT_URL)."""
    endpoint = os.environ.get("S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL")
    return {"client_kwargs": {"endpoint_url": endpoint}} if endpoint else {}


def filesystem(path: str):
    protocol = path.split("://", 1)[0] if is_url(path) else "file"
    opts = storage_options() if protocol in ("s3", "s3a") else {}
    return fsspec.filesystem(protocol, **opts)


@contextmanager
def open_input(path: str) -> Iterator[IO[bytes]]:
    """Open a local path or URL for binary reading, with a clear error if it cannot be."""
    try:
        if is_url(path) and not path.startswith("file://"):
            opts = storage_options() if path.startswith(("s3://", "s3a://")) else {}
            fh = fsspec.open(path, "rb", **opts).open()
        else:
            fh = open(strip_file_scheme(path), "rb")
    except FileNotFoundError:
        raise DataError(f"{path}: dataset file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory; pass a file") from None
    except Exception as exc:  # network/credential errors from fsspec backends
        raise DataError(f"{path}: cannot open ({type(exc).__name__}: {exc})") from exc
    try:
        yield fh
    finally:
        fh.close()


def write_at(path: str, data, offset: int) -> None:
    """Write ``data`` (a buffer: bytes, a contiguous array) into the existing local file ``path`` at byte
    ``offset``, leaving the rest of the file as it is: each Dask task of a parallel publish writes its own
    rows of a preallocated file this way."""
    view = memoryview(data).cast("B")
    fd = os.open(path, os.O_WRONLY)
    try:
        while view:
            written = os.pwrite(fd, view, offset)
            view, offset = view[written:], offset + written
    finally:
        os.close(fd)


class HashingWriter:
    """A binary writer that passes every byte on to ``fh`` and keeps their sha256 and count: a worker
    writes an object once, streaming, and describes it without reading it back."""

    def __init__(self, fh: IO[bytes]):
        self.fh = fh
        self.sha256 = hashlib.sha256()
        self.bytes = 0
        self.closed = False

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self.fh.write(view)
        self.sha256.update(view)
        self.bytes += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        pass  # the store's file uploads its parts as its buffer fills, and the rest at close

    def close(self) -> None:  # pyarrow closes its sink; the object is committed by ``open_output``
        self.closed = True

    def writable(self) -> bool:
        return True

    def description(self) -> dict:
        return {"sha256": self.sha256.hexdigest(), "bytes": self.bytes}


@contextmanager
def open_output(url: str) -> Iterator[HashingWriter]:
    """Write the object ``url`` (a whole object: an object store has no offset writes) through a
    ``HashingWriter``. The object is committed when the block ends without an error; on an error a
    pending multipart upload is aborted (what a store already holds under the name is no artifact
    file until a manifest lists it)."""
    fs = filesystem(url)
    try:
        fh = fs.open(url, "wb")
    except Exception as exc:
        raise DataError(f"{url}: cannot write ({type(exc).__name__}: {exc})") from exc
    try:
        yield HashingWriter(fh)
    except BaseException:
        discard = getattr(fh, "discard", None)
        if discard is not None:
            discard()
        if hasattr(fh, "_closed"):  # fsspec's buffered files: never committed, not even by their __del__
            fh.closed = True
        raise
    try:
        fh.close()
    except Exception as exc:
        raise DataError(f"{url}: cannot write ({type(exc).__name__}: {exc})") from exc
