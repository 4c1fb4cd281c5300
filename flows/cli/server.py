"""``prepflow server``: show or stop this installation's local Prefect server."""

from __future__ import annotations

import argparse
import json

from flows import local_server
from flows.cli.commands import command


def _setup_server(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["status", "stop"],
                   help="status: where this installation's local Prefect server runs and keeps its state; "
                        "stop: stop it (the next run starts it again)")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line of stdout")


@command("server", _setup_server)
def cmd_server(args: argparse.Namespace) -> int:
    """This installation's local Prefect server (flows/local_server.py): one per virtualenv and checkout."""

    if args.action == "stop":
        stopped = local_server.stop_server()
        print(json.dumps({"stopped": stopped}) if args.json else
              "stopped the local Prefect server" if stopped else "no local Prefect server was running")
        return 0
    info = local_server.status()
    if args.json:
        print(json.dumps(info))
    elif info["running"]:
        print(f"local Prefect server: UI {info['ui']}, API {info['url']}, pid {info['pid']}"
              f"{'' if info['healthy'] else ' (not answering)'}; {len(info['live_runs'])} run(s) in progress")
        print(f"state (database, log, reports): {info['state_dir']}")
    else:
        print(f"no local Prefect server running; its state would be in {info['state_dir']}")
    return 0
