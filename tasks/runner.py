"""The one loop over the stage graph (``tasks.graph``), and the in-process runner built on it.

``run_graph(ctx, call)`` checks the config before any data is read (the custom stages' DAG, then every
node's ``preflight``), then walks the run's nodes in order: each gets its parents' outputs (typed
handles), a retyping node (infer_types) gives the later ones a context with the typed config, and a gate
that fails with ``on_failure: fail`` stops the run (in ``execute``). ``call`` is how a node runs:
``execute`` here, in this process (``run_pipeline``: tests, notebooks, benchmarks, the fallback without a
Prefect API); ``flows.preprocess`` passes a call that runs ``execute`` as a Prefect task. So the two
runners share the loop and every step of a node by construction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from tasks.custom import plan as custom_plan
from tasks.graph import expand
from tasks.runtime.context import RunContext
from tasks.runtime.node import Node
from tasks.runtime.outputs import Output

Call = Callable[[Node, RunContext, list[Output]], Output]


@dataclass
class PipelineResult:
    artifact: dict
    stages: list[Output] = field(default_factory=list)

    def summary(self) -> dict:
        return {**{k: self.artifact[k] for k in ("artifact_path", "artifact_id", "rows")},
                "stages": [{"name": s.stage, "seconds": round(s.seconds, 3), "cached": s.cached}
                           for s in self.stages]}


def execute(node: Node, ctx: RunContext, inputs: list[Output], on_gate: Callable[[Output], None] | None = None,
            enforce: bool = True) -> Output:
    """Run one node: its result typed as its output, ``seconds`` the whole call (what the stage does
    before or after its cached step too). A gate's result goes to ``on_gate`` (the Prefect UI) first;
    then a failing ``fail`` gate raises (``enforce``)."""
    start = time.perf_counter()
    result = node.output.of(node.run(ctx, *node.args, *inputs))
    result.seconds = time.perf_counter() - start
    if node.gate:
        if on_gate is not None:
            on_gate(result)
        if enforce:
            node.enforce(ctx, result)
    return result


def plan(ctx: RunContext, until: str | None = None, local: bool = True) -> list[Node]:
    """The run's nodes (up to and including ``until``), after the checks made before any data is read."""
    custom_plan.check(ctx.config, ctx.dataset)  # the custom stages' DAG, with the dataset's header when cheap
    nodes = expand(custom_plan.names(ctx.config))
    if until is not None:
        nodes = nodes[:[n.name for n in nodes].index(until) + 1]
    for node in nodes:
        if node.preflight is not None:
            node.preflight(ctx, local)
    return nodes


def run_graph(ctx: RunContext, call: Call = execute, until: str | None = None, local: bool = True,
              retype: bool = True) -> dict[str, Output]:
    """Every node of the run (up to ``until``) through ``call``; the outputs by node name. ``local``: Dask
    runs in this process (no cluster); ``retype=False``: keep the config as given (``prepflow infer``
    reads the inferred types without applying them)."""
    results: dict[str, Output] = {}
    for node in plan(ctx, until, local):
        results[node.name] = call(node, ctx, [results[p] for p in node.inputs])
        if retype and node.retype is not None:  # later stages see every feature typed
            ctx = node.retype(ctx, results[node.name])
    return results


def run_pipeline(ctx: RunContext) -> PipelineResult:
    """The whole graph in this process; the published artifact and every stage's output."""
    results = run_graph(ctx)
    return PipelineResult(results["publish"].artifact, list(results.values()))
