"""A stage, declared: what it is called, what it reads and writes, what versions its cache.

Every stage module ends with its ``Node`` (``tasks/ingest/stage.py``: ``NODE = Node("ingest", run, ...)``)
and ``tasks.graph`` lists them in run order: the one declaration both runners walk (``tasks.graph``).

- ``run(ctx, *args, *inputs) -> StageResult``: the stage's pure logic (no Prefect), given its parents'
  outputs as typed handles (``tasks.runtime.outputs``), in ``inputs`` order. It does its own
  content-addressed caching (``tasks.runtime.context.run_cached``).
- ``inputs``: the names of the nodes whose outputs it reads; ``FILLED`` stands for the last of fill_missing
  and the custom stages (``tasks.graph.expand`` resolves it).
- ``output``: the handle type of its result; the runner gives every result that type.
- ``reads(ctx)``: the slice of the config it reads (part of its cache key, with its parents' keys and its
  code version).
- ``code_version``: derived from the source of the module that defines ``run`` and what it imports directly
  (``core.code_version``); ``in_artifact``: whether it joins the artifact id.
- ``gate`` with ``enforce(ctx, result)``: a data-quality gate; a failing ``fail`` gate raises after it.
- ``retype(ctx, result) -> ctx``: its result types the untyped features; later stages get the new context.
- ``preflight(ctx, local)``: checks made before any data is read (a bad config fails before the first stage).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from core.code_version import module_version
from tasks.runtime.outputs import Output

FILLED = "<filled>"  # fill_missing's output, or the last custom stage's


@dataclass(frozen=True)
class Node:
    name: str
    run: Callable[..., Any]
    inputs: tuple[str, ...] = ()
    output: type[Output] = Output
    reads: Callable[[Any], object] | None = None
    args: tuple = ()  # fixed arguments before the inputs (a custom stage's index)
    gate: bool = False
    enforce: Callable[[Any, Output], Any] | None = None
    retype: Callable[[Any, Output], Any] | None = None
    preflight: Callable[[Any, bool], None] | None = None
    in_artifact: bool = True

    @property
    def module(self) -> str:
        return self.run.__module__

    @property
    def code_version(self) -> str:
        return module_version(self.module)

    def with_inputs(self, inputs: tuple[str, ...]) -> "Node":
        return Node(self.name, self.run, inputs, self.output, self.reads, self.args, self.gate, self.enforce,
                    self.retype, self.preflight, self.in_artifact)
