"""Per-rank streaming of an ``s3://`` artifact's Parquet shards (``Artifact.open(url, stream=True)``).

Opening (``open_streamed``) downloads only the artifact's description: ``manifest.json``,
``feature_spec.yaml`` and ``training_set_metadata.json`` (each checked against the manifest's sha256)
into ``<artifact cache>/streamed/<artifact_id>/``. ``Artifact.batches`` then reads a split window by
window of the shard-aware order (``storage.order``, ``shuffle_window``): ``SplitStream.windows`` knows
from the rank's rows which shards each window needs, fetches them in a thread pool one window ahead
of the one being read, and hands the loader each window's rows (sorted by position) as in-memory
column buffers. A rank so downloads only the shards its rows touch.

Sizes: every object is read no further than its listed size (``storage.listed_reads``). Before the loader
builds its order from the manifest's row count, the footers of the split's first and last shards (ranged
reads of their ends) must give ``publish.shard_rows`` and the rest; every shard's footer is checked again,
rows and row shapes, before it is decoded (``storage.size_checks``).

The shard cache (``ShardCache``): a folder (``<artifact cache>/shards`` by default) of verified
shards named by their sha256, bounded by a size limit (``cache_limit``, else
``$PREPFLOW_SHARD_CACHE_BYTES``, else ``DEFAULT_LIMIT``; ``512M``/``20G`` suffixes accepted). A shard
is downloaded (at most its listed size) into a locked temporary file (``storage.tmpdirs``), its sha256 and size checked
against the manifest (a shard that differs raises ``IntegrityError`` naming it, and is neither kept nor
served), decoded, and only then renamed into the cache after the least recently used shards (by
mtime, touched on every use) were removed to make room; a shard larger than the whole limit is used
and not kept. Every step is a rename or an unlink, so processes may share a folder: a shard removed
under a reader is downloaded again. The cached copies are trusted as they were checked when written
(delete the folder to check them again).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.errors import DataError, IntegrityError
from storage import remote
from storage.artifact_files import FEATURE_SPEC, MANIFEST, arrow_to_numpy
from storage.artifact_read import check_bytes, parse_manifest
from storage.fs import filesystem
from storage.listed_reads import open_listed, read_listed
from storage.size_checks import check_footer, stored_shapes
from storage.tmpdirs import TempFile, TempFolder, first_time, sweep

METADATA_FILE = "training_set_metadata.json"
DESCRIPTION_FILES = (FEATURE_SPEC, METADATA_FILE)  # what a streamed artifact downloads when opened
DEFAULT_LIMIT = 16 << 30
LIMIT_ENV = "PREPFLOW_SHARD_CACHE_BYTES"
THREADS = 4  # concurrent shard downloads (and Parquet decodes)
DEFAULT_WINDOW_SHARDS = 2  # a streamed split's default shuffle window, in shards
_SHA256 = re.compile(r"[0-9a-f]{64}")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_limit(value: int | str | None) -> int:
    """A byte count: an int, or a string like ``"512M"``, ``"20G"`` (binary units); None: the environment's
    ``PREPFLOW_SHARD_CACHE_BYTES`` or ``DEFAULT_LIMIT``."""
    if value is None:
        value = os.environ.get(LIMIT_ENV) or DEFAULT_LIMIT
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        match = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)i?B?\s*", str(value), re.IGNORECASE)
        if match is None:
            raise DataError(f"shard cache limit {value!r} is not a byte count (e.g. 536870912, 512M, 20G)")
        number = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if number < 0:
        raise DataError(f"shard cache limit must be >= 0 bytes, got {number}")
    return number


def _checked_sha256(rel: str, info: dict) -> str:
    digest = str(info.get("sha256", ""))
    if not _SHA256.fullmatch(digest):  # it names a local file: nothing but a hex digest may
        raise IntegrityError(f"{rel}: manifest.json records no valid sha256 ({digest[:80]!r})")
    return digest


def _get(url: str, nbytes: int, attempts: int = 3) -> bytes:
    """The object's bytes, read no further than its listed size ``nbytes`` (``storage.listed_reads``), retried
    on transient errors (a missing or larger object is not retried)."""
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
        raise IntegrityError(f"{url}: {MANIFEST} lists its size as {nbytes!r}, not a byte count")
    for attempt in range(attempts):
        try:
            return read_listed(filesystem(url), url, nbytes)
        except FileNotFoundError:
            raise IntegrityError(f"{url}: listed in {MANIFEST} but missing on the store") from None
        except IntegrityError:
            raise
        except Exception as exc:  # network, credentials: the URL goes into the message
            if attempt == attempts - 1:
                raise DataError(f"{url}: cannot download ({type(exc).__name__}: {exc})") from exc
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


# ---- opening ---------------------------------------------------------------------------------------

def open_streamed(url: str) -> tuple[Path, str]:
    """A local folder with the artifact's description (manifest, feature spec, metadata; nothing else),
    and the artifact's URL (an output root is followed through ``LATEST``)."""
    art_url, manifest_bytes = remote.resolve(url)
    manifest = parse_manifest(manifest_bytes, f"{art_url}/{MANIFEST}")  # a plain artifact id, names inside
    art_id = manifest["artifact_id"]
    parent = remote.cache_root() / "streamed"
    local = parent / art_id
    if (local / MANIFEST).is_file() and (local / MANIFEST).read_bytes() == manifest_bytes:
        return local, art_url
    parent.mkdir(parents=True, exist_ok=True)
    if first_time(parent):
        sweep(parent, ".tmp-")
    with TempFolder(parent, f".tmp-{art_id}-") as tmp:
        for name in DESCRIPTION_FILES:
            info = manifest.get("files", {}).get(name)
            if info is None:
                if name == FEATURE_SPEC:
                    raise IntegrityError(f"{art_url}: {MANIFEST} lists no {FEATURE_SPEC}")
                continue
            where = remote.join(art_url, name)
            data = _get(where, info.get("bytes") if isinstance(info, dict) else None)
            (tmp / name).write_bytes(check_bytes(data, info, where))
        (tmp / MANIFEST).write_bytes(manifest_bytes)
        try:
            if local.exists():
                import shutil

                shutil.rmtree(local, ignore_errors=True)
            os.rename(tmp, local)
        except OSError:  # another process put the same description there first
            if not (local / MANIFEST).is_file():
                raise
    return local, art_url


# ---- the shard cache ---------------------------------------------------------------------------------

class ShardCache:
    """Verified shards by sha256 in ``folder``, at most ``limit`` bytes (see the module docstring).

    ``downloaded_bytes``, ``downloads`` and ``hits`` count this object's traffic."""

    SUFFIX = ".parquet"

    def __init__(self, folder: str | os.PathLike, limit: int):
        self.folder = Path(folder)
        self.limit = int(limit)
        self.folder.mkdir(parents=True, exist_ok=True)
        if first_time(self.folder):
            sweep(self.folder, ".tmp-")
        self._lock = threading.Lock()
        self.downloaded_bytes = 0
        self.downloads = 0
        self.hits = 0

    def stats(self) -> dict:
        return {"downloaded_bytes": self.downloaded_bytes, "downloads": self.downloads, "hits": self.hits,
                "cached_bytes": sum(size for _, size, _ in self._entries()), "limit": self.limit}

    def _entries(self) -> list[tuple[float, int, Path]]:
        out = []
        with os.scandir(self.folder) as it:
            for entry in it:
                if entry.name.endswith(self.SUFFIX) and not entry.name.startswith("."):
                    try:
                        st = entry.stat()
                    except FileNotFoundError:  # removed by another process meanwhile
                        continue
                    out.append((st.st_mtime, st.st_size, Path(entry.path)))
        return out

    def read(self, url: str, rel: str, sha256: str, nbytes: int, decode=None):
        """``decode(source)`` of the shard (``source``: a local path or an Arrow buffer), from the cache or
        downloaded and checked; ``rel`` names the shard in errors. Without ``decode``: only make sure the
        shard is in the cache (a shard over the whole limit is then not downloaded)."""
        final = self.folder / f"{sha256}{self.SUFFIX}"
        value = self._cached(final, nbytes, decode)
        if value is not None:
            return value
        if decode is None and nbytes > self.limit:
            return None
        data = _get(url, nbytes)
        digest = hashlib.sha256(data).hexdigest()
        if digest != sha256 or len(data) != nbytes:
            raise IntegrityError(f"{url}: shard {rel} does not match {MANIFEST} (sha256 {digest[:16]}..., "
                                 f"{len(data)} bytes; listed {sha256[:16]}..., {nbytes} bytes); not served")
        value = decode(pa.BufferReader(data)) if decode is not None else True
        with self._lock:
            self.downloaded_bytes += len(data)
            self.downloads += 1
        if nbytes <= self.limit:
            with TempFile(self.folder, ".tmp-", self.SUFFIX) as tmp:
                tmp.write_bytes(data)
                with self._lock:
                    self._make_room(nbytes, keep=final)
                    os.replace(tmp, final)
        return value

    def _cached(self, final: Path, nbytes: int, decode):
        try:
            if final.stat().st_size != nbytes:
                return None
            value = decode(str(final)) if decode is not None else True
        except FileNotFoundError:  # not cached, or removed by another process: downloaded again
            return None
        except (OSError, pa.ArrowException):  # an unreadable cached copy: replaced by a download
            final.unlink(missing_ok=True)
            return None
        try:
            os.utime(final)  # most recently used
        except FileNotFoundError:
            pass
        if decode is not None:
            with self._lock:
                self.hits += 1
        return value

    def _make_room(self, nbytes: int, keep: Path) -> None:
        entries = sorted(e for e in self._entries() if e[2] != keep)
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total + nbytes <= self.limit:
                break
            path.unlink(missing_ok=True)
            total -= size


# ---- a split's shards, window by window ------------------------------------------------------------

class WindowColumns:
    """A window's rows (sorted by position) as in-memory column buffers, for ``storage.loader.gather``."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self._arrays = arrays

    def array(self, name: str) -> np.ndarray:
        return self._arrays[name]


class SplitStream:
    """One split's Parquet shards on a store (``shard_rows`` rows each, the last one shorter)."""

    def __init__(self, art_url: str, manifest: dict, feature_spec: dict, split: str, cache: ShardCache,
                 threads: int = THREADS):
        self.art_url, self.split, self.cache, self.threads = art_url, split, cache, threads
        self.artifact_id = manifest["artifact_id"]
        self.num_rows = int(manifest["rows"][split])
        chunks = feature_spec["source_spec"].get(split, [])
        parquet = [c for c in chunks if c["type"] == "parquet"]
        if not parquet:
            formats = sorted({c["type"] for c in chunks})
            raise DataError(f"{art_url}: split {split!r} has no Parquet shards to stream (its formats: {formats}); "
                            f"publish with formats [parquet], or open it without stream=True to download it whole")
        self.media = {name for c in chunks if c["type"] == "media" for name in c["features"]}
        self.shapes = stored_shapes(feature_spec, chunks)
        self.files = list(parquet[0]["files"])
        described = manifest["files"]
        missing = [rel for rel in self.files if rel not in described]
        if missing:
            raise IntegrityError(f"{art_url}: {MANIFEST} does not list the shard(s) {missing[:5]}")
        self.sha256 = [_checked_sha256(rel, described[rel]) for rel in self.files]
        self.nbytes = [int(described[rel]["bytes"]) for rel in self.files]
        shard_rows = (manifest.get("config") or {}).get("publish", {}).get("shard_rows")
        expected = max(1, -(-self.num_rows // shard_rows)) if isinstance(shard_rows, int) and shard_rows > 0 else None
        if expected != len(self.files):
            raise DataError(f"{art_url}: split {split!r} has {len(self.files)} shard(s) for {self.num_rows} rows, "
                            f"not the publisher's shards of publish.shard_rows={shard_rows!r} rows: cannot stream it")
        self.shard_rows = shard_rows
        self._check_rows()
        self._next: dict[int, Future] = {}  # shards of the next epoch's first windows, fetched ahead
        self._next_pool: ThreadPoolExecutor | None = None
        self._next_lock = threading.Lock()

    def shard_row_count(self, shard: int) -> int:
        """The rows shard ``shard`` holds by the manifest: ``shard_rows``, the last one the rest."""
        return self.shard_rows if shard < len(self.files) - 1 else self.num_rows - shard * self.shard_rows

    def _check_rows(self) -> None:
        """The manifest's row count and ``shard_rows`` against the footers of the first and the last shard
        (ranged reads of their ends, no row downloaded), before the loader's order is built by them: every
        other shard's footer is checked when it is decoded."""
        fs = filesystem(self.art_url)
        for shard in sorted({0, len(self.files) - 1}):
            url = remote.join(self.art_url, self.files[shard])
            try:
                with open_listed(fs, url, self.nbytes[shard]) as fh:
                    meta = pq.read_metadata(fh)
            except FileNotFoundError:
                raise IntegrityError(f"{url}: listed in {MANIFEST} but missing on the store") from None
            except (pa.ArrowInvalid, OSError) as exc:
                raise IntegrityError(f"{url}: unreadable Parquet footer ({str(exc).splitlines()[0]})") from None
            self._expect_rows(url, check_footer(meta, url, self.shard_row_count(shard), self.shapes), shard)

    def _expect_rows(self, url: str, found: int, shard: int) -> None:
        if found != self.shard_row_count(shard):
            raise IntegrityError(f"{url}: the footer declares {found} rows, the manifest's split and "
                                 f"publish.shard_rows {self.shard_row_count(shard)}; the artifact is damaged or was "
                                 f"edited")

    @property
    def split_bytes(self) -> int:
        """The bytes of all the split's shards (what one rank would download to read them all)."""
        return sum(self.nbytes)

    def prefetch(self, shards: list[int]) -> None:
        """Fetch these shards into the cache in the background (the next epoch's first ones, while the
        last window of this one is read); a failure is left for the read that needs the shard to report."""
        with self._next_lock:
            if self._next_pool is None:
                self._next_pool = ThreadPoolExecutor(self.threads, thread_name_prefix="prepflow-shards-next")
            for s in shards:
                if s not in self._next:
                    rel = self.files[s]
                    self._next[s] = self._next_pool.submit(self.cache.read, remote.join(self.art_url, rel), rel,
                                                           self.sha256[s], self.nbytes[s])

    def _load(self, shard: int, names: list[str]) -> dict[str, np.ndarray]:
        with self._next_lock:
            pending = self._next.pop(shard, None)
        if pending is not None:  # being fetched ahead: wait for it, then read it from the cache
            try:
                pending.result()
            except Exception:  # noqa: BLE001  the read below downloads it again and reports what is wrong
                pass

        rel = self.files[shard]
        url = remote.join(self.art_url, rel)

        def decode(source) -> dict[str, np.ndarray]:
            with pq.ParquetFile(source) as shard_file:  # its footer first: a shard decodes to the rows it claims
                found = check_footer(shard_file.metadata, url, self.shard_row_count(shard), self.shapes)
                self._expect_rows(url, found, shard)
                table = shard_file.read(columns=names, use_threads=False)
            return {name: arrow_to_numpy(table.column(name)) for name in names}

        return self.cache.read(url, rel, self.sha256[shard], self.nbytes[shard], decode)

    def windows(self, rows: np.ndarray, starts: np.ndarray, first: int, names: list[str],
                ahead: int = 1, then=None) -> Iterator[WindowColumns]:
        """For each window ``j >= first``: the columns of its rows ``rows[starts[j]:starts[j + 1]]``, in that
        order. The shards of the next ``ahead`` windows are fetched (``threads`` at a time) and the next
        window assembled (one more thread) while a window is read; a shard is dropped from memory after
        the last window that needs it. ``then()``: the shards to ``prefetch`` while the last window is read
        (the next epoch's first)."""
        lazy = sorted(self.media.intersection(names))
        if lazy:
            raise DataError(f"{self.art_url}: streaming does not decode lazy media columns {lazy}; open the "
                            f"artifact without stream=True, or leave their channels out")
        plan = [rows[starts[j]:starts[j + 1]] for j in range(first, len(starts) - 1)]
        needs = [np.unique(p // self.shard_rows).tolist() for p in plan]
        last_use = {s: k for k, shards in enumerate(needs) for s in shards}
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix="prepflow-shards")
        assembler = ThreadPoolExecutor(1, thread_name_prefix="prepflow-windows")
        shards: dict[int, Future] = {}
        windows: dict[int, Future] = {}

        def assemble(k: int) -> WindowColumns:
            loaded = {s: shards[s].result() for s in needs[k]}
            return WindowColumns(self._assemble(plan[k], needs[k], loaded, names))

        def submit(k: int) -> None:
            if k < len(plan) and k not in windows:
                for s in needs[k]:
                    if s not in shards:
                        shards[s] = pool.submit(self._load, s, names)
                windows[k] = assembler.submit(assemble, k)

        try:
            for k in range(len(plan)):
                for ahead_k in range(k, k + ahead + 1):
                    submit(ahead_k)
                columns = windows.pop(k).result()
                for s in needs[k]:
                    if last_use[s] == k:
                        del shards[s]
                if k == len(plan) - 1 and then is not None:
                    self.prefetch(then())
                yield columns
        finally:
            for future in [*windows.values(), *shards.values()]:
                future.cancel()
            assembler.shutdown(wait=True)
            pool.shutdown(wait=True)

    def _assemble(self, positions: np.ndarray, shards: list[int], loaded: dict, names: list[str]) -> dict:
        """Each column's values at ``positions`` (in that order) out of the decoded shards: the window's
        shards end to end (one sequential copy), then one gather."""
        sizes = np.array([len(loaded[s][names[0]]) for s in shards], dtype=np.int64)
        offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        slot = np.searchsorted(np.asarray(shards, dtype=np.int64), positions // self.shard_rows)
        index = offsets[slot] + positions - np.asarray(shards, dtype=np.int64)[slot] * self.shard_rows
        out = {}
        for name in names:
            parts = [loaded[s][name] for s in shards]
            source = parts[0] if len(parts) == 1 else np.concatenate(parts)
            buffer = np.empty((len(positions), *source.shape[1:]), dtype=source.dtype)
            np.take(source, index, axis=0, out=buffer)
            out[name] = buffer
        return out
