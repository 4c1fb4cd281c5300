"""The names an artifact gives its files, resolved under its root before anything is read or written.

An artifact is data someone else may have made: its ``manifest.json``, ``feature_spec.yaml``,
``training_set_metadata.json``, media tables and ``LATEST`` name files, and a reader (``Artifact.open``,
``verify``, ``storage.remote.fetch``, ``storage.loader``, ``Preprocessor.load``) opens what they name.
Every such name must be a relative POSIX path inside the artifact: ``check_name`` refuses an absolute
name (``/etc/hostname``, ``C:\\x``, ``\\\\host``), a ``..`` component, a backslash, a NUL, an empty
name; ``under`` also refuses a path whose symlinks lead out of the root (``os.path.realpath``). An
artifact id (a folder name in the output and in the download cache, a report's file name) must be one
plain folder name as publish makes them: hex digits, at most ``ID_MAX`` (``check_id`` for a manifest's
``artifact_id``; ``latest_id`` for what a ``LATEST`` file holds, which a refusal never quotes: a ``LATEST``
may be a link to any file). Each refusal is one ``IntegrityError`` naming the file that holds the name
and, except for ``LATEST``, the name (``quoted``: bounded, control characters escaped).

``storage.artifact_read`` reads an artifact's files with these checks and its manifest's sizes and digests.

docs/security.md says what an artifact may contain and what prepflow checks.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from core.errors import IntegrityError, quoted

MANIFEST = "manifest.json"
DAMAGED = "the artifact is damaged or was edited (prepflow inspect --verify checks every file against its manifest)"

_DRIVE = re.compile(r"^[A-Za-z]:")
ID_MAX = 64  # publish's ids are 24 hex digits (tasks.publish.stage.artifact_id); a full sha256 is 64
_ID = re.compile(rf"[0-9a-f]{{1,{ID_MAX}}}")


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
    """An artifact id: one plain folder name, hex digits (at most ``ID_MAX``) as publish makes them."""
    if not isinstance(art_id, str) or not _ID.fullmatch(art_id):
        raise IntegrityError(f"{where}: artifact id {quoted(art_id)} is not one plain folder name (hex digits, at "
                             f"most {ID_MAX}); refused before anything is read or written (docs/security.md)")
    return art_id


def latest_id(data: bytes, where: str) -> str:
    """The artifact id a ``LATEST`` file holds (``data``: its first bytes; publish writes ``<id>\\n``). Its
    content is never quoted in the refusal: a ``LATEST`` may be a link to any file."""
    text = data.decode("ascii", errors="replace").strip()
    if not _ID.fullmatch(text):
        raise IntegrityError(f"{where}: does not hold one artifact id (hex digits, at most {ID_MAX}); its content is "
                             f"not shown; publish writes it (docs/security.md)")
    return text


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


def _entry(files: dict, name: str, path: Path) -> dict:
    info = files.get(name)
    if not isinstance(info, dict) or not isinstance(info.get("bytes"), int) or isinstance(info.get("bytes"), bool):
        raise IntegrityError(f"{path}: not listed in {MANIFEST} with its size; {DAMAGED}")
    return info


def listed_file(root: str | os.PathLike, files: dict, name: str, root_real: str | None = None) -> Path:
    """``root / name``: inside the artifact (no symlink out), listed in the manifest's ``files``, a regular file
    of the listed size. One ``stat``; nothing read."""
    path = under(root, name, str(Path(root) / MANIFEST), root_real)
    info = _entry(files, name, path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise IntegrityError(f"{Path(root)}: not a complete prepflow artifact: {name}: missing (listed in "
                             f"{MANIFEST})") from None
    if not stat.S_ISREG(st.st_mode):
        raise IntegrityError(f"{path}: not a regular file; {DAMAGED}")
    if st.st_size != info["bytes"]:
        raise IntegrityError(f"{path}: {st.st_size} bytes, {MANIFEST} lists {info['bytes']}; {DAMAGED}")
    return path
