"""The crash-test hook: a named point in a stage where a test can kill the run with its output half-written."""

from __future__ import annotations

import os
import time
from pathlib import Path

PAUSE_ENV = "PREPFLOW_TEST_PAUSE_AT"


def pause_point(stage: str) -> None:
    """Crash-test hook, inert unless ``PREPFLOW_TEST_PAUSE_AT=<stage>`` is set: the stage stops with its
    output half-written (cache entry or artifact still in its temporary folder), writes its pid to
    ``PREPFLOW_TEST_PAUSE_FILE`` and sleeps, so a test can SIGKILL the run at that point."""
    if os.environ.get(PAUSE_ENV) != stage:
        return
    if os.environ.get("PREPFLOW_TEST_PAUSE_FILE"):
        Path(os.environ["PREPFLOW_TEST_PAUSE_FILE"]).write_text(str(os.getpid()))
    time.sleep(3600)
