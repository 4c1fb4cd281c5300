"""``prepflow``'s entry point: parse, run the command, and turn every failure into one
``prepflow: error:`` line and an exit code (1 data, 2 usage or config, 130 interrupted)."""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import traceback
from pathlib import Path

from core.errors import MESSAGE_LIMIT, QUOTE_LIMIT, PrepflowError, bounded, quoted, shown
from flows.cli.commands import COMMANDS, DEBUG_ENV, build_parser
from tasks.dataset.files import as_dataset


def _debug(args: argparse.Namespace | None) -> bool:
    return bool(getattr(args, "debug", False)) or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def _print_error(message: str) -> None:
    """One ``prepflow: error:`` line; a message of several lines (a failed gate's report) keeps its other
    lines below it, indented. The message is bounded and every line escaped (``core.errors.shown``): whatever
    untrusted text an error quotes, it reaches the terminal as inert characters of bounded length."""
    first, *rest = (bounded(message).strip() or "(no message)").splitlines()
    print(f"prepflow: error: {shown(first, MESSAGE_LIMIT)}", file=sys.stderr)
    for line in rest:
        print(f"  {shown(line, MESSAGE_LIMIT)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 on usage errors
        return int(exc.code or 0)
    try:
        if isinstance(getattr(args, "dataset", None), list):  # --dataset PATH [PATH ...]
            args.dataset = as_dataset(args.dataset)
        return COMMANDS[args.command][1](args)
    except PrepflowError as exc:
        if _debug(args):
            traceback.print_exc()
        _print_error(str(exc))
        if getattr(exc, "gate", None) and getattr(args, "json", False):  # ValidationFailed: say which gate
            print(json.dumps({"error": str(exc).splitlines()[0], "failed_gate": exc.gate, "validation": exc.report},
                             default=str))
        return exc.exit_code
    except KeyboardInterrupt:
        print("prepflow: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG):
            return _internal_error(args, exc)
        if _debug(args):
            traceback.print_exc()
        _print_error(_name_too_long(exc) if exc.errno == errno.ENAMETOOLONG else _disk_full(exc, args))
        return 1
    except Exception as exc:  # not the user's to fix: a bug of prepflow or of a library it calls
        return _internal_error(args, exc)


def _disk_full(exc: OSError, args: argparse.Namespace) -> str:
    """A full disk (or quota) in one line, with the file when the error names one, else the folders the
    command writes in, instead of a traceback."""
    what = "no space left on device" if exc.errno == errno.ENOSPC else "disk quota exceeded"
    if exc.filename:
        return f"{exc.filename}: {what}; free space there (or pick another folder) and run again"
    folders = [f"{flag} {value}" for flag, value in (("--output", getattr(args, "output", None)),
                                                      ("--cache-dir", getattr(args, "cache_dir", None))) if value]
    where = f" while writing under {' or '.join(folders)}" if folders else ""
    return f"{what}{where}; free space there (or pick other folders) and run again"


def _name_too_long(exc: OSError) -> str:
    """A path the file system refuses for its length, in one line: which one, and how long its longest name
    and the whole path are."""
    name = os.fsdecode(exc.filename or "")
    longest = max((len(os.fsencode(part)) for part in Path(name).parts), default=0)
    return (f"{quoted(name)}: file name too long (its longest name is {longest} bytes, the whole path "
            f"{len(os.fsencode(name))}; file systems allow about 255 bytes per name and 4096 per path)")


def _internal_error(args: argparse.Namespace | None, exc: BaseException) -> int:
    if _debug(args):
        traceback.print_exc()
    detail = shown(str(exc).strip().splitlines()[0], 4 * QUOTE_LIMIT) if str(exc).strip() else ""
    hint = "" if _debug(args) else f" (--debug or {DEBUG_ENV}=1 prints the traceback)"
    print(f"prepflow: error: internal error: {type(exc).__name__}: {detail}{hint}", file=sys.stderr)
    return 1
