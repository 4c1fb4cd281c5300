"""Objects of a store read no further than the size an artifact's manifest lists for them.

A manifest lists each file's size; the object on the store may be larger (replaced, or made so on
purpose). ``storage.remote.fetch`` and ``storage.shard_stream`` read through here: the object's size as the
store reports it when it is opened (an S3 ``HEAD``) is compared with the listed one before any byte is
read, and the read itself stops one byte past the listed size whatever the store sends, so a larger
object is one ``IntegrityError`` naming it after at most that many bytes, never downloaded whole. A
smaller one is what the caller's size and sha256 check reports.
"""

from __future__ import annotations

from pathlib import Path

from core.errors import IntegrityError

CHUNK = 8 << 20  # bytes per ranged read when copying to a file
MANIFEST = "manifest.json"


def _larger(url: str, size: int | str, nbytes: int) -> IntegrityError:
    return IntegrityError(f"{url}: {size} bytes on the store, {MANIFEST} lists {nbytes}; not downloaded "
                          f"(the object was replaced, or the manifest does not describe it)")


def open_listed(fs, url: str, nbytes: int):
    """``url`` opened for ranged reads, refused when the store reports a size other than ``nbytes``."""
    fs.invalidate_cache(url)  # the size (and S3's ETag every ranged read is held to) from the store, not a listing
    fh = fs.open(url, "rb", block_size=CHUNK, cache_type="none")
    size = getattr(fh, "size", None)
    if isinstance(size, int) and size > nbytes:
        fh.close()
        raise _larger(url, size, nbytes)
    return fh


def read_listed(fs, url: str, nbytes: int) -> bytes:
    """The object's bytes, at most ``nbytes``: a larger object is refused (see the module docstring)."""
    with open_listed(fs, url, nbytes) as fh:
        data = fh.read(nbytes + 1)
    if len(data) > nbytes:
        raise _larger(url, f"more than {nbytes}", nbytes)
    return data


def copy_listed(fs, url: str, dest: Path, nbytes: int) -> None:
    """The object written to ``dest``, at most ``nbytes`` read: a larger object is refused (``dest`` is then
    partial: the caller's temporary folder is removed)."""
    left = nbytes + 1
    with open_listed(fs, url, nbytes) as fh, open(dest, "wb") as out:
        while left > 0:
            data = fh.read(min(CHUNK, left))
            if not data:
                break
            out.write(data)
            left -= len(data)
    if left == 0:
        raise _larger(url, f"more than {nbytes}", nbytes)
