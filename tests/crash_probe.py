"""A flow run started the way ``prepflow run`` starts one (``flows.bookkeeping.RunRecord`` as its
``on_running`` hook, the Prefect API chosen by ``flows.local_server.configure_prefect``), which blocks
inside a task until it is killed. Tests SIGKILL it and check that the run shows Crashed.

    python -m tests.crash_probe MARKER_FILE      # MARKER_FILE appears once the task runs
"""

from __future__ import annotations

import os
import sys
import time

from flows.local_server import configure_prefect, runs_dir

MODE = configure_prefect()  # before Prefect is imported, as the CLI does

from prefect import flow, task  # noqa: E402

from flows.bookkeeping import RunRecord  # noqa: E402


@task
def block(marker: str) -> None:
    with open(marker + ".tmp", "w") as f:  # renamed when written: a test that sees the file reads its text
        f.write(MODE)
    os.replace(marker + ".tmp", marker)
    time.sleep(900)


@flow(name="crash-probe")
def probe(marker: str) -> None:
    block(marker)


if __name__ == "__main__":
    probe.with_options(on_running=[RunRecord(runs_dir())])(sys.argv[1])
