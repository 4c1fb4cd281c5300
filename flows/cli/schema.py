"""``prepflow schema``: print the config's JSON Schema, for editors."""

from __future__ import annotations

import argparse
import json

from flows.cli.commands import command


@command("schema", lambda p: None)
def cmd_schema(args: argparse.Namespace) -> int:
    from tasks.config.json_schema import json_schema  # with every feature type's options

    print(json.dumps(json_schema(), indent=2))
    return 0
