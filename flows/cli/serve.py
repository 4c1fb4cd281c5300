"""``prepflow serve``: the flow as a scheduled Prefect deployment, triggerable from the UI."""

from __future__ import annotations

import argparse

from flows import serve as serve_command
from flows.cli.commands import command


@command("serve", serve_command.setup_parser)
def cmd_serve(args: argparse.Namespace) -> int:
    """The flow as a deployment with a cron schedule, triggerable from the UI (flows/serve.py)."""
    params, chosen = serve_command.prepare(args)
    from flows.preprocess import preprocess  # after prepare: Prefect reads its settings when first imported

    return serve_command.serve(args, preprocess, params, chosen)
