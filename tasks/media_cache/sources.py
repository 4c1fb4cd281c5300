"""media_cache: every media feature's distinct raw values and the sources they name.

``collect`` reads each media column of encode's parts once into ``Part`` rows (the index of each row's raw
value) and per-feature ``Sources``; ``resolve`` maps each raw value to a readable source (or why it cannot
be read); ``failure`` builds the one-line error naming the first input row that uses a failing source."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

from core.errors import DataError
from storage import media, npy
from tasks.config.constants import SPLIT_NAMES
from tasks.features.media import MediaFeature
from tasks.runtime.outputs import Encoded

# a part of the media_cache stage: the stage is versioned with what this module imports too (core.code_version)
CODE_VERSION_FOLLOWS_IMPORTS = True


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


def read_ipc(path: Path, columns: list[str] | None = None) -> pa.Table:
    return feather.read_table(str(path), columns=columns, memory_map=True)


def collect(encoded: Encoded, features: list[MediaFeature]) -> tuple[list[Part], dict[str, Sources]]:
    by_name = {f.name: Sources(f) for f in features}
    parts = []
    for split_id, split_name in enumerate(SPLIT_NAMES):
        for path in encoded.split_parts(split_name):
            table = read_ipc(path, [f.name for f in features])
            uids = {}
            for name, src in by_name.items():
                values = table.column(name).to_pylist()
                uids[name] = np.fromiter((src.uid(v) for v in values), dtype=np.int64, count=len(values))
            parts.append(Part(split_id, path, npy.load(Encoded.rows_file(path)), uids))
    return parts, by_name


def resolve(ctx, src: Sources) -> None:
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


def failure(parts: list[Part], src: Sources, bad_sids) -> DataError:
    row, sid = _first_row(parts, src, np.asarray(bad_sids, dtype=np.int64))
    f = src.feature
    where = src.sources[sid] or src.raw_of[sid]
    return DataError(f"row {row}, column '{f.column}': {f.describe()} cannot decode {src.raw_of[sid]!r} "
                     f"({where}): {src.error[sid]}. Set on_decode_error: skip_row or fill to go on without it")


def check_fail_early(parts: list[Part], all_sources: list[Sources]) -> None:
    """Under ``fail``, a value that cannot even be read stops the run before anything is decoded."""
    for src in all_sources:
        if src.feature.options.on_decode_error != "fail":
            continue
        referenced = np.zeros(len(src.sources), dtype=bool)
        for part in parts:
            referenced[src.sid_of_uid[part.uids[src.feature.name]]] = True
        bad = np.flatnonzero(referenced & src.failed())
        if len(bad):
            raise failure(parts, src, bad)

