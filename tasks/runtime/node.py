"""A stage, declared: what it is called, what it reads and writes, what versions its cache.

Every stage module ends with its ``Node`` (``tasks/split/stage.py``: ``NODE = Node("split", compute, ...)``)
and ``tasks.graph`` lists them in run order: the one declaration both runners walk. The runner
(``tasks.runtime.cached.run_node``) owns the cache: it builds the key, looks it up, and only on a miss
calls the node's computation with a temporary folder that becomes the entry.

- ``run(ctx, out, *args, *inputs) -> Statistics``: the stage's computation (no Prefect, no cache): it writes
  its files into ``out`` through its output handle (``tasks.runtime.outputs``) and returns its statistics;
  its parents' outputs come as typed handles, in ``inputs`` order. With ``prepare``, the prepared
  ``value`` comes first: ``run(ctx, out, value, *args, *inputs)``. An uncached node (``cached=False``:
  publish, which writes the artifact rather than an entry) is ``run(ctx, *args, *inputs) -> Output``.
- ``inputs``: the names of the nodes whose outputs it reads; ``FILLED`` stands for the last of fill_missing
  and the custom stages (``tasks.graph.expand`` resolves it).
- ``output``: the handle type of its result; the runner gives every result that type.
- ``reads(ctx, *args)``: the slice of the config it reads. The cache key is the node's name, its
  ``code_version``, its inputs' keys and this slice (with what ``prepare`` adds), built by the runner alone.
- ``code_version``: derived from the source of the module that defines ``run`` and what it imports
  directly (``core.code_version``; ingest's covers its file, pandas and Dask DataFrame readers, which its
  stage module imports); ``in_artifact``: whether it joins the artifact id.
- ``prepare(ctx, *args, *inputs) -> Prepared | None``: what the node does before its cache is looked up, on
  a hit too: checks of the config against the data, the dataset's fingerprint that keys ingest, the media
  content hash that keys media_cache, the suites that key a gate.
- ``on_hit(ctx, result, *args, *inputs)``: what it checks on a cache hit too (split's degenerate data check,
  whose features are not in its key); ``intact(ctx, result) -> bool``: whether a hit's entry can be used
  (ingest's per-file entries still there); one that is not is computed again.
- ``per_file``: it keeps one cache entry per file of a dataset of several files
  (``tasks.runtime.file_fits``), keyed by the runner from its name and code version.
- ``gate`` with ``enforce(ctx, result)``: a data-quality gate; a failing ``fail`` gate raises after it. A
  node that is not a gate may still ``enforce`` (drift's ``action: fail``).
- ``retype(ctx, result) -> ctx``: its result types the untyped features; later stages get the new context.
- ``preflight(ctx, local)``: checks made before any data is read (a bad config fails before the first stage).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from core.code_version import module_version
from tasks.runtime.outputs import Output

FILLED = "<filled>"  # fill_missing's output, or the last custom stage's


@dataclass(frozen=True)
class Prepared:
    """What a node's ``prepare`` found before the cache lookup."""

    parents: tuple[str, ...] = ()  # key parents besides the inputs' keys (ingest: the dataset's fingerprint)
    key: object = None  # joins the config slice in the key (a gate's suites, the media content hash)
    value: Any = None  # handed to the computation, first after ``out``
    result: Output | None = None  # the node's output with nothing to compute (media_cache without media)
    close: Callable[[], None] | None = None  # called once the node is done, hit or miss (staged files)


@dataclass(frozen=True)
class Node:
    name: str
    run: Callable[..., Any]
    inputs: tuple[str, ...] = ()
    output: type[Output] = Output
    reads: Callable[..., object] | None = None
    args: tuple = ()  # fixed arguments before the inputs (a custom stage's index)
    gate: bool = False
    enforce: Callable[[Any, Output], Any] | None = None
    retype: Callable[[Any, Output], Any] | None = None
    preflight: Callable[[Any, bool], None] | None = None
    in_artifact: bool = True
    cached: bool = True
    prepare: Callable[..., Prepared | None] | None = None
    on_hit: Callable[..., None] | None = None
    intact: Callable[[Any, Output], bool] | None = None
    per_file: bool = False

    @property
    def module(self) -> str:
        return self.run.__module__

    @property
    def code_version(self) -> str:
        return module_version(self.module)

    def with_inputs(self, inputs: tuple[str, ...]) -> "Node":
        return dataclasses.replace(self, inputs=inputs)
