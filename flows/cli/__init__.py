"""The ``prepflow`` command line (DESIGN section 5b).

Exit codes: 0 success, 1 a data or validation failure, 2 a usage or config error. With ``--json``
the last line of stdout is one JSON object. Every failure is one ``prepflow: error: ...`` line on
stderr, printed once (Prefect's log lines, which would repeat it, are quiet unless ``--verbose``);
a traceback only with ``--debug`` (or ``PREPFLOW_DEBUG=1``). What ``run`` shows while it runs (stage
lines, progress, the warnings block) is flows/console.py's.

Each command imports what it runs inside its function: the stages, storage, Great Expectations and
Prefect take seconds to import, and `prepflow --help`, `schema` or `server status` need none of them. The
imports at module level are the light ones every command uses.

A module per command (``flows/cli/<command>.py``) registers its parser setup and function in
``flows.cli.commands``; ``flows.cli.entry.main`` parses, dispatches and turns failures into exit codes.
"""

from __future__ import annotations

# every command module registers its command when imported
from flows.cli import apply, infer, inspect, report, run, schema, serve, server, transcode, validate  # noqa: F401
from flows.cli.commands import COMMANDS, build_parser
from flows.cli.entry import main
from flows.cli.run import _fingerprint  # noqa: F401  (tests hash a dataset as run does)

__all__ = ["COMMANDS", "build_parser", "main"]
