"""prepflow's stages, one module each, and the extension API: ``from tasks import Stage``."""

from tasks.stage import Stage

__all__ = ["Stage"]
