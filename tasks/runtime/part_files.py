"""Where ingest's Arrow IPC parts are in a cache entry: a listing with no dependency on the readers, so the
output handles (``tasks.runtime.outputs``) name their parts without importing the frame machinery."""

from __future__ import annotations

from pathlib import Path


def parts_in(folder: str | Path, offset: int = 0) -> list[tuple[str, int]]:
    """The Arrow IPC parts ingest wrote into ``folder`` (``part-NNNNN.arrow``, in row order), each with the row
    offset of its ``__row__`` (``tasks.runtime.outputs.Ingested.parts``: the parts of every file)."""
    return [(str(p), offset) for p in sorted(Path(folder).glob("part-*.arrow"))]
