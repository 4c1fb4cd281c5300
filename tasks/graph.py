"""The stage graph, declared once: the stages' ``Node`` objects in run order.

    ingest -> infer_types -> validate_raw -> split -> fill_missing [-> custom stages] -> balance -> vocab
    -> encode -> media_cache -> validate_encoded -> publish

Each stage module declares its node (``tasks.runtime.node.Node``: name, run function, inputs, output type,
config slice, flags); this module lists them and ``expand`` gives one run's nodes: the config's custom
stages inserted after fill_missing (``FILLED`` resolved to the last of them), publish given every node
before it as input and the artifact's code versions as argument. Both runners walk ``expand``'s nodes
(``tasks.runner``: in this process; ``flows.preprocess``: a Prefect task per node). Stage lists, code
versions and the artifact's code entry all derive from ``NODES``; no stage module imports another.
"""

from __future__ import annotations

from core.code_version import module_version
from tasks.balance import stage as balance
from tasks.custom import steps as custom_steps
from tasks.encode import stage as encode
from tasks.fill_missing import stage as fill_missing
from tasks.infer_types import stage as infer_types
from tasks.ingest import stage as ingest
from tasks.media_cache import stage as media_cache
from tasks.publish import stage as publish
from tasks.runtime.node import FILLED, Node
from tasks.runtime.outputs import MissingStates
from tasks.split import stage as split
from tasks.validate import stage as validate
from tasks.vocab import stage as vocab

NODES: tuple[Node, ...] = (
    ingest.NODE,
    infer_types.NODE,
    validate.RAW,
    split.NODE,
    fill_missing.NODE,
    balance.NODE,
    vocab.NODE,
    encode.NODE,
    media_cache.NODE,
    validate.ENCODED,
    publish.NODE,
)
STAGES: tuple[str, ...] = tuple(n.name for n in NODES)  # the built-in stages in run order
CUSTOM_AFTER = "fill_missing"  # custom stages' cached steps run after this node


def node(name: str) -> Node:
    """The built-in node called ``name``."""
    return next(n for n in NODES if n.name == name)


def custom_node(name: str, index: int, previous: str) -> Node:
    """The ``index``-th custom stage's cached step, reading the output of ``previous``."""
    return Node(name, custom_steps.run, inputs=("ingest", "split", previous), output=MissingStates, args=(index,),
                in_artifact=False)


def expand(custom_stage_names: list[str] | tuple[str, ...] = ()) -> list[Node]:
    """The nodes of one run, in run order: custom stages inserted, ``FILLED`` resolved, publish's inputs."""
    nodes: list[Node] = []
    filled = CUSTOM_AFTER
    for n in NODES:
        if n is publish.NODE:
            nodes.append(Node(n.name, n.run, tuple(m.name for m in nodes), n.output, n.reads,
                              (artifact_code_versions(),), preflight=n.preflight))
            continue
        nodes.append(n.with_inputs(tuple(filled if p == FILLED else p for p in n.inputs)))
        if n.name == CUSTOM_AFTER:
            for i, name in enumerate(custom_stage_names):
                nodes.append(custom_node(name, i, filled))
                filled = name
    return nodes


def code_version(stage: str) -> str:
    """The cache version of a built-in stage (the module defining its ``run`` and what it imports directly)."""
    return node(stage).code_version


def artifact_code_versions() -> dict[str, str]:
    """The code versions that join the artifact id, by module: a change in the code of any stage whose
    output the artifact holds gives a new artifact id."""
    return {n.module: module_version(n.module) for n in NODES if n.in_artifact}
