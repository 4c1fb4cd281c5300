"""The files of an input dataset: one file, a folder of files (recursively, hidden ones skipped) or a glob
(``day_*.parquet``), local or behind an fsspec URL, in name order: the order rows are numbered in."""

from __future__ import annotations

import glob as globlib
import os
from pathlib import Path

from core.errors import DataError
from storage.fs import filesystem, is_url, strip_file_scheme

GLOB_CHARS = "*?["


def is_glob(path: str) -> bool:
    return any(c in str(path) for c in GLOB_CHARS)


def is_multi(path: str) -> bool:
    """A folder of files or a glob pattern (not one file)."""
    return is_glob(path) or (not is_url(str(path)) and Path(strip_file_scheme(str(path))).is_dir())


def dataset_files(path: str) -> list[str]:
    """The files of a folder (recursively, hidden ones skipped) or a glob, in name order; one file: itself."""
    path = str(path)
    if is_glob(path):
        if is_url(path) and not path.startswith("file://"):
            fs = filesystem(path)
            fs.invalidate_cache()  # listed again: a long-lived process (serve) sees the files added since
            protocol = path.split("://", 1)[0]
            files = sorted(f"{protocol}://{p}" for p in fs.glob(path))
        else:
            files = sorted(p for p in globlib.glob(strip_file_scheme(path), recursive=True) if os.path.isfile(p))
        if not files:
            raise DataError(f"{path}: no file matches this pattern")
        return files
    local = Path(strip_file_scheme(path))
    if not is_url(path) and local.is_dir():
        files = sorted(str(p) for p in local.rglob("*")
                       if p.is_file() and not any(part.startswith(".") for part in p.relative_to(local).parts))
        if not files:
            raise DataError(f"{path}: the folder holds no file")
        return files
    return [path]


def readable(path: str) -> str:
    """Where a task opens ``path``: a local path made absolute (a worker's working folder may differ)."""
    return path if is_url(path) and not path.startswith("file://") else os.path.abspath(strip_file_scheme(path))


def base_of(path: str) -> str:
    """The folder that names are relative to: the folder itself, or a glob's part before its first wildcard."""
    path = readable(str(path))
    if not is_glob(path):
        return path
    head = path[:min(path.index(c) for c in GLOB_CHARS if c in path)]
    return head.rsplit("/", 1)[0] if "/" in head else "."
