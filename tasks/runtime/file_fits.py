"""Fits over a folder's files, one cache entry per file: a run after a file was added fits that file only.

A fit stage (fill_missing, vocab) over a dataset of several files (``Ingested.files``) fits each file's rows
into an accumulator of the ``core.combiner`` protocol and merges the files' accumulators, in file order, into
its result; the merge is exact, so the result is the one fitting every row at once gives. Each file's
accumulator is a cache entry (``<cache>/<stage>_file/<key>``, ``storage.accumulators``: JSON, ``.npy`` and
Arrow files, no pickle) keyed by the file's ingest entry, its row offset (accumulators may hold row
positions), the digest of its rows' slice of the split (which rows are fit rows), the stage's config slice
(with the fill states the fit depends on) and the stage's code version. A file whose key is unchanged is
not read again.

The entries are declared by the node (``Node.per_file``): the runner computes such a node inside
``declared(node)``, which names the entries' folder and code version after the node, so a stage never
keys them itself; ``fit_files`` called by a node that did not declare them is an error.

Which runs: a dataset of several files whose fit is a function of each file's rows alone
(``applicable``): no custom stages (their fitted states are global), no timeseries windows (a window reads
the rows before it), no ``ffill``/``bfill`` feature (a fill carried over from the previous file). Which
files keep their entries is decided by the split: with ``split: {type: random, exact: false}``, ``fixed`` or
``hash``, adding a file leaves every earlier row in its split; the exact random split (the default) moves a
few rows of every file when rows are added, so every file is fitted again (correct, not incremental).
"""

from __future__ import annotations

import contextlib
import contextvars
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import xxhash

from storage import accumulators
from storage.cache import cache_key
from tasks.runtime import dask_run
from tasks.runtime.outputs import Ingested
from tasks.runtime.timeseries_windows import windowed

_DECLARED: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("file_fits", default=None)


@contextlib.contextmanager
def declared(node):
    """Inside: ``node``'s per-file entries (when it declares ``per_file``) are keyed as its own."""
    token = _DECLARED.set((node.name, node.code_version) if node.per_file else None)
    try:
        yield
    finally:
        _DECLARED.reset(token)


def entries() -> tuple[str, str]:
    """``(cache folder, code version)`` of the running node's per-file entries."""
    scope = _DECLARED.get()
    if scope is None:
        raise RuntimeError("per-file cache entries outside a node that declares them (Node.per_file)")
    return f"{scope[0]}_file", scope[1]


def applicable(ctx, ingest: Ingested, states: dict) -> bool:
    """Whether the fit can go file by file (see the module docstring)."""
    if not ingest.files or ctx.config.stages:
        return False
    if windowed(ctx.features):
        return False
    return not any(s.get("missing_value_strategy") in ("ffill", "bfill") for s in states.values()
                   if isinstance(s, dict))


def storable(*states: Any) -> bool:
    """Whether accumulators like these (e.g. each combiner's ``create()``) can be stored without pickle."""
    with tempfile.TemporaryDirectory(prefix="prepflow-acc-") as tmp:
        try:
            accumulators.dump(list(states), Path(tmp))
        except TypeError:
            return False
    return True


def split_digest(assign, offset: int, rows: int) -> str:
    """XXH3-128 of the file's rows' split ids (``split.npy[offset:offset + rows]``)."""
    return xxhash.xxh3_128_hexdigest(np.ascontiguousarray(np.asarray(assign[offset:offset + rows])).tobytes())


def fit_files(ctx, ingest: Ingested, assign, key_slice: object, fit_file: Callable[[list[tuple[str, int]], str], Any],
              positions: bool | None = None) -> list[tuple[Any, Path]]:
    """Each file's accumulator and its entry's folder, in file order. ``fit_file(parts, folder)``: a delayed
    accumulator of the file's ingested ``parts``, whose tasks may also write files into ``folder`` (the new
    entry, absolute, shared with the workers). The files not cached are fitted in one Dask computation.
    ``assign=None``: a fit of every row whatever its split (infer_types' profiles, the raw gate's bundles):
    keyed without the split. ``positions``: whether an accumulator holds row positions, so that its entry is
    keyed by the file's row offset too (default: with a split); without them (infer_types' profiles) an entry
    is keyed by the file's ingest entry alone, so it holds wherever the file is."""
    folder, code_version = entries()
    positions = assign is not None if positions is None else positions
    results: list[Any] = [None] * len(ingest.files)
    pending: list[tuple[int, str, Path]] = []
    tasks = []
    with contextlib.ExitStack() as stack:
        for i, f in enumerate(ingest.files):
            parents = [f["key"], *([str(f["offset"])] if positions else []),
                       *([split_digest(assign, f["offset"], f["rows"])] if assign is not None else [])]
            key = cache_key(folder, code_version, parents, key_slice)
            entry = ctx.cache.get(folder, key)
            if entry is not None:
                results[i] = (accumulators.load(entry), entry)
                continue
            tmp = stack.enter_context(ctx.cache.writer(folder, key)).absolute()
            pending.append((i, key, tmp))
            tasks.append(fit_file(ingest.file_parts(f), str(tmp)))
        computed = dask_run.compute(tasks) if tasks else []
        for (_i, _key, tmp), acc in zip(pending, computed, strict=True):
            accumulators.dump(acc, tmp)
    for (i, key, _tmp), acc in zip(pending, computed, strict=True):
        results[i] = (acc, ctx.cache.path(folder, key))
    return results
