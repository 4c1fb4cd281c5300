"""media_cache: decode every source once into its split's store (the slots of a split are its distinct
sources in first-appearance order), in a thread pool with a bounded window or by Dask tasks on a cluster,
applying ``on_decode_error`` and recording the decode statistics."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from dask import delayed

from storage import media
from storage.fs import write_at
from tasks.config.constants import SPLIT_NAMES
from tasks.media_cache.sources import Part, Sources, failure
from tasks.runtime import dask_run, progress
from tasks.runtime.dask_run import on_cluster
from tasks.runtime.statistics import Statistics, decode_failures, sequence_lengths

# a part of the media_cache stage: the stage is versioned with what this module imports too (core.code_version)
CODE_VERSION_FOLLOWS_IMPORTS = True


@dataclass
class SplitSlots:
    sids: np.ndarray  # slot -> sid
    slot_of_sid: np.ndarray  # sid -> slot (-1: not in this split)
    store: np.ndarray | None = None  # slot -> decoded tensor (eager: scratch; lazy_cached: the memmap)
    memmap: str | None = None


def split_slots(parts: list[Part], src: Sources, split_id: int) -> SplitSlots:
    chosen = [src.sid_of_uid[p.uids[src.feature.name]] for p in parts if p.split_id == split_id]
    sids = np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)
    uniq, first = np.unique(sids, return_index=True)
    order = uniq[np.argsort(first, kind="stable")]
    slot_of_sid = np.full(len(src.sources), -1, dtype=np.int64)
    slot_of_sid[order] = np.arange(len(order))
    return SplitSlots(order, slot_of_sid)


def _decoder(src: Sources, codec, keep: bool, checked: dict[int, int]):
    """``sid -> (tensor | None | failure reason, length)``; a source already checked is not decoded
    again when its tensor is not kept (lazy mode)."""

    def one(sid: int):
        if src.error[sid] is not None:
            return None, 0
        if not keep and sid in checked:
            return None, checked[sid]
        try:
            arr, length = media.decode_source(codec, src.sources[sid], src.sha[sid], src.stamp[sid])
        except media.MediaError as exc:
            return str(exc), 0
        return (arr if keep else None), length

    return one


DECODE_TASK_SLOTS = 256  # slots one Dask task decodes on a cluster (and writes with one write)


def _decode_slots(codec, items: list[tuple], target: tuple[str, int] | None) -> list[tuple[str | None, int]]:
    """On a Dask worker: decode each ``(source, sha, error)``; ``(failure reason or None, length)`` each.
    With ``target`` (a store file and the byte offset of the first item's slot) each tensor, or the
    codec's fill for a failure, is written at its slot, all of them in one write. A source is checked
    against its sha256 here (the size/time/inode stamp is of the flow process's machine)."""
    out, tensors = [], []
    for source, sha, error in items:
        if error is not None:  # known to fail already: the flow has its reason
            out.append((None, 0))
            tensors.append(None)
            continue
        try:
            arr, length = media.decode_source(codec, source, sha)
        except media.MediaError as exc:
            out.append((str(exc), 0))
            tensors.append(None)
            continue
        out.append((None, length))
        tensors.append(arr)
    if target is not None and items:
        block = np.stack([t if t is not None else codec.fill() for t in tensors]).astype(codec.dtype, copy=False)
        write_at(target[0], np.ascontiguousarray(block), target[1])
    return out


def decode_all(parts, all_sources, codecs, slots, scratch: Path, media_dir: Path | None,
                writers: list, stats: Statistics) -> None:
    """Decode every slot of every split into its store (none in lazy mode: checked, then dropped): in a
    thread pool here, or, on a distributed cluster, by Dask tasks that write the stores themselves."""
    total = sum(len(s.sids) for s in slots.values())
    on_workers = on_cluster()
    for src in all_sources:
        f, codec = src.feature, codecs[src.feature.name]
        for split_id, split_name in enumerate(SPLIT_NAMES):
            sl = slots[(f.name, split_id)]
            shape = (len(sl.sids), *codec.shape)
            if f.mode == "eager":  # a scratch file in the entry, deleted once the parts are written
                scratch.mkdir(parents=True, exist_ok=True)
                sl.store = np.lib.format.open_memmap(scratch / f"{f.name}-{split_name}.npy", mode="w+",
                                                     dtype=codec.dtype, shape=shape)
            elif f.mode == "lazy_cached":
                sl.memmap = media.memmap_name(f.name, split_name, codec.to_json(),
                                              [src.sha[s] or f"error:{src.error[s]}" for s in sl.sids])
                if media_dir is not None and not media.memmap_complete(media_dir / sl.memmap, shape, codec.dtype):
                    writer = media.MemmapWriter(media_dir / sl.memmap, shape, codec.dtype)
                    writers.append(writer)
                    sl.store = writer.array
    decoded = _decode_on_workers(all_sources, codecs, slots) if on_workers else {}
    done = 0
    progress.report(done, total)
    for src in all_sources:
        f, codec = src.feature, codecs[src.feature.name]
        policy = f.options.on_decode_error
        threads = f.options.num_processes or media.default_threads()
        checked: dict[int, int] = {}  # sid -> length, for sources decoded once already (lazy)
        lengths: dict[int, int] = {}
        for split_id in range(len(SPLIT_NAMES)):
            sl = slots[(f.name, split_id)]
            if on_workers:
                results = decoded[(f.name, split_id)]
            else:
                one = _decoder(src, codec, keep=sl.store is not None, checked=checked)
                results = media.ordered_map(one, sl.sids.tolist(), threads, chunk=8)
            for slot, (result, length) in enumerate(results):
                sid = int(sl.sids[slot])
                if isinstance(result, str):
                    src.error[sid] = result
                    if policy == "fail":
                        raise failure(parts, src, [sid])
                elif src.error[sid] is None:
                    checked[sid] = lengths[sid] = length
                if sl.store is not None and not on_workers:  # (the workers wrote their slots)
                    sl.store[slot] = result if isinstance(result, np.ndarray) else codec.fill()
                done += 1
                if done % 64 == 0 or done == total:
                    progress.report(done, total)
        referenced = np.unique(np.concatenate([slots[(f.name, s)].sids for s in range(len(SPLIT_NAMES))]))
        stats.counter(f"media_cache.sources.{f.name}", len(referenced))
        _add(stats, decode_failures("media_cache", f.name, int(src.failed()[referenced].sum())))
        if f.media_kind == "audio":
            decoded_lengths = np.array([lengths[s] for s in sorted(lengths)], dtype=np.int64)
            _add(stats, sequence_lengths("media_cache", f.name, decoded_lengths, codec.max_length))


def _decode_on_workers(all_sources, codecs, slots) -> dict[tuple[str, int], list]:
    """Every slot decoded by Dask tasks of ``DECODE_TASK_SLOTS`` slots, each writing its slots of the
    store (if any) at their offset: ``(feature, split id) -> [(failure reason or None, length)]``."""
    keys, tasks = [], []
    for src in all_sources:
        name = src.feature.name
        codec = dask_run.shared(codecs[name])
        for split_id in range(len(SPLIT_NAMES)):
            sl = slots[(name, split_id)]
            sids = sl.sids.tolist()
            store = sl.store
            slot_bytes = int(np.prod(store.shape[1:], dtype=np.int64)) * store.dtype.itemsize if store is not None else 0
            for start in range(0, len(sids), DECODE_TASK_SLOTS):
                chunk = sids[start:start + DECODE_TASK_SLOTS]
                items = [(src.sources[s], src.sha[s], src.error[s]) for s in chunk]
                target = (str(store.filename), int(store.offset) + start * slot_bytes) if store is not None else None
                keys.append((name, split_id))
                tasks.append(delayed(_decode_slots, pure=False)(codec, items, target))
    out: dict[tuple[str, int], list] = {(s.feature.name, i): [] for s in all_sources for i in range(len(SPLIT_NAMES))}
    for key, result in zip(keys, dask_run.compute(tasks), strict=True):
        out[key].extend(result)
    return out


def _add(stats: Statistics, other: Statistics) -> None:
    for item in other.items.values():
        stats.add(item)

