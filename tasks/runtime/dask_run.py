"""Running Dask delayed tasks on the active scheduler: a distributed Client when one is set (its
workers run them), else Dask's local threads. Every stage's per-partition work goes through ``compute``."""

from __future__ import annotations

import contextlib
import os
import sys

import dask
import dask.threaded
import numpy as np
from dask import delayed

from core.errors import ConfigError
from core.plugins import folder_plugins
from core.task_fusion import fused
from core.task_tree import tree
from tasks.runtime.progress import tracking


def local_only() -> bool:
    """No scheduler configured and ``distributed`` never imported, so no Client can exist: Dask's local
    threaded scheduler runs the tasks. Dask would import ``distributed`` (a heavy import, once per process)
    just to find that out."""

    return dask.config.get("scheduler", None) is None and "distributed" not in sys.modules


def on_cluster() -> bool:
    """A distributed Client is the default scheduler (``Client(...)`` sets it): delayed tasks run on its
    workers, whose working directory is not necessarily this process's."""

    return dask.config.get("scheduler", None) == "dask.distributed"


def client(address: str | None):
    """A distributed Client of the scheduler at ``address``, as a context: while it is open it is the default
    scheduler, so every ``compute`` runs on its workers. Without an address: Dask's local scheduler. An
    address that cannot be reached is a ConfigError naming it. The plugins this process imported from a
    config's folder are imported on every worker (``tasks.runtime.worker_plugins``)."""
    if not address:
        return contextlib.nullcontext()
    from distributed import Client  # a heavy import: only with --dask-address

    try:
        dask_client = Client(address, timeout=os.environ.get("PREPFLOW_DASK_CONNECT_TIMEOUT", "30s"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--dask-address {address}: cannot reach the Dask scheduler ({exc})") from None
    modules = folder_plugins()
    if modules:  # plugins beside the config: the scheduler and every worker import them as this process did
        from tasks.runtime.worker_plugins import PluginFolders, import_plugins

        dask_client.run_on_scheduler(import_plugins, modules)
        dask_client.register_plugin(PluginFolders(modules))
    return dask_client


def compute(tasks: list, here: bool = False) -> list:
    """Run delayed tasks on the active scheduler (a distributed Client if one is set), each task that only
    one other needs fused into it (``core.task_fusion``). ``here``: on this process's threads even when a
    Client is set (tasks that read files only this process may see)."""

    if not tasks:
        return []
    kwargs = {"scheduler": dask.threaded.get} if here or local_only() else {}  # the default for delayed tasks
    with tracking(len(tasks)), fused():  # a partition's read and preparation run inside its stage's task
        return list(dask.compute(*tasks, **kwargs))


def _add(*arrays):
    return np.sum(arrays, axis=0)


def summed(tasks: list, fan_in: int = 8):
    """The element-wise sum of delayed arrays (histograms), summed on the workers (``tree``)."""
    return compute([tree(tasks, _add, fan_in=fan_in)])[0]


def shared(value):
    """Wrap a large argument (metadata, states, arrays) once, so Dask does not walk it per task."""

    return delayed(value, traverse=False)


CHUNK_ROWS = 1 << 20  # input rows per task over a per-row file (a task holds a few arrays of 8 bytes per row)


def row_chunks(n: int, size: int | None = None) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges of ``size`` (default ``CHUNK_ROWS``) rows covering ``n`` rows: one Dask task each."""
    size = size or CHUNK_ROWS
    return [(lo, min(lo + size, n)) for lo in range(0, n, size)]
