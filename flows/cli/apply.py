"""``prepflow apply``: encode new data with a published artifact's fitted state, with drift."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from core.errors import PrepflowError
from flows import bookkeeping, console
from flows.cli.commands import command
from flows.cli.flow_runs import (
    flow_run_url,
    quiet_prefect_tracebacks,
    run_settings,
    stage_output,
    with_ui_record,
)
from flows.local_server import configure_prefect, runs_dir
from flows.output_target import check_cache_dir, check_output


def _setup_apply(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact", help="the fitted artifact: folder or URL (or an output root with LATEST)")
    p.add_argument("--dataset", required=True, nargs="+", metavar="PATH_OR_URL",
                   help="the new data: a file, folder or glob (path or fsspec URL), or several files")
    p.add_argument("--output", required=True, help="artifact root folder or URL of the applied artifact")
    p.add_argument("--split", default="test", help="the applied artifact's one split (default test)")
    p.add_argument("--config", default=None, help="a YAML file with a 'validation:' section only (drift thresholds, "
                                                  "user suites)")
    p.add_argument("--cache-dir", default=".prepflow-cache", help="stage cache folder (default .prepflow-cache)")
    p.add_argument("--npartitions", type=int, default=None, help="Dask partitions (default: one per 256k rows)")
    p.add_argument("--dask-address", default=None, help="Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line of stdout")
    p.add_argument("--verbose", action="store_true", help="show Prefect's own log lines")


@command("apply", _setup_apply)
def cmd_apply(args: argparse.Namespace) -> int:
    from flows import apply as apply_flow

    start = time.perf_counter()
    # a bad artifact, config or split fails before any server start or data read
    checked = apply_flow.apply_context(args.artifact, args.dataset, args.output, args.split, args.config,
                                       args.cache_dir, args.npartitions)
    check_output(args.output)
    check_cache_dir(args.cache_dir)
    # the artifact checked (an output root resolved through its LATEST once: a LATEST that moves on meanwhile
    # does not change what is applied)
    params = dict(artifact=checked.fitted_from["path"], dataset=args.dataset, output=args.output, split=args.split,
                  config=args.config, cache_dir=args.cache_dir, npartitions=args.npartitions,
                  dask_address=args.dask_address)
    with console.collected_warnings() as collected:  # drift warnings: one block after the summary, as run's
        try:
            summary = _apply(args, params, apply_flow)
        except BaseException:
            if not args.verbose:
                console.print_warnings(collected.lines, sys.stderr)
            raise
    summary = {**summary, "warnings": list(collected.lines)} if collected.lines else summary
    wall = time.perf_counter() - start
    if args.json:
        print(json.dumps({**summary, "seconds": round(wall, 3)}))
    else:
        rows = ", ".join(f"{k}={v}" for k, v in summary["rows"].items())
        print(f"prepflow apply {summary['artifact_id']}\nrows: {rows}\nartifact: {summary['artifact_path']}  "
              f"({wall:.1f} s)")
        for feature, entry in summary.get("drift", {}).items():
            if entry["status"] != "ok":
                print(f"drift {entry['status']}: {feature}: {entry['statistic']} {entry['value']} "
                      f"(threshold {entry['threshold']})")
    return 0


def _apply(args: argparse.Namespace, params: dict, apply_flow) -> dict:
    """The apply flow (with a Prefect API), named, tagged and crash-marked as ``run``'s (``_run_flow``),
    else the same graph in this process."""
    summary = None
    if os.environ.get("PREPFLOW_PREFECT") != "off":
        try:
            mode = configure_prefect()
        except PrepflowError as exc:  # no local server: the apply goes on without one
            bookkeeping.note_incomplete("local Prefect server", exc)
        else:
            if not args.verbose:
                console.quiet_prefect_console()
            quiet_prefect_tracebacks()
            from prefect import tags

            from flows.preprocess import apply_flow as flow
            from flows.run_labels import file_name

            record = bookkeeping.RunRecord(runs_dir() if mode != "ephemeral" else None)
            named = flow.with_options(flow_run_name=f"apply · {file_name(args.dataset)} · "
                                                    f"{file_name(str(args.artifact).rstrip('/'))}",
                                      on_running=[*flow.on_running_hooks, record])
            with run_settings(mode), stage_output(args):
                try:
                    with tags("prepflow", "apply", f"dataset:{file_name(args.dataset)}", *record.tags):
                        summary = named(**params)
                except Exception as exc:
                    if not bookkeeping.is_api_failure(exc):
                        record.finish()  # a failed apply, recorded as Failed
                        raise
                    record.finish(recorded=False)
                    bookkeeping.note_incomplete("flow run", exc)
                else:
                    record.finish(summary.get("artifact_id"))
                    if mode != "ephemeral" and (url := flow_run_url(record.flow_run_id)):
                        summary = {**summary, "flow_run_url": url}
    if summary is None:
        with stage_output(args):
            summary = apply_flow.apply_in_process(**params)
    return with_ui_record(summary, bookkeeping)
