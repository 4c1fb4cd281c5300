"""The runner's cached step: one place builds a node's cache key, looks it up and computes on a miss.

The key (``storage.cache.cache_key``) is the node's name, its code version, its inputs' keys and the
config slice it ``reads`` (with what its ``prepare`` adds: ingest's dataset fingerprint, a gate's suites).
On a hit the entry is the node's output; on a miss its computation writes into a temporary folder that
becomes the entry atomically (``storage.cache.StageCache.writer``), with the statistics it returns beside
its files. The CLI's progress lines (``tasks.runtime.progress``) and the crash tests' pause point are said
here, for every node alike. A node that keeps one entry per file (``Node.per_file``) computes inside
``file_fits.declared``, which keys those entries from the node's name and code version.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from core.pause import pause_point
from storage.cache import cache_key
from tasks.runtime import file_fits, progress
from tasks.runtime.node import Node, Prepared
from tasks.runtime.outputs import STATS_FILE, Output


def run_node(node: Node, ctx, inputs: list[Output]) -> Output:
    """``node``'s output for ``inputs``: its cache entry, computed first when there is none."""
    if not node.cached:
        return node.output.of(node.run(ctx, *node.args, *inputs))
    prepared = prepare(node, ctx, inputs)
    try:
        if prepared.result is not None:
            return node.output.of(prepared.result)
        key = key_of(node, ctx, inputs, prepared)
        value = (prepared.value,) if node.prepare is not None else ()
        result = _cached(node, ctx, key, value, inputs)
        if result.cached and node.intact is not None and not node.intact(ctx, result):
            ctx.cache.discard(node.name, key)  # e.g. its per-file entries were cleaned away
            result = _cached(node, ctx, key, value, inputs)
        if result.cached and node.on_hit is not None:
            node.on_hit(ctx, result, *node.args, *inputs)
        return result
    finally:
        if prepared.close is not None:
            prepared.close()


def prepare(node: Node, ctx, inputs: list[Output]) -> Prepared:
    """What ``node`` does before its cache lookup (``Node.prepare``); the caller closes it."""
    return (node.prepare(ctx, *node.args, *inputs) if node.prepare is not None else None) or Prepared()


def key_of(node: Node, ctx, inputs: list[Output], prepared: Prepared) -> str:
    """The cache key of ``node`` on ``inputs``: its name, code version, the inputs' keys (and what ``prepare``
    adds to them) and the config slice it reads (with ``prepare``'s key)."""
    reads = node.reads(ctx, *node.args) if node.reads is not None else None
    return cache_key(node.name, node.code_version, [*(i.key for i in inputs), *prepared.parents],
                     reads if prepared.key is None else {"reads": reads, "prepared": prepared.key})


def _cached(node: Node, ctx, key: str, value: tuple, inputs: list[Output]) -> Output:
    """The entry for ``key``, or ``node.run`` into a temporary folder stored under it."""
    start = time.perf_counter()
    stage = node.name
    progress.started(stage)  # the CLI's "started" line
    hit = ctx.cache.get(stage, key)
    if hit is not None:
        ctx.cache.sweep_once(stage)  # leftovers of killed runs, though this node writes nothing
        stats = json.loads((hit / STATS_FILE).read_text()) if (hit / STATS_FILE).exists() else {}
        progress.finished(stage, time.perf_counter() - start, True, stats)
        return node.output(stage, key, str(hit), True, time.perf_counter() - start, stats)
    with ctx.cache.writer(stage, key) as tmp, progress.stage(stage), file_fits.declared(node):
        stats = node.run(ctx, Path(tmp), *value, *node.args, *inputs).to_json()
        (tmp / STATS_FILE).write_text(json.dumps(stats, sort_keys=True))
        pause_point(stage)
    progress.finished(stage, time.perf_counter() - start, False, stats)
    return node.output(stage, key, str(ctx.cache.path(stage, key)), False, time.perf_counter() - start, stats)
