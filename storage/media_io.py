"""Media bytes without codecs: where a value's bytes live, how they are read, hashed and cached.

The lowest media layer (``storage.media_image``/``storage.media_audio`` build on it, ``storage.media``
on those): sources, decode threads, ``MediaError`` and the content-addressed cache of in-memory
values. It knows no codec: ``decode_source`` takes any object with ``decode(bytes)``.

Sources. A raw value is a path (absolute, relative to the dataset's folder, or an fsspec URL) or
``media-cache:<feature>/<name>``, a file prepflow wrote for an in-memory value under
``<cache_dir>/media/``. ``resolve`` turns it into an absolute path or URL. With ``media_root``,
relative paths resolve against that folder and every path must stay inside it (symlinks
resolved); one that escapes fails like an unreadable file.

Failures. ``MediaError`` carries the reason (missing file, truncated or corrupt data, zero-length
audio, a decompression bomb, a path outside ``media_root``); callers apply ``on_decode_error``.

Threads. ``ordered_map`` runs a function over items in a thread pool with at most ``window``
results in flight and yields them in order: memory is O(window), not O(dataset). Pillow's
decoders and resize, soundfile, numpy's FFT and hashlib release the GIL.

Temporary files. Media cache files (``<cache_dir>/media/<feature>/<name>``, ``store_file``) are
written under private names, then renamed into place; a run killed mid-write leaves them behind.
Each is locked by its writer while it exists (``storage.tmpdirs``), so the next writer into the same
folder removes exactly the dead writers' (``sweep_temps``; ``TEMP_NAME``, which also matches the
memmap temporaries of ``storage.media``), never a live writer's and never a finished file (whose name
never starts with a dot). ``store_file`` writes many small files (one per in-memory value), for which
a lock file each costs about as much as decoding a small picture, so inside ``store_batch()`` (ingest
of a DataFrame) its temporary files of a folder share one locked ``TempFolder`` ``.tmp-<hex>/`` for the whole
batch; outside one each is a ``TempFile``. The first write of this process into a feature folder
sweeps it (one listing).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import threading
import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import fsspec
import numpy as np

from storage.fs import common_folder, storage_options
from storage.tmpdirs import TempFile, TempFolder, first_time, sweep

CACHE_REF = "media-cache:"
MEDIA_DIR = "media"  # <cache_dir>/media/<feature>/ (in-memory values), <output>/media/ (memmaps)
# Temporary paths of the media cache and of memmaps (see the module docstring): ``.<name>.<hex>.tmp``
# (a file or memmap being written), ``.<name>.done.<hex>`` (a memmap's sentinel) and ``.tmp-<hex>``
# (a batch's staging folder). A finished file never starts with a dot (content hashes,
# ``<feature>-<split>-<hash>.npy``).
STAGING_PREFIX = ".tmp-"
TEMP_NAME = re.compile(r"\.(?:tmp-[0-9a-f]+|.+\.(?:[0-9a-f]+\.tmp|done\.[0-9a-f]+))")


class MediaError(Exception):
    """A media value that cannot be turned into a tensor; ``str(exc)`` is the reason."""


def is_url(path: str) -> bool:
    return "://" in str(path)


def default_threads() -> int:
    """Decode threads: ``PREPFLOW_MEDIA_THREADS``, else the usable CPU count plus one (I/O overlaps)."""
    env = os.environ.get("PREPFLOW_MEDIA_THREADS")
    if env:
        return max(1, int(env))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cpus + 1


def ordered_map(fn: Callable[[Any], Any], items: Iterable, threads: int, window: int | None = None,
                chunk: int = 1) -> Iterator:
    """``fn(item)`` for each item in a pool of ``threads``, yielded in order, at most ``window``
    (default ``4 * threads``) tasks submitted but not yet consumed; a task handles ``chunk`` items
    (fewer futures when each item is cheap)."""
    window = window or 4 * threads
    if threads <= 1:
        yield from map(fn, items)
        return
    if chunk > 1:
        def run_chunk(group: list) -> list:
            return [fn(item) for item in group]

        for results in ordered_map(run_chunk, _chunks(items, chunk), threads, window):
            yield from results
        return
    pool = ThreadPoolExecutor(threads, thread_name_prefix="prepflow-media")
    pending: deque = deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for fut in pending:
            fut.cancel()
        pool.shutdown(wait=True)


def _chunks(items: Iterable, size: int) -> Iterator[list]:
    group: list = []
    for item in items:
        group.append(item)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


# ---- sources -------------------------------------------------------------------------------------

def _join(base: str, rel: str) -> str:
    if is_url(base):
        scheme, rest = base.split("://", 1)
        return f"{scheme}://{posixpath.normpath(posixpath.join(rest, rel))}"
    return os.path.normpath(os.path.join(base, rel))


def dataset_dir(dataset: Any) -> str:
    """The folder relative media paths resolve against: the dataset file's folder (a URL's parent
    for URLs), the working directory for an in-memory DataFrame."""
    if isinstance(dataset, (list, tuple)):  # a list of files: the deepest folder holding them all
        return common_folder([str(p) for p in dataset])
    if not isinstance(dataset, (str, os.PathLike)):
        return os.getcwd()
    text = str(dataset)
    if text.startswith("file://"):
        text = text[len("file://"):]
    if is_url(text):
        scheme, rest = text.split("://", 1)
        return f"{scheme}://{posixpath.dirname(rest.rstrip('/'))}"
    return os.path.dirname(os.path.abspath(text))


def root_dir(media_root: str | None, base_dir: str) -> str | None:
    if media_root is None:
        return None
    root = media_root[len("file://"):] if media_root.startswith("file://") else media_root
    if is_url(root) or os.path.isabs(root):
        return root.rstrip("/") or "/"
    return _join(base_dir, root)


def resolve(raw: str, base_dir: str, media_root: str | None = None, cache_dir: str | None = None) -> str:
    """A raw value -> an absolute local path or a URL (see the module docstring)."""
    if raw.startswith(CACHE_REF):
        rel = raw[len(CACHE_REF):]
        if cache_dir is None or rel.startswith("/") or ".." in rel.split("/"):
            raise MediaError(f"not a valid media cache reference (cache folder: {cache_dir})")
        return os.path.join(os.path.abspath(cache_dir), MEDIA_DIR, rel)
    text = raw[len("file://"):] if raw.startswith("file://") else raw
    if not text.strip():
        raise MediaError("empty path")
    root = root_dir(media_root, base_dir)
    if is_url(text):
        if root is not None:
            scheme, rest = text.split("://", 1)
            text = f"{scheme}://{posixpath.normpath(rest)}"
            if not is_url(root) or not text.startswith(root.rstrip("/") + "/"):
                raise MediaError(f"the URL is outside media_root {root}")
        return text
    if os.path.isabs(text):
        path = os.path.normpath(text)
    else:
        path = _join(root if root is not None else base_dir, text)
    if is_url(path):  # a relative path under a URL dataset folder or media_root
        if root is not None and not path.startswith(root.rstrip("/") + "/"):
            raise MediaError(f"the path escapes media_root {root}")
        return path
    if root is not None:
        if is_url(root):
            raise MediaError(f"a local path is outside media_root {root}")
        real, real_root = os.path.realpath(path), os.path.realpath(root)
        if os.path.commonpath([real, real_root]) != real_root:
            raise MediaError(f"the path resolves to {real}, outside media_root {real_root}")
    return path


def read_stamped(source: str) -> tuple[bytes, tuple | None]:
    """All bytes of a local path or URL, and for a local file its ``(size, mtime_ns, inode)`` as read;
    a missing or unreadable file is a ``MediaError``."""
    try:
        if is_url(source):
            opts = storage_options() if source.startswith(("s3://", "s3a://")) else {}
            with fsspec.open(source, "rb", **opts) as fh:
                return fh.read(), None
        with open(source, "rb") as fh:
            st = os.fstat(fh.fileno())
            return fh.read(), (st.st_size, st.st_mtime_ns, st.st_ino)
    except FileNotFoundError:
        raise MediaError("file not found") from None
    except IsADirectoryError:
        raise MediaError("is a directory, not a file") from None
    except PermissionError:
        raise MediaError("permission denied") from None
    except OSError as exc:
        raise MediaError(f"cannot read ({exc})") from None


def read_bytes(source: str) -> bytes:
    return read_stamped(source)[0]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


CHANGED = "the file changed since it was hashed ({}); run prepflow again"


def decode_source(codec, source: str, sha: str | None = None, stamp: tuple | None = None) -> tuple[np.ndarray, int]:
    """Read ``source``, check it is the file that was hashed, decode it: ``(tensor, length)``.

    ``stamp`` (size, mtime_ns, inode of a local file when it was hashed moments ago) is the cheap
    check; otherwise ``sha`` (when given) is compared with the bytes' sha256."""
    data, now = read_stamped(source)
    if stamp is not None and now is not None:
        if tuple(now) != tuple(stamp):
            raise MediaError(CHANGED.format("size, time or inode differ"))
    elif sha is not None and sha256_bytes(data) != sha:
        raise MediaError(CHANGED.format("sha256 differs"))
    return codec.decode(data)


def sweep_temps(folder: str | Path) -> list[str]:
    """Remove the temporary files (``TEMP_NAME``) that killed writers left in a media folder; their names."""
    return sweep(folder, TEMP_NAME)



# ---- in-memory values -> the content-addressed file cache ---------------------------------------

def _sweep_once(folder: Path) -> None:
    if first_time(folder):  # once per process and folder: a listing of what may be many files
        sweep_temps(folder)  # what killed writers left (a live writer's are locked, so kept)


class _Batch:
    """The staging folders of one ``store_batch``: one locked ``TempFolder`` per media folder."""

    def __init__(self):
        self.folders: dict[tuple[str, str], TempFolder] = {}  # (cache_dir, feature) -> staging folder
        self.lock = threading.Lock()

    def staging(self, key: tuple[str, str], folder: Path) -> Path:
        staged = self.folders.get(key)  # no lock to read: entries are only ever added
        if staged is None:
            with self.lock:
                staged = self.folders.get(key)
                if staged is None:
                    _sweep_once(folder)
                    staged = self.folders[key] = TempFolder(folder, STAGING_PREFIX)
        return staged.path


_BATCH: ContextVar[_Batch | None] = ContextVar("prepflow_media_batch", default=None)


@contextmanager
def store_batch() -> Iterator[None]:
    """Within it (in this thread), ``store_file`` writes its temporary files into one locked staging
    folder per media folder instead of locking each file; they are removed and unlocked at the end."""
    batch = _Batch()
    token = _BATCH.set(batch)
    try:
        yield
    finally:
        _BATCH.reset(token)
        for staged in batch.folders.values():
            staged.close()


def store_file(cache_dir: str | Path, feature: str, name: str, write: Callable[[Path], None]) -> str:
    """``<cache_dir>/media/<feature>/<name>`` written once by ``write(tmp_path)`` (atomically); returns its
    ``media-cache:`` reference. An existing file is left alone: rerunning writes nothing. The temporary
    file is locked (in its ``store_batch``'s staging folder, else a ``TempFile``); the first write of
    this process into a feature folder sweeps it."""
    folder = Path(cache_dir) / MEDIA_DIR / feature
    path = folder / name
    if path.exists():
        return f"{CACHE_REF}{feature}/{name}"
    folder.mkdir(parents=True, exist_ok=True)
    batch = _BATCH.get()
    if batch is None:
        _sweep_once(folder)
        with TempFile(folder, f".{name}.", ".tmp") as tmp:  # removed, then unlocked, unless renamed
            write(tmp)
            os.replace(tmp, path)
    else:
        tmp = batch.staging((str(cache_dir), feature), folder) / f"{name}.{uuid.uuid4().hex[:8]}"
        try:
            write(tmp)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return f"{CACHE_REF}{feature}/{name}"


def typed_digest(kind: str, *parts: bytes | str) -> str:
    """sha256 of a value's type tag and content parts, for naming cached in-memory values."""
    h = hashlib.sha256(kind.encode() + b"\0")
    for p in parts:
        data = p.encode() if isinstance(p, str) else p
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()
