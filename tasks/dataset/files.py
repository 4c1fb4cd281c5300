"""The files of an input dataset: one file, a folder of files (recursively, hidden ones skipped), a glob
(``day_*.parquet``) or a list of files, local or behind an fsspec URL, in name order: the order rows are
numbered in. A list's names are relative to the deepest folder holding all its files, so a list and a glob
or folder of the same files are the same dataset (same fingerprint, same artifact)."""

from __future__ import annotations

import glob as globlib
import os
from pathlib import Path

from core.errors import ConfigError, DataError
from storage.fs import common_folder, filesystem, is_url, strip_file_scheme

GLOB_CHARS = "*?["


def as_dataset(value):
    """A dataset as the stages take it: a path or URL as ``str``; a list of files (the CLI's
    ``--dataset a b``, Python's ``dataset=[...]``) checked and kept as a ``list`` of two or more files, a
    list of one entry as what that entry names; anything else (a DataFrame) as it is. A bad list is one
    ConfigError (a usage error) naming the entry."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if not isinstance(value, (list, tuple)):
        return value
    if not value:
        raise ConfigError("dataset: the list of files is empty")
    if len(value) == 1 and isinstance(value[0], (str, os.PathLike)) and str(value[0]):
        return os.fspath(value[0])  # one entry: the dataset it names (a file, folder or glob), as the CLI's
    listed, seen = [], {}
    for i, entry in enumerate(value):
        if not isinstance(entry, (str, os.PathLike)) or not str(entry):
            raise ConfigError(f"dataset: entry {i} of the list is {entry!r}; expected a file path or URL")
        entry = os.fspath(entry)
        if is_multi(entry):
            raise ConfigError(f"{entry}: a list of files names files; give a folder or a pattern as the whole dataset")
        where = readable(entry)
        if where in seen:
            raise ConfigError(f"{entry}: listed twice in the dataset (entries {seen[where]} and {i})")
        seen[where] = i
        listed.append(entry)
    schemes = {e.split("://", 1)[0] if is_url(e) and not e.startswith("file://") else "local" for e in listed}
    if len(schemes) > 1:
        raise ConfigError(f"dataset: the listed files mix {' and '.join(sorted(schemes))} files; list files of "
                        "one store")
    return listed


def is_list(dataset) -> bool:
    """A dataset given as a list of files (``as_dataset``)."""
    return isinstance(dataset, (list, tuple))


def label(dataset) -> str:
    """How messages name a dataset: its path, or a list's first file and how many more."""
    if is_list(dataset):
        first = sorted(dataset, key=readable)[0]
        more = len(dataset) - 1
        return f"{first} (and {more} more listed file{'s' if more > 1 else ''})"
    return str(dataset)


def is_glob(path: str) -> bool:
    return any(c in str(path) for c in GLOB_CHARS)


def is_multi(path) -> bool:
    """A folder of files, a glob pattern or a list of files (not one file)."""
    if is_list(path):
        return True
    return is_glob(path) or (not is_url(str(path)) and Path(strip_file_scheme(str(path))).is_dir())


def dataset_files(path) -> list[str]:
    """The files of a folder (recursively, hidden ones skipped), a glob or a list, in name order; one file:
    itself."""
    if is_list(path):
        return sorted(path, key=readable)
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


def base_of(path) -> str:
    """The folder that names are relative to: the folder itself, a glob's part before its first wildcard, or
    the deepest folder holding every listed file."""
    if is_list(path):
        return common_folder([readable(p) for p in path])
    path = readable(str(path))
    if not is_glob(path):
        return path
    head = path[:min(path.index(c) for c in GLOB_CHARS if c in path)]
    return head.rsplit("/", 1)[0] if "/" in head else "."
