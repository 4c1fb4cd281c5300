"""The sizes a CSV/TSV line may have, so that a huge header or cell is refused by name at a bounded cost.

* ``PREPFLOW_CSV_MAX_HEADER_BYTES`` (default 1 MiB): the header line. The header is found in the file's
  first bytes; a first line longer than this (a file with no line break, a binary file) is one error
  naming the limit, before any column name is taken from it.
* ``PREPFLOW_CSV_MAX_LINE_BYTES`` (default 64 MiB, the size of a byte range of the range reader; at least
  1 MiB, pyarrow's first block): any line of the file (the bytes between two row ends). A line longer than
  this is refused before it is read whole; finding which line it is reads at most this many bytes at a time.

Both are read in the process that plans the ingest (``tasks.ingest.spec.IngestSpec`` carries them to the
Dask workers). They bound what a row costs, not what the artifact holds: neither is in a cache key.
"""

from __future__ import annotations

import os

from core.errors import ConfigError

HEADER_BYTES_ENV = "PREPFLOW_CSV_MAX_HEADER_BYTES"
LINE_BYTES_ENV = "PREPFLOW_CSV_MAX_LINE_BYTES"
DEFAULT_HEADER_BYTES = 1 << 20
DEFAULT_LINE_BYTES = 64 << 20
LEAST_LINE_BYTES = 1 << 20  # pyarrow's first block: shorter lines are never looked at on their own


def _limit(name: str, default: int, least: int = 1) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < least:
        raise ConfigError(f"{name}: expected a number of bytes, at least {least}, got {raw[:40]!r}")
    return value


def header_bytes() -> int:
    """The longest header line read (``PREPFLOW_CSV_MAX_HEADER_BYTES``)."""
    return _limit(HEADER_BYTES_ENV, DEFAULT_HEADER_BYTES)


def line_bytes() -> int:
    """The longest line of a CSV/TSV file read (``PREPFLOW_CSV_MAX_LINE_BYTES``)."""
    return _limit(LINE_BYTES_ENV, DEFAULT_LINE_BYTES, LEAST_LINE_BYTES)


def mib(n: int) -> str:
    """``n`` bytes as a person reads it: ``64 MiB``, ``1.5 MiB`` or ``4096 bytes``."""
    if n >= 1 << 20 and n % (1 << 18) == 0:
        return f"{n / (1 << 20):g} MiB"
    return f"{n} bytes"


def header_too_long(path: str, limit: int) -> str:
    return (f"{path}: line 1 (header): no line end in the first {mib(limit)}, the longest header line read; "
            f"if the header is that wide, set {HEADER_BYTES_ENV} to more bytes")


def line_too_long(path: str, line: int, limit: int, how: str = "") -> str:
    return (f"{path}: line {line}: longer than {mib(limit)}, the longest line read; set {LINE_BYTES_ENV} to more "
            f"bytes to read it{f' ({how})' if how else ''}")
