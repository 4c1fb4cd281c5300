"""What ``run`` and ``apply`` share around a Prefect flow run: the run's Prefect settings, quiet tracebacks of
prepflow's own errors, the run's link in the UI, the stage lines and progress, and the UI record's gaps."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys

from core.errors import PrepflowError
from flows import console


class _HidePrepflowTracebacks(logging.Filter):
    """Prefect logs a task's exception with its traceback; for our own errors the message is enough."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], PrepflowError):
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_prefect_tracebacks() -> None:
    filt = _HidePrepflowTracebacks()
    for name in ("prefect", "prefect.flow_runs", "prefect.task_runs", "prefect.flow_engine", "prefect.task_engine"):
        logger = logging.getLogger(name)
        logger.addFilter(filt)
        for handler in logger.handlers:
            handler.addFilter(filt)


def run_settings(mode: str):
    """Prefect settings for the run (flow and bookkeeping after it).

    * The API URL: ``configure_prefect`` sets ``PREFECT_API_URL`` in the environment (the local server's),
      but Prefect reads its settings once, at import, and ``flows.serve`` (imported with the CLI, for the serve command's parser)
      imports Prefect: without this, a Prefect client made outside the flow (the artifact tag of
      ``bookkeeping.RunRecord.finish``), or every run after the first of a process that calls ``main``
      repeatedly (the URL is then in the environment: mode "remote"), would start an ephemeral server.
    * No heartbeat on the local server: Prefect's flow heartbeat thread's shutdown joins a thread that
      sleeps in 1 s steps (wall time added to every run: benchmarks/flow_heartbeat.py), and Prefect's
      server marks a dead run Crashed only through an automation a user creates; the local server marks
      it itself (flows/run_registry.py). With a remote server
      (PREFECT_API_URL) the heartbeat stays on, so does it when PREFECT_FLOWS_HEARTBEAT_FREQUENCY is set."""

    from prefect.settings import (  # heavy optional dependency: Prefect (not for runs without it)
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    updates: dict = {}
    if mode != "ephemeral" and os.environ.get("PREFECT_API_URL"):
        updates[PREFECT_API_URL] = os.environ["PREFECT_API_URL"]
    if mode != "remote" and not os.environ.get("PREFECT_FLOWS_HEARTBEAT_FREQUENCY"):
        updates[PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = None
    return temporary_settings(updates=updates) if updates else contextlib.nullcontext()



def flow_run_url(flow_run_id: str | None) -> str | None:
    """The run's page in the Prefect UI (Prefect's "View at" line, quiet without --verbose)."""
    from prefect.utilities.urls import url_for  # heavy optional dependency: Prefect (not for runs without it)

    try:
        return url_for("flow-run", obj_id=flow_run_id) if flow_run_id else None
    except Exception:  # a link is not worth failing a published run for
        return None



def stage_output(args: argparse.Namespace):
    """Stage lines and progress (flows/console.py): a live bar only on a terminal, and never with
    ``--verbose`` (Prefect's log lines would write through it) or ``--json``."""
    return console.stage_output(bar=sys.stderr.isatty() and not args.verbose and not args.json)


def with_ui_record(summary: dict, bookkeeping) -> dict:
    """``ui_record_incomplete``: what did not reach the Prefect API (absent when everything did)."""
    missing = bookkeeping.incomplete()
    if missing:
        print(f"prepflow: warning: Prefect UI record incomplete: {'; '.join(missing)}", file=sys.stderr)
        return {**summary, "ui_record_incomplete": missing}
    return summary
