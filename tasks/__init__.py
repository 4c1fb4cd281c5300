"""prepflow's stages, one module each, and the extension API: ``from tasks import Stage``."""

__all__ = ["Stage"]


def __getattr__(name: str):
    # lazy on purpose: every `import tasks.<module>` runs this file first, and light modules the CLI
    # loads at start-up (tasks.runtime.progress) must not pull tasks.custom.stage's pandas and pydantic (both slow)
    if name == "Stage":
        from tasks.custom.stage import Stage

        return Stage
    raise AttributeError(f"module 'tasks' has no attribute {name!r}")
