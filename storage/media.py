"""Media (images, audio): where a value's bytes live, how they are read, hashed and decoded.

Shared by the ``media_cache`` stage, the image/audio feature types and the loader. One ``Codec``
(``storage.media_image.ImageCodec``, ``storage.media_audio.AudioCodec``) turns a file's bytes
into a tensor wherever that happens, so the modes ``eager``, ``lazy`` and ``lazy_cached`` give
identical tensors.

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

Lazy columns. In the artifact, a ``lazy``/``lazy_cached`` media column holds an int64 slot into
its split's media table ``<split>/<feature>.media.parquet`` (``source``, ``sha256``, ``ok``,
``error``; the codec in the schema metadata ``prepflow.media``), listed in ``source_spec`` as a
chunk of type ``media``. ``MediaColumn`` gives the loader that column as an ``n x item`` array:
``lazy`` decodes a batch's sources in a thread pool (checking each file's sha256 against the
table, so a changed file is an error, never a silently different tensor); ``lazy_cached`` reads
the split's memmap ``<output>/media/<feature>-<split>-<hash>.npy``, building it first when its
``.done`` sentinel is missing. The hash in its name covers the codec and every slot's content
hash, so a changed source gets a new memmap instead of a stale one.

Temporary files. Media cache files (``<cache_dir>/media/<feature>/<name>``, ``store_file``) and
memmaps with their sentinels (``MemmapWriter``) are written under private names, then renamed into
place; a run killed mid-write leaves them behind. Each is locked by its writer while it exists
(``storage.tmpdirs``), so the next writer into the same folder removes exactly the dead writers'
(``sweep_temps``; ``TEMP_NAME``), never a live writer's and never a finished file (whose name never
starts with a dot). A memmap is a ``TempFile`` ``.<name>.<hex>.tmp``, its sentinel ``.<name>.done.<hex>``;
``MemmapWriter`` sweeps its folder at every build (a few files, written rarely). ``store_file`` writes
many small files (one per in-memory value), for which a lock file each costs about as much as decoding
them (+40 us a file on tmpfs, +0.2 ms on ext4, against ~35 us to decode a 32x32 PNG), so inside
``store_batch()`` (ingest of a DataFrame: +0.0-0.6 us a file) its
temporary files of a folder share one locked ``TempFolder`` ``.tmp-<hex>/`` for the whole batch;
outside one each is a ``TempFile``. The first write of this process into a feature folder sweeps it
(one listing).
"""

from __future__ import annotations

import hashlib
import json
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

import numpy as np

from storage.tmpdirs import TempFile, TempFolder, first_time, sweep
from core.errors import DataError

CACHE_REF = "media-cache:"
MEDIA_DIR = "media"  # <cache_dir>/media/<feature>/ (in-memory values), <output>/media/ (memmaps)
DONE = ".done"
TABLE_SUFFIX = ".media.parquet"
TABLE_META = b"prepflow.media"
MEMMAP_FORMAT = "1"  # part of every memmap name: bump when a codec's output changes
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
            import fsspec

            from storage.fs import storage_options

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


# ---- codecs --------------------------------------------------------------------------------------

def codec_from_json(data: dict):
    if data.get("kind") == "image":
        from storage.media_image import ImageCodec

        return ImageCodec.from_json(data)
    if data.get("kind") == "audio":
        from storage.media_audio import AudioCodec

        return AudioCodec.from_json(data)
    raise DataError(f"unknown media codec {data.get('kind')!r}")


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


def memmap_name(feature: str, split: str, codec_json: dict, contents: list[str]) -> str:
    """``<feature>-<split>-<hash>.npy``: the hash covers the codec and each slot's content hash."""
    h = hashlib.sha256(json.dumps([MEMMAP_FORMAT, codec_json], sort_keys=True).encode())
    for c in contents:
        h.update(c.encode())
        h.update(b"\n")
    return f"{feature}-{split}-{h.hexdigest()[:20]}.npy"


def memmap_dir(artifact_path: str | Path) -> Path:
    return Path(artifact_path).parent / MEDIA_DIR


def _expected_bytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def memmap_complete(path: Path, shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """The memmap exists, its ``.done`` sentinel says so and its size matches."""
    done = path.with_name(path.name + DONE)
    if not (path.is_file() and done.is_file()):
        return False
    try:
        info = json.loads(done.read_text())
    except (OSError, ValueError):
        return False
    return (info.get("shape") == list(shape) and info.get("dtype") == np.dtype(dtype).str
            and path.stat().st_size == info.get("bytes"))


def sweep_temps(folder: str | Path) -> list[str]:
    """Remove the temporary files (``TEMP_NAME``) that killed writers left in a media folder; their names."""
    return sweep(folder, TEMP_NAME)


class MemmapWriter:
    """Writes a memmap under a private, locked name (a ``TempFile``); ``commit`` renames it into place,
    then writes ``.done`` the same way. Opening one first sweeps the folder (killed builds' files)."""

    def __init__(self, path: Path, shape: tuple[int, ...], dtype: np.dtype):
        self.path, self.shape, self.dtype = Path(path), tuple(shape), np.dtype(dtype)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        sweep_temps(self.path.parent)
        self._temp = TempFile(self.path.parent, f".{self.path.name}.", ".tmp")  # locked until commit/abort
        self.tmp = self._temp.path
        try:
            self.array = np.lib.format.open_memmap(self.tmp, mode="w+", dtype=self.dtype, shape=self.shape)
        except BaseException:
            self._temp.close()
            raise

    def commit(self) -> None:
        self.array.flush()
        del self.array
        try:
            os.replace(self.tmp, self.path)
        finally:
            self._temp.close()
        done = {"shape": list(self.shape), "dtype": self.dtype.str, "bytes": self.path.stat().st_size}
        with TempFile(self.path.parent, f".{self.path.name}{DONE}.") as tmp_done:
            tmp_done.write_text(json.dumps(done))
            os.replace(tmp_done, self.path.with_name(self.path.name + DONE))

    def abort(self) -> None:
        self.__dict__.pop("array", None)
        self._temp.close()  # removes the temporary memmap (if still there), then its lock


# ---- the media table of a split (lazy modes) ---------------------------------------------------

def write_table(path: Path, sources: list[str | None], sha: list[str | None], errors: list[str | None],
                meta: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"source": pa.array(sources, pa.string()), "sha256": pa.array(sha, pa.string()),
                      "ok": pa.array([e is None for e in errors], pa.bool_()),
                      "error": pa.array(errors, pa.string())})
    table = table.replace_schema_metadata({TABLE_META: json.dumps(meta, sort_keys=True).encode()})
    pq.write_table(table, path, compression="zstd")


def read_table(path: Path) -> tuple[dict, dict[str, list]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except OSError as exc:
        raise DataError(f"{path}: cannot read the media table ({exc})") from exc
    meta = json.loads(table.schema.metadata[TABLE_META])
    return meta, {name: table.column(name).to_pylist() for name in table.column_names}


def item_specs(feature_spec: dict) -> dict:
    """``feature_spec`` entries as the loader yields them: a lazy media column's dtype and shape are
    its decoded item's (from its ``media`` chunk), not the stored int64 slot's."""
    spec = feature_spec["feature_spec"]
    media = {name: chunk for chunks in (feature_spec.get("source_spec") or {}).values() for chunk in chunks
             if chunk.get("type") == "media" for name in chunk["features"]}
    if not media:
        return spec
    return {**spec, **{n: {**spec[n], "dtype": c["dtype"], "shape": list(c["shape"])}
                       for n, c in media.items() if n in spec}}


_POOL: dict[int, ThreadPoolExecutor] = {}
_POOL_LOCK = threading.Lock()


def loader_pool() -> ThreadPoolExecutor:
    """One decode pool per process (a forked DataLoader worker makes its own)."""
    pid = os.getpid()
    with _POOL_LOCK:
        if pid not in _POOL:
            _POOL[pid] = ThreadPoolExecutor(default_threads(), thread_name_prefix="prepflow-lazy-media")
        return _POOL[pid]


class MediaColumn:
    """A lazy/lazy_cached media column of one split, as an ``n x item`` array (see module docstring).

    Supports what ``storage.loader.gather`` uses: ``len``, ``shape``, ``dtype``, slicing and
    ``take(indices, axis=0, out=...)``.
    """

    def __init__(self, root: Path, chunk: dict, index: np.ndarray):
        self.root = Path(root)
        self.table_path = self.root / chunk["files"][0]
        meta, cols = read_table(self.table_path)
        self.feature = meta["feature"]
        self.mode = meta["mode"]
        self.memmap = meta.get("memmap")
        self.codec = codec_from_json(meta["codec"])
        self.sources: list[str | None] = cols["source"]
        self.sha: list[str | None] = cols["sha256"]
        self.ok: list[bool] = cols["ok"]
        self.index = np.asarray(index, dtype=np.int64)
        self.dtype = np.dtype(self.codec.dtype)
        self.shape = (len(self.index), *self.codec.shape)
        self.ndim = len(self.shape)
        self._store: np.ndarray | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return self.take(np.array([key]))[0]
        if isinstance(key, slice):
            slots = self.index[key]
            if self.mode == "lazy_cached" and len(slots) and int(slots[-1]) - int(slots[0]) + 1 == len(slots) \
                    and (len(slots) < 2 or bool((np.diff(slots) == 1).all())):
                return self.store()[int(slots[0]):int(slots[-1]) + 1]  # consecutive slots: a view, one copy later
            return self.take(np.arange(len(self.index))[key])
        return self.take(np.asarray(key))

    def take(self, indices, axis: int = 0, out: np.ndarray | None = None, mode: str = "raise") -> np.ndarray:
        if axis != 0:
            raise ValueError("a media column is taken along axis 0 only")
        slots = np.take(self.index, np.asarray(indices, dtype=np.int64), mode=mode)
        if out is None:
            out = np.empty((len(slots), *self.codec.shape), dtype=self.dtype)
        if self.mode == "lazy_cached":
            np.take(self.store(), slots, axis=0, out=out)
        else:
            self._decode_into(slots, out)
        return out

    # ---- lazy: decode the batch ------------------------------------------------------------------
    def _decode_slot(self, slot: int) -> np.ndarray:
        if not self.ok[slot]:
            return self.codec.fill()
        source = self.sources[slot]
        try:
            return decode_source(self.codec, source, self.sha[slot])[0]
        except MediaError as exc:
            raise DataError(f"{self.table_path}: {self.feature}: {source}: cannot be decoded at load time ({exc}); "
                            "it decoded when the artifact was made: the file changed or went away") from None

    def _decode_into(self, slots: np.ndarray, out: np.ndarray) -> None:
        uniq, inverse = np.unique(slots, return_inverse=True)
        decoded = list(loader_pool().map(self._decode_slot, uniq.tolist()))
        for j, arr in enumerate(decoded):
            out[inverse == j] = arr

    # ---- lazy_cached: the split's memmap -----------------------------------------------------------
    def memmap_path(self) -> Path:
        return memmap_dir(self.root) / self.memmap

    def store(self) -> np.ndarray:
        if self._store is None:
            with self._lock:
                if self._store is None:
                    self._store = self._open_store()
        return self._store

    def _open_store(self) -> np.ndarray:
        path = self.memmap_path()
        shape = (len(self.sources), *self.codec.shape)
        if not memmap_complete(path, shape, self.dtype):
            self.build()
        if not shape[0]:
            return np.zeros(shape, dtype=self.dtype)
        return np.asarray(np.load(path, mmap_mode="r"))

    def build(self, threads: int | None = None) -> None:
        """Decode every slot into the memmap (a private file renamed into place, then ``.done``)."""
        path = self.memmap_path()
        writer = MemmapWriter(path, (len(self.sources), *self.codec.shape), self.dtype)
        try:
            decoded = ordered_map(self._decode_slot, range(len(self.sources)), threads or default_threads())
            for slot, arr in enumerate(decoded):
                writer.array[slot] = arr
            writer.commit()
        except BaseException:
            writer.abort()
            raise


def open_media_columns(root: Path, chunks: dict[str, dict], arrays: dict[str, np.ndarray]) -> dict:
    """The loader's hook: index columns of lazy media features -> ``MediaColumn``; others unchanged."""
    return {name: (MediaColumn(root, chunks[name], arr) if name in chunks else arr) for name, arr in arrays.items()}


def ensure_memmaps(artifact_path: str | Path) -> list[Path]:
    """Build the lazy_cached memmaps of a local artifact that are not complete yet; returns them all."""
    from storage.artifact import Artifact

    art = Artifact.open(artifact_path)
    paths = []
    for split in art.splits:
        for chunk in art.chunks(split):
            if chunk["type"] != "media" or chunk.get("mode") != "lazy_cached":
                continue
            column = MediaColumn(art.path, chunk, np.zeros(0, dtype=np.int64))
            column.store()
            paths.append(column.memmap_path())
    return paths


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
