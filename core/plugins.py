"""Finding plugin classes: custom stages and feature types, by ``"pkg.module:Class"`` or an entry point.

A plugin package registers names in the entry-point groups ``prepflow.stages`` and
``prepflow.features`` (``[project.entry-points."prepflow.stages"] haversine = "geo.stages:Haversine"``),
so a config can say ``uses: haversine`` or ``type: hashed_tokens`` and prepflow needs no change.

``code_version(cls)`` is what cache keys and artifact ids hold for a plugin class: its declared
``version`` when it has one, else the sha256 of its module's source, so editing the plugin
recomputes what depends on it. A class whose source cannot be read and that declares no version is
an error (a key that silently ignores the code would serve stale results).

This module imports nothing else of prepflow, so the schema, the feature types and the stage DAG
can all use it; ``tasks.config.plugins`` (what a config's plugins are) sits above them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import sys
from importlib import metadata

STAGES_GROUP = "prepflow.stages"
FEATURES_GROUP = "prepflow.features"


class PluginNotFound(LookupError):
    """``ref`` is neither an importable ``pkg.module:Attr`` nor a registered entry-point name."""


@functools.lru_cache(maxsize=None)
def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=group)}


def load_object(ref: str, group: str) -> object:
    """``"pkg.module:Attr"`` (``Attr`` may be dotted) or an entry-point name of ``group``."""
    if ":" in ref:
        module_name, _, attr = ref.partition(":")
        try:
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
