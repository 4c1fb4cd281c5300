"""The code's structure, checked in the fast lane (``make lint`` runs import-linter's contracts too):
no import cycle and a short longest import chain, counting imports inside functions and imports of a
package's name (``from storage import npy`` depends on ``storage`` itself); no production module over
500 lines; the stage graph declared once, its stages never importing one another; no comment or
docstring naming an issue number or a pass (history lives in git, figures in benchmarks/RESULTS.md)."""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

from tasks import graph
from tasks.config.constants import BUILTIN_STAGES

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("prepflow", "core", "storage", "expectations", "tasks", "flows")
MAX_CHAIN = 12
MAX_LINES = 500
STAGE_PACKAGES = ("ingest", "infer_types", "split", "fill_missing", "balance", "vocab", "encode", "media_cache",
                  "validate", "publish", "fitted", "drift")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def imports(found: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the prepflow modules it imports anywhere in its body (a ``from P import x`` depends on
    ``P`` and, when ``x`` is a module, on ``P.x``); a module's own parent packages are left out."""

    def resolve(name: str) -> str:
        while name and name not in found:
            name = name.rpartition(".")[0]
        return name

    edges: dict[str, set[str]] = {}
    for mod, path in found.items():
        out = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            out |= {t for t in map(resolve, names) if t and t != mod and not mod.startswith(t + ".")}
        edges[mod] = out
    return edges


def test_no_import_cycle_and_the_longest_chain_is_short():
    edges = imports(modules())
    on_path: set[str] = set()

    @functools.lru_cache(maxsize=None)
    def depth(mod: str) -> int:  # modules on the longest chain starting at mod
        assert mod not in on_path, f"import cycle through {mod}: {sorted(on_path)}"
        on_path.add(mod)
        d = 1 + max((depth(m) for m in edges[mod]), default=0)
        on_path.discard(mod)
        return d

    worst = max(edges, key=depth)
    chain = [worst]
    while edges[chain[-1]]:
        chain.append(max(edges[chain[-1]], key=depth))
    assert len(chain) <= MAX_CHAIN, " > ".join(chain)


def test_no_production_module_is_over_500_lines():
    long = {m: n for m, p in modules().items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long


def test_no_stage_imports_another_stage():
    edges = imports(modules())
    for mod, targets in edges.items():
        parts = mod.split(".")
        if parts[0] == "tasks" and len(parts) > 1 and parts[1] in STAGE_PACKAGES:
            others = {t for t in targets if t.split(".")[:2] != parts[:2] and len(t.split(".")) > 1
                      and t.split(".")[0] == "tasks" and t.split(".")[1] in STAGE_PACKAGES}
            assert not others, f"{mod} imports {sorted(others)}"


def test_the_graph_declares_every_stage_once_in_the_order_custom_stages_are_placed_by():
    assert graph.STAGES == BUILTIN_STAGES
    assert len({n.run for n in graph.NODES}) == len(graph.NODES)  # each node runs its own stage function
    for node in graph.NODES:
        assert node.module.split(".")[1] in STAGE_PACKAGES, node


def test_every_node_reads_only_outputs_declared_before_it():
    nodes = graph.expand(["a_custom_stage"])
    seen: set[str] = set()
    for node in nodes:
        assert set(node.inputs) <= seen, node.name
        seen.add(node.name)
    assert set(nodes[-1].inputs) == seen - {"publish"}  # publish merges every stage's statistics


# A comment states why the code is as it is; which issue asked for it, and in which pass, is history (git).
# Matched: "issue 43", "issues 11 and 19", "#43" (not "#1f2328" or "row #"), "fourteenth pass", "8th pass"
# (not "a first pass over the data" or "Pass 1 on a worker": passes over data are algorithms, not history).
HISTORY = re.compile(
    r"\bissues?\s+#?\d+"
    r"|(?<![\w&#/])#\d{1,4}\b(?![\w-])"
    r"|\b(?:third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth"
    r"|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|\d+(?:st|nd|rd|th))[- ](?:review\s+)?pass\b",
    re.IGNORECASE)


def comments(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring line of a module."""
    text = path.read_text(encoding="utf-8")
    found = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
             if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found += [(first.lineno + i, line) for i, line in enumerate(first.value.value.splitlines())]
    return found


def test_history_pattern_matches_issue_and_pass_numbers_only():
    named = ["(issue 43, item 7)", "issues 11 and 19", "see #43", "fourteenth pass", "issue 19 eighth pass",
             "the 15th pass", "Issue #40"]
    legit = ["a first pass over the data", "No second pass over the data", "Pass 1 on a worker", "color #1f2328",
             "the row's issue", "passes the gate", "item 3 of the list", "&#43;", "a/#12", "tissue 4"]
    assert [t for t in named if not HISTORY.search(t)] == []
    assert [t for t in legit if HISTORY.search(t)] == []


def test_no_comment_names_an_issue_or_a_pass():
    found = [f"{path.relative_to(ROOT)}:{line}: {text.strip()}" for path in modules().values()
             for line, text in comments(path) if HISTORY.search(text)]
    assert not found, "\n".join(found)
