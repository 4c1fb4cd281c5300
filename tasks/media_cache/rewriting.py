"""media_cache: encode's parts rewritten with each media column as its mode stores it (eager: the
tensors; lazy modes: a slot into the split's media table), and the media tables of the lazy features."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from dask import delayed

from storage import media
from tasks.config.constants import SPLIT_NAMES
from tasks.media_cache.sources import read_ipc
from tasks.runtime import dask_run
from tasks.runtime.frame import to_arrow, write_ipc
from tasks.runtime.outputs import Encoded
from tasks.runtime.statistics import Statistics

# a part of the media_cache stage: the stage is versioned with what this module imports too (core.code_version)
CODE_VERSION_FOLLOWS_IMPORTS = True

CHUNK_ROWS = 2048  # rows per rewritten part: bounds memory in eager mode


def rewrite_parts(out: Path, parts, all_sources, codecs, slots, stats: Statistics) -> dict[str, int]:
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
    table = read_ipc(Path(path))
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


def write_tables(out: Path, all_sources, codecs, slots) -> None:
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


