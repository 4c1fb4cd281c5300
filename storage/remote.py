"""Artifacts on an fsspec store (``s3://bucket/prefix``, ``memory://``, ...).

Publishing: the workers write the artifact's row files (Parquet shards, ``.npy`` columns,
split_binary files) straight to ``<output>/<artifact_id>/`` on the store, each object by the task
that makes it (``tasks.publish.shards``, ``tasks.publish.split_binary``), and return its name, size
and sha256. The flow process stages only the small rest in a local folder (metadata, vocabularies,
feature specs, media tables, the manifest it assembles from the workers' descriptions), checks that
every object the workers reported is on the store at its size, uploads the rest, then
``manifest.json`` after every other file, then ``LATEST``. A reader refuses a folder without a
manifest, so it never sees a half-written artifact (an object store has no rename; the manifest is
the commit marker). What a killed run left under the artifact's prefix is never listed by any
manifest, so it is invisible to ``Artifact.open``, and the next run of the same artifact id
overwrites it object by object with the same bytes before it writes the manifest. An artifact
whose manifest is already there is reused, never rewritten, when one listing of its prefix finds every
listed object at its size; a damaged one loses its manifest first and is published again (so a reader
never trusts an artifact with a missing or truncated object).

Reading: ``fetch`` checks every name the manifest gives (and the artifact id) before it downloads anything
(``storage.safe_paths``), then downloads the artifact into a local cache folder (``$PREPFLOW_ARTIFACT_CACHE``,
else ``$PREPFLOW_HOME/artifacts``, else ``~/.prepflow/artifacts``), each file read no further than its
listed size (``storage.listed_reads``), and checks every file's size and sha256 against the manifest
before the folder is renamed into place. A cached copy whose manifest
matches the remote one is reused; ``verify=True`` always downloads and checks again.

Both build in private folders locked for their writer's life (``storage.tmpdirs``): a publish first
removes the ``prepflow-publish-*`` staging folders that killed runs left in the system temporary
folder, a fetch the ``.tmp-*`` downloads left in the artifact cache.

S3 endpoint and credentials come from the environment (``S3_ENDPOINT_URL`` or
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ...; see ``storage.fs``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from core.errors import DataError, IntegrityError
from storage.artifact_read import LATEST_MAX, parse_manifest
from storage.cache import verify_files
from storage.fs import filesystem, is_url
from storage.listed_reads import copy_listed
from storage.safe_paths import check_names, latest_id
from storage.tmpdirs import TempFolder, sweep

MANIFEST = "manifest.json"
LATEST = "LATEST"
log = logging.getLogger("prepflow.publish")
DOWNLOAD_THREADS = 8  # concurrent file downloads of a fetch
STAGING_PREFIX = "prepflow-publish-"  # local staging of a remote publish, in the system temporary folder


def is_remote(path: str | os.PathLike) -> bool:
    """A URL that is not a local ``file://`` path."""
    return is_url(str(path)) and not str(path).startswith("file://")


def join(url: str, *parts: str) -> str:
    return "/".join([url.rstrip("/"), *(p.strip("/") for p in parts)])


def cache_root() -> Path:
    if os.environ.get("PREPFLOW_ARTIFACT_CACHE"):
        return Path(os.environ["PREPFLOW_ARTIFACT_CACHE"])
    return Path(os.environ.get("PREPFLOW_HOME", Path.home() / ".prepflow")) / "artifacts"


def _wrap(url: str, action: str, exc: Exception) -> DataError:
    return DataError(f"{url}: cannot {action} ({type(exc).__name__}: {exc})")


def _read_bytes(fs, url: str) -> bytes | None:
    try:
        with fs.open(url, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except Exception as exc:  # credentials, endpoint, bucket: the path goes into the message
        raise _wrap(url, "read", exc) from exc


# ---- publishing ----------------------------------------------------------------------------------

def publish(output_url: str, art_id: str, build: Callable[[Path, str], dict]) -> dict:
    """Publish under ``output_url``: ``build(local_root, art_url)`` writes the artifact's large files
    to ``art_url`` (from the workers) and the rest, manifest included, to ``local_root/<art_id>``, and
    returns publish's summary; the staged files are uploaded, manifest last, then ``LATEST``."""
    fs = filesystem(output_url)
    art_url = join(output_url, art_id)
    existing = _read_bytes(fs, join(art_url, MANIFEST))
    if existing is not None:
        manifest, problems = _stored_problems(fs, art_url, existing)
        if not problems:
            write_latest(fs, output_url, art_id)
            return {"artifact_path": art_url, "artifact_id": art_id, "rows": manifest["rows"], "reused": True}
        log.warning("%s: the published artifact is damaged and is published again: %s", art_url,
                    "; ".join(problems[:5]))
        try:  # no manifest while its files are rewritten: readers refuse the folder meanwhile
            fs.rm_file(join(art_url, MANIFEST))
        except Exception as exc:
            raise _wrap(join(art_url, MANIFEST), "remove the damaged artifact's manifest", exc) from exc
    sweep(tempfile.gettempdir(), STAGING_PREFIX)
    with TempFolder(tempfile.gettempdir(), STAGING_PREFIX, mode=0o700) as staging:
        result = build(staging, art_url)
        local = staging / art_id
        upload(fs, local, art_url)
        write_latest(fs, output_url, art_id)
        return {**result, "artifact_path": art_url, "reused": False}


def _stored_problems(fs, art_url: str, manifest_bytes: bytes) -> tuple[dict, list[str]]:
    """The stored manifest and what one listing of the artifact's prefix finds wrong with it: a listed object
    missing or not of its listed size (no byte read)."""
    try:
        manifest = json.loads(manifest_bytes)
        files = manifest["files"]
        check_names(files, join(art_url, MANIFEST))
    except (ValueError, KeyError, TypeError, IntegrityError) as exc:
        return {}, [f"{MANIFEST}: unreadable ({exc})"]
    try:
        fs.invalidate_cache(art_url)
        stored = {name: info.get("size") for name, info in fs.find(art_url, detail=True).items()}
    except Exception as exc:
        raise _wrap(art_url, "list the published artifact", exc) from exc
    prefix = fs._strip_protocol(art_url).rstrip("/")
    problems = []
    for rel, info in files.items():
        size = stored.get(f"{prefix}/{rel}")
        want = info.get("bytes") if isinstance(info, dict) else None
        if size != want:
            problems.append(f"{rel}: {'missing' if size is None else f'{size} bytes'}, expected {want}")
    return manifest, problems


def upload(fs, local: Path, art_url: str) -> None:
    """Upload the manifest's files staged in ``local``, check that the others (written by the workers)
    are on the store at their size, then upload the manifest."""
    manifest = json.loads((local / MANIFEST).read_text())
    files = sorted(rel for rel in manifest["files"] if (local / rel).is_file())
    written = sorted(set(manifest["files"]) - set(files))
    try:
        if files:
            fs.put([str(local / rel) for rel in files], [join(art_url, rel) for rel in files])
        if written:
            fs.invalidate_cache(art_url)
            stored = {name: info.get("size") for name, info in fs.find(art_url, detail=True).items()}
            prefix = fs._strip_protocol(art_url).rstrip("/")
            for rel in written:
                size = stored.get(f"{prefix}/{rel}")
                if size != manifest["files"][rel]["bytes"]:
                    raise IntegrityError(f"{join(art_url, rel)}: {'missing' if size is None else f'{size} bytes'} "
                                         f"on the store, the worker that wrote it reported "
                                         f"{manifest['files'][rel]['bytes']}; no manifest written")
        fs.put_file(str(local / MANIFEST), join(art_url, MANIFEST))
    except IntegrityError:
        raise
    except Exception as exc:
        raise _wrap(art_url, "upload the artifact", exc) from exc


def write_latest(fs, output_url: str, art_id: str) -> None:
    try:
        fs.pipe_file(join(output_url, LATEST), (art_id + "\n").encode())
    except Exception as exc:
        raise _wrap(join(output_url, LATEST), "write", exc) from exc


# ---- reading -------------------------------------------------------------------------------------

def resolve(url: str) -> tuple[str, bytes]:
    """The artifact's URL and its manifest bytes; an output root is followed through ``LATEST``."""
    fs = filesystem(url)
    url = url.rstrip("/")
    manifest = _read_bytes(fs, join(url, MANIFEST))
    if manifest is None:
        latest = _read_bytes(fs, join(url, LATEST))
        if latest is None:
            raise DataError(f"{url}: not a complete artifact (no {MANIFEST}) and no {LATEST} file")
        url = join(url, latest_id(latest[:LATEST_MAX], join(url, LATEST)))  # its content is never quoted
        manifest = _read_bytes(fs, join(url, MANIFEST))
        if manifest is None:
            raise DataError(f"{url}: not a complete artifact (no {MANIFEST})")
    return url, manifest


def download_listed(fs, art_url: str, files: dict, dest: Path) -> None:
    """Every file ``files`` lists, from ``art_url`` into ``dest``, each read no further than its listed size
    (``storage.listed_reads``), ``DOWNLOAD_THREADS`` at a time."""
    sizes = {}
    for rel, info in files.items():
        size = info.get("bytes") if isinstance(info, dict) else None
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise IntegrityError(f"{join(art_url, MANIFEST)}: {rel}: size {size!r} is not a byte count")
        sizes[rel] = size
    with ThreadPoolExecutor(DOWNLOAD_THREADS, thread_name_prefix="prepflow-fetch") as pool:
        futures = [pool.submit(copy_listed, fs, join(art_url, rel), dest / rel, size)
                   for rel, size in sorted(sizes.items())]
        try:
            for done in futures:
                done.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def fetch(url: str, verify: bool = False) -> Path:
    """A verified local copy of the artifact at ``url``; returns its folder."""
    art_url, manifest_bytes = resolve(url)
    # its id and every name it holds are checked before anything is downloaded
    manifest = parse_manifest(manifest_bytes, join(art_url, MANIFEST))
    root = cache_root()
    local = root / manifest["artifact_id"]
    if not verify and (local / MANIFEST).is_file() and (local / MANIFEST).read_bytes() == manifest_bytes:
        return local
    root.mkdir(parents=True, exist_ok=True)
    sweep(root, ".tmp-")
    download = TempFolder(root, f".tmp-{manifest['artifact_id']}-")
    tmp = download.path
    try:
        fs = filesystem(art_url)
        files = sorted(manifest["files"])
        for rel in files:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        try:
            download_listed(fs, art_url, manifest["files"], tmp)
        except FileNotFoundError as exc:
            raise IntegrityError(f"{art_url}: a file listed in {MANIFEST} is missing ({exc})") from None
        except IntegrityError:
            raise
        except Exception as exc:
            raise _wrap(art_url, "download the artifact", exc) from exc
        problems = verify_files(tmp, manifest["files"])
        if problems:
            raise IntegrityError(f"{art_url}: {len(problems)} file(s) do not match {MANIFEST}: "
                                 + "; ".join(problems[:10]))
        (tmp / MANIFEST).write_bytes(manifest_bytes)
        if local.is_symlink():
            local.unlink()
        elif local.exists():
            shutil.rmtree(local, ignore_errors=True)
        try:
            os.rename(tmp, local)
        except OSError:  # another process put the same verified artifact there first
            if not (local / MANIFEST).is_file():
                raise
        return local
    finally:
        download.close()
