"""``prepflow run``: preprocess a dataset and publish an artifact, or reuse the one already published."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from core.errors import ConfigError, PrepflowError
from flows import bookkeeping, console
from flows.cli.commands import command
from flows.cli.flow_runs import (
    flow_run_url,
    quiet_prefect_tracebacks,
    run_settings,
    stage_output,
    with_ui_record,
)
from flows.flow_parameters import add_flow_parameters
from flows.local_server import configure_prefect, runs_dir
from flows.output_target import check_cache_dir, check_output


def _setup_run(p: argparse.ArgumentParser) -> None:
    add_flow_parameters(p)
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line of stdout")
    p.add_argument("--always-run-flow", action="store_true",
                   help="run the Prefect flow even when the artifact for these inputs is already published "
                        "(every stage then shows as Cached in the UI)")
    p.add_argument("--stats", action="store_true",
                   help="print the run's statistics table after the summary (they are in the report either way)")
    p.add_argument("--extend", action="store_true",
                   help="keep the parent artifact's fit, rows and ids; encode the new files only, vocabularies "
                        "extended (docs/apply-and-drift.md)")
    p.add_argument("--parent", default=None, help="--extend: the artifact to extend (default: OUTPUT's LATEST)")
    p.add_argument("--window", type=int, default=None, help="--extend: keep the newest N files by name")
    p.add_argument("--verbose", action="store_true",
                   help="show Prefect's own log lines (quiet by default; they always reach the Prefect UI); "
                        "no progress bar then")


def _print_summary(summary: dict, wall: float, stats: bool, warnings: list[str]) -> None:
    """The stage table, rows, artifact and report lines, the statistics with ``--stats``, the warnings
    block: a screen (the Titanic example: about 40 lines with the stage lines)."""

    out = Console()
    out.print(f"prepflow run {summary['artifact_id']}", markup=False, highlight=False)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("stage")
    table.add_column("seconds", justify="right")
    table.add_column("cached")
    for stage in summary["stages"]:
        table.add_row(stage["name"], f"{stage['seconds']:.3f}", "yes" if stage["cached"] else "no")
    out.print(table)
    if stats:
        from flows.reporting import print_statistics

        print_statistics(out, summary["artifact_path"])
    rows = ", ".join(f"{k}={v}" for k, v in summary["rows"].items())
    out.print(f"rows: {rows}", markup=False, highlight=False)
    if summary.get("dropped") is not None:
        out.print(console.dropped_line(summary["dropped"]), markup=False, highlight=False, soft_wrap=True)
    if "files" in summary:  # a folder or glob: what this run read of it
        out.print(f"files: {summary['files']['total']} ({summary['files']['new']} read, the others' ingest reused)",
                  markup=False, highlight=False)
    out.print(f"artifact: {summary['artifact_path']}  ({wall:.1f} s)", markup=False, highlight=False,
              soft_wrap=True)
    if summary.get("report_path"):
        out.print(f"report: {summary['report_path']}", markup=False, highlight=False, soft_wrap=True)
    if summary.get("flow_run_url"):
        out.print(f"prefect: {summary['flow_run_url']}", markup=False, highlight=False, soft_wrap=True)
    if summary.get("reused_artifact"):
        out.print("already published for this dataset and config: nothing ran "
                  "(--always-run-flow runs the flow anyway)", markup=False, highlight=False, soft_wrap=True)
    console.print_warnings(warnings)


def _run_flow(args: argparse.Namespace, config, fingerprint: str | None = None) -> dict:
    """The preprocess flow, named and tagged for the UI (flows/run_labels.py), given the ``Config`` the CLI
    parsed (never the file again). Bookkeeping never fails the run: a Prefect API that cannot be reached, or
    fails the flow, leaves the run to finish without it."""
    from flows import without_prefect  # the in-process runner: the stages (slow to import)

    if os.environ.get("PREPFLOW_PREFECT") == "off":  # the in-process runner, no Prefect API at all
        return _without_prefect(args, without_prefect, config)
    try:
        mode = configure_prefect()
    except PrepflowError as exc:  # no local server: the run goes on without one
        bookkeeping.note_incomplete("local Prefect server", exc)
        return _finish_without_prefect(args, without_prefect, bookkeeping, config)
    if not args.verbose:  # after the server started: its process keeps its own log lines
        console.quiet_prefect_console()
    from prefect import tags

    from flows.preprocess import preprocess
    from flows.run_labels import run_name, run_tags

    quiet_prefect_tracebacks()
    # Every run holds its lock (the local server, and the next run against the same API, mark it Crashed
    # if this process dies); only an ephemeral server, gone with this process, needs none.
    record = bookkeeping.RunRecord(runs_dir() if mode != "ephemeral" else None)
    flow = preprocess.with_options(flow_run_name=run_name(args.dataset, args.config, config),
                                   on_running=[*preprocess.on_running_hooks, record])
    _freeze_imports()
    with run_settings(mode):
        try:
            with tags(*run_tags(args.dataset, config), *record.tags), stage_output(args):
                summary = flow(config=config, dataset=args.dataset, output=args.output,
                               cache_dir=args.cache_dir, npartitions=args.npartitions,
                               dask_address=args.dask_address, dataset_fingerprint=fingerprint,
                               **_extend_parameters(args))
        except Exception as exc:
            if not bookkeeping.is_api_failure(exc):
                record.finish()  # a failed run, recorded as Failed
                raise
            record.finish(recorded=False)  # its final state may be missing: the next sweep marks it Crashed
            bookkeeping.note_incomplete("flow run", exc)
            return _finish_without_prefect(args, without_prefect, bookkeeping, config)
        record.finish(summary.get("artifact_id"))
        if mode != "ephemeral" and (url := flow_run_url(record.flow_run_id)):
            summary = {**summary, "flow_run_url": url}
    return with_ui_record(summary, bookkeeping)



def _extend_parameters(args: argparse.Namespace) -> dict:
    """The flow's extend parameters, only for an extend (a plain run's parameters stay as they were)."""
    if not getattr(args, "extend", False):
        return {}
    return {"extend": True, "parent": args.parent, "window": args.window}


def _finish_without_prefect(args: argparse.Namespace, without_prefect, bookkeeping, config) -> dict:
    print("prepflow: warning: the Prefect API failed; finishing the run without it (its UI record is "
          "incomplete)", file=sys.stderr)
    return with_ui_record(_without_prefect(args, without_prefect, config), bookkeeping)


def _without_prefect(args: argparse.Namespace, without_prefect, config) -> dict:
    if not args.verbose:
        console.quiet_prefect_console()
    _freeze_imports()
    with stage_output(args):
        if getattr(args, "extend", False):
            from flows.extend import extend_in_process

            return extend_in_process(args.config, args.dataset, args.output, args.parent, args.window,
                                     args.cache_dir, args.npartitions, args.dask_address)
        return without_prefect.run_config(config, args.dataset, args.output, args.cache_dir, args.npartitions,
                                          args.dask_address)


def _freeze_imports() -> None:
    """Keep Python's cyclic collector off what the run has imported (Prefect, pydantic's models, the stages,
    pandas: over a million objects that live until the process exits). Its full collections over them
    are a sizeable share of the flow process's CPU (benchmarks/RESULTS.md); ``gc.freeze`` moves them to the
    permanent generation, which no collection scans."""
    gc.freeze()



@command("run", _setup_run)
def cmd_run(args: argparse.Namespace) -> int:
    from tasks.config.loader import load_config

    if args.npartitions is not None and args.npartitions < 1:
        raise ConfigError(f"--npartitions must be at least 1, got {args.npartitions}")
    start = time.perf_counter()
    if args.extend or args.parent is not None or args.window is not None:
        return _extend(args, start)
    config = load_config(args.config)  # the run's one parse: config errors before any server start or data read
    if config.stages:  # so is a malformed custom-stage DAG
        from tasks.custom import plan as custom_plan

        custom_plan.check(config, args.dataset)
    check_output(args.output)  # so is an output that cannot be written
    check_cache_dir(args.cache_dir)  # and a stage cache that cannot be
    with console.collected_warnings() as collected:
        try:
            summary = _run(args, config, start)
        except BaseException:  # the warnings so far, before the error line
            if not args.verbose:  # (with --verbose, Prefect's console handler has shown them)
                console.print_warnings(collected.lines, sys.stderr)
            raise
    summary = {**summary, "warnings": list(collected.lines)} if collected.lines else summary
    summary = {**summary, "dropped": console.dropped_rows(console.read_manifest(summary["artifact_path"]))}
    if not summary.get("report_path"):  # the run's log has why (a full disk, ...): never a silent null
        note = ("the data report was not written (the run's log says why); the artifact is complete: "
                f"`prepflow report {summary['artifact_path']}` builds the report again")
        print(f"prepflow: warning: {note}", file=sys.stderr)
        summary = {**summary, "warnings": [*summary.get("warnings", []), note]}
    _report(args, summary, time.perf_counter() - start)
    return 0


def _extend(args: argparse.Namespace, start: float) -> int:
    """``--extend``: the preprocess flow's extend graph (``flows.extend``), or the same graph in this process
    without the Prefect API."""
    from tasks.config.loader import load_config

    if not args.extend:
        raise ConfigError("--parent and --window apply to --extend")
    config = load_config(args.config)
    check_output(args.output)
    check_cache_dir(args.cache_dir)
    with console.collected_warnings() as collected:
        summary = _run_flow(args, config)
    summary = {**summary, "warnings": list(collected.lines)} if collected.lines else summary
    _report(args, summary, time.perf_counter() - start)
    return 0


def _run(args: argparse.Namespace, config, start: float) -> dict:
    """The run's summary: a published artifact reused, or the flow's (or in-process runner's)."""
    fingerprint = None  # the dataset's sha256, computed once per run and handed to ingest
    if not args.always_run_flow and "://" not in args.output:
        from tasks.graph import artifact_code_versions
        from tasks.publish import stage as publish

        fingerprint = _fingerprint(args)
        reused = publish.reusable(args.output, fingerprint, config, artifact_code_versions())
        if reused is not None:
            from storage.artifact import Artifact

            # Every file's sha256, not just its size: a reused artifact is one the user will train on.
            # A corrupt one is refused (IntegrityError, exit 1), never silently rebuilt over.
            Artifact.open(reused["artifact_path"], verify=True)
            publish.write_latest(Path(args.output), reused["artifact_id"])
            summary = {**{k: reused[k] for k in ("artifact_path", "artifact_id", "rows")},
                       "stages": [{"name": "publish", "seconds": 0.0, "cached": True}], "reused_artifact": True}
            summary["report_path"] = _reused_report(reused["artifact_path"])
            return summary
    return _run_flow(args, config, fingerprint)


def _fingerprint(args: argparse.Namespace) -> str:
    """The dataset's fingerprint (``tasks.dataset.fingerprint``). Data larger than one hashing block is hashed by Dask
    tasks: with ``--dask-address`` on the cluster's workers (a Client of its own, closed before the flow
    opens the run's), so the flow's process never reads the dataset's bytes."""
    from tasks.dataset import fingerprint
    from tasks.dataset.file_stamps import FileStamps

    stamps = FileStamps.at(args.cache_dir)  # the fingerprints of a folder's files that earlier runs hashed
    if args.dask_address and fingerprint.needs_tasks(args.dataset) and fingerprint.read_by_workers(args.dataset):
        from tasks.runtime import dask_run

        with dask_run.client(args.dask_address):
            return fingerprint.fingerprint(args.dataset, stamps)
    return fingerprint.fingerprint(args.dataset, stamps)


def _reused_report(artifact_path: str) -> str | None:
    """The report beside a reused artifact, or a new one (without stage timings) when there is none."""
    from tasks.config.constants import REPORT_SUFFIX
    from tasks.report.page import write_report

    existing = Path(artifact_path).parent / f"{Path(artifact_path).name}{REPORT_SUFFIX}"
    if existing.is_file():
        return str(existing)
    try:
        return write_report(artifact_path)
    except Exception as exc:  # the artifact is the product: a report that fails is a warning
        print(f"prepflow: warning: report not written: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def _report(args: argparse.Namespace, summary: dict, wall: float) -> None:
    if args.json:
        print(json.dumps({**summary, "seconds": round(wall, 3)}))
    else:
        _print_summary(summary, wall, args.stats, [] if args.verbose else summary.get("warnings", []))
