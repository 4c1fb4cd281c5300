"""Finding plugin classes: custom stages and feature types, by ``"pkg.module:Class"`` or an entry point.

A plugin package registers names in the entry-point groups ``prepflow.stages`` and
``prepflow.features`` (``[project.entry-points."prepflow.stages"] haversine = "geo.stages:Haversine"``),
so a config can say ``uses: haversine`` or ``type: hashed_tokens`` and prepflow needs no change.

``code_version(cls)`` is what cache keys and artifact ids hold for a plugin class: its declared
``version`` when it has one, else the sha256 of its module's source, so editing the plugin
recomputes what depends on it. A class whose source cannot be read and that declares no version is
an error (a key that silently ignores the code would serve stale results).

Before a module a ref names is imported, its origin is checked without running it
(``check_module``: ``importlib.util.find_spec`` of its top-level package, which executes nothing): a
standard-library or built-in module (``os:system``, ``this:X``) is refused, and so is one that is neither
part of an installed distribution (site-packages, or a distribution's top-level names) nor under the
folder of a config that was loaded (``allow_root``), the current folder (the project), prepflow's own
packages, or a folder of ``$PREPFLOW_PLUGIN_PATH``. A module found nowhere on ``sys.path`` is looked for
in those folders (``plugin_folders``, then the current folder) and imported from there under its own name
(``import_plugin``): only the modules a config names, never anything else the process imports (the folders
are not put on ``sys.path``, where a stray file would answer every optional import). The Dask scheduler and
workers import the same modules before they run a task (``tasks.runtime.dask_run``). A config that names
plugins runs their code: so does an artifact's metadata that names them, which readers load only when the
caller trusts it (``trusted_module``; docs/security.md).

This module imports nothing else of prepflow, so the schema, the feature types and the stage DAG
can all use it; ``tasks.config.plugins`` (what a config's plugins are) sits above them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

STAGES_GROUP = "prepflow.stages"
FEATURES_GROUP = "prepflow.features"


class PluginNotFound(LookupError):
    """``ref`` is neither an importable ``pkg.module:Attr`` nor a registered entry-point name."""


PREPFLOW_PACKAGES = ("prepflow", "core", "storage", "expectations", "tasks", "flows")
PLUGIN_PATH_ENV = "PREPFLOW_PLUGIN_PATH"  # more folders a plugin module may come from (os.pathsep-separated)
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ROOTS: list[str] = []  # folders of the configs loaded in this process (``allow_root``)
_CHECKED: set[str] = set()  # top-level packages whose origin passed ``check_module``
_FROM_FOLDERS: dict[str, str] = {}  # top-level module -> the plugin folder it was imported from


def allow_root(folder: str | os.PathLike) -> None:
    """Plugin modules under ``folder`` (a loaded config's folder) may be imported by ``load_object``."""
    real = os.path.realpath(folder)
    if real not in _ROOTS:
        _ROOTS.append(real)
        # processes started from here on (Dask workers of a local cluster) allow it too
        paths = [p for p in os.environ.get(PLUGIN_PATH_ENV, "").split(os.pathsep) if p]
        if real not in paths:
            os.environ[PLUGIN_PATH_ENV] = os.pathsep.join([*paths, real])


def plugin_folders() -> list[str]:
    """The folders a plugin module may come from besides installed distributions and the current folder: the
    loaded configs' folders (``allow_root``) and those of ``$PREPFLOW_PLUGIN_PATH``."""
    env = (os.path.realpath(p) for p in os.environ.get(PLUGIN_PATH_ENV, "").split(os.pathsep) if p)
    return list(dict.fromkeys([*_ROOTS, *env]))


def _find_spec(top: str):
    """``top``'s spec from ``sys.path``, else from the plugin folders or the current folder (None: in none)."""
    spec = importlib.util.find_spec(top)
    if spec is None:
        spec = importlib.machinery.PathFinder.find_spec(top, [*plugin_folders(), os.path.realpath(os.getcwd())])
    return spec


def import_plugin(top: str) -> None:
    """Import the top-level module ``top`` (a ``.py`` file or a package) from the first plugin folder (then the
    current folder) that holds it, when nothing on ``sys.path`` provides it, and register it under its name in ``sys.modules`` (so its
    submodules, and pickles of its classes, import as usual). Nothing happens for a module already imported
    or importable."""
    if top in sys.modules or importlib.util.find_spec(top) is not None:
        return
    for folder in dict.fromkeys([*plugin_folders(), os.path.realpath(os.getcwd())]):
        spec = importlib.machinery.PathFinder.find_spec(top, [folder])
        if spec is not None and spec.loader is not None:
            break
    else:
        return  # importlib.import_module says "No module named ..."
    module = importlib.util.module_from_spec(spec)
    sys.modules[top] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(top, None)
        raise
    _FROM_FOLDERS[top] = folder


def folder_plugins() -> dict[str, str]:
    """``{top-level module: its folder}`` of the plugins this process imported from plugin folders
    (``import_plugin``); a Dask worker imports the same (``tasks.runtime.dask_run``)."""
    return dict(_FROM_FOLDERS)


@functools.lru_cache(maxsize=None)
def _distribution_packages() -> frozenset[str]:
    return frozenset(metadata.packages_distributions())


@functools.lru_cache(maxsize=None)
def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k))


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_module(module_name: str) -> None:
    """Refuse (``PluginNotFound``) to import ``module_name`` unless its origin is allowed (module docstring);
    nothing of the module runs to find out."""
    if not _MODULE.match(module_name):
        raise PluginNotFound(f"{module_name!r} is not a module name (expected 'pkg.module:Class')")
    top = module_name.split(".")[0]
    if top in _CHECKED or top in PREPFLOW_PACKAGES:
        return
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        raise PluginNotFound(f"module {module_name!r} is part of Python's standard library, not a plugin; refused "
                             f"before it is imported")
    try:
        spec = _find_spec(top)
    except (ImportError, ValueError) as exc:
        raise PluginNotFound(f"cannot find module {top!r} ({exc})") from None
    if spec is None:
        raise PluginNotFound(f"cannot import module {module_name!r} (No module named {top!r})")
    if spec.origin in ("built-in", "frozen"):
        raise PluginNotFound(f"module {module_name!r} is built into Python, not a plugin; refused before it is imported")
    locations = [spec.origin] if spec.origin else list(spec.submodule_search_locations or [])
    where = [os.path.realpath(p) for p in locations if p]
    if not where:
        raise PluginNotFound(f"module {module_name!r} has no file to check; refused before it is imported")
    installed = top in _distribution_packages() or any(
        part in ("site-packages", "dist-packages") for p in where for part in Path(p).parts)
    stdlib = any(_under(p, d) for p in where for d in _stdlib_dirs())
    if stdlib and not installed:
        raise PluginNotFound(f"module {module_name!r} ({where[0]}) is part of Python's standard library, not a "
                             f"plugin; refused before it is imported")
    roots = [os.path.realpath(os.getcwd()), *_ROOTS,
             *(os.path.realpath(p) for p in os.environ.get(PLUGIN_PATH_ENV, "").split(os.pathsep) if p)]
    if not installed and not any(_under(p, r) for p in where for r in roots):
        raise PluginNotFound(f"module {module_name!r} ({where[0]}) is neither an installed distribution's nor "
                             f"under the config's folder, the current folder or ${PLUGIN_PATH_ENV}; refused "
                             f"before it is imported")
    _CHECKED.add(top)


def ref_module(ref: str, group: str) -> str | None:
    """The module a feature type or stage ``ref`` names (``pkg.module`` of ``pkg.module:Class``, or an entry
    point's), without importing it; None for a name that is neither."""
    if ":" in ref:
        return ref.partition(":")[0]
    ep = entry_points(group).get(ref)
    return ep.module if ep is not None else None


def trusted_module(module: str | None, trust: bool | object) -> bool:
    """``trust``: True (every module), False/None (none), or a collection of module names (a module is trusted
    when it or a package above it is listed)."""
    if trust is True:
        return True
    if not trust or module is None or isinstance(trust, str):
        return False
    parts = module.split(".")
    return any(".".join(parts[:i]) in trust for i in range(1, len(parts) + 1))


@functools.lru_cache(maxsize=None)
def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=group)}


def load_object(ref: str, group: str) -> object:
    """``"pkg.module:Attr"`` (``Attr`` may be dotted) or an entry-point name of ``group``."""
    if ":" in ref:
        module_name, _, attr = ref.partition(":")
        check_module(module_name)
        try:
            import_plugin(module_name.split(".")[0])
            obj = importlib.import_module(module_name)
        except ImportError as exc:
            raise PluginNotFound(f"cannot import module {module_name!r} ({exc})") from None
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise PluginNotFound(f"module {module_name!r} has no attribute {attr!r}") from None
        return obj
    found = entry_points(group)
    if ref not in found:
        known = ", ".join(sorted(found)) or "none installed"
        raise PluginNotFound(f"{ref!r} is not 'pkg.module:Class' nor a registered {group} entry point "
                             f"(registered: {known})")
    check_module(found[ref].module)  # a distribution's entry point: still never a standard-library module
    try:
        return found[ref].load()
    except (ImportError, AttributeError) as exc:
        raise PluginNotFound(f"entry point {ref!r} ({found[ref].value}) cannot be loaded: {exc}") from None


def load_subclass(ref: str, group: str, base: type, *, where: str, what: str, base_name: str,
                  error: type[Exception]) -> type:
    """The class ``ref`` names (``load_object``), which must be a subclass of ``base``.

    A failure raises ``error`` naming the config key ``where``: ``<where>: cannot load <what> <ref>:
    <why>`` or ``<where>: <ref> is <object>, not a subclass of <base_name>``.
    """
    try:
        obj = load_object(ref, group)
    except PluginNotFound as exc:
        raise error(f"{where}: cannot load {what} {ref!r}: {exc}") from None
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise error(f"{where}: {ref!r} is {obj!r}, not a subclass of {base_name}")
    return obj


def code_version(cls: type) -> str:
    """``version:<declared>`` or ``sha256:<hash of the class's module source>``."""
    declared = getattr(cls, "version", None)
    if declared is not None:
        return f"version:{declared}"
    module = sys.modules.get(cls.__module__)
    try:
        source = inspect.getsource(module) if module is not None else inspect.getsource(cls)
    except (OSError, TypeError) as exc:
        raise OSError(f"cannot read the source of {cls.__module__}.{cls.__qualname__} to key the cache on it "
                      f"({exc}); give the class a 'version' attribute") from None
    return "sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest()
