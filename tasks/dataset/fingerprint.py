"""The dataset fingerprint: a hash of the dataset's bytes, computed by Dask tasks when the data is large.

The fingerprint is the root of every cache key and of the artifact id, so it must depend on the bytes
and on nothing else: not on the file's name or place (a moved file keeps its cache entries), nor on
where it was computed.

* A file of at most ``BLOCK`` bytes: the sha256 of its bytes (what ``sha256sum`` prints).
* A larger file: the sha256 of ``BLOCK_TAG`` followed by the sha256 digests of its consecutive
  ``BLOCK``-byte blocks (the last one shorter). Each block is hashed by its own Dask task, so a large
  file is hashed by the workers of a cluster in parallel, not by the flow's process (one sequential
  sha256 of a terabyte file would keep the flow's process busy for many minutes).
* A folder or glob: the hash of ``[relative name, file fingerprint]`` for every file, in name order
  (``files``: each file's own fingerprint, the root of its per-file cache entries, ``tasks.ingest.files``).
  Within one process a file's fingerprint is kept by its stamp (a local file's path, size, times and inode; a
  remote object's URL, size, ETag and time), so the CLI's check for a published artifact and the ingest stage
  hash its bytes once; across runs by the stage cache's ``file_stamps`` (``tasks.dataset.file_stamps``), so
  a run after a file was added to a folder reads only that file's bytes.

The blocks go to a cluster's workers only for the formats the workers read anyway (Parquet, CSV/TSV); a
JSON, Feather or Excel file is read by the flow's process, may be on its own disk, and is hashed on its
threads.

The block size is part of the definition: changing it changes every large dataset's fingerprint.
"""

from __future__ import annotations

import hashlib
import os

from dask import delayed

from core.errors import DataError
from storage.fs import filesystem, is_url, open_input, strip_file_scheme
from storage.hashing import hash_stream, stable_hash
from tasks.dataset import file_stamps
from tasks.dataset.file_stamps import FileStamps
from tasks.dataset.files import base_of, dataset_files, is_multi, readable
from tasks.dataset.info import detect_format
from tasks.runtime.dask_run import compute

BLOCK = 64 << 20  # bytes per hashing task; the CSV reader's byte ranges are this size too
BLOCK_TAG = b"prepflow-sha256-blocks-64MiB\n"
CHUNK = 1 << 20  # read size inside a block
WORKER_FORMATS = ("parquet", "csv", "tsv")  # what ingest's Dask tasks read (``read_by_workers``)


def size_of(path: str) -> int:
    """The size in bytes of one dataset file (a local path or a URL), or a DataError naming it."""
    try:
        if is_url(path) and not path.startswith("file://"):
            return int(filesystem(path).size(path))
        return os.path.getsize(strip_file_scheme(path))
    except FileNotFoundError:
        raise DataError(f"{path}: dataset file not found") from None
    except Exception as exc:  # as storage.fs.open_input: network and credential errors of fsspec's backends
        raise DataError(f"{path}: cannot open ({type(exc).__name__}: {exc})") from exc


def blocks(size: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` byte ranges a file of ``size`` bytes is hashed in (one, empty, for an empty file)."""
    return [(start, min(start + BLOCK, size)) for start in range(0, size, BLOCK)] or [(0, 0)]


def hash_block(path: str, start: int, end: int) -> bytes:
    """The sha256 digest of bytes ``[start, end)`` of ``path``."""
    digest = hashlib.sha256()
    with open_input(path) as fh:
        fh.seek(start)
        left = end - start
        while left > 0:
            chunk = fh.read(min(CHUNK, left))
            if not chunk:
                raise DataError(f"{path}: the file ended at byte {end - left}, before byte {end} (it changed "
                                "while it was read?)")
            digest.update(chunk)
            left -= len(chunk)
    return digest.digest()


def combine(digests: list[bytes]) -> str:
    """A file's fingerprint from its blocks' digests (``blocks`` order)."""
    if len(digests) == 1:
        return digests[0].hex()
    return hashlib.sha256(BLOCK_TAG + b"".join(digests)).hexdigest()


def needs_tasks(path) -> bool:
    """Whether ``fingerprint`` runs Dask tasks: a folder, a glob, or a file larger than one block."""
    return is_multi(path) or size_of(str(path)) > BLOCK


def read_by_workers(path) -> bool:
    """Whether ingest's Dask tasks read the dataset (Parquet, CSV/TSV: ``tasks.ingest.parquet``,
    ``tasks.ingest.csv_ranges``), so that a cluster's workers see its files. The other formats are read by the flow's
    process and may sit on its own disk."""
    try:
        return detect_format(path) in WORKER_FORMATS
    except DataError:  # an unknown extension: ingest names it
        return False


def fingerprint(path, stamps: FileStamps | None = None) -> str:
    """The dataset's fingerprint (module doc). A single file of one block is hashed in this process; anything
    larger by Dask tasks: on the cluster's workers when a distributed Client is active and the workers read
    the dataset (``read_by_workers``), else on this process's threads. ``stamps``: the fingerprints of
    files remembered by earlier runs (``tasks.dataset.file_stamps``)."""
    if not is_multi(path):
        path = str(path)
        size = size_of(path)
        if size <= BLOCK:
            with open_input(path) as fh:
                return hash_stream(fh)
        return _file_digests([path], [size], read_by_workers(path), stamps)[0]
    return stable_hash([[name, digest] for name, _f, digest in files(path, stamps)], length=64)


def files(path, stamps: FileStamps | None = None) -> list[tuple[str, str, str]]:
    """A folder's, glob's or list's files in name order as ``(name relative to the folder, path, fingerprint)``.
    ``stamps``: the fingerprints remembered by earlier runs (``tasks.dataset.file_stamps``)."""
    found = dataset_files(path)
    base = base_of(path)
    names = [os.path.relpath(strip_file_scheme(f), base).replace(os.sep, "/") for f in found]
    digests = _file_digests(found, [size_of(f) for f in found], read_by_workers(path), stamps)
    return list(zip(names, found, digests, strict=True))


_KNOWN: dict[tuple, str] = {}  # stamp -> fingerprint, in this process


def _stamp(path: str) -> tuple | None:
    """What the file system says of a file (``tasks.dataset.file_stamps``): a local file's path, size, times and
    inode; a remote object's URL, size, ETag and modification time. None: nothing that tells a change (a
    remote store without ETags or times)."""
    if is_url(path) and not path.startswith("file://"):
        try:  # the client's listing cache was emptied when the files were listed (``dataset_files``)
            info = filesystem(path).info(path)
        except Exception:  # noqa: BLE001  (a store that cannot say: the object is hashed)
            return None
        tag = info.get("ETag") or info.get("etag") or info.get("VersionId")
        modified = info.get("LastModified") or info.get("mtime") or info.get("last_modified")
        if tag is None and modified is None:
            return None
        return "remote", path, int(info.get("size") or 0), str(tag), str(modified), BLOCK
    st = os.stat(strip_file_scheme(path))
    return ("local", os.path.abspath(strip_file_scheme(path)), st.st_size, st.st_mtime_ns, st.st_ctime_ns,
            st.st_ino, BLOCK)


def _file_digests(files: list[str], sizes: list[int], on_workers: bool, stamps: FileStamps | None = None
                  ) -> list[str]:
    """Each file's fingerprint: every block of every file not known in this process (``_KNOWN``) nor
    remembered by an earlier run (``stamps``) hashed by one Dask task (``on_workers``: on the active
    scheduler, else on this process's threads)."""
    stamped = [_stamp(f) for f in files]
    digests: list[str | None] = [_KNOWN.get(st) if st is not None else None for st in stamped]
    # remembered across runs: a local file only once its times have settled (``file_stamps.SETTLE_NS``)
    durable = [st is not None and stamps is not None and (st[0] == "remote" or file_stamps.settled(st[3], st[4]))
               for st in stamped]
    digests = [stamps.get(list(st)) if d is None and keep else d
               for d, st, keep in zip(digests, stamped, durable, strict=True)]
    plan = [(i, blocks(sizes[i])) for i, d in enumerate(digests) if d is None]
    tasks = [delayed(hash_block, pure=False)(readable(files[i]), start, end) for i, ranges in plan
             for start, end in ranges]
    parts = iter(compute(tasks, here=not on_workers)) if tasks else iter(())
    for i, ranges in plan:
        digests[i] = combine([next(parts) for _ in ranges])
        if durable[i]:
            stamps.put(list(stamped[i]), digests[i])
    for st, digest in zip(stamped, digests, strict=True):
        if st is not None:
            _KNOWN[st] = digest
    return digests
