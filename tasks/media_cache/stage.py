"""media_cache: decode, resize and convert images/audio once (DESIGN section 4), keyed by content.

Runs after encode, which wrote each media row's raw value (a path, or a ``media-cache:`` reference
to an in-memory value ingest stored). For every media feature this stage

1. resolves each distinct value to a source (``storage.media.resolve``: relative paths against the
   dataset's folder or ``media_root``) and hashes every source's bytes in a thread pool;
2. keys its entry on the encode and vocab keys, the media features' config and that content hash
   (plus the sources themselves in lazy modes, whose artifacts hold them): a file changed in place
   misses the cache, and the artifact id covers the same hash (``fingerprint``), so a changed image
   is never served from an old artifact or memmap (Ludwig names its memmap by shape only);
3. finalizes the feature's metadata from the fit rows' sources in input order
   (``MediaFeature.finalize_media``: image size/channels, audio sampling rate) into its ``Codec``;
4. decodes every source once, in a thread pool with a bounded window (memory O(window)), reporting
   progress, and applies ``on_decode_error`` the same way in every mode: ``fail`` raises DataError
   naming the input row (0-based, `__row__`) and the path (files that cannot be read or escape ``media_root``
   are found before any decoding, at the first input row naming one; a decode failure stops the
   run where it is met), ``skip_row`` drops the rows, ``fill`` uses the codec's fill tensor.
   Statistics: ``media_cache.decode_failures.<f>`` (distinct sources),
   ``media_cache.rows_skipped.<f>`` / ``rows_filled.<f>`` (encoded rows), ``media_cache.sources.<f>``,
   and for audio the length histogram and truncations;
5. rewrites the encoded parts (at most ``CHUNK_ROWS`` rows each) with each media column as:
   ``eager``: the tensors; ``lazy``/``lazy_cached``: an int64 slot into the split's media table
   ``<split>/<f>.media.parquet`` (slots in first-appearance order; see ``storage.media``). For
   ``lazy_cached`` the split's decoded memmap is written straight to ``<output>/media/`` (content-
   named, ``.done`` sentinel); ``ensure_memmaps`` after publish rebuilds any that are missing.

The entry has encode's layout (``<split>/part-*.arrow``, ``rows-*.npy``, ``encode.json``) plus the
finalized ``training_set_metadata.json`` and the Parquet vocabularies it references (``vocab/*.parquet``,
hard-linked from vocab's entry); ``outputs`` hands it to validate(encoded) and publish in
place of encode's and vocab's. Without media features the stage passes encode's result through.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
from dask import delayed

from core.code_version import module_version
from core.errors import DataError
from storage import media, npy
from storage.fs import write_at
from tasks.config.constants import SPLIT_NAMES
from tasks.features.media import MediaFeature
from tasks.runtime import dask_run, fitted_metadata, progress
from tasks.runtime.dask_run import on_cluster
from tasks.runtime.frame import to_arrow, write_ipc
from tasks.runtime.node import Node, Prepared
from tasks.runtime.outputs import Encoded, Fitted, MediaCached
from tasks.runtime.statistics import Statistics, decode_failures, sequence_lengths

CHUNK_ROWS = 2048  # rows per rewritten part: bounds memory in eager mode


@dataclass
class Part:
    split_id: int
    path: Path
    rows: np.ndarray  # input row of each encoded row
    uids: dict[str, np.ndarray]  # feature -> index of the row's raw value in Sources.raws


@dataclass
class Sources:
    """One feature's distinct raw values (uids) and distinct sources (sids)."""

    feature: MediaFeature
    raws: list[str | None] = field(default_factory=list)
    uid_of: dict = field(default_factory=dict)
    sources: list[str | None] = field(default_factory=list)  # sid -> resolved source
    raw_of: list[str | None] = field(default_factory=list)  # sid -> a raw value naming it
    sha: list[str | None] = field(default_factory=list)
    stamp: list[tuple | None] = field(default_factory=list)  # sid -> (size, mtime_ns, inode) when hashed
    error: list[str | None] = field(default_factory=list)  # sid -> why it fails (None: fine so far)
    sid_of_uid: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def uid(self, raw) -> int:
        u = self.uid_of.get(raw)
        if u is None:
            u = self.uid_of[raw] = len(self.raws)
            self.raws.append(raw)
        return u

    def failed(self) -> np.ndarray:
        return np.array([e is not None for e in self.error], dtype=bool)


def _read_ipc(path: Path, columns: list[str] | None = None) -> pa.Table:
    return feather.read_table(str(path), columns=columns, memory_map=True)


def _collect(encoded: Encoded, features: list[MediaFeature]) -> tuple[list[Part], dict[str, Sources]]:
    by_name = {f.name: Sources(f) for f in features}
    parts = []
    for split_id, split_name in enumerate(SPLIT_NAMES):
        for path in encoded.split_parts(split_name):
            table = _read_ipc(path, [f.name for f in features])
            uids = {}
            for name, src in by_name.items():
                values = table.column(name).to_pylist()
                uids[name] = np.fromiter((src.uid(v) for v in values), dtype=np.int64, count=len(values))
            parts.append(Part(split_id, path, npy.load(Encoded.rows_file(path)), uids))
    return parts, by_name


def _resolve(ctx, src: Sources) -> None:
    opts = src.feature.options
    base = media.dataset_dir(ctx.dataset)
    sid_of: dict = {}
    sid_of_uid = np.empty(len(src.raws), dtype=np.int64)
    for uid, raw in enumerate(src.raws):
        try:
            if raw is None:
                raise media.MediaError("missing value (the missing-value strategy left it empty)")
            source, error, key = media.resolve(raw, base, opts.media_root, ctx.media_cache_root), None, None
            key = source
        except media.MediaError as exc:
            source, error, key = None, str(exc), ("error", raw)
        sid = sid_of.get(key)
        if sid is None:
            sid = sid_of[key] = len(src.sources)
            src.sources.append(source)
            src.raw_of.append(raw)
            src.sha.append(None)
            src.stamp.append(None)
            src.error.append(error)
        sid_of_uid[uid] = sid
    src.sid_of_uid = sid_of_uid


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


def _hash_all(all_sources: list[Sources]) -> None:
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


def _content(all_sources: list[Sources]) -> str:
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


def _first_row(parts: list[Part], src: Sources, bad_sids: np.ndarray) -> tuple[int, int]:
    """(input row, sid) of the first input row whose value is one of ``bad_sids``."""
    best = (None, None)
    mask = np.zeros(len(src.sources), dtype=bool)
    mask[bad_sids] = True
    for part in parts:
        sids = src.sid_of_uid[part.uids[src.feature.name]]
        hit = mask[sids]
        if hit.any():
            i = int(np.argmin(np.where(hit, part.rows, np.iinfo(np.int64).max)))
            if best[0] is None or part.rows[i] < best[0]:
                best = (int(part.rows[i]), int(sids[i]))
    return best


def _failure(parts: list[Part], src: Sources, bad_sids) -> DataError:
    row, sid = _first_row(parts, src, np.asarray(bad_sids, dtype=np.int64))
    f = src.feature
    where = src.sources[sid] or src.raw_of[sid]
    return DataError(f"row {row}, column '{f.column}': {f.describe()} cannot decode {src.raw_of[sid]!r} "
                     f"({where}): {src.error[sid]}. Set on_decode_error: skip_row or fill to go on without it")


def _check_fail_early(parts: list[Part], all_sources: list[Sources]) -> None:
    """Under ``fail``, a value that cannot even be read stops the run before anything is decoded."""
    for src in all_sources:
        if src.feature.options.on_decode_error != "fail":
            continue
        referenced = np.zeros(len(src.sources), dtype=bool)
        for part in parts:
            referenced[src.sid_of_uid[part.uids[src.feature.name]]] = True
        bad = np.flatnonzero(referenced & src.failed())
        if len(bad):
            raise _failure(parts, src, bad)


# ---- the stage ----------------------------------------------------------------------------------

def config_slice(ctx) -> dict:
    """The media features' options and ``fit_on`` (the media content's hash joins the key in ``run``)."""
    return {"features": ctx.features_slice([f.name for f in ctx.media_features()]),
            "fit_on": ctx.config.preprocessing.fit_on}


def prepare(ctx, fitted: Fitted, encoded: Encoded) -> Prepared:
    """Every media source read and hashed, on a cache hit too: their content joins the key. Without media
    features encode's entry is this node's output."""
    features = ctx.media_features()
    if not features:  # nothing to decode: encode's result is this stage's
        return Prepared(result=MediaCached.passing(fitted, encoded))
    with progress.stage("media_cache"):
        parts, by_name = _collect(encoded, features)
        all_sources = list(by_name.values())
        for src in all_sources:
            _resolve(ctx, src)
        _hash_all(all_sources)
    _check_fail_early(parts, all_sources)
    content = _content(all_sources)
    return Prepared(key={"content": content}, value=(parts, all_sources, content))


def compute(ctx, out: Path, prepared: tuple, fitted: Fitted, encoded: Encoded) -> Statistics:
    parts, all_sources, content = prepared
    return _compute(ctx, out, fitted, encoded, parts, all_sources, content, ctx.config.preprocessing.fit_on)


def _fit_sids(parts: list[Part], src: Sources, fit_on: str) -> list[int]:
    """Distinct readable sources of the fit rows, in input-row order."""
    chosen = [p for p in parts if fit_on == "all" or p.split_id == 0]
    if not chosen:
        return []
    rows = np.concatenate([p.rows for p in chosen])
    sids = np.concatenate([src.sid_of_uid[p.uids[src.feature.name]] for p in chosen])
    sids = sids[np.argsort(rows, kind="stable")]
    _, first = np.unique(sids, return_index=True)
    return [int(s) for s in sids[np.sort(first)] if src.error[s] is None]


def _sample(parts, src: Sources, fit_on: str):
    for sid in _fit_sids(parts, src, fit_on):
        try:
            yield media.read_bytes(src.sources[sid])
        except media.MediaError:
            continue


@dataclass
class SplitSlots:
    sids: np.ndarray  # slot -> sid
    slot_of_sid: np.ndarray  # sid -> slot (-1: not in this split)
    store: np.ndarray | None = None  # slot -> decoded tensor (eager: scratch; lazy_cached: the memmap)
    memmap: str | None = None


def _slots(parts: list[Part], src: Sources, split_id: int) -> SplitSlots:
    chosen = [src.sid_of_uid[p.uids[src.feature.name]] for p in parts if p.split_id == split_id]
    sids = np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)
    uniq, first = np.unique(sids, return_index=True)
    order = uniq[np.argsort(first, kind="stable")]
    slot_of_sid = np.full(len(src.sources), -1, dtype=np.int64)
    slot_of_sid[order] = np.arange(len(order))
    return SplitSlots(order, slot_of_sid)


def _compute(ctx, out: Path, fitted: Fitted, encoded: Encoded, parts: list[Part], all_sources: list[Sources], content: str,
             fit_on: str) -> Statistics:
    metadata = Fitted.read_full(fitted.path)  # rewritten below, inline vocabularies included
    stats = Statistics()
    codecs = {}
    for src in all_sources:
        f = src.feature
        update = f.finalize_media(_sample(parts, src, fit_on))
        meta = metadata[f.name]
        meta["preprocessing"].update(update.pop("preprocessing", {}))
        meta.update(update)
        codecs[f.name] = f.codec(meta)

    scratch = out / "_scratch"
    media_dir = media.output_media_dir(ctx.output)
    writers: list[media.MemmapWriter] = []
    slots: dict[tuple[str, int], SplitSlots] = {}
    try:
        for src in all_sources:
            for split_id in range(len(SPLIT_NAMES)):
                slots[(src.feature.name, split_id)] = _slots(parts, src, split_id)
        _decode_all(parts, all_sources, codecs, slots, scratch, media_dir, writers, stats)
        for w in writers:
            w.commit()
        writers.clear()
        counts = _rewrite_parts(out, parts, all_sources, codecs, slots, stats)
        _write_tables(out, all_sources, codecs, slots)
    finally:
        for w in writers:
            w.abort()
        slots.clear()
        shutil.rmtree(scratch, ignore_errors=True)
    fitted_metadata.write(out, metadata)
    fitted.copy_files(metadata, out, link=True)  # Parquet vocabularies: publish reads them from this entry
    Encoded.write_info(out, counts, len(parts))
    # the decoding code joins the artifact's dataset fingerprint (MediaCached.fingerprint)
    MediaCached.write_state(out, {"content": content, "code_version": module_version(__name__),
                                  "features": [s.feature.name for s in all_sources],
                                  "encode_statistics": encoded.statistics})
    return stats


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


def _decode_all(parts, all_sources, codecs, slots, scratch: Path, media_dir: Path | None,
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
                        raise _failure(parts, src, [sid])
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


def _rewrite_parts(out: Path, parts, all_sources, codecs, slots, stats: Statistics) -> dict[str, int]:
    """Every encoded part rewritten with its media columns (``_rewrite_part``): one Dask task per part (on
    a cluster's workers, which read the eager tensors from the scratch store themselves)."""
    failed = {src.feature.name: src.failed() for src in all_sources}
    tasks = []
    for part in parts:
        columns = []
        for src in all_sources:
            f = src.feature
            sids = src.sid_of_uid[part.uids[f.name]]
            sl = slots[(f.name, part.split_id)]
            store = str(sl.store.filename) if f.mode == "eager" else None
            columns.append((f.name, f.mode, f.options.on_decode_error, ~failed[f.name][sids], sl.slot_of_sid[sids],
                            store, codecs[f.name].shape, codecs[f.name].dtype))
        tasks.append(delayed(_rewrite_part, pure=False)(str(out), str(part.path), part.rows,
                                                        SPLIT_NAMES[part.split_id], columns))
    counts = dict.fromkeys(SPLIT_NAMES, 0)
    skipped = {src.feature.name: 0 for src in all_sources}
    filled = dict(skipped)
    for part, (kept, part_skipped, part_filled) in zip(parts, dask_run.compute(tasks), strict=True):
        counts[SPLIT_NAMES[part.split_id]] += kept
        for name in skipped:
            skipped[name] += part_skipped[name]
            filled[name] += part_filled[name]
    for name in skipped:
        policy = next(s.feature.options.on_decode_error for s in all_sources if s.feature.name == name)
        if policy == "skip_row":
            stats.counter(f"media_cache.rows_skipped.{name}", skipped[name])
        elif policy == "fill":
            stats.counter(f"media_cache.rows_filled.{name}", filled[name])
    for split_name, n in counts.items():
        stats.counter(f"media_cache.rows_out.{split_name}", n)
    return counts


def _rewrite_part(out: str, path: str, rows: np.ndarray, split_name: str, columns: list[tuple]) -> tuple:
    """One encoded part with its media columns as the mode stores them (eager: the tensors, read from the
    scratch store; lazy modes: the slot), rows a ``skip_row`` feature failed left out, in parts of at most
    ``CHUNK_ROWS`` rows. ``columns``: per media feature ``(name, mode, on_decode_error, ok per row, slot per
    row, scratch store path or None, shape, dtype)``. Returns (rows kept, skipped and filled per feature)."""
    keep = np.ones(len(rows), dtype=bool)
    skipped, filled = {}, {}
    for name, _mode, policy, ok, *_ in columns:
        skipped[name] = int((keep & ~ok).sum()) if policy == "skip_row" else 0
        if policy == "skip_row":
            keep &= ok
    for name, _mode, policy, ok, *_ in columns:
        filled[name] = int((keep & ~ok).sum()) if policy == "fill" else 0
    idx = np.flatnonzero(keep)
    table = _read_ipc(Path(path))
    folder = Path(out) / split_name
    folder.mkdir(parents=True, exist_ok=True)
    stem = Path(path).stem.removeprefix("part-")
    stores = {name: np.load(store, mmap_mode="r") for name, _m, _p, _o, _s, store, *_ in columns if store}
    for c, start in enumerate(range(0, len(idx), CHUNK_ROWS) if len(idx) else [0]):
        chosen = idx[start:start + CHUNK_ROWS]
        sub = table.take(pa.array(chosen, type=pa.int64()))
        for name, mode, _policy, _ok, slot_of_row, _store, shape, dtype in columns:
            slot = slot_of_row[chosen]
            if mode == "eager":
                column = to_arrow(np.asarray(stores[name][slot]) if len(slot) else np.zeros((0, *shape), dtype=dtype))
            else:
                column = pa.array(slot, type=pa.int64())
            sub = sub.set_column(sub.schema.get_field_index(name), name, column)
        part = Encoded.part_file(folder, f"{stem}-{c:05d}")
        write_ipc(sub, part)
        np.save(Encoded.rows_file(part), rows[chosen].astype(np.int64))
    return len(idx), skipped, filled


def _write_tables(out: Path, all_sources, codecs, slots) -> None:
    """The media table of every lazy feature and split (slot -> source, sha256, ok, error)."""
    for src in all_sources:
        f = src.feature
        if f.mode == "eager":
            continue
        for split_id, split_name in enumerate(SPLIT_NAMES):
            sl = slots[(f.name, split_id)]
            ids = sl.sids.tolist()
            meta = {"feature": f.name, "mode": f.mode, "codec": codecs[f.name].to_json(),
                    "on_decode_error": f.options.on_decode_error, "memmap": sl.memmap}
            (out / split_name).mkdir(parents=True, exist_ok=True)
            media.write_table(out / split_name / f"{f.name}{media.TABLE_SUFFIX}",
                              [src.sources[s] for s in ids], [src.sha[s] for s in ids], [src.error[s] for s in ids],
                              meta)


# ---- what later stages read ----------------------------------------------------------------------


NODE = Node("media_cache", compute, inputs=("vocab", "encode"), output=MediaCached, reads=config_slice,
            prepare=prepare, in_artifact=False)  # its content hash joins the artifact id through the dataset fingerprint
