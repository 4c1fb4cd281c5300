"""docs/ARCHITECTURE.md's picture of the stage graph is the declared graph's: the block between its markers is
what docs/tools/graph_diagram.py draws from ``tasks.graph`` now, so a node, an input or a gate changed in the
code without ``python docs/tools/graph_diagram.py --write`` fails here."""

from __future__ import annotations

import dataclasses
import importlib.util

from tasks import graph
from tests.conftest import ROOT


def _diagram():
    spec = importlib.util.spec_from_file_location("graph_diagram", ROOT / "docs" / "tools" / "graph_diagram.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_picture_is_the_declared_graph():
    diagram = _diagram()
    assert diagram.committed(diagram.DOC.read_text(encoding="utf-8")) == diagram.block()


def test_the_picture_follows_a_changed_graph(monkeypatch):
    """The block is drawn from the declaration, not kept beside it: another input for a node redraws it."""
    diagram = _diagram()
    before = diagram.block()
    drift = next(n for n in graph.NODES if n.name == "drift")
    changed = tuple(dataclasses.replace(n, inputs=(*n.inputs, "balance")) if n is drift else n for n in graph.NODES)
    monkeypatch.setattr(graph, "NODES", changed)
    after = diagram.block()
    assert "balance --> drift" in after and "balance --> drift" not in before
