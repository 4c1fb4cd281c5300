"""A CSV/TSV byte stream cut into lines of at most a bounded length (``tasks.dataset.csv_limits``): the slow
pass that locates a bad row (``csv_ranges.locate_problem``) and the checks before a long row is read whole
hold at most the limit (and one chunk) in memory, whatever the file holds."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

CHUNK = 1 << 20  # bytes read at a time


class LineTooLong(Exception):
    """A line longer than the limit: ``index`` (0-based, from the stream's start; None when unknown) and
    ``offset``, a byte inside it (from the stream's start)."""

    def __init__(self, index: int | None, offset: int):
        super().__init__(f"line {index} at byte {offset}")
        self.index = index
        self.offset = offset


def lines(fh, term: bytes, limit: int) -> Iterator[tuple[int, bytes]]:
    """(offset of its first byte, the line without ``term``) for each line of ``fh`` (a binary stream);
    ``LineTooLong`` as soon as a line passes ``limit`` bytes, before it is held whole."""
    pending: list[bytes] = []
    pending_len, at, index = 0, 0, 0
    while True:
        chunk = bytes(fh.read(CHUNK))
        if not chunk:
            break
        start = 0
        while (found := chunk.find(term, start)) >= 0:
            piece = chunk[start:found]
            if pending_len + len(piece) > limit:
                raise LineTooLong(index, at)
            line = b"".join([*pending, piece]) if pending else piece
            pending, pending_len = [], 0
            yield at, line
            at += len(line) + len(term)
            index += 1
            start = found + len(term)
        rest = chunk[start:]
        pending.append(rest)
        pending_len += len(rest)
        if pending_len > limit:
            raise LineTooLong(index, at)
    if pending_len:
        yield at, b"".join(pending)


def first_long_line(fh, limit: int, chunk_bytes: int = 4 * CHUNK) -> int | None:
    """The byte offset where the first line longer than ``limit`` starts (a line ends at a CR or an LF, as
    pyarrow's CSV reader ends rows), None when there is none; ``fh`` is read in chunks (numpy, no Python
    loop over bytes)."""
    start, at = 0, 0  # where the current line starts; where the next chunk starts
    while True:
        chunk = bytes(fh.read(chunk_bytes))
        if not chunk:
            return start if at - start > limit else None
        view = np.frombuffer(chunk, dtype=np.uint8)
        ends = np.flatnonzero((view == 10) | (view == 13)) + at
        if len(ends):
            starts = np.concatenate(([start], ends[:-1] + 1))
            over = np.flatnonzero(ends - starts > limit)
            if len(over):
                return int(starts[over[0]])
            start = int(ends[-1]) + 1
        at += len(chunk)
        if at - start > limit:
            return start
