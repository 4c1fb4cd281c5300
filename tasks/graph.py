"""The stage graph, declared once: which stages run, which results each reads, what versions its cache.

Two runners walk it: ``tasks.runner.run_graph`` calls the stage functions in this process (tests,
notebooks, benchmarks), and ``flows.preprocess.preprocess`` runs each node as a Prefect task. Stage
lists, code versions and the artifact's code entry all derive from ``NODES``; nothing else lists stages.

A node names its stage function as ``"module:function"`` (imported when a runner first calls it, so this
module stays light enough for the CLI's rerun check) and the results it reads (``parents``, in argument
order: ``fn(ctx, *args, *parent_results)``). ``FILLED`` stands for the last of fill_missing and the custom
stages (``expand`` inserts one node per custom stage of the config after fill_missing).

    ingest -> infer_types -> validate_raw -> split -> fill_missing [-> custom stages] -> balance -> vocab
    -> encode -> media_cache -> validate_encoded -> publish
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from core.code_version import module_version

FILLED = "<filled>"  # fill_missing's result, or the last custom stage's


@dataclass(frozen=True)
class Node:
    name: str
    function: str  # "module:function" of the stage function: fn(ctx, *args, *parent results) -> StageResult
    parents: tuple[str, ...] = ()
    versioned_by: str | None = None  # the module whose code versions the stage (default: the function's)
    args: tuple = ()  # fixed arguments before the parents' results (a custom stage's index)
    gate: bool = False  # a data-quality gate: a failing ``fail`` gate stops the run after it
    retypes: bool = False  # its result types the untyped features: later stages get a new context
    in_artifact: bool = True  # its code version joins the artifact id

    @property
    def module(self) -> str:
        return self.versioned_by or self.function.split(":")[0]

    def resolve(self) -> Callable:
        module, name = self.function.split(":")
        return getattr(importlib.import_module(module), name)


NODES: tuple[Node, ...] = (
    Node("ingest", "tasks.ingest.stage:run"),
    # what it decides reaches the artifact id through the typed config
    Node("infer_types", "tasks.infer_types.stage:run", ("ingest",), retypes=True, in_artifact=False),
    Node("validate_raw", "tasks.validate.stage:run_raw", ("ingest",), gate=True),
    Node("split", "tasks.split.stage:run", ("ingest",)),
    Node("fill_missing", "tasks.fill_missing.stage:run", ("ingest", "split")),
    Node("balance", "tasks.balance.stage:run", ("ingest", "split", FILLED)),
    Node("vocab", "tasks.vocab.stage:run", ("ingest", "split", FILLED)),
    Node("encode", "tasks.encode.stage:run", ("ingest", "split", FILLED, "balance", "vocab")),
    # its content hash joins the artifact id through the dataset fingerprint (tasks.media_cache.stage.fingerprint)
    Node("media_cache", "tasks.media_cache.stage:run", ("vocab", "encode"), in_artifact=False),
    Node("validate_encoded", "tasks.steps:validate_encoded", ("split", "balance", "vocab", "encode", "media_cache"),
         versioned_by="tasks.validate.stage", gate=True),
    # publish merges every stage's statistics: every stage is its parent (filled in by ``expand``)
    Node("publish", "tasks.steps:publish", versioned_by="tasks.publish.stage"),
)
STAGES: tuple[str, ...] = tuple(n.name for n in NODES)  # the built-in stages in run order
CUSTOM_AFTER = "fill_missing"  # custom stages' cached steps run after this node


def custom_node(name: str, index: int, previous: str) -> Node:
    return Node(name, "tasks.custom.steps:run", ("ingest", "split", previous), args=(index,), in_artifact=False)


def expand(custom_stage_names: list[str] | tuple[str, ...] = ()) -> list[Node]:
    """The nodes of one run, in run order: custom stages inserted, ``FILLED`` resolved, publish's parents."""
    nodes: list[Node] = []
    filled = CUSTOM_AFTER
    for node in NODES:
        if node.name == "publish":
            nodes.append(Node(node.name, node.function, tuple(n.name for n in nodes), node.versioned_by))
            continue
        nodes.append(Node(node.name, node.function, tuple(filled if p == FILLED else p for p in node.parents),
                          node.versioned_by, node.args, node.gate, node.retypes, node.in_artifact))
        if node.name == CUSTOM_AFTER:
            for i, name in enumerate(custom_stage_names):
                nodes.append(custom_node(name, i, filled))
                filled = name
    return nodes


def code_version(stage: str) -> str:
    """The cache version of a built-in stage (``tasks.<stage module>`` and what it imports directly)."""
    return module_version(next(n.module for n in NODES if n.name == stage))


def artifact_code_versions() -> dict[str, str]:
    """The code versions that join the artifact id, by module: a change in the code of any stage whose
    output the artifact holds gives a new artifact id."""
    return {n.module: module_version(n.module) for n in NODES if n.in_artifact}
