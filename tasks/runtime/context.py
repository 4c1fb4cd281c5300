"""What every stage receives: the resolved config, feature objects, cache and run options.

``run_cached`` is every stage's cached step: it returns the stage's typed output
(``tasks.runtime.outputs``). No Dask collection ever crosses a stage boundary, only paths and keys.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from core.code_version import class_version
from core.pause import pause_point
from storage.cache import StageCache, cache_key
from tasks.config.schema import Config
from tasks.features import build_all, feature_code
from tasks.features.base import FeatureType
from tasks.features.media import MediaFeature
from tasks.runtime import progress
from tasks.runtime.outputs import StageResult
from tasks.runtime.statistics import Statistics


@dataclass
class RunContext:
    config: Config
    dataset: str
    cache: StageCache
    npartitions: int | None = None
    output: str = "artifacts"
    fingerprint: str | None = None  # the dataset's, when the caller has already hashed it (tasks.ingest.stage)
    media_dir: str | None = None  # where ``media-cache:`` references resolve (default: the stage cache's folder)
    fitted_from: dict | None = None  # prepflow apply: the fitted artifact (artifact_id, path) and the output split

    def __post_init__(self) -> None:
        # Untyped features get their type (and a feature object) from the infer_types stage.
        typed = self.config.model_copy(update={"input_features": [f for f in self.config.input_features if f.type],
                                               "output_features": [f for f in self.config.output_features if f.type]})
        self.features: list[FeatureType] = build_all(typed)

    def with_config(self, config: Config) -> "RunContext":
        """The same run with another config (the typed one, after infer_types); ``self`` is unchanged."""
        return replace(self, config=config)

    @property
    def media_cache_root(self) -> str:
        """The folder ``media-cache:`` references resolve under (``storage.media.resolve``)."""
        return self.media_dir or str(self.cache.root)

    def media_features(self) -> list[MediaFeature]:
        """The image and audio features (the ones media_cache decodes)."""
        return [f for f in self.features if isinstance(f, MediaFeature)]

    def feature(self, name: str) -> FeatureType:
        return next(f for f in self.features if f.name == name)

    def features_slice(self, names: list[str] | None = None) -> list[dict]:
        """The config slice of the named features (all by default), for cache keys."""
        chosen = [f for f in self.config.features if names is None or f.name in names]
        built = {f.name: f for f in self.features}
        # the feature type's code: a built-in type's modules (core.code_version), a custom type's source
        return [{"name": f.name, "type": f.type, "column": f.source_column, "preprocessing": f.preprocessing,
                 "output": self.config.is_output(f.name),
                 **({"code": code} if (code := feature_code(f.type) or _builtin_code(built.get(f.name))) else {})}
                for f in chosen]


def _builtin_code(feature: FeatureType | None) -> str | None:
    return class_version(type(feature)) if feature is not None else None


STATS_FILE = "statistics.json"
def timed(stage_fn: Callable[..., StageResult], *args) -> StageResult:
    """Run a stage function; its result's ``seconds`` cover the whole call (what the stage does before
    or after its cached step too: reading the ingested parts, first imports), not only ``run_cached``."""
    start = time.perf_counter()
    result = stage_fn(*args)
    result.seconds = time.perf_counter() - start
    return result


def run_cached(ctx: RunContext, stage: str, code_version: str, parents: list[str], config_slice: object,
               compute: Callable[[Path], Statistics], output: type[StageResult] = StageResult) -> StageResult:
    """Return the cached entry for this key, or run ``compute(tmp_dir)`` and store it atomically; as an
    ``output`` (the stage's typed output, ``tasks.runtime.outputs``)."""
    start = time.perf_counter()
    progress.started(stage)  # the CLI's "started" line
    key = cache_key(stage, code_version, parents, config_slice)
    hit = ctx.cache.get(stage, key)
    if hit is not None:
        ctx.cache.sweep_once(stage)  # leftovers of killed runs, though this stage writes nothing
        stats = json.loads((hit / STATS_FILE).read_text()) if (hit / STATS_FILE).exists() else {}
        progress.finished(stage, time.perf_counter() - start, True, stats)
        return output(stage, key, str(hit), True, time.perf_counter() - start, stats)
    with ctx.cache.writer(stage, key) as tmp, progress.stage(stage):
        stats = compute(tmp)
        (tmp / STATS_FILE).write_text(json.dumps(stats.to_json(), sort_keys=True))
        pause_point(stage)
    progress.finished(stage, time.perf_counter() - start, False, stats.to_json())
    return output(stage, key, str(ctx.cache.path(stage, key)), False, time.perf_counter() - start, stats.to_json())
