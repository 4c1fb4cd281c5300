"""The one way a published artifact's files are read: checked against its manifest first.

The manifest is the root of trust. ``read_manifest`` refuses a ``manifest.json`` that is a symlink (a
manifest elsewhere could vouch for any file) or a special file, reads at most ``MANIFEST_MAX`` bytes, and
refuses a manifest without the shape a reader relies on or whose ``artifact_id`` is not one plain folder
name (``storage.safe_paths.check_id``). Every other file is taken from the manifest:

* ``listed_file``: the path of a file the manifest lists, resolved under the artifact's root (a name
  leaving it, or a symlink leading out of it, is refused by name: ``storage.safe_paths.under``), a regular
  file of the size the manifest lists (one ``stat``, no byte read: a big shard is never hashed here);
* ``read_small``: the bytes of a small file (``feature_spec.yaml``, ``training_set_metadata.json``),
  read up to its listed size and checked against its listed sha256 (``check_bytes``, which a download of
  the same files uses too: ``storage.shard_stream``, ``tasks.report.page``);
* ``check_chunks``: ``listed_file`` for every file a split's ``feature_spec.yaml`` chunks name, before the
  loader, ``read_split`` or a media column opens one.

``read_latest`` reads an output folder's ``LATEST`` (at most ``LATEST_MAX`` bytes, never through a symlink
leading out of the folder) and returns the id it holds, never quoting its content.

Each refusal is one ``IntegrityError`` naming the file. docs/security.md states what is checked where.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from core.errors import DataError, IntegrityError, quoted, shown
from storage.safe_paths import (  # noqa: F401  (listed_file, MANIFEST and DAMAGED: this module's API too)
    DAMAGED,
    MANIFEST,
    check_id,
    check_names,
    inside,
    latest_id,
    listed_file,
    real_root,
    under,
)

FEATURE_SPEC = "feature_spec.yaml"
METADATA_FILE = "training_set_metadata.json"
LATEST = "LATEST"
MANIFEST_MAX = 256 << 20  # bytes: a manifest lists files and statistics, never data
LATEST_MAX = 128  # bytes read of a LATEST file: an id and its newline fit many times over


def check_manifest(manifest: object, where: str) -> dict:
    """``manifest`` if it has the shape a reader relies on, names only files inside the artifact and carries
    a plain artifact id."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict) \
            or not isinstance(manifest.get("rows", {}), dict):
        raise IntegrityError(f"{where}: not a prepflow manifest (no 'files' mapping)")
    check_id(manifest.get("artifact_id"), where)
    check_names(manifest["files"], where)
    for split, rows in manifest.get("rows", {}).items():
        if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
            raise IntegrityError(f"{where}: rows of split {quoted(split)} is {quoted(rows)}, expected a count >= 0")
    return manifest


def parse_manifest(data: bytes, where: str) -> dict:
    """A manifest's bytes (read here or downloaded) as a checked manifest (``check_manifest``)."""
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise IntegrityError(f"{where}: unreadable manifest ({str(exc)[:200]})") from None
    return check_manifest(manifest, where)


def read_manifest(root: str | os.PathLike) -> dict:
    """The checked manifest of the artifact folder ``root``: a plain file, never a symlink."""
    path = Path(root) / MANIFEST
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise DataError(f"{Path(root)}: not a complete artifact (no {MANIFEST})") from None
    if stat.S_ISLNK(info.st_mode):
        raise IntegrityError(f"{path}: is a symlink; the manifest vouches for every other file of the artifact and "
                             f"must be a plain file in its folder (docs/security.md)")
    if not stat.S_ISREG(info.st_mode):
        raise IntegrityError(f"{path}: not a regular file")
    if info.st_size > MANIFEST_MAX:
        raise IntegrityError(f"{path}: {info.st_size} bytes, more than a manifest's limit of {MANIFEST_MAX}")
    with open(path, "rb") as fh:
        data = fh.read(MANIFEST_MAX + 1)
    return parse_manifest(data, str(path))


def check_bytes(data: bytes, info: object, where: str) -> bytes:
    """``data`` if it is of the size and sha256 the manifest entry ``info`` lists."""
    listed = info if isinstance(info, dict) else {}
    if len(data) != listed.get("bytes") or hashlib.sha256(data).hexdigest() != listed.get("sha256"):
        raise IntegrityError(f"{where}: size or sha256 differs from {MANIFEST}; not used; {DAMAGED}")
    return data


def read_small(root: str | os.PathLike, manifest: dict, name: str) -> bytes:
    """The bytes of a small listed file (``feature_spec.yaml``, ``training_set_metadata.json``), read up to its
    listed size and checked against its listed sha256."""
    files = manifest["files"]
    path = listed_file(root, files, name)
    with open(path, "rb") as fh:
        data = fh.read(files[name]["bytes"] + 1)
    return check_bytes(data, files[name], str(path))


def json_object(data: str | bytes, where: str, what: str) -> dict:
    """``data``, the bytes of the artifact's file ``where``, as the JSON object ``what`` it must hold; damaged
    JSON or another JSON value is one ``IntegrityError`` naming the file and what was expected."""
    try:
        value = json.loads(data)
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise IntegrityError(f"{where}: not valid JSON ({shown(str(exc))}); expected {what}, a JSON object; the "
                             "artifact is damaged (prepflow inspect --verify checks every file against its "
                             "manifest)") from None
    if not isinstance(value, dict):
        raise IntegrityError(f"{where}: a JSON {type(value).__name__}, expected {what}, a JSON object")
    return value


def read_json(root: str | os.PathLike, manifest: dict, name: str, what: str) -> dict:
    """A small listed JSON file (``read_small``) holding the JSON object ``what``, parsed."""
    return json_object(read_small(root, manifest, name), str(Path(root) / name), what)


def check_chunks(root: str | os.PathLike, files: dict, chunks: list) -> None:
    """``listed_file`` for every file the chunks of a split name (``feature_spec.yaml``'s ``source_spec``)."""
    root_real = real_root(root)
    for chunk in chunks:
        for name in chunk.get("files", []) if isinstance(chunk, dict) else []:
            listed_file(root, files, name, root_real)


def read_latest(folder: str | os.PathLike) -> str:
    """The artifact id an output folder's ``LATEST`` names: at most ``LATEST_MAX`` bytes read, never through a
    symlink leading out of the folder; its content is never quoted."""
    path = Path(folder) / LATEST
    if not inside(real_root(folder), path):
        raise IntegrityError(f"{path}: is a symlink leading out of {Path(folder)}; publish writes it as a plain "
                             f"file (docs/security.md)")
    with open(path, "rb") as fh:
        return latest_id(fh.read(LATEST_MAX), str(path))


def fetch_small(fs, art_url: str, manifest: dict, name: str) -> bytes:
    """A small listed file of an artifact on a store (``fs``: its fsspec filesystem), read up to its listed size
    and checked against its listed sha256 (as ``read_small`` checks a local one)."""
    where = f"{art_url.rstrip('/')}/{name}"
    info = manifest["files"].get(name)
    if not isinstance(info, dict) or not isinstance(info.get("bytes"), int) or info["bytes"] < 0:
        raise IntegrityError(f"{where}: not listed in {MANIFEST} with its size; {DAMAGED}")
    try:
        data = fs.cat_file(where, start=0, end=info["bytes"] + 1)
    except FileNotFoundError:
        raise IntegrityError(f"{where}: listed in {MANIFEST} but missing on the store") from None
    except Exception as exc:  # network, credentials: the URL goes into the message
        raise DataError(f"{where}: cannot download ({type(exc).__name__}: {str(exc)[:200]})") from exc
    return check_bytes(data, info, where)
