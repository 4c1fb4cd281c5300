"""The ``prepflow`` command line (DESIGN section 5b).

Exit codes: 0 success, 1 a data or validation failure, 2 a usage or config error. With ``--json``
the last line of stdout is one JSON object. Every failure is one ``prepflow: error: ...`` line on
stderr, printed once (Prefect's log lines, which would repeat it, are quiet unless ``--verbose``);
a traceback only with ``--debug`` (or ``PREPFLOW_DEBUG=1``). What ``run`` shows while it runs (stage
lines, progress, the warnings block) is flows/console.py's.

Each command imports what it runs inside its function: the stages, storage, Great Expectations and
Prefect take seconds to import, and `prepflow --help`, `schema` or `server status` need none of them. The
imports at module level are the light ones every command uses.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

import yaml
from rich import box
from rich.console import Console
from rich.table import Table

from core.errors import MESSAGE_LIMIT, QUOTE_LIMIT, ConfigError, PrepflowError, bounded, quoted, shown
from flows import bookkeeping, console, local_server
from flows import serve as serve_command
from flows.flow_parameters import add_flow_parameters
from flows.local_server import configure_prefect, runs_dir
from flows.output_target import check_cache_dir, check_output
from tasks.dataset.files import as_dataset

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


class _HidePrepflowTracebacks(logging.Filter):
    """Prefect logs a task's exception with its traceback; for our own errors the message is enough."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], PrepflowError):
            record.exc_info = None
            record.exc_text = None
        return True


def _quiet_prefect_tracebacks() -> None:
    filt = _HidePrepflowTracebacks()
    for name in ("prefect", "prefect.flow_runs", "prefect.task_runs", "prefect.flow_engine", "prefect.task_engine"):
        logger = logging.getLogger(name)
        logger.addFilter(filt)
        for handler in logger.handlers:
            handler.addFilter(filt)


# ---- run ---------------------------------------------------------------------------------------

def _setup_run(p: argparse.ArgumentParser) -> None:
    add_flow_parameters(p)
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line of stdout")
    p.add_argument("--always-run-flow", action="store_true",
                   help="run the Prefect flow even when the artifact for these inputs is already published "
                        "(every stage then shows as Cached in the UI)")
    p.add_argument("--stats", action="store_true",
                   help="print the run's statistics table after the summary (they are in the report either way)")
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


def _run_settings(mode: str):
    """Prefect settings for the run (flow and bookkeeping after it).

    * The API URL: ``configure_prefect`` sets ``PREFECT_API_URL`` in the environment (the local server's),
      but Prefect reads its settings once, at import, and ``flows.serve`` (imported above, for its parser)
      imports Prefect: without this, a Prefect client made outside the flow (the artifact tag of
      ``bookkeeping.RunRecord.finish``), or every run after the first of a process that calls ``main``
      repeatedly (the URL is then in the environment: mode "remote"), would start an ephemeral server.
    * No heartbeat on the local server: Prefect's flow heartbeat thread's shutdown joins a thread that
      sleeps in 1 s steps (wall time added to every run: benchmarks/flow_heartbeat.py), and Prefect's
      server marks a dead run Crashed only through an automation a user creates; the local server marks
      it itself (flows/run_registry.py). With a remote server
      (PREFECT_API_URL) the heartbeat stays on, so does it when PREFECT_FLOWS_HEARTBEAT_FREQUENCY is set."""

    from prefect.settings import (  # heavy optional dependency: Prefect (not for runs without it)
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    updates: dict = {}
    if mode != "ephemeral" and os.environ.get("PREFECT_API_URL"):
        updates[PREFECT_API_URL] = os.environ["PREFECT_API_URL"]
    if mode != "remote" and not os.environ.get("PREFECT_FLOWS_HEARTBEAT_FREQUENCY"):
        updates[PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = None
    return temporary_settings(updates=updates) if updates else contextlib.nullcontext()


def _run_flow(args: argparse.Namespace, config, fingerprint: str | None = None) -> dict:
    """The preprocess flow, named and tagged for the UI (flows/run_labels.py). Bookkeeping never fails the
    run: a Prefect API that cannot be reached, or fails the flow, leaves the run to finish without it."""
    from flows import without_prefect  # the in-process runner: the stages (slow to import)

    if os.environ.get("PREPFLOW_PREFECT") == "off":  # the in-process runner, no Prefect API at all
        return _without_prefect(args, without_prefect)
    try:
        mode = configure_prefect()
    except PrepflowError as exc:  # no local server: the run goes on without one
        bookkeeping.note_incomplete("local Prefect server", exc)
        return _finish_without_prefect(args, without_prefect, bookkeeping)
    if not args.verbose:  # after the server started: its process keeps its own log lines
        console.quiet_prefect_console()
    from prefect import tags

    from flows.preprocess import preprocess
    from flows.run_labels import run_name, run_tags

    _quiet_prefect_tracebacks()
    # Every run holds its lock (the local server, and the next run against the same API, mark it Crashed
    # if this process dies); only an ephemeral server, gone with this process, needs none.
    record = bookkeeping.RunRecord(runs_dir() if mode != "ephemeral" else None)
    flow = preprocess.with_options(flow_run_name=run_name(args.dataset, args.config, config),
                                   on_running=[*preprocess.on_running_hooks, record])
    _freeze_imports()
    with _run_settings(mode):
        try:
            with tags(*run_tags(args.dataset, config), *record.tags), _stage_output(args):
                summary = flow(config=args.config, dataset=args.dataset, output=args.output,
                               cache_dir=args.cache_dir, npartitions=args.npartitions,
                               dask_address=args.dask_address, dataset_fingerprint=fingerprint)
        except Exception as exc:
            if not bookkeeping.is_api_failure(exc):
                record.finish()  # a failed run, recorded as Failed
                raise
            record.finish(recorded=False)  # its final state may be missing: the next sweep marks it Crashed
            bookkeeping.note_incomplete("flow run", exc)
            return _finish_without_prefect(args, without_prefect, bookkeeping)
        record.finish(summary.get("artifact_id"))
        if mode != "ephemeral" and (url := _flow_run_url(record.flow_run_id)):
            summary = {**summary, "flow_run_url": url}
    return _with_ui_record(summary, bookkeeping)


def _flow_run_url(flow_run_id: str | None) -> str | None:
    """The run's page in the Prefect UI (Prefect's "View at" line, quiet without --verbose)."""
    from prefect.utilities.urls import url_for  # heavy optional dependency: Prefect (not for runs without it)

    try:
        return url_for("flow-run", obj_id=flow_run_id) if flow_run_id else None
    except Exception:  # a link is not worth failing a published run for
        return None


def _finish_without_prefect(args: argparse.Namespace, without_prefect, bookkeeping) -> dict:
    print("prepflow: warning: the Prefect API failed; finishing the run without it (its UI record is "
          "incomplete)", file=sys.stderr)
    return _with_ui_record(_without_prefect(args, without_prefect), bookkeeping)


def _without_prefect(args: argparse.Namespace, without_prefect) -> dict:
    if not args.verbose:
        console.quiet_prefect_console()
    _freeze_imports()
    with _stage_output(args):
        return without_prefect.run(args.config, args.dataset, args.output, args.cache_dir, args.npartitions,
                                   args.dask_address)


def _freeze_imports() -> None:
    """Keep Python's cyclic collector off what the run has imported (Prefect, pydantic's models, the stages,
    pandas: over a million objects that live until the process exits). Its full collections over them
    are a sizeable share of the flow process's CPU (benchmarks/RESULTS.md); ``gc.freeze`` moves them to the
    permanent generation, which no collection scans."""
    gc.freeze()


def _stage_output(args: argparse.Namespace):
    """Stage lines and progress (flows/console.py): a live bar only on a terminal, and never with
    ``--verbose`` (Prefect's log lines would write through it) or ``--json``."""
    return console.stage_output(bar=sys.stderr.isatty() and not args.verbose and not args.json)


def _with_ui_record(summary: dict, bookkeeping) -> dict:
    """``ui_record_incomplete``: what did not reach the Prefect API (absent when everything did)."""
    missing = bookkeeping.incomplete()
    if missing:
        print(f"prepflow: warning: Prefect UI record incomplete: {'; '.join(missing)}", file=sys.stderr)
        return {**summary, "ui_record_incomplete": missing}
    return summary


@command("run", _setup_run)
def cmd_run(args: argparse.Namespace) -> int:
    from tasks.config.loader import load_config

    if args.npartitions is not None and args.npartitions < 1:
        raise ConfigError(f"--npartitions must be at least 1, got {args.npartitions}")
    start = time.perf_counter()
    config = load_config(args.config)  # config errors before any server start or data read
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


# ---- apply -----------------------------------------------------------------------------------------

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
            _quiet_prefect_tracebacks()
            from prefect import tags

            from flows.preprocess import apply_flow as flow
            from flows.run_labels import file_name

            record = bookkeeping.RunRecord(runs_dir() if mode != "ephemeral" else None)
            named = flow.with_options(flow_run_name=f"apply · {file_name(args.dataset)} · "
                                                    f"{file_name(str(args.artifact).rstrip('/'))}",
                                      on_running=[*flow.on_running_hooks, record])
            with _run_settings(mode), _stage_output(args):
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
                    if mode != "ephemeral" and (url := _flow_run_url(record.flow_run_id)):
                        summary = {**summary, "flow_run_url": url}
    if summary is None:
        with _stage_output(args):
            summary = apply_flow.apply_in_process(**params)
    return _with_ui_record(summary, bookkeeping)


# ---- report ----------------------------------------------------------------------------------------

def _setup_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact", help="artifact folder or URL (or an output root with LATEST)")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line of stdout")


@command("report", _setup_report)
def cmd_report(args: argparse.Namespace) -> int:
    """(Re)build ``<output>/<artifact_id>.report.html`` from the artifact alone (tasks/report/page.py); stage
    timings and cache hits come only from a run (``prepflow run`` writes them into its report)."""
    from tasks.report.page import write_report

    location = write_report(args.artifact)
    print(json.dumps({"report_path": location}) if args.json else f"report: {location}")
    return 0


# ---- schema ----------------------------------------------------------------------------------------

@command("schema", lambda p: None)
def cmd_schema(args: argparse.Namespace) -> int:
    from tasks.config.json_schema import json_schema  # with every feature type's options

    print(json.dumps(json_schema(), indent=2))
    return 0


# ---- inspect ------------------------------------------------------------------------------------------

def _setup_inspect(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact", help="artifact folder or URL (or an output root with LATEST)")
    p.add_argument("--verify", action="store_true", help="check every file's sha256 against the manifest "
                   "(a URL is downloaded again and checked)")
    p.add_argument("--id-map", metavar="PARENT", help="what moved in each vocabulary since PARENT (an artifact "
                   "folder or URL): ids kept in place, moved, values that left (now <UNK>), values new here")
    p.add_argument("--json", action="store_true")


@command("inspect", _setup_inspect)
def cmd_inspect(args: argparse.Namespace) -> int:
    from flows.inspect_text import inspect_lines
    from storage.artifact import Artifact

    art = Artifact.open(args.artifact, verify=args.verify)
    if args.id_map:
        return _print_id_map(art, Artifact.open(args.id_map), args.json)
    info = art.describe()
    if args.json:
        print(json.dumps(info))
        return 0
    for line in inspect_lines(info, art.path, len(art.manifest["files"]) if args.verify else None):
        print(line)
    return 0


def _print_id_map(art, parent, as_json: bool) -> int:
    from storage import id_map

    moves = id_map.moves_between(art, parent)
    if as_json:
        print(json.dumps({"artifact_id": art.artifact_id, "parent": parent.artifact_id, "features": moves}))
        return 0
    print(f"id map of {art.artifact_id} from parent {parent.artifact_id}")
    for name, m in moves.items():
        print(f"  {name:<24} {m['parent_size']:>8} -> {m['new_size']:<8} kept {m['kept']}, moved {m['moved']}, "
              f"left -> <UNK> {m['left']}, new {m['new']}")
    return 0


# ---- transcode -----------------------------------------------------------------------------------------

def _setup_transcode(p: argparse.ArgumentParser) -> None:
    p.add_argument("feature_spec", help="an NVIDIA DeepLearningExamples FeatureSpec YAML whose chunks are csv, "
                                        "split_binary (NVIDIA's raw binary files), npy or parquet (what prepflow "
                                        "publishes)")
    p.add_argument("--output", required=True, help="artifact root folder or URL")
    p.add_argument("--cache-dir", default=".prepflow-cache", help="stage cache folder (default .prepflow-cache)")
    p.add_argument("--normalization", default="none", choices=["none", "zscore", "minmax", "iq", "log1p"],
                   help="normalization of numerical features (default none: values kept as they are)")
    p.add_argument("--formats", default="npy,parquet", help="publish formats (default npy,parquet)")
    p.add_argument("--npartitions", type=int, default=None, help="Dask partitions (default: one per 256k rows)")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line of stdout")
    p.add_argument("--stats", action="store_true", help="as for `run`")
    p.add_argument("--verbose", action="store_true", help="as for `run`")


@command("transcode", _setup_transcode)
def cmd_transcode(args: argparse.Namespace) -> int:
    """FeatureSpec dataset -> one Parquet dataset + derived config (storage/featurespec.py) -> ``run``."""

    from storage.featurespec import FeatureSpecInput
    from storage.hashing import stable_hash

    check_cache_dir(args.cache_dir)  # its work folder goes there, before `run` checks it
    spec = FeatureSpecInput.load(args.feature_spec)
    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    key = stable_hash({"spec": str(spec.path.resolve()), "normalization": args.normalization, "formats": formats})
    workdir = Path(args.cache_dir) / "transcode" / key
    dataset, config = spec.prepare(workdir, normalization=args.normalization, formats=formats)
    config_path = workdir / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    run_args = ["run", str(config_path), "--dataset", str(dataset), "--output", args.output,
                "--cache-dir", args.cache_dir]
    run_args += ["--npartitions", str(args.npartitions)] if args.npartitions else []
    run_args += ["--json"] if args.json else []
    run_args += [flag for flag, on in (("--stats", args.stats), ("--verbose", args.verbose)) if on]
    return cmd_run(build_parser().parse_args(run_args))


# ---- infer ---------------------------------------------------------------------------------------------

def _setup_infer(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", nargs="+", help="dataset: a file, folder or glob (path or fsspec URL), or several files")
    p.add_argument("--target", default=None, help="the column to predict (becomes the output feature)")
    p.add_argument("--npartitions", type=int, default=None, help="Dask partitions for the profiling pass")
    p.add_argument("--config", default=None, help="a config whose media_root (a feature's, or defaults.image/"
                                                  "audio) says where relative media paths resolve, as in `run`")
    p.add_argument("--cache-dir", default=".prepflow-cache",
                   help="stage cache folder, for media-cache: references (default .prepflow-cache)")


@command("infer", _setup_infer)
def cmd_infer(args: argparse.Namespace) -> int:
    """Print a config (YAML) with a type per column and a comment saying why (flows/infer.py)."""
    from flows.infer import infer_dataset, render_config
    from tasks.config.loader import load_config

    if args.npartitions is not None and args.npartitions < 1:
        raise ConfigError(f"--npartitions must be at least 1, got {args.npartitions}")
    config = load_config(args.config) if args.config else None
    inferred, rows = infer_dataset(args.dataset, args.target, args.npartitions, config, args.cache_dir)
    print(render_config(inferred, args.dataset, rows, config), end="")
    return 0


# ---- serve ---------------------------------------------------------------------------------------------

@command("serve", serve_command.setup_parser)
def cmd_serve(args: argparse.Namespace) -> int:
    """The flow as a deployment with a cron schedule, triggerable from the UI (flows/serve.py)."""
    params, chosen = serve_command.prepare(args)
    from flows.preprocess import preprocess  # after prepare: Prefect reads its settings when first imported

    return serve_command.serve(args, preprocess, params, chosen)


# ---- server --------------------------------------------------------------------------------------------

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


# ---- validate ------------------------------------------------------------------------------------------

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


# ---- entry point -------------------------------------------------------------------------------------

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


if __name__ == "__main__":
    sys.exit(main())
