"""``prepflow validate``: the raw data-quality gates only, a CI data gate (exit 0/1/2)."""

from __future__ import annotations

import argparse
import json

from core.errors import ConfigError
from flows.cli.commands import command
from flows.output_target import check_cache_dir


def _setup_validate(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", nargs="+", help="dataset: a file, folder or glob (path or fsspec URL), or several files")
    p.add_argument("--config", action="append", default=[], help="a config: its raw gate (generated suite and "
                   "the user suites under validation.raw); may be repeated")
    p.add_argument("--suite", action="append", default=[], help="a GX 1.x expectation suite (JSON) to run on the "
                   "raw table; may be repeated")
    p.add_argument("--cache-dir", default=".prepflow-cache", help="stage cache folder (default .prepflow-cache)")
    p.add_argument("--npartitions", type=int, default=None, help="Dask partitions (default: one per 256k rows)")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line of stdout")


@command("validate", _setup_validate)
def cmd_validate(args: argparse.Namespace) -> int:
    """A data gate: exit 0 when every gate passes, 1 with a report when one fails, 2 on a usage error."""
    from flows.reporting import print_validation
    from flows.validation import validate_dataset

    if args.npartitions is not None and args.npartitions < 1:
        raise ConfigError(f"--npartitions must be at least 1, got {args.npartitions}")
    check_cache_dir(args.cache_dir)
    report = validate_dataset(args.dataset, args.config, args.suite, cache_dir=args.cache_dir,
                              npartitions=args.npartitions)
    if args.json:
        print(json.dumps(report, default=str))
    else:
        print_validation(report)
    return 0 if report["success"] else 1
