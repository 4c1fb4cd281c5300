"""Media (images, audio) in the artifact: codecs, lazy media columns and their memmaps.

Shared by the ``media_cache`` stage, the image/audio feature types and the loader. One ``Codec``
(``storage.media_image.ImageCodec``, ``storage.media_audio.AudioCodec``) turns a file's bytes
into a tensor wherever that happens, so the modes ``eager``, ``lazy`` and ``lazy_cached`` give
identical tensors.

Layers (imports point one way): ``storage.media_io`` (sources, threads, ``MediaError``, the cache of
in-memory values) <- ``storage.media_image``, ``storage.media_audio`` (the codecs) <- this module
(``codec_from_json``, memmaps, media tables, ``MediaColumn``) <- ``storage.loader`` <-
``storage.artifact``. The names of ``storage.media_io`` are re-exported here, so callers use one module.

Lazy columns. In the artifact, a ``lazy``/``lazy_cached`` media column holds an int64 slot into
its split's media table ``<split>/<feature>.media.parquet`` (``source``, ``sha256``, ``ok``,
``error``; the codec in the schema metadata ``prepflow.media``), listed in ``source_spec`` as a
chunk of type ``media``. ``MediaColumn`` gives the loader that column as an ``n x item`` array:
``lazy`` decodes a batch's sources in a thread pool (checking each file's sha256 against the
table, so a changed file is an error, never a silently different tensor); ``lazy_cached`` reads
the split's memmap ``<output>/media/<feature>-<split>-<hash>.npy``, building it first when its
``.done`` sentinel is missing. The hash in its name covers the codec and every slot's content
hash, so a changed source gets a new memmap instead of a stale one.

Temporary files. Memmaps with their sentinels (``MemmapWriter``) are written under private, locked
names, then renamed into place (see ``storage.media_io`` for the scheme, which the media cache
shares): a memmap is a ``TempFile`` ``.<name>.<hex>.tmp``, its sentinel ``.<name>.done.<hex>``;
``MemmapWriter`` sweeps its folder at every build (a few files, written rarely).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.errors import DataError, IntegrityError
from storage import npy
from storage.artifact_files import locate, read_feature_spec
from storage.artifact_read import check_chunks, read_manifest
from storage.media_audio import AudioCodec
from storage.media_image import ImageCodec
from storage.media_io import (
    CACHE_REF,
    CHANGED,
    MEDIA_DIR,
    STAGING_PREFIX,
    TEMP_NAME,
    MediaError,
    dataset_dir,
    decode_source,
    default_threads,
    is_url,
    ordered_map,
    read_bytes,
    read_stamped,
    resolve,
    root_dir,
    sha256_bytes,
    store_batch,
    store_file,
    sweep_temps,
    typed_digest,
)
from storage.tmpdirs import TempFile

__all__ = [  # this module's own names and, re-exported, storage.media_io's
    "CACHE_REF", "CHANGED", "DONE", "MEDIA_DIR", "MEMMAP_FORMAT", "STAGING_PREFIX", "TABLE_META", "TABLE_SUFFIX",
    "TEMP_NAME", "MediaColumn", "MediaError", "MemmapWriter", "codec_from_json", "dataset_dir", "decode_source",
    "default_threads", "ensure_memmaps", "is_url", "item_specs", "loader_pool", "memmap_complete", "memmap_dir",
    "memmap_name", "open_media_columns", "ordered_map", "read_bytes", "read_stamped", "read_table", "resolve",
    "root_dir", "sha256_bytes", "store_batch", "store_file", "sweep_temps", "typed_digest", "write_table"]

DONE = ".done"
TABLE_SUFFIX = ".media.parquet"
TABLE_META = b"prepflow.media"
MEMMAP_FORMAT = "1"  # part of every memmap name: bump when a codec's output changes

CODECS = {"image": ImageCodec, "audio": AudioCodec}


def codec_from_json(data: dict):
    codec = CODECS.get(data.get("kind"))
    if codec is None:
        raise DataError(f"unknown media codec {data.get('kind')!r}")
    return codec.from_json(data)

def memmap_name(feature: str, split: str, codec_json: dict, contents: list[str]) -> str:
    """``<feature>-<split>-<hash>.npy``: the hash covers the codec and each slot's content hash."""
    h = hashlib.sha256(json.dumps([MEMMAP_FORMAT, codec_json], sort_keys=True).encode())
    for c in contents:
        h.update(c.encode())
        h.update(b"\n")
    return f"{feature}-{split}-{h.hexdigest()[:20]}.npy"


def memmap_dir(artifact_path: str | Path) -> Path:
    return Path(artifact_path).parent / MEDIA_DIR


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
    table = pa.table({"source": pa.array(sources, pa.string()), "sha256": pa.array(sha, pa.string()),
                      "ok": pa.array([e is None for e in errors], pa.bool_()),
                      "error": pa.array(errors, pa.string())})
    table = table.replace_schema_metadata({TABLE_META: json.dumps(meta, sort_keys=True).encode()})
    pq.write_table(table, path, compression="zstd")


def read_table(path: Path) -> tuple[dict, dict[str, list]]:

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
        if self.memmap is not None and (not isinstance(self.memmap, str) or "/" in self.memmap
                                        or "\\" in self.memmap or self.memmap in ("", ".", "..")):
            raise IntegrityError(f"{self.table_path}: memmap {self.memmap!r} is not one plain file name "
                                 "(it is opened under <output>/media; docs/security.md)")
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
        return np.asarray(npy.load(path, mmap_mode="r"))

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


def output_media_dir(output: str | Path) -> Path | None:
    """``<output>/media``, where the lazy_cached memmaps of a local output live; None for a remote output
    (the loader builds them in its own cache)."""
    output = str(output)
    if "://" in output and not output.startswith("file://"):
        return None
    return Path(output[len("file://"):] if output.startswith("file://") else output) / MEDIA_DIR


def ensure_memmaps(artifact_path: str | Path) -> list[Path]:
    """Build the lazy_cached memmaps of a local artifact that are not complete yet; returns them all."""
    path = locate(artifact_path)
    manifest = read_manifest(path)
    paths = []
    for chunks in (read_feature_spec(path, manifest).get("source_spec") or {}).values():
        for chunk in chunks:
            if chunk["type"] != "media" or chunk.get("mode") != "lazy_cached":
                continue
            check_chunks(path, manifest["files"], [chunk])  # its media table: listed, inside, of its size
            column = MediaColumn(path, chunk, np.zeros(0, dtype=np.int64))
            column.store()
            paths.append(column.memmap_path())
    return paths
