"""The runner owns the cache, checked on the source: no stage builds a cache key or keeps a code-version
constant, the handles (``tasks.runtime.outputs``) are the only code naming the files of a cache entry, and
one loop runs every variant of the graph."""

from __future__ import annotations

import ast
from pathlib import Path

from tasks import graph
from tasks.runtime import fitted_metadata, outputs

ROOT = Path(__file__).resolve().parents[3]
RUNNER = ROOT / "tasks" / "runtime" / "cached.py"
HANDLES = {ROOT / "tasks" / "runtime" / "outputs.py", ROOT / "tasks" / "runtime" / "fitted_metadata.py"}


def _modules(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


def _trees(*packages: str) -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(), str(p))) for p in _modules(*packages)]


def test_no_stage_calls_the_cache_or_keeps_a_code_version():
    calls, constants = [], []
    for path, tree in _trees("tasks"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == "run_cached" or \
                    isinstance(node, ast.Attribute) and node.attr == "run_cached":
                calls.append(str(path.relative_to(ROOT)))
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CODE_VERSION"
                                                    for t in node.targets):
                constants.append(str(path.relative_to(ROOT)))
    assert calls == [] and constants == []
    cache_keys = [str(p.relative_to(ROOT)) for p, tree in _trees("tasks") if p != RUNNER and p.parent.name != "runtime"
                  and any(isinstance(n, ast.Name) and n.id == "cache_key" for n in ast.walk(tree))]
    assert cache_keys == ["tasks/ingest/files.py"]  # ingest's per-file entries, keyed with the node's version


def test_the_files_of_a_cache_entry_are_named_by_the_handles_alone():
    """In the stages and the runtime; the artifact's readers (report, serving) name the artifact's files, some
    of which a cache entry shares (``training_set_metadata.json``)."""
    names = {value for name, value in vars(outputs).items() if name.endswith(("_FILE", "_ENTRIES"))}
    names |= {fitted_metadata.METADATA_FILE, fitted_metadata.SUMMARY_FILE}
    assert {"split.npy", "ingest.json", "encode.json", "missing.json", "statistics.json"} <= names
    readers = (ROOT / "tasks" / "report", ROOT / "tasks" / "serving")
    literal = [(str(p.relative_to(ROOT)), n.value) for p, tree in _trees("tasks")
               if p not in HANDLES and p.parent not in readers for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names]
    assert literal == []


def test_one_loop_runs_every_variant_of_the_graph():
    assert not hasattr(graph, "run_apply_graph")
    loops = []
    for path, tree in _trees("tasks", "flows", "prepflow"):
        for loop in (n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.comprehension))):
            body = loop.body if isinstance(loop, ast.For) else [loop]
            for call in (c for b in body for c in ast.walk(b) if isinstance(c, ast.Call)):
                name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
                if name in ("execute", "run_node", "call"):
                    loops.append((str(path.relative_to(ROOT)), name))
    assert loops == [("tasks/graph.py", "call")]
    apply_nodes = [n.name for n in graph.expand_apply()]
    assert apply_nodes[-1] == "publish" and "infer_types" not in apply_nodes
