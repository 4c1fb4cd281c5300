"""The stage graph, declared once (the stages' ``Node`` objects in run order), and the loop that runs it.

    ingest -> infer_types -> validate_raw -> split -> fill_missing [-> custom stages] -> balance -> vocab
    -> encode -> media_cache -> validate_encoded -> drift -> publish

Each stage module declares its node (``tasks.runtime.node.Node``: name, computation, inputs, output type,
config slice, hooks); this module lists them in the order ``tasks.config.constants.BUILTIN_STAGES`` names
(the config layer places custom stages by it). A variant of the graph is a list of nodes: ``expand`` gives
one run's (the config's custom stages inserted after fill_missing, ``FILLED`` resolved to the last of
them), ``expand_apply`` ``prepflow apply``'s (the fitting nodes replaced by the fitted artifact's state);
publish is given every node before it as input and the artifact's code versions as argument in one place
(``_publish``). No stage module imports another.

``run_graph(ctx, call, nodes=...)`` is the one loop: it checks the config before any data is read (the
custom stages' DAG, then every node's ``preflight``), then walks the nodes in order: each gets its parents'
outputs (typed handles), a retyping node (infer_types) gives the later ones a context with the typed
config, and a gate that fails with ``on_failure: fail`` stops the run (in ``execute``). ``execute`` runs
one node through the runner's cached step (``tasks.runtime.cached.run_node``: the cache key built from
the node's name, code version, inputs' keys and config slice; the stage only computes). ``call`` is how a
node runs: ``execute`` here, in this process (``run_pipeline``: tests, notebooks, benchmarks, the fallback
without a Prefect API); ``flows.preprocess`` passes a call that runs ``execute`` as a Prefect task. So the
runners share the loop and every step of a node by construction.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable

from core.code_version import module_version
from tasks.balance import stage as balance
from tasks.config.constants import BUILTIN_STAGES
from tasks.custom import plan as custom_plan
from tasks.custom import steps as custom_steps
from tasks.drift import stage as drift
from tasks.encode import stage as encode
from tasks.fill_missing import stage as fill_missing
from tasks.fitted import stage as fitted
from tasks.infer_types import stage as infer_types
from tasks.ingest import stage as ingest
from tasks.media_cache import stage as media_cache
from tasks.publish import stage as publish
from tasks.runtime.cached import run_node
from tasks.runtime.context import RunContext
from tasks.runtime.node import FILLED, Node
from tasks.runtime.outputs import Drifted, Ingested, MissingStates, Output
from tasks.split import stage as split
from tasks.validate import stage as validate
from tasks.vocab import stage as vocab

_BUILTIN = {n.name: n for n in (ingest.NODE, infer_types.NODE, validate.RAW, split.NODE, fill_missing.NODE,
                                 balance.NODE, vocab.NODE, encode.NODE, media_cache.NODE, validate.ENCODED,
                                 drift.NODE, publish.NODE)}
# the run order is the config layer's (custom stages are placed after built-in stages below this layer)
assert set(_BUILTIN) == set(BUILTIN_STAGES), "tasks.config.constants.BUILTIN_STAGES names every built-in node"
NODES: tuple[Node, ...] = tuple(_BUILTIN[name] for name in BUILTIN_STAGES)
STAGES: tuple[str, ...] = BUILTIN_STAGES
CUSTOM_AFTER = "fill_missing"  # custom stages' cached steps run after this node


def custom_node(name: str, index: int, previous: str) -> Node:
    """The ``index``-th custom stage's cached step, reading the output of ``previous``."""
    return Node(name, custom_steps.compute, inputs=("ingest", "split", previous), output=MissingStates,
                reads=custom_steps.config_slice, args=(index,), in_artifact=False)


def _publish(before: list[Node], code_versions: dict[str, str]) -> Node:
    """publish, reading every node before it (their statistics and gates join the manifest), with the code
    versions that join the artifact id."""
    return dataclasses.replace(publish.NODE, inputs=tuple(n.name for n in before), args=(code_versions,))


def expand(custom_stage_names: list[str] | tuple[str, ...] = ()) -> list[Node]:
    """The nodes of one run, in run order: custom stages inserted, ``FILLED`` resolved, publish's inputs."""
    nodes: list[Node] = []
    filled = CUSTOM_AFTER
    for n in NODES:
        if n is publish.NODE:
            nodes.append(_publish(nodes, artifact_code_versions()))
            continue
        nodes.append(n.with_inputs(tuple(filled if p == FILLED else p for p in n.inputs)))
        if n.name == CUSTOM_AFTER:
            for i, name in enumerate(custom_stage_names):
                nodes.append(custom_node(name, i, filled))
                filled = name
    return nodes


APPLY_SKIPS = ("infer_types", "validate_raw")  # apply: the types and the raw gate are the fitted artifact's


def expand_apply() -> list[Node]:
    """``prepflow apply``'s nodes: the run's, with the fitting nodes replaced by the fitted artifact's state
    (``tasks.fitted.stage``: split, fill_missing, balance, vocab under their own names), without
    infer_types and the raw gate; encode, media_cache, the encoded gate and publish as in a run."""
    nodes: list[Node] = []
    for n in expand():
        if n.name in APPLY_SKIPS:
            continue
        if n.name in fitted.NODES:
            nodes.append(fitted.NODES[n.name])
        elif n.name == publish.NODE.name:  # the fitted nodes' code joins the artifact id
            nodes.append(_publish(nodes, {**artifact_code_versions(), fitted.SPLIT.module: fitted.SPLIT.code_version}))
        else:
            nodes.append(n)
    return nodes


def expand_extend(split_node: Node, vocab_node: Node, publish_node: Node) -> list[Node]:
    """``prepflow run --extend``'s nodes: apply's (the parent's fill values, no balancing), with ``split_node``
    (the new rows' splits by row), ``vocab_node`` (the parent's vocabularies extended) and ``publish_node`` (the
    parent's shards linked). The callers (``flows.extend``, ``flows.preprocess``) hand the extend nodes in:
    their publish imports publish's helpers, one module deeper than this module's import chain allows."""
    replaced = {split_node.name: split_node, vocab_node.name: vocab_node}
    nodes: list[Node] = []
    for n in expand_apply():
        if n.name == publish.NODE.name:
            versions = {**artifact_code_versions(), **{m.module: m.code_version for m in
                                                       (fitted.FILL_MISSING, split_node, vocab_node, publish_node)}}
            nodes.append(dataclasses.replace(publish_node, inputs=tuple(m.name for m in nodes), args=(versions,)))
        else:
            nodes.append(replaced.get(n.name, n))
    return nodes


def artifact_code_versions() -> dict[str, str]:
    """The code versions that join the artifact id, by module: a change in the code of any stage whose
    output the artifact holds gives a new artifact id."""
    return {n.module: module_version(n.module) for n in NODES if n.in_artifact}


# ---- running it ------------------------------------------------------------------------------------

Call = Callable[[Node, RunContext, list[Output]], Output]


@dataclass
class PipelineResult:
    artifact: dict
    stages: list[Output] = field(default_factory=list)

    def summary(self) -> dict:
        """The run's summary (``--json``): artifact path, id and rows per split, the stages (seconds, cached),
        and for a folder or glob its files (``total``) and how many this run read (``new``)."""
        out = {**{k: self.artifact[k] for k in ("artifact_path", "artifact_id", "rows")},
               "stages": [{"name": s.stage, "seconds": round(s.seconds, 3), "cached": s.cached} for s in self.stages]}
        ingested = next((s for s in self.stages if isinstance(s, Ingested)), None)
        if ingested is not None and ingested.files:
            out["files"] = {"total": len(ingested.files), "new": ingested.files_read}
        drifted = next((s for s in self.stages if isinstance(s, Drifted)), None)
        if drifted is not None:  # feature -> its worst skew (a run) or drift (apply) entry
            out["drift"] = drifted.entries()
        return out


def execute(node: Node, ctx: RunContext, inputs: list[Output], on_gate: Callable[[Output], None] | None = None,
            enforce: bool = True) -> Output:
    """Run one node (``tasks.runtime.cached.run_node``: its cache entry, computed on a miss): its result
    typed as its output, ``seconds`` the whole call (its preparation and checks too). A gate's result goes to
    ``on_gate`` (the Prefect UI) first; then a failing ``fail`` gate raises (``enforce``; drift's
    ``action: fail`` always)."""
    start = time.perf_counter()
    result = run_node(node, ctx, inputs)
    result.seconds = time.perf_counter() - start
    if node.gate and on_gate is not None:
        on_gate(result)
    if node.enforce is not None and (enforce or not node.gate):
        node.enforce(ctx, result)
    return result


def plan(ctx: RunContext, until: str | None = None, local: bool = True, nodes: list[Node] | None = None
         ) -> list[Node]:
    """The nodes to run (a run's by default, with its custom stages; up to and including ``until``), after
    the checks made before any data is read."""
    if nodes is None:
        custom_plan.check(ctx.config, ctx.dataset)  # the custom stages' DAG, with the dataset's header when cheap
        nodes = expand(custom_plan.names(ctx.config))
    if until is not None:
        nodes = nodes[:[n.name for n in nodes].index(until) + 1]
    for node in nodes:
        if node.preflight is not None:
            node.preflight(ctx, local)
    return nodes


def run_graph(ctx: RunContext, call: Call = execute, until: str | None = None, local: bool = True,
              retype: bool = True, nodes: list[Node] | None = None) -> dict[str, Output]:
    """Every node (a run's by default; ``nodes``: another variant of the graph, e.g. ``expand_apply()``, up
    to ``until``) through ``call``; the outputs by node name. ``local``: Dask runs in this process (no
    cluster); ``retype=False``: keep the config as given (``prepflow infer`` reads the inferred types
    without applying them)."""
    results: dict[str, Output] = {}
    for node in plan(ctx, until, local, nodes):
        results[node.name] = call(node, ctx, [results[p] for p in node.inputs])
        if retype and node.retype is not None:  # later stages see every feature typed
            ctx = node.retype(ctx, results[node.name])
    return results


def run_pipeline(ctx: RunContext) -> PipelineResult:
    """The whole graph in this process; the published artifact and every stage's output."""
    results = run_graph(ctx)
    return PipelineResult(results["publish"].artifact, list(results.values()))
