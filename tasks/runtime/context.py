"""What every stage receives: the resolved config, feature objects, cache and run options.

No Dask collection ever crosses a stage boundary, only paths and keys (``tasks.runtime.outputs``); the
runner's cached step is ``tasks.runtime.cached``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from core.code_version import class_version
from storage.cache import StageCache
from tasks.config.schema import Config
from tasks.features import build_all, feature_code
from tasks.features.base import FeatureType
from tasks.features.media import MediaFeature


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
    extend: dict | None = None  # --extend: the parent, the new rows' first number, the files kept, new, dropped

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
