"""Private temporary folders and files that a killed run cannot leak for ever.

Writers build an output under a private name (``<parent>/<prefix><random><suffix>``) and rename it
into place: a cache entry, an artifact, the ``LATEST`` pointer, an HTML report, a transcoded dataset.
A process killed with SIGKILL leaves that folder or file behind. So every such path has a lock file
beside it, ``<path>.lock``, which its writer holds with an exclusive ``fcntl.flock`` from before the
path exists until after it is gone; the kernel drops the lock when the process ends, however it
ends. ``sweep(parent, match)`` removes the temporary paths whose lock it can take without waiting:
their writer is dead. A live writer's lock is never free, in another process or in this one (flock
locks belong to the open file, not the process), so a sweep never removes a path being written.

The order of the steps closes the races between a writer and a sweeper:

* writer: ``open(lock, O_CREAT)`` -> ``flock(LOCK_EX)`` -> the path still names the file it locked
  (else a sweeper unlinked it in between: start again) -> ``mkdir(folder)`` (a file: the caller
  writes it) -> ... -> the path is renamed away or removed -> ``unlink(lock)`` -> close;
* sweeper: ``open(lock)`` (never creates) -> ``flock(LOCK_EX | LOCK_NB)`` (taken: a live writer,
  keep) -> the path still names that file -> remove the path -> ``unlink(lock)`` -> close.

So a current writer's path never exists without its lock file. A temporary path with no lock file
beside it was made by a prepflow older than this scheme, which may still be running: nothing tells
whether its writer is alive, so it is removed only once clearly abandoned, when neither it nor
anything in it was modified for ``ABANDONED_AFTER_S`` (an hour; an old writer that sat that long
without writing a byte could lose its output, and would then fail its rename, never publish a
partial one). A lock file whose path is gone (the writer died after the rename) is removed. Where the
filesystem refuses locks (``ENOLCK``, some FUSE mounts), writers go on without one and sweeps keep
their paths (the lock file is there, so the age rule does not apply either).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import shutil
import stat
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

log = logging.getLogger("prepflow.tmpdirs")

LOCK_SUFFIX = ".lock"
# A temporary path without a lock file (an older prepflow's) is removed once it and everything in it
# are older than this, by mtime: long past any write an old writer could still be in the middle of.
ABANDONED_AFTER_S = 3600.0
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


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + LOCK_SUFFIX)


def _remove(path: Path) -> bool:
    """Remove a folder (recursively) or a file; whether something was there (it may stay, if not ours)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return True


class TempPath:
    """A new path ``<parent>/<prefix><12 hex><suffix>`` guarded by a held lock until ``close()``.

    Nothing is created at the path here (``TempFolder`` makes a folder; a ``TempFile``'s caller
    writes the file). ``close()`` removes whatever is still at the path (it was not renamed into
    place), then the lock file. Use it as a context manager (``with TempFile(p, ".x.") as path:``)
    or call ``close()`` in a ``finally``.
    """

    def __init__(self, parent: str | os.PathLike, prefix: str, suffix: str = ""):
        parent = Path(parent)
        while True:
            self.path = parent / f"{prefix}{uuid.uuid4().hex[:12]}{suffix}"
            self.lock_path = _lock_path(self.path)
            self._fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            except OSError as exc:  # a filesystem without locks: go on unguarded (sweeps keep it)
                log.debug("cannot lock %s (%s); the path is not guarded", self.lock_path, exc)
            if _same_file(self._fd, self.lock_path):
                break
            os.close(self._fd)  # a sweeper took the fresh lock file for a stale one and unlinked it
        st = os.fstat(self._fd)
        self._id = (st.st_dev, st.st_ino)
        with _LIVE_LOCK:
            _LIVE.add(self._id)

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        if self._fd is None:
            return
        try:
            _remove(self.path)
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


class TempFile(TempPath):
    """A locked name for a file the caller writes and then renames into place (``os.replace``)."""


class TempFolder(TempPath):
    """A new folder ``<parent>/<prefix><12 hex>``, locked until ``close()``; ``mode`` is the folder's
    (0o700: private to this user, like ``tempfile.mkdtemp``)."""

    def __init__(self, parent: str | os.PathLike, prefix: str, mode: int = 0o777):
        super().__init__(parent, prefix)
        try:
            self.path.mkdir(mode=mode)  # less the umask
        except BaseException:
            self._release_lock()
            raise


def _remove_if_dead(path: Path, lock: Path) -> bool:
    """Remove ``path`` and ``lock`` when ``lock`` is free (its writer is gone); True if a folder or
    file was removed (False also when only an orphan lock file went)."""
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
                log.debug("cannot lock %s (%s); keeping %s", lock, exc, path)
            return False
        if not _same_file(fd, lock):
            return False
        existed = _remove(path)
        if existed and os.path.lexists(path):  # not ours to delete (permissions): keep the lock beside it
            return False
        try:
            os.unlink(lock)
        except OSError:
            pass
        return existed
    finally:
        os.close(fd)


def newest_mtime(path: Path) -> float:
    """The latest mtime of ``path`` and, for a folder, of everything under it (links not followed).
    What cannot be read, or vanishes during the walk (someone is at work in it), counts as now."""
    try:
        top = os.lstat(path)
    except FileNotFoundError:
        return 0.0
    except OSError:
        return time.time()
    newest = top.st_mtime
    stack = [path] if stat.S_ISDIR(top.st_mode) else []
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    st = entry.stat(follow_symlinks=False)
                    newest = max(newest, st.st_mtime)
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(Path(entry.path))
        except OSError:
            return time.time()
    return newest


def _remove_if_abandoned(path: Path, max_age: float) -> bool:
    """Remove a lock-less temporary ``path`` (an older prepflow's) if nothing in it changed for
    ``max_age`` seconds and no lock file appeared beside it meanwhile."""
    if time.time() - newest_mtime(path) < max_age:
        return False
    if os.path.lexists(_lock_path(path)):  # a lock-based writer's after all (the listing was stale)
        return False
    return _remove(path) and not os.path.lexists(path)


Match = str | tuple[str, ...] | re.Pattern[str]


def _matcher(match: Match) -> Callable[[str], bool]:
    """A prefix (or prefixes) is matched with ``startswith``, a compiled pattern must match the whole name."""
    if isinstance(match, re.Pattern):
        return lambda name: match.fullmatch(name) is not None
    return lambda name: name.startswith(match)


def sweep(parent: str | os.PathLike, match: Match, names: list[str] | None = None,
          max_age: float = ABANDONED_AFTER_S) -> list[str]:
    """Remove the temporary folders and files under ``parent`` named by ``match`` whose writer is
    gone (their lock is free), and lock-less ones abandoned for ``max_age`` seconds; their names.

    ``match``: a name prefix (``".tmp-"``), a tuple of them, or a compiled pattern for the whole name.
    ``names``: ``parent``'s listing when the caller has one (a large folder is listed once). Costs one
    listing plus a lock attempt per temporary path found. Best effort: an unreadable ``parent`` or a
    path that cannot be removed is left as it is (a sweep must never fail the run that does it).
    """
    parent = Path(parent)
    if names is None:
        try:
            names = os.listdir(parent)
        except OSError:
            return []
    is_temp = _matcher(match)
    locks, unlocked = [], []
    present = set(names)
    for name in names:
        if name.endswith(LOCK_SUFFIX):
            if is_temp(name[: -len(LOCK_SUFFIX)]):
                locks.append(name)
        elif is_temp(name) and name + LOCK_SUFFIX not in present:
            unlocked.append(name)
    removed = []
    for name in sorted(locks):
        path = parent / name[: -len(LOCK_SUFFIX)]
        if _remove_if_dead(path, parent / name):
            removed.append(path.name)
    stale = [name for name in sorted(unlocked) if _remove_if_abandoned(parent / name, max_age)]
    if removed:
        log.info("removed %d temporary path(s) left by stopped runs in %s: %s", len(removed), parent,
                 ", ".join(removed))
    if stale:
        log.info("removed %d lock-less temporary path(s) untouched for over %.0f s in %s: %s", len(stale),
                 max_age, parent, ", ".join(stale))
    return sorted(removed + stale)


_SWEPT: set[str] = set()
_SWEPT_LOCK = threading.Lock()


def first_time(folder: str | os.PathLike) -> bool:
    """True the first time this process asks about ``folder`` (by absolute path), then False: a sweep
    that need not run more than once per process (a cache hit's)."""
    key = os.path.abspath(folder)
    with _SWEPT_LOCK:
        if key in _SWEPT:
            return False
        _SWEPT.add(key)
        return True
