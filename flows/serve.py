"""``prepflow serve``: the ``preprocess`` flow as a Prefect deployment with a cron schedule.

``flow.serve`` registers the deployment ``preprocess/<name>`` with the given parameters as its
defaults and a cron schedule (nightly at 02:00 UTC by default), then polls for runs and executes
each one in a subprocess until Ctrl-C or SIGTERM (either pauses the schedule). It prints the
``PREFECT_API_URL`` of the server it registered on and the ``prefect deployment run`` command that
reaches it (the local server is not always on port 4200). A deployment's runs are named and tagged as
CLI runs are (``flows/run_labels.py``). In the Prefect UI the deployment
can be triggered at any time, with its parameters edited ("Custom run"); a run whose inputs did not
change finds every stage in the cache and finishes with every task state named *Cached*.

The Prefect API is the one ``prepflow run`` uses (``flows/local_server.py``): ``PREFECT_API_URL``
when set, else the local server, which this process keeps from idling out while it serves.

Local paths are made absolute: the runs execute in other processes (and Dask workers resolve paths
in their own working directory).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import threading

from pydantic import ValidationError

from core.errors import ConfigError
from flows.flow_parameters import add_flow_parameters
from flows.local_server import configure_prefect, state_dir
from flows.output_target import check_cache_dir
from tasks.dataset.files import as_dataset

DEFAULT_CRON = "0 2 * * *"
DEFAULT_NAME = "nightly"


def setup_parser(p: argparse.ArgumentParser) -> None:
    add_flow_parameters(p)
    p.add_argument("--name", default=DEFAULT_NAME,
                   help=f"deployment name; the UI shows preprocess/NAME (default {DEFAULT_NAME})")
    p.add_argument("--cron", default=DEFAULT_CRON,
                   help=f"cron schedule (default '{DEFAULT_CRON}': nightly at 02:00); '' for none "
                        "(runs only when triggered)")
    p.add_argument("--timezone", default="UTC", help="time zone of the cron schedule (IANA name, default UTC)")
    p.add_argument("--limit", type=int, default=None, help="at most this many runs at a time (default: no limit)")


def _absolute(path):
    """A local path made absolute (each of a list of files); a URL as it is."""
    if isinstance(path, list):
        return [_absolute(p) for p in path]
    if path is None or "://" in path:
        return path
    return os.path.abspath(path)


def deployment_parameters(args: argparse.Namespace) -> dict:
    """The flow's parameters, as the deployment's defaults (local paths absolute)."""
    params = {"config": _absolute(args.config), "dataset": _absolute(as_dataset(args.dataset)),
              "output": _absolute(args.output), "cache_dir": _absolute(args.cache_dir)}
    if args.npartitions is not None:
        params["npartitions"] = args.npartitions
    if args.dask_address:
        params["dask_address"] = args.dask_address
    return params


def schedules(cron: str, timezone: str) -> list:
    """``[Cron(...)]``, or ``[]`` for no schedule; a bad expression or zone is a ConfigError."""
    if not cron.strip():
        return []
    # Prefect is imported only once the API URL is set (``serve``): it reads its settings when imported,
    # and the CLI imports this module for its parser
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.schedules import Cron

    try:
        CronSchedule(cron=cron, timezone=timezone)
    except ValidationError as exc:
        problem = exc.errors()[0]
        field = "--timezone" if problem["loc"] and problem["loc"][0] == "timezone" else "--cron"
        value = timezone if field == "--timezone" else cron
        raise ConfigError(f"{field} {value!r}: {problem['msg'].removeprefix('Value error, ')}") from None
    return [Cron(cron, timezone=timezone)]


def _keep_local_server_alive(interval: float = 60.0) -> None:
    """The local server exits after PREPFLOW_SERVER_IDLE_SECONDS without activity; serving is activity."""

    activity = state_dir() / "server.activity"

    def touch() -> None:
        while True:
            try:
                activity.touch()
            except OSError:
                pass
            threading.Event().wait(interval)

    threading.Thread(target=touch, name="prepflow-server-keepalive", daemon=True).start()


def prepare(args: argparse.Namespace) -> tuple[dict, list]:
    """Everything before the flow is imported: the options and the config checked, Prefect pointed at its
    server (the local one kept alive while serving); the deployment's parameters and schedules."""
    if args.npartitions is not None and args.npartitions < 1:
        raise ConfigError(f"--npartitions must be at least 1, got {args.npartitions}")
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {args.limit}")
    # here, not at module level: the CLI imports this module for its parser, and `prepflow --help` should
    # not pay for the config models' pandas and pydantic
    from tasks.config.loader import load_config

    load_config(args.config)  # config errors before anything is registered
    check_cache_dir(args.cache_dir)  # the runs write there: an unusable folder now, not at 02:00
    params = deployment_parameters(args)

    uses_local_server = not os.environ.get("PREFECT_API_URL")
    if uses_local_server and os.environ.get("PREPFLOW_PREFECT") == "ephemeral":
        raise ConfigError("prepflow serve needs a Prefect server that outlives each run: unset "
                          "PREPFLOW_PREFECT=ephemeral (local server) or set PREFECT_API_URL")
    configure_prefect()
    if uses_local_server:
        _keep_local_server_alive()
    return params, schedules(args.cron, args.timezone)


def serve(args: argparse.Namespace, preprocess, params: dict, chosen: list) -> int:
    """Serve the ``preprocess`` flow (imported by the caller after ``prepare``: Prefect reads its settings,
    PREFECT_API_URL, when first imported) as the deployment ``preprocess/<name>``."""
    from flows.run_labels import run_tags
    from tasks.config.loader import load_config
    from tasks.dataset.files import label

    api = os.environ.get("PREFECT_API_URL", "")
    runner = _runner_class()(name=args.name, pause_on_shutdown=True, limit=args.limit)
    deployment_id = runner.add_flow(preprocess, name=args.name, schedules=chosen, parameters=params,
                                    tags=run_tags(params["dataset"], load_config(params["config"])),  # as a CLI run's
                                    description=f"prepflow: {params['config']} on {label(params['dataset'])}")
    when = f"cron '{args.cron}' ({args.timezone})" if chosen else "no schedule (trigger runs from the UI)"
    ui = api.removesuffix("/api")
    print(f"prepflow serve: deployment preprocess/{args.name}, {when}\n"
          f"  Prefect UI: {ui}/deployments/deployment/{deployment_id}\n"
          f"  the API it is on (not always port 4200): PREFECT_API_URL={api}\n"
          f"  trigger a run: PREFECT_API_URL={api} prefect deployment run preprocess/{args.name}\n"
          "  stop: Ctrl-C or SIGTERM (the schedule is paused)", flush=True)
    try:
        asyncio.run(runner.start())
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (_runner_class): the runner paused the schedule
        print(f"prepflow serve: stopped; deployment preprocess/{args.name} paused", flush=True)
    return 0


def _runner_class():
    """Prefect's ``Runner`` (what ``flow.serve`` runs) whose SIGTERM does what Ctrl-C does. Prefect's own
    SIGTERM handler calls the runner's async ``stop`` from synchronous code (``coroutine 'Runner.astop' was
    never awaited``); ``signal.default_int_handler`` raises ``KeyboardInterrupt`` instead, so the runner
    shuts down (and pauses the schedule) on the path Ctrl-C takes. Made after Prefect's settings are set."""
    from prefect.runner import Runner

    class ServeRunner(Runner):
        def handle_sigterm(self, *args) -> None:
            signal.default_int_handler(*args)

    return ServeRunner
