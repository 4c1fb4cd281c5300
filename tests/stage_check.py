"""``check_stage(node, ...)``: the contract one node of the graph keeps on its own (as scikit-learn's
``check_estimator`` checks one estimator): run alone from its declared inputs, in a cache of its own, its
output is of its declared type; a second call is a cache hit on the same entry; a change of the config
slice it reads (one of ``changes``, the first that changes its key) misses. An uncached node (publish)
reuses its artifact on the second call and writes another artifact for the changed config.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from storage.cache import StageCache
from tasks.graph import execute
from tasks.runtime import cached
from tasks.runtime.context import RunContext
from tasks.runtime.node import Node
from tasks.runtime.outputs import Output


def key_of(node: Node, ctx: RunContext, inputs: list[Output]) -> str:
    """The cache key the runner gives ``node`` on ``inputs`` under ``ctx``."""
    prepared = cached.prepare(node, ctx, inputs)
    try:
        return cached.key_of(node, ctx, inputs, prepared) if prepared.result is None else prepared.result.key
    finally:
        if prepared.close is not None:
            prepared.close()


def check_stage(node: Node, ctx: RunContext, inputs: list[Output], changes: list[Callable[[], RunContext]],
                tmp: Path) -> str:
    """Run ``node`` alone on ``inputs`` (its parents' outputs) in a fresh cache and output folder under ``tmp``;
    ``changes``: contexts with one config change each, tried in order. Returns the change's index used
    as ``"change <i>"`` (for the failure messages of the caller), or ``"passthrough"`` for a node whose
    output is its input's (media_cache without media features)."""
    def alone(c: RunContext) -> RunContext:
        return dataclasses.replace(c, cache=StageCache(tmp / "cache"), output=str(tmp / "out"))

    first = execute(node, alone(ctx), inputs)
    assert type(first) is node.output, f"{node.name}: {type(first).__name__} is not its declared {node.output.__name__}"
    assert first.stage == node.name or not node.cached
    again = execute(node, alone(ctx), inputs)
    assert type(again) is node.output
    if not node.cached:  # publish: the same artifact, reused
        assert not first.cached and again.cached and again.key == first.key, node.name
        changed = execute(node, alone(changes[0]()), inputs)
        assert not changed.cached and changed.key != first.key, f"{node.name}: a changed config reused the artifact"
        return "change 0"
    if cached.prepare(node, ctx, inputs).result is not None:
        return "passthrough"
    assert not first.cached, f"{node.name}: the first call in an empty cache was a hit"
    assert again.cached and (again.key, again.path) == (first.key, first.path), f"{node.name}: the second call missed"
    for i, change in enumerate(changes):
        other = change()
        if key_of(node, alone(other), inputs) == first.key:
            continue
        result = execute(node, alone(other), inputs)
        assert not result.cached and result.key != first.key, f"{node.name}: change {i} hit the cache"
        return f"change {i}"
    raise AssertionError(f"{node.name}: no config change in the list changes its cache key")
