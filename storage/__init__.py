"""prepflow storage: content-addressed cache, artifact writer/reader, loaders, Preprocessor."""

from __future__ import annotations

__all__ = ["Artifact", "Preprocessor", "StageCache"]


def __getattr__(name: str):
    # lazy on purpose: storage.preprocessor imports the stages (tasks), the layer above, and every
    # `import storage.<module>` runs this file first; the names load on first use instead
    if name == "Artifact":
        from storage.artifact import Artifact

        return Artifact
    if name == "Preprocessor":
        from storage.preprocessor import Preprocessor

        return Preprocessor
    if name == "StageCache":
        from storage.cache import StageCache

        return StageCache
    raise AttributeError(name)
