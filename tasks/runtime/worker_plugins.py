"""What a Dask cluster sets up before it runs a flow's tasks (``tasks.runtime.dask_run.client`` asks for it).

The plugin modules the flow process imported from a config's folder or a folder of ``$PREPFLOW_PLUGIN_PATH``
(``core.plugins.import_plugin``) are imported from the same folder by the scheduler (``import_plugins``,
which deserializes the task graph) and by every worker, present and future (``PluginFolders``), so a task
that holds one of their classes unpickles there. The folder must be at the same path there (a shared
filesystem, as for the stage cache); a process that does not see it is left as it is, and a task needing
the module fails naming it.
"""

from __future__ import annotations

import os

from distributed.diagnostics.plugin import WorkerPlugin

from core.plugins import allow_root, import_plugin


def import_plugins(modules: dict[str, str]) -> None:
    """Import each ``{top-level module: folder}`` from its folder, when that folder exists here."""
    for top, folder in modules.items():
        if os.path.isdir(folder):
            allow_root(folder)
            import_plugin(top)


class PluginFolders(WorkerPlugin):
    name = "prepflow-plugin-folders"

    def __init__(self, modules: dict[str, str]):
        self.modules = dict(modules)  # top-level module -> the folder it comes from

    def setup(self, worker) -> None:
        import_plugins(self.modules)
