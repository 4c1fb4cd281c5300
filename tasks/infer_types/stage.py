"""infer_types: give every column without a declared ``type`` one, from a full pass over the data.

``run`` is the pipeline stage (after ingest, cached like the others): it infers the untyped
features only and writes ``types.json``; ``apply`` puts the types into the run's config, which
every later stage then reads. ``infer_dataset`` + ``render_config`` are ``prepflow infer``
(``--config``: the ``media_root`` to resolve against, kept in the printed config; ``--cache-dir``);
``infer_dataset`` also takes a pandas/Dask DataFrame, read as the pipeline's ingest reads one.


The profiles are ``tasks.infer_types.profile``, the rules ``tasks.infer_types.rules``.
"""

from __future__ import annotations

from functools import reduce
from pathlib import Path

from dask import delayed

from core.errors import DataError
from storage import media
from tasks.config.loader import resolve_preprocessing
from tasks.infer_types.profile import merge_profiles, profile_partition
from tasks.infer_types.rules import MediaPlace, decide
from tasks.runtime import dask_run, file_fits, frame
from tasks.runtime.node import Node
from tasks.runtime.outputs import Ingested, Types
from tasks.runtime.statistics import Statistics

TYPES = ("binary", "number", "category", "text", "date", "image", "audio", "set", "vector", "timeseries")


def profile_columns(ingested_parts: list[tuple[str, int]], columns: list[str], npartitions: int | None = None
                    ) -> dict[str, dict]:
    """Full pass over the ingested parts (``Ingested.parts``) with Dask: merged profile per column."""
    parts = frame.partitions(ingested_parts, npartitions)
    partials = dask_run.compute([delayed(profile_partition)(p, columns) for p in parts])
    return merged_profiles(partials, columns)


def merged_profiles(partials: list[dict], columns: list[str]) -> dict[str, dict]:
    """Per column, the partials' profiles merged (exact: in any order, the same profile)."""
    return {c: reduce(merge_profiles, [p[c] for p in partials]) for c in columns}


def _profiles(ctx, ingest: Ingested, columns: list[str]) -> dict[str, dict]:
    """The columns' profiles; a folder's files profiled one by one, each file's profiles a cache entry
    (``tasks.runtime.file_fits``: a new file is the only one read)."""
    if not ingest.files:
        return profile_columns(ingest.parts, columns, ctx.npartitions)

    def fit_file(parts: list, _folder: str):
        return delayed(merged_profiles)([delayed(profile_partition)(p, columns) for p in frame.partitions(parts, None)],
                                        columns)

    by_file = file_fits.fit_files(ctx, ingest, None, {"columns": columns}, fit_file)
    return merged_profiles([profiles for profiles, _entry in by_file], columns)


def media_roots(config, feature=None) -> dict[str, str]:
    """Per media kind (image, audio), the ``media_root`` the media stage would use for ``feature``
    (a ``FeatureConfig``) once it has that type: its own, else the kind's ``defaults``; kinds
    without one are left out. ``feature=None``: the defaults only."""
    roots = {}
    for kind in ("image", "audio"):
        defaults = config.defaults.get(kind)
        root = defaults.preprocessing.get("media_root") if defaults else None
        if feature is not None:
            root = feature.preprocessing.get("media_root", root)
        if root is not None:
            roots[kind] = root
    return roots


def column_media_roots(config, column: str) -> dict[str, str]:
    """``media_roots`` for the first feature of ``config`` reading ``column`` (the defaults when none
    does, or when there is no config: ``{}``)."""
    if config is None:
        return {}
    feature = next((f for f in config.features if f.source_column == column), None)
    return media_roots(config, feature)


def untyped(config) -> list[dict]:
    """The features without a type; ``media_root``: per media kind, the feature's own or the kind's
    ``defaults`` (where its paths would resolve once typed)."""
    return [{"name": f.name, "column": f.source_column, "output": config.is_output(f.name),
             "media_root": media_roots(config, f)} for f in config.features if f.type is None]


def config_slice(ctx) -> dict:
    """The features the config leaves untyped (with where their media would resolve)."""
    return {"untyped": untyped(ctx.config)}


def compute(ctx, out: Path, ingest: Ingested) -> Statistics:
    """Infer the untyped features from the ingested data (``Types``)."""
    todo = untyped(ctx.config)
    stats = Statistics()
    decisions = {}
    if todo:
        columns = sorted({t["column"] for t in todo})
        profiles = _profiles(ctx, ingest, columns)
        base = media.dataset_dir(ctx.dataset)
        for t in todo:
            place = MediaPlace(base, t["media_root"], ctx.media_cache_root)
            item = decide(t["name"], profiles[t["column"]], t["output"], t["column"], place)
            decisions[t["name"]] = item.to_json()
            stats.counter(f"infer_types.{item.type or 'excluded'}", 1)
    Types.write(out, decisions)
    return stats


def apply(ctx, result: Types):
    """The run's context with a new config in which every untyped feature has its inferred type (the
    given context and its config are unchanged)."""

    decisions = Types.of(result).types()
    if all(f.type is not None for f in ctx.config.features):
        return ctx
    config = ctx.config.model_copy(deep=True)
    for f in config.features:
        if f.type is not None:
            continue
        item = decisions.get(f.name)
        if item is None:
            raise DataError(f"feature '{f.name}' has no type and no inferred type; rerun the infer_types stage")
        if item["type"] is None:
            raise DataError(f"feature '{f.name}' (column '{f.source_column}') has no type and inference would "
                            f"exclude it: {item['reason'].removeprefix('excluded: ')}; give it a 'type' in the "
                            "config or remove it")
        f.type = item["type"]
        for key, value in (item.get("preprocessing") or {}).items():  # e.g. the true label inference chose
            f.preprocessing.setdefault(key, value)  # the user's own options win
    resolve_preprocessing(config, "inferred config")
    return ctx.with_config(config)


# what it decides reaches the artifact id through the typed config, not through its code version
NODE = Node("infer_types", compute, inputs=("ingest",), output=Types, reads=config_slice, retype=apply, in_artifact=False,
            per_file=True)
