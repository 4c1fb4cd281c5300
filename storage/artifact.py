"""Reading a published artifact (DESIGN section 5).

``Artifact.open`` reads ``manifest.json`` (refusing a folder without one: an artifact without its
manifest is not complete; a symlinked one, or one whose ``artifact_id`` is not a plain id) and, with
``verify=True``, checks every file's size and sha256 against it and refuses a file the manifest does not
list (``UNLISTED_BY_DESIGN``). Every file name the manifest and ``feature_spec.yaml`` give is checked at
open, before anything is read (``storage.safe_paths``), and every file is read through
``storage.artifact_read``: inside the folder, listed, of its listed size, and the small ones
(``feature_spec.yaml``, ``training_set_metadata.json``) of their listed sha256 (docs/security.md). ``read_split`` returns ``{column: numpy array}`` as published, ``__row__`` (each row's 0-based
position in the input) included, with lazy and lazy_cached media columns decoded as an eager
column holds them (``decode=False``: their int64 slots, as stored); ``batches`` and
``torch_dataset`` read the same files as torch tensors (``storage.loader``).

Sizes: ``check_sizes``, ``read_split``, ``batches`` and ``torch_dataset`` hold the manifest's row counts against
the files' own headers and footers before they allocate by them (``storage.size_checks``).

``metadata`` is the per-feature ``training_set_metadata.json``; the file's ``__row__`` entry (the
row id column's description, no feature) is ``row_id``.

``path`` may be a URL (``s3://bucket/prefix[/<artifact_id>]``): the artifact is downloaded into a
local cache folder and every file's sha256 checked on the way (``storage.remote``); ``url`` keeps
where it came from. With ``stream=True`` only its description is downloaded, and ``batches`` streams
each rank's shards through a bounded local cache (``storage.shard_stream``); ``read_split`` and
``torch_dataset`` need the whole files, so they ask for an ``Artifact.open`` without it.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

from core.errors import DataError, IntegrityError
from storage import npy, remote, shard_stream
from storage.artifact_files import (
    MANIFEST,
    ROW_COLUMN,
    arrow_to_numpy,
    json_object,
    locate,
    read_feature_spec,
    read_shard,
)
from storage.artifact_read import (
    FEATURE_SPEC,
    METADATA_FILE,
    check_chunks,
    check_manifest,
    listed_file,
    read_manifest,
    read_small,
)
from storage.cache import verify_files
from storage.fs import strip_file_scheme
from storage.loader import BatchLoader, SplitColumns
from storage.media import MediaColumn, ensure_memmaps, item_specs
from storage.size_checks import check_parquet, check_split, stored_shapes
from storage.split_binary import read_chunk

# arrow_to_numpy: re-exported from storage.artifact_files; check_manifest from storage.artifact_read
__all__ = ["MANIFEST", "Artifact", "arrow_to_numpy", "check_manifest"]

# What prepflow writes in an artifact's folder that its manifest does not list, by design: the manifest
# itself (written last, it cannot list its own digest). Anything else unlisted fails ``verify``
# (docs/security.md). The memmaps of lazy_cached media columns live beside the artifact (``<output>/media``),
# the report is ``<output>/<artifact_id>.report.html``: neither is inside the folder.
UNLISTED_BY_DESIGN = frozenset({MANIFEST})


class Artifact:
    def __init__(self, path: Path, manifest: dict, url: str | None = None):
        self.path = path
        self.manifest = manifest
        self.url = url or str(path)

    @classmethod
    def open(cls, path: str | Path, verify: bool = False, stream: bool = False,
             cache_limit: int | str | None = None, cache_dir: str | Path | None = None) -> "Artifact":
        """``stream=True`` (an ``s3://`` artifact): download the description only, and stream the shards a
        rank reads into a cache of at most ``cache_limit`` bytes (``storage.shard_stream``)."""
        if remote.is_remote(path) and stream:
            return cls._open_streamed(str(path), cache_limit, cache_dir)
        if remote.is_remote(path):
            local = remote.fetch(str(path), verify=verify)  # downloads are always checked against sha256
            art = cls.open(local, verify=False)
            art.url = str(path)
            return art
        path = locate(strip_file_scheme(str(path)))
        art = cls(path, read_manifest(path))
        art._check_description()
        if verify:
            art.verify()
        return art

    @classmethod
    def _open_streamed(cls, url: str, cache_limit, cache_dir) -> "Artifact":
        local, art_url = shard_stream.open_streamed(url)
        art = cls(local, read_manifest(local), url=url)
        art._check_description()
        art._stream = (art_url, shard_stream.ShardCache(cache_dir or remote.cache_root() / "shards",
                                                        shard_stream.parse_limit(cache_limit)))
        return art

    def _check_description(self) -> None:
        """The small files every reader reads (``feature_spec.yaml``, ``training_set_metadata.json``) are inside the
        folder, listed, of their listed size: a symlink out of it is refused at open, whatever is read next."""
        for name in (FEATURE_SPEC, METADATA_FILE):
            if name in self.manifest["files"]:
                listed_file(self.path, self.manifest["files"], name)

    @property
    def streamed(self) -> bool:
        """Opened with ``stream=True``: the rows are on the store, read shard by shard by ``batches``."""
        return "_stream" in self.__dict__

    def _local_rows(self, what: str) -> None:
        if self.streamed:
            raise DataError(f"{self.url}: {what} needs the split's whole files, and this artifact was opened with "
                            f"stream=True (only batches() streams); Artifact.open({self.url!r}) downloads them")

    def verify(self) -> None:
        if self.streamed:  # every shard is checked against its sha256 as it is downloaded
            raise DataError(f"{self.url}: a streamed artifact is verified shard by shard as batches() reads it; "
                            f"Artifact.open(url, verify=True) downloads and verifies it whole")
        problems = verify_files(self.path, self.manifest["files"], str(self.path / MANIFEST))
        problems += [f"{rel}: not listed in {MANIFEST}" for rel in unlisted_files(self.path, self.manifest["files"])]
        if problems:
            raise IntegrityError(f"{self.path}: {len(problems)} file(s) do not match manifest.json: "
                                 + "; ".join(problems[:10]))

    def check_sizes(self) -> None:
        """Every split's files hold the manifest's rows of ``feature_spec.yaml``'s row shapes, as their headers
        and footers say (``storage.size_checks``: no row read); else one ``IntegrityError`` naming the file."""
        self._local_rows("check_sizes")
        for split in self.splits:
            check_split(self.path, self.feature_spec, split, self.num_rows(split))

    # ---- metadata --------------------------------------------------------------------------------
    @property
    def artifact_id(self) -> str:
        return self.manifest["artifact_id"]

    @property
    def splits(self) -> list[str]:
        return [s for s, n in self.manifest["rows"].items()]

    def num_rows(self, split: str) -> int:
        return int(self.manifest["rows"][split])

    @property
    def metadata(self) -> dict:
        """Every feature's fitted metadata (``training_set_metadata.json`` without its ``__row__`` entry)."""
        metadata = self._metadata_file()
        metadata.pop(ROW_COLUMN, None)
        return metadata

    @property
    def row_id(self) -> dict | None:
        """The ``__row__`` column's entry in ``training_set_metadata.json`` (None: an artifact made before it)."""
        return self._metadata_file().get(ROW_COLUMN)

    def _metadata_file(self) -> dict:
        return json_object(self._metadata_bytes, str(self.path / METADATA_FILE), "every feature's fitted metadata")

    @cached_property
    def _metadata_bytes(self) -> bytes:
        """``training_set_metadata.json``'s bytes, checked once per artifact object; parsed on each use (each
        caller gets its own dict)."""
        return read_small(self.path, self.manifest, METADATA_FILE)

    def id_map(self, parent: "str | Path | Artifact") -> dict[str, np.ndarray]:
        """Per vocabulary feature both artifacts have: an int32 array of the parent's vocabulary size, each parent
        id's id here (the ``<UNK>`` id where its value left), from the two vocabularies (``storage.id_map``)."""
        from storage import id_map

        parent = parent if isinstance(parent, Artifact) else Artifact.open(parent)
        mine = id_map.vocabularies(self.metadata, self.path)
        theirs = id_map.vocabularies(parent.metadata, parent.path)
        return {name: id_map.map_ids(values, mine[name]) for name, values in theirs.items() if name in mine}

    @cached_property
    def feature_spec(self) -> dict:
        return read_feature_spec(self.path, self.manifest)

    def formats(self, split: str) -> list[str]:
        return list(dict.fromkeys(c["type"] for c in self.chunks(split)))

    def describe(self) -> dict:
        spec = self.feature_spec
        stats = {n: (s.get("count") if s.get("kind") == "counter" else s.get("counts"))
                 for n, s in self.manifest.get("statistics", {}).items()}
        metadata = self.metadata
        features = {name: {"type": meta.get("type"), "column": meta.get("column"),
                           "output": name in {f["name"] for f in self.manifest.get("config", {}).get("output_features", [])}}
                    for name, meta in metadata.items()}
        return {k: self.manifest.get(k) for k in ("artifact_id", "created_at", "prepflow_version",
                                                   "dataset_fingerprint", "rows")} | {
            "url": self.url, "formats": {s: self.formats(s) for s in self.splits}, "features": features,
            "columns": self.column_specs(), "channels": spec["channel_spec"], "row_id": self.row_id,
            "statistics": stats, "dataset_files": self.manifest.get("dataset_files", []),
            "fitted_from": self.manifest.get("fitted_from"), "mode": self.manifest.get("mode"),
            "lineage": self.lineage(), "refit_advised": self.manifest.get("refit_advised"),
            "dropped_files": self.manifest.get("dropped_files", [])}

    def lineage(self) -> list[dict]:
        """An extend's chain of parents back to the last refit (``artifact_id``, ``path``, ``mode``), nearest
        first; a parent that can no longer be read ends the chain with ``"missing": True``."""
        chain, manifest = [], self.manifest
        while manifest.get("mode") == "extend" and manifest.get("parent") and len(chain) < 10_000:
            parent = dict(manifest["parent"])
            try:
                manifest = json.loads((Path(parent["path"]) / "manifest.json").read_text())
            except (OSError, ValueError, TypeError):
                chain.append({**parent, "missing": True})
                break
            chain.append({**parent, "mode": manifest.get("mode", "refit")})
        return chain

    def column_specs(self) -> dict[str, dict]:
        """Every published column's dtype and shape as ``read_split`` returns it: a lazy or lazy_cached media
        column as its decoded items, with ``media`` (``<feature type> (<mode>)``), not as its int64 slots."""
        specs = item_specs(self.feature_spec)
        metadata = self.metadata
        media = {name: chunk.get("mode") for chunks in self.feature_spec["source_spec"].values() for chunk in chunks
                 if chunk["type"] == "media" for name in chunk["features"]}
        out = {}
        for name, spec in specs.items():
            out[name] = dict(spec)
            meta = metadata.get(name) or {}
            if meta.get("type") in ("image", "audio"):
                out[name]["media"] = f"{meta['type']} ({media.get(name) or 'eager'})"
        return out

    # ---- data ------------------------------------------------------------------------------------
    def chunks(self, split: str) -> list[dict]:
        return self.feature_spec["source_spec"].get(split, [])

    def read_split(self, split: str, columns: list[str] | None = None, decode: bool = True) -> dict[str, np.ndarray]:
        """``{column: numpy array}`` of one split, rows in published order. Lazy and lazy_cached media
        columns are decoded here (lazy_cached from its memmap, built on first use), so they equal an eager
        column of the same data; ``decode=False`` gives their int64 slots as stored."""
        out = self._read_stored(split, columns)
        if decode:
            for chunk in self.chunks(split):
                for name in chunk["features"] if chunk["type"] == "media" else []:
                    if name in out:
                        column = MediaColumn(self.path, chunk, out[name])
                        out[name] = column.take(np.arange(len(column), dtype=np.int64))
        return out

    def _read_stored(self, split: str, columns: list[str] | None) -> dict[str, np.ndarray]:
        self._local_rows("read_split")
        if split not in self.manifest["rows"]:
            raise DataError(f"{self.path}: no split {split!r}; splits are {self.splits}")
        out: dict[str, np.ndarray] = {}
        chunks = self.chunks(split)
        check_chunks(self.path, self.manifest["files"], chunks)  # listed, inside, of their listed size
        parquet = [c for c in chunks if c["type"] == "parquet"]
        if parquet:  # the footers first: a shard decodes to as many rows as its footer says
            check_parquet(self.path, parquet[0]["files"], self.num_rows(split),
                          stored_shapes(self.feature_spec, chunks))
            files = [self.path / f for f in parquet[0]["files"]]
            table = pa.concat_tables([read_shard(f, columns) for f in files])
            for name in table.column_names:
                out[name] = arrow_to_numpy(table.column(name))
            return out
        for chunk in chunks:
            if chunk["type"] == "npy":
                for name, file in zip(chunk["features"], chunk["files"], strict=False):
                    if columns is None or name in columns:
                        out[name] = npy.load(self.path / file, rows=self.num_rows(split), feature=name,
                                             row_shape=self._row_shape(split, name))
        for chunk in chunks:  # columns published only in NVIDIA's split_binary layout (storage.split_binary)
            rest = [n for n in chunk["features"] if n not in out and (columns is None or n in columns)]
            if chunk["type"] == "split_binary" and rest:
                out.update(read_chunk(self.path, chunk, self.num_rows(split), rest, mmap=False))
        return out

    def _row_shape(self, split: str, name: str) -> list | None:
        """The row shape ``feature_spec.yaml`` gives a column stored as it is read (not a lazy media column's
        slots); None when it gives none."""
        if any(name in c["features"] for c in self.chunks(split) if c["type"] == "media"):
            return None
        shape = (self.feature_spec.get("feature_spec", {}).get(name) or {}).get("shape")
        return shape if isinstance(shape, list) else None

    # ---- torch -------------------------------------------------------------------------------------
    def batches(self, split: str, batch_size: int = 4096, shuffle: bool = True, seed: int = 0, prefetch: int = 4,
                drop_last: bool = False, rank: int = 0, world_size: int = 1, pin_memory: bool | None = None,
                device=None, epoch: int = 0, channels: list[str] | None = None, prefer: str = "npy",
                shuffle_block: int = 1, shuffle_window: int | None = None):
        """Batches of ``dict[channel -> torch.Tensor]`` over ``split`` (see ``storage.loader``); with
        ``state_dict``/``load_state_dict`` for resuming. ``shuffle_window`` (rows): the shard-aware order
        (``storage.order``), which a streamed artifact is always read in (default: two shards' rows)."""
        if split not in self.manifest["rows"]:
            raise DataError(f"{self.url}: no split {split!r}; splits are {self.splits}")
        stream, columns = None, None
        if self.streamed:
            art_url, cache = self.__dict__["_stream"]
            stream = shard_stream.SplitStream(art_url, self.manifest, self.feature_spec, split, cache)
            if shuffle_window is None:
                shuffle_window = shard_stream.DEFAULT_WINDOW_SHARDS * stream.shard_rows
        else:
            columns = self.split_columns(split, prefer)
        return BatchLoader(columns, self.feature_spec, batch_size=batch_size,
                           shuffle=shuffle, seed=seed, prefetch=prefetch, drop_last=drop_last, rank=rank,
                           world_size=world_size, pin_memory=pin_memory, device=device, epoch=epoch, channels=channels,
                           shuffle_block=shuffle_block, shuffle_window=shuffle_window,
                           shard_rows=self.shard_rows if shuffle_window is not None else None,
                           stream=stream, artifact_id=self.artifact_id, split=split)

    @property
    def shard_rows(self) -> int | None:
        """Rows per Parquet shard as the publisher cut the splits (``publish.shard_rows``; the last one shorter)."""
        value = (self.manifest.get("config") or {}).get("publish", {}).get("shard_rows")
        return value if isinstance(value, int) and value > 0 else None

    def torch_dataset(self, split: str, channels: list[str] | None = None, prefer: str = "npy"):
        """A map-style ``torch.utils.data.Dataset`` over ``split`` (see ``storage.torch_dataset``)."""
        from storage.torch_dataset import ArtifactDataset  # imports torch (slow): only when asked for

        return ArtifactDataset(self.split_columns(split, prefer), self.feature_spec, channels=channels,
                               artifact_id=self.artifact_id, shard_rows=self.shard_rows)

    def split_columns(self, split: str, prefer: str = "npy"):
        """The split's columns as numpy arrays, opened once per artifact object (``storage.loader``)."""
        if split not in self.manifest["rows"]:
            raise DataError(f"{self.url}: no split {split!r}; splits are {self.splits}")
        self._local_rows("torch_dataset (and a local read of the split)")
        cache = self.__dict__.setdefault("_split_columns", {})
        if (split, prefer) not in cache:
            check_chunks(self.path, self.manifest["files"], self.chunks(split))  # listed, inside, of their size
            cache[(split, prefer)] = SplitColumns(self.path, self.feature_spec, split, prefer, self.num_rows(split))
        return cache[(split, prefer)]

    def ensure_memmaps(self) -> list:
        """Build the ``lazy_cached`` media memmaps that are not complete yet (``storage.media.ensure_memmaps``)."""
        return ensure_memmaps(self.path)


def unlisted_files(root: Path, files: dict) -> list[str]:
    """Files (and symlinks, and other entries) under ``root`` that neither ``files`` nor ``UNLISTED_BY_DESIGN``
    name: one listing of the folder tree (``os.scandir``), no file read."""
    out: list[str] = []
    stack = [(str(root), "")]
    while stack:
        folder, prefix = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, rel + "/"))
                elif rel not in files and rel not in UNLISTED_BY_DESIGN:
                    out.append(rel)
    return sorted(out)
