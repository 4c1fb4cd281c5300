"""Where a published artifact's files are and how its columns read as numpy (no loader, no codecs).

The lowest artifact layer: ``storage.media`` (memmaps of lazy media columns), ``storage.loader`` and
``storage.artifact`` build on it. ``locate`` finds the artifact folder (an output folder's ``LATEST``
is followed: ``storage.artifact_read.read_latest``) and refuses one without ``manifest.json``: an artifact
without its manifest is not complete. ``read_feature_spec`` reads ``feature_spec.yaml`` through
``storage.artifact_read`` (its size and sha256 checked against the manifest); ``arrow_to_numpy`` turns an
Arrow column into a numpy array (fixed-size lists become n x d arrays).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from core.errors import DataError, IntegrityError
from core.yaml_load import load_yaml
from storage.artifact_read import (  # noqa: F401  (json_object: this module's API too)
    FEATURE_SPEC,
    LATEST,
    MANIFEST,
    json_object,
    read_latest,
    read_small,
)
from storage.safe_paths import check_name, real_root, under
from storage.split_binary import prepflow_view

__all__ = ["FEATURE_SPEC", "LATEST", "MANIFEST", "ROW_COLUMN", "arrow_to_numpy", "check_spec_files", "locate",
           "read_feature_spec", "read_shard", "size_problems", "yaml_problem"]
ROW_COLUMN = "__row__"  # every split's int64 column of input row positions (tasks.publish.rows)


def locate(path: str | Path) -> Path:
    """The local artifact folder ``path`` names (``path`` itself, or the one its ``LATEST`` names)."""
    path = Path(path)
    if (path / LATEST).is_file() and not (path / MANIFEST).exists():
        path = path / read_latest(path)
    if not (path / MANIFEST).is_file():
        raise DataError(f"{path}: not a complete artifact (no {MANIFEST})")
    return path


def read_feature_spec(path: Path, manifest: dict) -> dict:
    """The artifact's ``feature_spec.yaml`` as prepflow reads it (with libyaml's loader when present: much
    faster on wide specs): for a split_binary artifact, the prepflow spec kept in NVIDIA's (``prepflow_view``).
    Read through ``storage.artifact_read.read_small``: inside the folder, of the size and sha256 ``manifest``
    lists."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    file = Path(path) / FEATURE_SPEC
    data = read_small(path, manifest, FEATURE_SPEC)
    try:
        raw = load_yaml(data, loader)
    except yaml.YAMLError as exc:  # one line naming the file, not a YAML traceback
        raise IntegrityError(f"{file}: not valid YAML ({yaml_problem(exc)}); the artifact is damaged "
                             "(prepflow inspect --verify checks every file against its manifest)") from None
    if not isinstance(raw, dict):
        raise IntegrityError(f"{file}: not a feature spec (a mapping with source_spec)")
    spec = prepflow_view(raw)
    root_real = real_root(path)
    for view in (raw, spec):  # NVIDIA's spec and prepflow's: every file either names stays in the artifact
        check_spec_files(Path(path), view, str(file), root_real)
    return spec


def check_spec_files(root: Path, spec: dict, where: str, root_real: str | None = None) -> None:
    """Every file ``spec``'s ``source_spec`` chunks name is inside ``root`` (``storage.safe_paths.under``), and
    a media chunk's ``memmap`` is one plain file name (it is opened under ``<output>/media``)."""
    sources = spec.get("source_spec") or {}
    if not isinstance(sources, dict):
        raise IntegrityError(f"{where}: source_spec is not a mapping")
    root_real = root_real or real_root(root)
    for split, chunks in sources.items():
        for i, chunk in enumerate(chunks or []):
            at = f"{where}: source_spec.{split}[{i}]"
            if not isinstance(chunk, dict) or not isinstance(chunk.get("files", []), list):
                raise IntegrityError(f"{at}: not a chunk with a list of files")
            for name in chunk.get("files", []):
                under(root, name, at, root_real)
            if chunk.get("memmap") is not None and "/" in check_name(chunk["memmap"], f"{at}.memmap"):
                raise IntegrityError(f"{at}.memmap: {chunk['memmap']!r} is not one plain file name")


def yaml_problem(exc: Exception) -> str:
    """A YAML error in one line: the problem and where (1-based line and column, as editors count)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else problem


def arrow_to_numpy(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A column as numpy; fixed-size list columns become n x d (x ...) arrays."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    shape = [len(arr)]
    while pa.types.is_fixed_size_list(arr.type):
        shape.append(arr.type.list_size)
        arr = arr.flatten()
    return arr.to_numpy(zero_copy_only=False).reshape(shape)


def read_shard(path: Path, columns: list[str] | None = None, memory_map: bool = False) -> pa.Table:
    """A Parquet shard of the artifact; an unreadable one (cut short, overwritten) is one ``IntegrityError``
    naming the file."""
    try:
        return pq.read_table(path, columns=columns, memory_map=memory_map)
    except (pa.ArrowInvalid, OSError) as exc:
        raise IntegrityError(f"{path}: unreadable Parquet shard ({str(exc).splitlines()[0]}); the artifact is "
                             "damaged (prepflow inspect --verify checks every file against its manifest)") from None


def size_problems(root: Path, manifest: dict) -> list[str]:
    """What a cheap look finds wrong with a published artifact: a file its manifest lists that is missing
    or not of the listed size (one ``stat`` per file, no byte read), or a name leaving the folder."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        return [f"{MANIFEST}: no 'files' mapping"]
    problems = []
    root_real = real_root(root)
    for rel, info in files.items():
        try:
            path = under(root, rel, str(Path(root) / MANIFEST), root_real)
        except IntegrityError as exc:
            return [str(exc)]
        try:
            size = path.stat().st_size if path.is_file() else None
        except OSError:
            size = None
        want = info.get("bytes") if isinstance(info, dict) else None
        if size is None:
            problems.append(f"{rel}: missing")
        elif size != want:
            problems.append(f"{rel}: {size} bytes, expected {want}")
    return problems
