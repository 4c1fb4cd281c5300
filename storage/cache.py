"""Content-addressed stage cache.

Layout: ``<cache_dir>/<stage>/<key>/`` holds the stage's output files plus ``_entry.json``
(written last) listing every file with its XXH3-128 digest and size (``storage.hashing.file_digest``:
the entry's integrity, never published; entries of older prepflows list sha256 and still verify). An
entry is trusted only when ``_entry.json`` exists and every listed file still matches it.

Writes are atomic: ``StageCache.writer`` yields a private temporary folder
(``<stage>/.tmp-<key>-<random>``); on success it records the hashes and renames the folder
into place, on failure it deletes it. Two runs racing on the same key both build a folder and
the loser's rename fails harmlessly (the winner's identical entry stays). A corrupted entry
(a file truncated or edited on disk) is reported by ``get`` and moved aside, so the stage
recomputes it.

A run killed mid-write leaves its temporary folder behind; the writer holds a lock beside it for its
whole life (``storage.tmpdirs``), so the next writer into the same stage folder removes the folders
whose writer is gone (and ``.corrupt-*`` leftovers, and lock-less folders of older prepflows once
abandoned), never one that a live run is writing. A stage that only hits the cache sweeps its folder
too, once per process (``sweep_once``: one listing of the stage folder).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from core.errors import IntegrityError
from storage.hashing import DIGESTS, file_digest, stable_hash
from storage.safe_paths import real_root, under
from storage.tmpdirs import TempFolder, first_time, sweep

log = logging.getLogger("prepflow.cache")

ENTRY_FILE = "_entry.json"
ENTRY_DIGEST = "xxh3_128"  # cache entries' file digest; artifacts record sha256 (tasks.publish.stage)


def cache_key(stage: str, code_version: str, parents: list[str], config_slice: object) -> str:
    """Key of a stage output: its name, code version, parent keys and the config it reads."""
    return stable_hash(
        {"stage": stage, "code_version": code_version, "parents": list(parents), "config": config_slice}
    )


def list_files(root: Path) -> list[str]:
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if rel != ENTRY_FILE:
                out.append(rel.replace(os.sep, "/"))
    return sorted(out)


# Below this many bytes in all, files are hashed on the calling thread: starting a pool's threads costs
# more than hashing a few small files (a gate's entry), the more so in a `prepflow run`, where Prefect's
# threads hold the GIL now and then.
PARALLEL_HASH_BYTES = 8 << 20
# On a cluster, one hashing task per this many bytes of consecutive files, not one per file: the flow process
# spends CPU on every Dask task, and an encode entry holds several files per partition (a hundred thousand
# tasks at Criteo 1TB's partitions), while hashing this many bytes takes a fraction of a task's cost.
HASH_TASK_BYTES = 64 << 20


def file_digests(paths: list[str], algorithm: str) -> list[str]:
    """``file_digest`` of each file, in order; several large files are hashed on parallel threads (hashlib,
    xxhash and file reads release the GIL), so an entry of many parts costs about its largest file per
    core. When a distributed Client is the scheduler (``prepflow run --dask-address``), the workers that
    wrote the files hash them: the flow process reads none of an entry's or an artifact's bytes."""
    if len(paths) < 2 or sum(os.path.getsize(p) for p in paths) < PARALLEL_HASH_BYTES:
        return [file_digest(p, algorithm) for p in paths]
    if _on_cluster():
        import dask  # heavy: only with a distributed Client, which has imported it already

        groups = _size_groups([os.path.abspath(p) for p in paths], HASH_TASK_BYTES)
        done = dask.compute(*[dask.delayed(file_digest_group, pure=False)(g, algorithm) for g in groups])
        return [digest for group in done for digest in group]
    with ThreadPoolExecutor(max_workers=min(len(paths), os.cpu_count() or 1, 8)) as pool:
        return list(pool.map(file_digest, paths, [algorithm] * len(paths)))


def file_digest_group(paths: list[str], algorithm: str) -> list[str]:
    """``file_digest`` of each file, in order: one Dask task's share of ``file_digests``."""
    return [file_digest(p, algorithm) for p in paths]


def _size_groups(paths: list[str], target: int) -> list[list[str]]:
    """``paths`` in consecutive groups of at least ``target`` bytes each (the last one may be smaller)."""
    groups: list[list[str]] = [[]]
    size = 0
    for p in paths:
        if size >= target:
            groups.append([])
            size = 0
        groups[-1].append(p)
        size += os.path.getsize(p)
    return groups


def sha256_files(paths: list[str]) -> list[str]:
    """sha256 of each file (``file_digests``): the digest an artifact's manifest records."""
    return file_digests(paths, "sha256")


def _on_cluster() -> bool:
    """A distributed Client is Dask's scheduler (it sets ``scheduler: dask.distributed``); ``dask`` is not
    imported to find out."""
    dask = sys.modules.get("dask")
    return dask is not None and "distributed" in sys.modules and \
        dask.config.get("scheduler", None) == "dask.distributed"


def describe_files(root: Path, algorithm: str = ENTRY_DIGEST) -> dict[str, dict]:
    """``{relative path: {algorithm: digest, "bytes": size}}`` for every file under ``root``."""
    rels = list_files(root)
    digests = file_digests([str(root / rel) for rel in rels], algorithm)
    return {rel: {algorithm: digest, "bytes": (root / rel).stat().st_size}
            for rel, digest in zip(rels, digests, strict=True)}


def verify_files(root: Path, files: dict[str, dict], where: str = "the file listing") -> list[str]:
    """Problems (missing, wrong size, wrong digest) of ``files`` under ``root``; [] if all good. Each file
    is checked with the digest its listing records (``sha256`` in a manifest, ``xxh3_128`` in a cache
    entry). A name that leaves ``root`` (absolute, ``..``, a symlink out of it) raises ``IntegrityError``
    naming ``where`` before any file is read (``storage.safe_paths``)."""
    problems: dict[str, str] = {}
    to_hash: dict[str, list[str]] = {}
    root_real = real_root(root)
    paths = {rel: under(root, rel, where, root_real) for rel in files}
    for rel, info in files.items():
        path = paths[rel]
        info = info if isinstance(info, dict) else {}
        algorithm = next((a for a in DIGESTS if a in info), None)
        if algorithm is None:
            problems[rel] = f"{rel}: no digest recorded (expected one of {', '.join(DIGESTS)})"
        elif not path.is_file():
            problems[rel] = f"{rel}: missing"
        elif not isinstance(info.get("bytes"), int):
            problems[rel] = f"{rel}: no size recorded"
        elif path.stat().st_size != info["bytes"]:
            problems[rel] = f"{rel}: {path.stat().st_size} bytes, expected {info['bytes']}"
        else:
            to_hash.setdefault(algorithm, []).append(rel)
    for algorithm, rels in to_hash.items():
        for rel, digest in zip(rels, file_digests([str(root / rel) for rel in rels], algorithm), strict=True):
            if digest != files[rel][algorithm]:
                problems[rel] = f"{rel}: {algorithm} differs from the recorded one"
    return [problems[rel] for rel in files if rel in problems]  # in the listing's order, as before


class StageCache:
    """The cache of one ``cache_dir`` (local filesystem)."""

    def __init__(self, cache_dir: str | os.PathLike):
        self.root = Path(cache_dir)

    def path(self, stage: str, key: str) -> Path:
        return self.root / stage / key

    def get(self, stage: str, key: str) -> Path | None:
        """The entry's folder if it is complete and intact, else None (corrupt ones are moved aside)."""
        entry = self.path(stage, key)
        meta_path = entry / ENTRY_FILE
        if not meta_path.is_file():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            problems = verify_files(entry, meta["files"], f"{entry / ENTRY_FILE}")
        except (OSError, ValueError, KeyError, IntegrityError) as exc:
            problems = [f"{ENTRY_FILE}: unreadable ({exc})"]
        if problems:
            log.warning("cache entry %s/%s is corrupt and will be recomputed: %s", stage, key, "; ".join(problems))
            self._discard(entry)
            return None
        return entry

    def discard(self, stage: str, key: str) -> None:
        """Remove the entry ``stage/key`` (a later ``get`` misses)."""
        self._discard(self.path(stage, key))

    def _discard(self, entry: Path) -> None:
        trash = entry.parent / f".corrupt-{entry.name}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(entry, trash)
            shutil.rmtree(trash, ignore_errors=True)
        except OSError:
            pass

    @contextmanager
    def writer(self, stage: str, key: str) -> Iterator[Path]:
        """Yield a temporary folder; on success its content becomes the entry ``stage/key``."""
        final = self.path(stage, key)
        final.parent.mkdir(parents=True, exist_ok=True)
        self.sweep(stage)
        folder = TempFolder(final.parent, f".tmp-{key}-")
        tmp = folder.path
        try:
            yield tmp
            meta = {"stage": stage, "key": key, "files": describe_files(tmp)}
            (tmp / ENTRY_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True))
            try:
                os.rename(tmp, final)
            except OSError:
                # Another run published the same key first, or a stale entry is in the way.
                if self.get(stage, key) is None:
                    shutil.rmtree(final, ignore_errors=True)
                    os.rename(tmp, final)
        finally:
            folder.close()  # removes the folder unless it was renamed into place, then its lock

    def sweep_once(self, stage: str) -> list[str]:
        """``sweep(stage)`` the first time this process asks for this stage folder, else nothing: what a
        cache hit runs, so a stage that is never written again still loses a killed run's leftovers."""
        return self.sweep(stage) if first_time(self.root / stage) else []

    def sweep(self, stage: str) -> list[str]:
        """Remove what stopped runs left in the stage folder: temporary folders whose writer is gone
        and ``.corrupt-*`` folders (garbage once renamed; a concurrent removal is harmless)."""
        root = self.root / stage
        try:
            names = os.listdir(root)
        except OSError:
            return []
        corrupt = [n for n in names if n.startswith(".corrupt-")]
        for name in corrupt:
            shutil.rmtree(root / name, ignore_errors=True)
        return sweep(root, ".tmp-", names) + corrupt
