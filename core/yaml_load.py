"""YAML read with aliases bounded: ``load_yaml(text)`` for configs and feature specs.

An anchor (``&a``) used as an alias (``*a``) shares one composed node, but everything downstream (a
deep copy, pydantic's validation, JSON for a hash) expands it: a few hundred bytes of nested aliases
("billion laughs") become 10^9 values. ``load_yaml`` composes the document (no Python objects yet),
counts the nodes it holds with every alias expanded (each composed node counted once, then reused), and
refuses a document whose expansion exceeds ``expansion_limit(written)``: ``EXPANSION_FACTOR`` times the
nodes written out in it, or ``MIN_EXPANDED_NODES``, whichever is larger. A recursive alias (a node that
holds itself) is refused too. Merge keys (``<<: *a``) are aliases as well and count the same way. Only
then are the Python values built.

``YamlExpansionError`` is a ``yaml.YAMLError`` (with ``problem`` and ``problem_mark``, the node where
the expansion passed the limit), so a caller's handling of malformed YAML refuses it the same way.
"""

from __future__ import annotations

from typing import Any

import yaml

MIN_EXPANDED_NODES = 100_000
EXPANSION_FACTOR = 10

__all__ = ["EXPANSION_FACTOR", "MIN_EXPANDED_NODES", "YamlExpansionError", "expansion_limit", "load_yaml"]


class YamlExpansionError(yaml.YAMLError):
    def __init__(self, problem: str, mark=None):
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark
        self.context = None

    def __str__(self) -> str:
        mark = self.problem_mark
        return self.problem + (f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "")


def expansion_limit(written: int) -> int:
    """The most nodes a document with ``written`` composed nodes may hold with its aliases expanded."""
    return max(MIN_EXPANDED_NODES, EXPANSION_FACTOR * written)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _written(root: yaml.Node) -> int:
    """How many distinct nodes the composed graph holds (what the text writes out)."""
    seen, stack = {id(root)}, [root]
    while stack:
        for child in _children(stack.pop()):
            if id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    return len(seen)


def check_expansion(root: yaml.Node) -> int:
    """The node count of ``root`` with every alias expanded; ``YamlExpansionError`` past the limit or on a
    recursive alias. Iterative (a deeply nested document does not exhaust Python's stack)."""
    limit = expansion_limit(_written(root))
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            size = 1 + sum(sizes[id(c)] for c in _children(node))
            if size > limit:
                raise YamlExpansionError(
                    f"YAML aliases (&name used as *name) expand to more than {limit:,} values (the limit: "
                    f"{MIN_EXPANDED_NODES:,} or {EXPANSION_FACTOR}x the values written, whichever is more); "
                    "write the values out instead of nesting aliases", node.start_mark)
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YamlExpansionError("a YAML alias refers to a node that holds it (a recursive alias)",
                                     node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


SAFE_LOADERS = (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_yaml(text: str | bytes, loader: type = yaml.SafeLoader) -> Any:
    """One YAML document read by a safe loader (``SafeLoader`` or libyaml's ``CSafeLoader``; any other is a
    programming error), refusing one whose aliases expand past ``expansion_limit`` before any value is built."""
    if not issubclass(loader, SAFE_LOADERS):
        raise TypeError(f"load_yaml takes a safe YAML loader, not {loader.__name__}")
    reader = loader(text)
    try:
        node = reader.get_single_node()
        if node is None:
            return None
        check_expansion(node)
        return reader.construct_document(node)
    finally:
        reader.dispose()
