"""Private temporary folders that a killed run cannot leak for ever.

Writers build an output in a private folder (``<parent>/<prefix><random>``) and rename it into
place (a cache entry, an artifact). A process killed with SIGKILL leaves that folder behind. So
every such folder has a lock file beside it, ``<folder>.lock``, which its writer holds with an
exclusive ``fcntl.flock`` from before the folder exists until after it is gone; the kernel drops
the lock when the process ends, however it ends. ``sweep(parent, prefix)`` removes the folders
whose lock it can take without waiting: their writer is dead. A live writer's lock is never free,
in another process or in this one (flock locks belong to the open file, not the process), so a
sweep never removes a folder that is being written.

The order of the steps closes the races between a writer and a sweeper:

* writer: ``open(lock, O_CREAT)`` -> ``flock(LOCK_EX)`` -> the path still names the file it locked
  (else a sweeper unlinked it in between: start again) -> ``mkdir(folder)`` -> ... -> the folder is
  renamed away or removed -> ``unlink(lock)`` -> close;
* sweeper: ``open(lock)`` (never creates) -> ``flock(LOCK_EX | LOCK_NB)`` (taken: a live writer,
  keep) -> the path still names that file -> ``rmtree(folder)`` -> ``unlink(lock)`` -> close.

A folder with no lock file beside it (made by a prepflow older than this scheme, which may still be
running) is kept: nothing tells whether its writer is alive. A lock file whose folder is gone (the
writer died after the rename) is removed. Where the filesystem refuses locks (``ENOLCK``, some FUSE
mounts), writers go on without one and sweeps keep everything.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import threading
import uuid
from pathlib import Path

log = logging.getLogger("prepflow.tmpdirs")

LOCK_SUFFIX = ".lock"
_BUSY = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)
# This process's live lock files, as (st_dev, st_ino): where flock is emulated by POSIX record locks
# (NFS), a process does not conflict with its own locks, and closing any descriptor of the file drops
# them, so a sweep must recognize its own process's lock files before it even opens them.
_LIVE: set[tuple[int, int]] = set()
_LIVE_LOCK = threading.Lock()


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (a sweeper may have unlinked it)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _lock_path(folder: Path) -> Path:
    return folder.with_name(folder.name + LOCK_SUFFIX)


class TempFolder:
    """A new folder ``<parent>/<prefix><12 hex>`` guarded by a held lock until ``close()``.

    ``close()`` removes the folder if it is still there (it was not renamed into place), then the
    lock file. ``mode`` is the folder's (0o700: private to this user, like ``tempfile.mkdtemp``).
    Use it as a context manager (``with TempFolder(p, ".tmp-x-") as path:``) or call
    ``close()`` in a ``finally``.
    """

    def __init__(self, parent: str | os.PathLike, prefix: str, mode: int = 0o777):
        parent = Path(parent)
        while True:
            self.path = parent / f"{prefix}{uuid.uuid4().hex[:12]}"
            self.lock_path = _lock_path(self.path)
            self._fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            except OSError as exc:  # a filesystem without locks: go on unguarded (sweeps keep it)
                log.debug("cannot lock %s (%s); the folder is not guarded", self.lock_path, exc)
            if _same_file(self._fd, self.lock_path):
                break
            os.close(self._fd)  # a sweeper took the fresh lock file for a stale one and unlinked it
        st = os.fstat(self._fd)
        self._id = (st.st_dev, st.st_ino)
        with _LIVE_LOCK:
            _LIVE.add(self._id)
        try:
            self.path.mkdir(mode=mode)  # less the umask
        except BaseException:
            self._release_lock()
            raise

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        if self._fd is None:
            return
        try:
            if self.path.exists():
                shutil.rmtree(self.path, ignore_errors=True)
        finally:
            self._release_lock()

    def _release_lock(self) -> None:
        try:
            os.unlink(self.lock_path)
        except FileNotFoundError:
            pass
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(self._id)
            os.close(self._fd)
            self._fd = None


def _remove_if_dead(folder: Path, lock: Path) -> bool:
    """Remove ``folder`` and ``lock`` when ``lock`` is free (its writer is gone); True if a folder
    was removed (False also when only an orphan lock file went)."""
    try:
        st = os.stat(lock)
    except OSError:
        return False
    with _LIVE_LOCK:
        if (st.st_dev, st.st_ino) in _LIVE:
            return False
    try:  # O_RDWR: an exclusive lock emulated by fcntl (NFS) needs a writable descriptor
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except OSError:  # gone meanwhile (its writer finished, another sweep), or not ours to open
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in _BUSY:
                log.debug("cannot lock %s (%s); keeping %s", lock, exc, folder)
            return False
        if not _same_file(fd, lock):
            return False
        existed = folder.exists()
        if existed:
            shutil.rmtree(folder, ignore_errors=True)
            if folder.exists():  # not ours to delete (permissions): keep the lock beside what is left
                return False
        try:
            os.unlink(lock)
        except OSError:
            pass
        return existed
    finally:
        os.close(fd)


def sweep(parent: str | os.PathLike, prefix: str, names: list[str] | None = None) -> list[str]:
    """Remove the ``<prefix>*`` folders under ``parent`` whose writer is gone; their names.

    ``names``: ``parent``'s listing when the caller has one (a large folder is listed once).
    Best effort: an unreadable ``parent`` or a folder that cannot be removed is left as it is (a
    sweep must never fail the run that does it).
    """
    parent = Path(parent)
    if names is None:
        try:
            names = os.listdir(parent)
        except OSError:
            return []
    locks = [n for n in names if n.startswith(prefix) and n.endswith(LOCK_SUFFIX)]
    removed = []
    for name in sorted(locks):
        folder = parent / name[: -len(LOCK_SUFFIX)]
        if _remove_if_dead(folder, parent / name):
            removed.append(folder.name)
    if removed:
        log.info("removed %d temporary folder(s) left by stopped runs in %s: %s", len(removed), parent,
                 ", ".join(removed))
    return removed
