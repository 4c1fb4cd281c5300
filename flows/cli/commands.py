"""The command registry: each command module registers its parser setup and its function with ``command``;
``build_parser`` makes ``prepflow``'s parser from every registered command, in the order of ``SUMMARIES``."""

from __future__ import annotations

import argparse
from typing import Callable

DEBUG_ENV = "PREPFLOW_DEBUG"

COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {}
# What `prepflow --help` lists, in this order: the README's command table in one line each, so the two agree.
SUMMARIES = {
    "run": "preprocess a dataset and publish an artifact (tensors, metadata, FeatureSpec, report)",
    "apply": "encode new data with a published artifact's fitted state (nothing refitted), with drift",
    "infer": "print a config with an inferred type per column and the reason",
    "validate": "run the raw data-quality gates only (a CI data gate: exit 0/1/2)",
    "inspect": "show an artifact's splits, rows, features, columns, channels, statistics",
    "report": "rebuild the HTML data report beside an artifact",
    "transcode": "turn an NVIDIA FeatureSpec dataset into a prepflow artifact",
    "serve": "serve the flow as a scheduled Prefect deployment (cron), triggerable from the UI",
    "server": "show or stop this installation's local Prefect server",
    "schema": "print the config's JSON Schema, for editors",
}


def command(name: str, setup: Callable[[argparse.ArgumentParser], None]):
    def register(fn: Callable[[argparse.Namespace], int]):
        COMMANDS[name] = (setup, fn)
        return fn

    return register


def build_parser() -> argparse.ArgumentParser:
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help=f"print the traceback of an error (also: {DEBUG_ENV}=1)")
    parser = argparse.ArgumentParser(prog="prepflow", description="Raw datasets -> GPU-ready training artifacts.",
                                     parents=[debug])
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    for name in sorted(COMMANDS, key=lambda n: list(SUMMARIES).index(n) if n in SUMMARIES else len(SUMMARIES)):
        setup, _fn = COMMANDS[name]
        summary = SUMMARIES.get(name)
        setup(sub.add_parser(name, parents=[debug], help=summary, description=summary))
    return parser
