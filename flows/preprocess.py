"""The Prefect runner of the stage graph: ``preprocess`` runs each node of ``tasks.graph`` as a task.

The flow parses the config once (a path is read here, a mapping validated) and hands every task the
normalized config as a value with its hash, never a path: editing the YAML during a run changes
nothing in it. Each task is a thin wrapper around the node's stage function, which does its own
content-addressed caching; tasks pass ``StageResult`` dicts (keys and paths), never Dask collections,
and a task's parents are exactly the results its stage reads, so the UI's graph shows the real data
dependencies. A stage served from the cache finishes in a ``Completed`` state named ``Cached`` whose
cache key is prepflow's. Prefect's own result caching is off: prepflow's keys hash file *content*.

``tasks.runner.run_pipeline`` is the in-process runner of the same graph;
``tests/contract/test_runners_agree.py`` checks that both publish the same bytes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from dask import delayed
from prefect import flow, get_run_logger, task
from prefect.client.schemas.objects import StateDetails
from prefect.context import TagsContext
from prefect.states import Completed, State
from prefect.utilities.annotations import opaque, quote

from flows.reporting import report_artifact, statistics_artifact, validation_artifact
from flows.resilience import retry_options
from storage.cache import StageCache
from storage.hashing import stable_hash
from tasks import steps
from tasks.config.loader import load_config, parse_config
from tasks.config.schema import Config
from tasks.custom import plan as custom_plan
from tasks.graph import Node, expand
from tasks.infer_types import stage as infer_types
from tasks.publish.stage import normalized_config
from tasks.report import page as report
from tasks.runner import PipelineResult
from tasks.runtime import dask_run
from tasks.runtime.context import RunContext, StageResult
from tasks.validate import stage as validate

# Transient I/O (S3, network filesystems) is retried with exponential backoff; prepflow's own errors
# and other failures are not (flows/resilience.py).
TASK_OPTS = {"persist_result": False, "cache_policy": None, **retry_options()}


def config_value(config: str | os.PathLike | dict | Config) -> Config:
    """The run's config, parsed and validated once: from a file path, a mapping or a ``Config``."""
    if isinstance(config, Config):
        return config.model_copy(deep=True)
    if isinstance(config, dict):
        return parse_config(config, "config")
    return load_config(config)


def _params(config: Config, dataset: str, output: str, cache_dir: str, npartitions: int | None,
            fingerprint: str | None) -> dict:
    """What every task receives: the normalized config (a value) and its hash, and the run's options."""
    config_json = normalized_config(config)
    return {"config": config_json, "config_hash": stable_hash(config_json, 16), "dataset": dataset,
            "output": output, "cache_dir": cache_dir, "npartitions": npartitions, "fingerprint": fingerprint}


def _ctx(params: dict) -> RunContext:
    return RunContext(config_value(params["config"]), params["dataset"], StageCache(params["cache_dir"]),
                      params.get("npartitions"), params["output"], params.get("fingerprint"))


def _state(result: StageResult):
    data = result.to_json()
    if result.cached:
        return Completed(data=data, name="Cached", message=f"{result.stage}: reused cache entry {result.key}",
                         state_details=StateDetails(cache_key=f"prepflow:{result.stage}:{result.key}"))
    return data


def _data(value):
    """A task that returned a State hands the State to the flow; unwrap it to its data."""
    return value.result() if isinstance(value, State) else value


@task(name="stage", **TASK_OPTS)
def stage_task(params: dict, node: dict, *parents: dict):
    """One node of the graph (``node``: its fields); the run is named after the stage."""
    step = Node(**{**node, "parents": tuple(node["parents"]), "args": tuple(node["args"])})
    ctx = _ctx(params)
    start = time.perf_counter()
    result = step.resolve()(ctx, *step.args, *[StageResult.from_json(p) for p in parents])
    result.seconds = time.perf_counter() - start  # the whole stage call, first imports included
    if step.gate:  # results to the UI first, then a failing `fail` gate raises and stops the flow
        validation_artifact([validate.load(result)])
        validate.enforce(ctx, result)
    return _state(result)


@task(name="report", **TASK_OPTS)
def report_task(summary: dict) -> str | None:
    """The HTML data report beside the artifact (tasks/report/page.py) with this run's stage timings, and a
    Prefect markdown artifact that points to it, for every run, all-cached ones included. A report that
    cannot be built is a warning, not a failed run: the artifact is published either way."""

    existing = Path(summary["artifact_path"]).parent / (summary["artifact_id"] + report.REPORT_SUFFIX)
    if "://" not in summary["artifact_path"] and existing.is_file() and all(s["cached"] for s in summary["stages"]):
        location = str(existing)  # the reused artifact's report is kept as it is
    else:
        try:
            location = _write_report(summary)
        except Exception as exc:  # logged with its traceback; the run's product is the artifact
            get_run_logger().warning("report not written: %s: %s", type(exc).__name__, exc, exc_info=True)
            return None
    report_artifact(location, summary)
    return location


def _write_report(summary: dict) -> str:
    """The report, built on a Dask worker when a cluster runs the flow (its reads of the artifact's
    metadata, plots and matplotlib's import then cost the flow process nothing), else in this process."""
    if not dask_run.on_cluster():
        return report.write_report(summary["artifact_path"], summary)
    task = delayed(report.write_report, pure=False)(_shared_path(summary["artifact_path"]), summary)
    return dask_run.compute([task])[0]


def _shared_path(path: str) -> str:
    """Dask workers resolve paths in their own working directory: pass the cache folder absolute."""
    return path if "://" in str(path) else os.path.abspath(path)


def _node_json(node: Node) -> dict:
    return {"name": node.name, "function": node.function, "parents": list(node.parents),
            "versioned_by": node.versioned_by, "args": list(node.args), "gate": node.gate,
            "retypes": node.retypes, "in_artifact": node.in_artifact}


@flow(name="preprocess", log_prints=True)
def preprocess(config: str | dict, dataset: str, output: str = "artifacts", cache_dir: str = ".prepflow-cache",
               npartitions: int | None = None, dask_address: str | None = None,
               dataset_fingerprint: str | None = None) -> dict:
    """Preprocess ``dataset`` with ``config`` (a path, or the config as a mapping) into a GPU-ready
    artifact under ``output``. ``dataset_fingerprint``: the dataset's sha256 when the caller has already
    hashed it (``prepflow run`` does, to look for a published artifact), so it is read once."""
    ctx = RunContext(config_value(config), dataset, StageCache(_shared_path(cache_dir)), npartitions, output,
                     dataset_fingerprint)
    steps.preflight(ctx, local=not dask_address)  # a bad config, suite or DAG fails before any task
    params = _params(ctx.config, dataset, output, _shared_path(cache_dir), npartitions, dataset_fingerprint)
    results: dict[str, dict] = {}
    # The flow run carries the run's tags (flows/run_labels.py); its task runs none. Prefect asks its API for
    # tag concurrency slots before each tagged task run and releases them after, two requests per task.
    with TagsContext(current_tags=set()), dask_run.client(dask_address):
        for node in expand(custom_plan.names(ctx.config)):
            run = stage_task.with_options(name=node.name)
            # Prefect walks every argument twice per task run, looking for futures and upstream results.
            # params and node: quoted (not walked). The parents: opaque, so Prefect still recognizes each
            # one as a task's result (the UI's edges) without walking into it (encode's statistics alone
            # are ~2,300 values)
            results[node.name] = _data(run(quote(params), quote(_node_json(node)),
                                           *(opaque(results[p]) for p in node.parents)))
            if node.retypes:  # later tasks get the typed config, as a value
                ctx = infer_types.apply(ctx, StageResult.from_json(results[node.name]))
                params = _params(ctx.config, dataset, output, params["cache_dir"], npartitions, dataset_fingerprint)
        stages = [StageResult.from_json(r) for r in results.values()]
        summary = PipelineResult(results["publish"]["artifact"], stages).summary()
        statistics_artifact(stages)
        summary["report_path"] = _data(report_task(summary))  # on a worker of the cluster, if any
    get_run_logger().info("artifact %s (%s)", summary["artifact_id"], summary["artifact_path"])
    return summary
