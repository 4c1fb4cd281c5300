"""The names an artifact gives its files, resolved under its root before anything is read or written.

An artifact is data someone else may have made: its ``manifest.json``, ``feature_spec.yaml``,
``training_set_metadata.json``, media tables and ``LATEST`` name files, and a reader (``Artifact.open``,
``verify``, ``storage.remote.fetch``, ``storage.loader``, ``Preprocessor.load``) opens what they name.
Every such name must be a relative POSIX path inside the artifact: ``check_name`` refuses an absolute
name (``/etc/hostname``, ``C:\\x``, ``\\\\host``), a ``..`` component, a backslash, a NUL, an empty
name; ``under`` also refuses a path whose symlinks lead out of the root (``os.path.realpath``). An
artifact id (a folder name in the output and in the download cache) must be one plain name
(``check_id``). Each refusal is one ``IntegrityError`` naming the file that holds the name and the name.

docs/security.md says what an artifact may contain and what prepflow checks.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from core.errors import IntegrityError, quoted

_DRIVE = re.compile(r"^[A-Za-z]:")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")


def _refuse(where: str, name: object, why: str) -> IntegrityError:
    return IntegrityError(f"{where}: file name {quoted(name)} {why}; an artifact names only files inside its own folder "
                          f"(docs/security.md)")


def check_name(name: object, where: str) -> str:
    """``name`` if it is a relative POSIX path that stays inside its root, else an ``IntegrityError``."""
    if not isinstance(name, str) or not name:
        raise _refuse(where, name, "is not a non-empty string")
    if "\x00" in name or "\\" in name:
        raise _refuse(where, name, "holds a NUL or a backslash")
    if name.startswith("/") or _DRIVE.match(name):
        raise _refuse(where, name, "is absolute")
    parts = name.split("/")
    if any(p == ".." for p in parts):
        raise _refuse(where, name, "leaves the artifact ('..')")
    if any(p in ("", ".") for p in parts):
        raise _refuse(where, name, "is not a plain relative name (empty or '.' component)")
    return name


def check_names(names, where: str) -> None:
    for name in names:
        check_name(name, where)


def check_id(art_id: object, where: str) -> str:
    """An artifact id: one plain folder name (letters, digits, ``.``, ``_``, ``-``; not ``.`` or ``..``)."""
    if not isinstance(art_id, str) or not _ID.match(art_id) or art_id in (".", ".."):
        raise IntegrityError(f"{where}: artifact id {quoted(art_id)} is not one plain folder name (letters, digits, "
                             f"'.', '_', '-'); refused before anything is read or written (docs/security.md)")
    return art_id


def real_root(root: str | os.PathLike) -> str:
    return os.path.realpath(root)


def inside(root_real: str, path: str | os.PathLike) -> bool:
    """``path`` (after its symlinks) is ``root_real`` or below it."""
    real = os.path.realpath(path)
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def under(root: str | os.PathLike, name: object, where: str, root_real: str | None = None) -> Path:
    """``root / name``, refused unless ``name`` passes ``check_name`` and its symlinks stay under ``root``."""
    path = Path(root) / check_name(name, where)
    if not inside(root_real or real_root(root), path):
        raise _refuse(where, name, "is a symlink (or under one) that leads out of the artifact")
    return path
