"""Progress of long stages: Dask task completions reported to whoever listens (the CLI's bar).

``run_cached`` names the running stage (``stage(name)``); ``tasks.frame.compute`` reports how many of
that compute's Dask tasks finished through a local-scheduler callback. A reporter is any callable
``(stage, done, total)``; the CLI installs a rich progress bar on a terminal, tests install a list.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from typing import Callable, Iterator

Reporter = Callable[[str, int, int], None]

_stage: contextvars.ContextVar[str] = contextvars.ContextVar("prepflow_stage", default="")
_reporter: Reporter | None = None


def set_reporter(reporter: Reporter | None) -> None:
    global _reporter
    _reporter = reporter


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    token = _stage.set(name)
    try:
        yield
    finally:
        _stage.reset(token)


def report(done: int, total: int) -> None:
    """Report progress of work that is not Dask tasks (media decoding) for the running stage."""
    if _reporter is not None:
        _reporter(_stage.get(), done, total)


@contextlib.contextmanager
def tracking(n_outputs: int) -> Iterator[None]:
    """Report finished Dask tasks of the compute run inside this block (local schedulers)."""
    reporter, name = _reporter, _stage.get()
    if reporter is None:
        yield
        return
    from dask.callbacks import Callback

    lock = threading.Lock()
    state = {"done": 0, "total": 0}

    def start_state(_dsk, dask_state):
        state["total"] = len(dask_state["ready"]) + len(dask_state["waiting"]) + len(dask_state.get("running", ()))
        reporter(name, 0, state["total"])

    def posttask(_key, _result, _dsk, _state, _worker_id):
        with lock:
            state["done"] += 1
            reporter(name, state["done"], max(state["total"], state["done"]))

    with Callback(start_state=start_state, posttask=posttask):
        yield
