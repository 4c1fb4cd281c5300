"""Dataset files' fingerprints remembered across runs by what the file system says of each file (its stamp),
so a run over a folder of files it has seen hashes only the new or changed ones (git's index and make trust
a file's stat the same way).

The stamp (``tasks.dataset.fingerprint._stamp``) of a local file: its absolute path, size, modification and
change times (ns), inode and the hashing block size. The change time is set by the kernel on every write and
on every change of the other times, so a rewrite that restores the size and the modification time
(``cp -p``, ``touch -d``) still changes the stamp. A file changed in the last ``SETTLE_NS`` has no stamp (a
write within the clock's granularity could keep its times: git's "racily clean" case), so it is hashed and
not remembered. A remote object's stamp (``s3://``...): its URL, size, ETag and modification time from the
store's listing; without an ETag or a time there is none, and the object is hashed on every run.

Stamps live in ``<cache dir>/file_stamps/<xxh3-64 of the path or URL>-<xxh3-128 of the stamp>.json`` (the
stamp and its fingerprint, written to a temporary name and renamed), read before hashing. Remembering a file's
new stamp removes the records of its earlier versions, so the folder keeps one small file per path seen, not
one per version. A record that does not parse, or whose stamp is not the one asked for, is ignored (the file
is hashed again).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import xxhash

FOLDER = "file_stamps"
SETTLE_NS = 2_000_000_000  # a local file changed more recently than this has no stamp


def settled(*times_ns: int) -> bool:
    """Whether every time (ns since the epoch) is at least ``SETTLE_NS`` before now."""
    return time.time_ns() - max(times_ns) >= SETTLE_NS


class FileStamps:
    """Fingerprints by stamp under ``<cache_dir>/file_stamps`` (a local folder)."""

    def __init__(self, cache_dir: str | os.PathLike):
        self.folder = Path(cache_dir) / FOLDER

    @classmethod
    def at(cls, cache_dir: str | os.PathLike | None) -> FileStamps | None:
        """The store of a local stage cache folder; None without one (or for a remote cache)."""
        if cache_dir is None or "://" in str(cache_dir):
            return None
        return cls(cache_dir)

    def _prefix(self, stamp: list) -> str:
        return xxhash.xxh3_64_hexdigest(str(stamp[1]).encode())  # the path or URL (``fingerprint._stamp``)

    def _path(self, stamp: list) -> Path:
        return self.folder / f"{self._prefix(stamp)}-{xxhash.xxh3_128_hexdigest(json.dumps(stamp).encode())}.json"

    def get(self, stamp: list) -> str | None:
        try:
            record = json.loads(self._path(stamp).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("stamp") != stamp:
            return None
        digest = record.get("fingerprint")
        return digest if isinstance(digest, str) and len(digest) == 64 else None

    def put(self, stamp: list, digest: str) -> None:
        """Remember ``digest`` for ``stamp`` and forget the same path's earlier stamps; a folder that cannot be
        written only costs the next run a hash."""
        path = self._path(stamp)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"stamp": stamp, "fingerprint": digest}))
            os.replace(tmp, path)
            for earlier in self.folder.glob(f"{self._prefix(stamp)}-*.json"):
                if earlier != path:  # a run still reading that version only hashes it again
                    earlier.unlink(missing_ok=True)
        except OSError:
            tmp.unlink(missing_ok=True)
