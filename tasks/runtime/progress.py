"""Progress of long stages: Dask task completions, and each stage's start and end, reported to whoever
listens (the CLI's lines and bar, flows/console.py).

The runner (``tasks.runtime.cached``) names the running stage (``stage(name)``);
``tasks.runtime.dask_run.compute`` reports how many of that compute's Dask tasks finished through a local-scheduler callback. A reporter is any callable
``(stage, done, total)``; the CLI installs one, tests install a list.

It also says when a stage starts and ends (``started`` / ``finished``) to the stage listener,
a callable ``(event, stage, info)``: event ``"start"`` (info ``{}``) or ``"end"`` (info ``seconds``,
``cached`` and ``rows``: the stage's row count from its statistics, ``None`` when it has none).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from typing import Callable, Iterator

from dask.callbacks import Callback

Reporter = Callable[[str, int, int], None]
StageListener = Callable[[str, str, dict], None]

_stage: contextvars.ContextVar[str] = contextvars.ContextVar("prepflow_stage", default="")
_reporter: Reporter | None = None
_listener: StageListener | None = None


def set_reporter(reporter: Reporter | None) -> None:
    global _reporter
    _reporter = reporter


def set_stage_listener(listener: StageListener | None) -> None:
    global _listener
    _listener = listener


def started(stage: str) -> None:
    """A stage began (its cache lookup included)."""
    if _listener is not None:
        _listener("start", stage, {})


def finished(stage: str, seconds: float, cached: bool, statistics: dict) -> None:
    """A stage ended: computed, or served from the cache (``statistics``: its ``Statistics.to_json()``)."""
    if _listener is not None:
        _listener("end", stage, {"seconds": seconds, "cached": cached, "rows": rows_of(stage, statistics)})


def rows_of(stage: str, statistics: dict) -> int | None:
    """The rows a stage produced or read, from its counters: ``<stage>.rows_out``, else the sum of
    ``<stage>.rows_out.<split>`` or ``<stage>.rows.<split>``, else ``<stage>.rows_in``; ``None`` if none."""

    def count(name: str) -> int | None:
        entry = statistics.get(name)
        return int(entry["count"]) if isinstance(entry, dict) and "count" in entry else None

    if (n := count(f"{stage}.rows_out")) is not None:
        return n
    for prefix in (f"{stage}.rows_out.", f"{stage}.rows."):
        parts = [count(k) for k in statistics if k.startswith(prefix)]
        if parts and all(p is not None for p in parts):
            return sum(parts)
    return count(f"{stage}.rows_in")


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
