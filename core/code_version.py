"""Code versions derived from source, so a stage's cache entries follow its code without hand-kept bumps.

``module_version("tasks.encode.stage")`` hashes the module's syntax tree together with the trees of the
prepflow modules it imports directly (anywhere in its body, imports inside functions included):
``tasks.encode.stage`` with ``tasks.runtime.frame``, ``tasks.runtime.statistics``, ... The trees are compared without comments
and docstrings, as Hamilton compares function source: rewording a docstring or a comment keeps every
cache entry; changing an expression in the stage or in a helper it imports recomputes that stage on the
next run. ``class_version(cls)`` does the same for a feature type: the modules of its classes (its MRO)
and what they import directly.

Why one level and not the transitive closure: the stage modules share the run context, the feature
registry and storage, so the closure of every stage is nearly the whole code base, and any edit anywhere
would recompute every stage, ingest of a terabyte included. A helper two imports away from a stage that
changes what the stage writes is the case for the salt below.

One exception, declared by the module itself: a dispatcher that only chooses between implementations
(``tasks.custom.prepared``: plain, custom-stage or windowed partitions) sets ``CODE_VERSION_FOLLOWS_IMPORTS =
True``, and a module importing it is versioned with the dispatcher's own imports too (and through
further dispatchers), so the stages that read prepared partitions follow the code that prepares them.
A stage split into several files marks its parts the same way (``tasks.media_cache.decoding``, ...): the
stage's version covers what its parts import, as it did when their code was in the stage's module.

The files are parsed, never imported, so computing a version costs no heavy import (a rerun of a
published artifact computes the artifact id from these versions before deciding to do anything).
Parsing every stage's modules costs noticeable CPU, in the flow process and again in every Dask worker
process (the stage modules compute their version when imported), so what a parse finds is kept in a
small file per source content under ``~/.cache/prepflow/code-versions/`` (``$XDG_CACHE_HOME`` is
honoured): named by the sha256 of the Python version, the module's name and its bytes, so an edited
file is parsed again and a stale entry cannot be read. An unwritable cache folder only costs the parse.

Deliberate invalidation without a code change (a library upgrade that changes output, say): a module
may define ``CACHE_SALT = "..."``; the constant is part of the tree, so editing it changes the version.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the packages whose code decides what a stage writes; flows (orchestration, CLI) never does
PACKAGES = ("core", "tasks", "storage", "expectations")


def _file(module: str) -> Path | None:
    if module.split(".")[0] not in PACKAGES:
        return None
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _import_names(module: str, tree: ast.AST, is_package: bool) -> list[str]:
    """Every name ``module`` imports anywhere in its body, relative imports resolved (what it is)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against this module's package
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, node.module] if node.module else parts)
            else:
                base = node.module or ""
            found.extend([base, *(f"{base}.{alias.name}" for alias in node.names)])
    return sorted(set(found))


def _prepflow_modules(names: list[str]) -> set[str]:
    """The prepflow modules that importing ``names`` runs (which files exist decides: read now)."""
    found: set[str] = set()
    for name in names:
        while name and _file(name) is None and "." in name:  # `import a.b.c` names a.b.c, a.b and a
            name = name.rsplit(".", 1)[0]
        if name and _file(name) is not None:
            found.add(name)
            parts = name.split(".")  # importing a.b.c runs a/__init__ and a/b/__init__ too
            found.update(p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if _file(p))
    return found


FOLLOW_MARKER = "CODE_VERSION_FOLLOWS_IMPORTS"


def _follows(tree: ast.Module) -> bool:
    """Does the module declare ``CODE_VERSION_FOLLOWS_IMPORTS = True`` at top level?"""
    return any(isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == FOLLOW_MARKER
                                                    for t in node.targets)
               and isinstance(node.value, ast.Constant) and node.value.value is True for node in tree.body)


def _cache_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "prepflow" / "code-versions"


def _parse(module: str, path: Path, source: bytes) -> dict:
    tree = _strip_docstrings(ast.parse(source.decode("utf-8"), str(path)))
    return {"digest": hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest(),
            "imports": _import_names(module, tree, path.name == "__init__.py"), "follows": _follows(tree)}


def _cached_parse(module: str, path: Path) -> dict:
    """``_parse``, kept per (Python version, module name, source bytes) in ``_cache_folder()``."""
    source = path.read_bytes()
    key = hashlib.sha256(f"{sys.version_info[0]}.{sys.version_info[1]}\0{module}\0".encode() + source).hexdigest()
    entry = _cache_folder() / f"{key}.json"
    try:
        found = json.loads(entry.read_text())
        if {"digest", "imports", "follows"} <= set(found):
            return found
    except (OSError, ValueError):
        pass
    parsed = _parse(module, path, source)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as fh:
            json.dump(parsed, fh)
        os.replace(tmp, entry)  # atomic: a reader sees the whole entry or none
    except OSError:
        pass
    return parsed


@functools.lru_cache(maxsize=None)
def _parsed(module: str) -> tuple[str, frozenset[str], bool]:
    """(sha256 of the module's tree without docstrings, the prepflow modules it imports, whether it is
    a dispatcher whose importers are versioned with its imports)."""
    path = _file(module)
    if path is None:
        raise ValueError(f"{module}: not a prepflow module under {ROOT}")
    parsed = _cached_parse(module, path)
    return parsed["digest"], frozenset(_prepflow_modules(parsed["imports"])), bool(parsed["follows"])


def hashed_modules(*modules: str) -> list[str]:
    """The modules whose trees a version covers: ``modules``, what each imports directly, and what the
    dispatchers among those import (see the module docstring), sorted."""
    covered = set(modules)
    todo = [m for module in modules for m in _parsed(module)[1]]
    while todo:
        name = todo.pop()
        if name in covered:
            continue
        covered.add(name)
        if _parsed(name)[2]:
            todo.extend(_parsed(name)[1])
    return sorted(covered)


def _version(modules: list[str]) -> str:
    h = hashlib.sha256()
    for name in modules:
        h.update(f"{name}\0{_parsed(name)[0]}\0".encode())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def module_version(module: str) -> str:
    """A 16-hex-digit version of ``module``'s code and of the modules it imports directly."""
    return _version(hashed_modules(module))


def class_version(cls: type) -> str | None:
    """The version of a class's code: its MRO's prepflow modules and their direct imports (None for a
    class defined outside prepflow's packages, e.g. a plugin, which is hashed by its own source)."""
    modules = [c.__module__ for c in cls.__mro__ if _file(c.__module__) is not None]
    return _version(hashed_modules(*modules)) if modules else None
