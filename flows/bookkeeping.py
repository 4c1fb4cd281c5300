"""Prefect bookkeeping that never fails a data run, and what a CLI run tells the Prefect UI.

The Prefect API records a run (its states, logs, artifacts); the run's product is the artifact. So:

* Prefect's client retries API errors with backoff (``flows/local_server.py:CLIENT_SETTINGS``).
* An API call that still fails while recording something optional (an artifact, a tag) is logged and
  remembered (``note_incomplete``), never raised.
* A flow that fails *because of* the API (``is_api_failure``) is finished without Prefect by
  ``prepflow run`` (``flows/without_prefect.py``); the run then says its UI record is incomplete.

``RunRecord`` is the flow's ``on_running`` hook that learns the flow run's id: the CLI then holds the
run's lock for crash detection (``flows/run_registry.py``) and tags the run with its artifact id.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid

from core.errors import PrepflowError
from flows import run_registry

logger = logging.getLogger("prepflow.bookkeeping")

# httpx's transport failures (connect/read/write errors, timeouts), by class name: no httpx import here.
TRANSPORT_CLASS_NAMES = frozenset({"TransportError", "TimeoutException", "NetworkError", "ProtocolError"})
RETRYABLE_STATUS = frozenset({408, 429})

_incomplete: list[str] = []


def is_api_failure(exc: BaseException | None, _depth: int = 0) -> bool:
    """True when ``exc`` (or what caused it) is the Prefect API failing: unreachable, timed out, a 5xx
    (503 "database is locked" included) or 408/429 after the client's retries. prepflow's own errors never are."""
    if exc is None or _depth > 8 or isinstance(exc, PrepflowError):
        return False
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & TRANSPORT_CLASS_NAMES:
        return True
    if "PrefectHTTPStatusError" in names or "HTTPStatusError" in names:
        code = getattr(getattr(exc, "response", None), "status_code", 0)
        return code >= 500 or code in RETRYABLE_STATUS
    return is_api_failure(exc.__cause__ or exc.__context__, _depth + 1)


def note_incomplete(what: str, exc: BaseException) -> None:
    """Remember (and log) that ``what`` did not reach the Prefect API."""
    reason = f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
    _incomplete.append(reason)
    logger.warning("Prefect UI record incomplete (%s)", reason)


def incomplete() -> list[str]:
    return list(_incomplete)


def best_effort(what: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, or None when the Prefect API fails (noted, not raised)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if not is_api_failure(exc):
            raise
        note_incomplete(what, exc)
        return None


class RunRecord:
    """The flow's ``on_running`` hook: remembers the flow run id and, for the local server, holds the
    run's lock so that the run shows as Crashed if this process dies (``flows/run_registry.py``)."""

    def __init__(self, runs_dir=None):
        self.runs_dir = runs_dir
        self.flow_run_id: str | None = None
        self.token: str | None = None
        self.tags: list[str] = []  # run the flow with these (the pending lock's tag)
        if runs_dir is not None:  # a lock before the flow run exists: a kill before Running is found too
            token = uuid.uuid4().hex[:16]  # names a lock and a tag, never data
            try:
                self.tags = [run_registry.register_pending(runs_dir, token, os.environ["PREFECT_API_URL"])]
                self.token = token
            except OSError as exc:
                print(f"prepflow: warning: cannot register the run for crash detection: {exc}", file=sys.stderr)

    def __call__(self, flow, flow_run, state) -> None:
        self.flow_run_id = str(flow_run.id)
        if self.runs_dir is not None:
            try:
                run_registry.register(self.runs_dir, self.flow_run_id, os.environ["PREFECT_API_URL"])
            except OSError as exc:  # crash detection lost for this run; the run itself goes on
                print(f"prepflow: warning: cannot register the run for crash detection: {exc}", file=sys.stderr)
                return
            self._drop_pending()

    def _drop_pending(self) -> None:
        if self.token is not None:
            run_registry.release(self.token)
            self.token = None

    def finish(self, artifact_id: str | None = None, recorded: bool = True) -> None:
        """After the flow: tag the run with its artifact id and drop the run's lock. ``recorded=False``
        (the API failed the flow): the lock file stays, so the next sweep marks the run Crashed."""
        if self.flow_run_id is None:  # never Running: the next sweep crashes a run left with its tag, if any
            if self.token is not None:
                run_registry.abandon(self.token)
                self.token = None
            return
        if artifact_id and recorded:
            best_effort("artifact tag", add_tag, self.flow_run_id, f"artifact:{artifact_id}")
        if self.runs_dir is not None:
            (run_registry.release if recorded else run_registry.abandon)(self.flow_run_id)


def add_tag(flow_run_id: str, tag: str) -> None:
    # heavy (Prefect's client, slow to import): only when a run is tagged
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
        if tag not in run.tags:
            client.update_flow_run(flow_run_id, tags=[*run.tags, tag])
