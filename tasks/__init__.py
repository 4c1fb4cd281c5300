from tasks.stage import Stage

"""prepflow's stages, one module each, and the extension API: ``from tasks import Stage``.

``Stage`` is imported on first use, so ``import core.errors`` stays light."""


def __getattr__(name: str):
    if name == "Stage":

        return Stage
    raise AttributeError(f"module 'tasks' has no attribute {name!r}")
