"""media_cache: the sha256 of every media source's bytes, and the content hash the stage keys on.

Hashing runs on a cache hit too (the content joins the key): in a thread pool here, or by Dask tasks on a
distributed cluster."""

from __future__ import annotations

import hashlib
import json

from dask import delayed

from storage import media
from tasks.media_cache.sources import Sources
from tasks.runtime import dask_run
from tasks.runtime.dask_run import on_cluster

# a part of the media_cache stage: the stage is versioned with what this module imports too (core.code_version)
CODE_VERSION_FOLLOWS_IMPORTS = True

HASH_TASK_SOURCES = 256  # sources one Dask task reads and hashes on a cluster


def _hash_one(source: str) -> tuple:
    """``(sha256, failure reason, (size, mtime_ns, inode))`` of one source's bytes."""
    try:
        data, stamp = media.read_stamped(source)
        return media.sha256_bytes(data), None, stamp
    except media.MediaError as exc:
        return None, str(exc), None


def _hash_sources(sources: list[str]) -> list[tuple]:
    return [_hash_one(s) for s in sources]


def hash_all(all_sources: list[Sources]) -> None:
    """sha256 of every resolvable source (shared across features): in a thread pool, or on a distributed
    cluster by Dask tasks (the flow process then reads no media bytes; decoding there checks the sha256)."""
    todo = sorted({s for src in all_sources for s, e in zip(src.sources, src.error, strict=True) if e is None})
    if on_cluster():
        chunks = [todo[i:i + HASH_TASK_SOURCES] for i in range(0, len(todo), HASH_TASK_SOURCES)]
        hashed = [r for chunk in dask_run.compute([delayed(_hash_sources, pure=False)(c) for c in chunks]) for r in chunk]
        results = dict(zip(todo, hashed, strict=True))
    else:
        threads = max(src.feature.options.num_processes or media.default_threads() for src in all_sources)
        results = dict(zip(todo, media.ordered_map(_hash_one, todo, threads, chunk=64), strict=True))
    for src in all_sources:
        for sid, source in enumerate(src.sources):
            if src.error[sid] is None:
                src.sha[sid], src.error[sid], src.stamp[sid] = results[source]


def content_hash(all_sources: list[Sources]) -> str:
    """Hash of what every raw value stands for: its content hash or failure (and source in lazy modes)."""
    h = hashlib.sha256()
    for src in sorted(all_sources, key=lambda s: s.feature.name):
        lazy = src.feature.mode != "eager"
        h.update(json.dumps(["feature", src.feature.name, src.feature.mode]).encode())
        for uid in sorted(range(len(src.raws)), key=lambda u: (src.raws[u] is not None, src.raws[u] or "")):
            sid = int(src.sid_of_uid[uid])
            entry = [src.raws[uid], src.sha[sid], src.error[sid], src.sources[sid] if lazy else None]
            h.update(json.dumps(entry).encode())
    return h.hexdigest()

