"""The Prefect runner of the stage graph: ``preprocess`` runs each node of ``tasks.graph`` as a task.

The flow takes the config ``prepflow run`` parsed as it is, or parses it once (a path, or a mapping, as a
deployment's JSON parameters give it: read here, validated) and walks the graph with
``tasks.graph.run_graph``, the loop the in-process runner uses too; its ``call`` runs each node as a
Prefect task (``stage_task``) around the same ``tasks.graph.execute``, which runs the node through the
runner's content-addressed cache and enforces gates. Tasks pass typed stage outputs (keys and paths), never
Dask collections, and a task's parents are exactly the outputs its stage reads, so the UI's graph shows
the real data dependencies. A stage served from the cache finishes in a ``Completed`` state named
``Cached`` whose cache key is prepflow's. Prefect's own result caching is off: prepflow's keys hash file
*content*. A gate's results go to the UI as an artifact before a failing ``fail`` gate stops the flow.
"""

# Annotations are evaluated (no ``from __future__ import annotations``): Prefect validates the flows' parameters
# against them, and a deployment's run loads this module under another name, where a string
# annotation (``Config``) cannot be resolved.

import os
from pathlib import Path

from dask import delayed
from prefect import flow, get_run_logger, task
from prefect.client.schemas.objects import StateDetails
from prefect.context import TagsContext
from prefect.states import Completed, State
from prefect.utilities.annotations import opaque, quote

from flows import bookkeeping
from flows.apply_context import apply_context, with_references
from flows.extend_context import extend_context, summary_of
from flows.reporting import drift_artifact, report_artifact, statistics_artifact, validation_artifact
from flows.resilience import retry_options
from flows.run_labels import parameters_run_name
from storage.cache import StageCache
from tasks.config.loader import load_config, parse_config
from tasks.config.schema import Config
from tasks.dataset.files import as_dataset
from tasks.graph import PipelineResult, execute, expand_apply, expand_extend, run_graph
from tasks.publish import extend as publish_extend
from tasks.report import page as report
from tasks.runtime import dask_run
from tasks.runtime.context import RunContext
from tasks.runtime.node import Node
from tasks.runtime.outputs import Output
from tasks.split import extend as split_extend
from tasks.vocab import extend as vocab_extend

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


def _state(result: Output):
    if result.cached:
        return Completed(data=result, name="Cached", message=f"{result.stage}: reused cache entry {result.key}",
                         state_details=StateDetails(cache_key=f"prepflow:{result.stage}:{result.key}"))
    return result


def _data(value):
    """A task that returned a State hands the State to the flow; unwrap it to its data."""
    return value.result() if isinstance(value, State) else value


@task(name="stage", **TASK_OPTS)
def stage_task(ctx: RunContext, node: Node, *inputs: Output):
    """One node of the graph; the task run is named after the stage (``with_options``)."""
    return _state(execute(node, ctx, list(inputs), on_gate=lambda result: validation_artifact([result.results()])))


def _prefect_call(node: Node, ctx: RunContext, inputs: list[Output]) -> Output:
    """``tasks.graph.run_graph``'s call: the node as a Prefect task. The context and node are quoted and
    the inputs opaque: Prefect walks every argument twice per task run looking for futures and upstream
    results; opaque still lets it recognize each input as a task's result (the UI's edges) without walking
    into it (encode's statistics alone are ~2,300 values)."""
    run = stage_task.with_options(name=node.name)
    return _data(run(quote(ctx), quote(node), *(opaque(i) for i in inputs)))


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


@flow(name="preprocess", log_prints=True, flow_run_name=parameters_run_name)  # a CLI run names its own
def preprocess(config: str | dict | Config, dataset: str | list[str], output: str = "artifacts", cache_dir: str = ".prepflow-cache",
               npartitions: int | None = None, dask_address: str | None = None,
               dataset_fingerprint: str | None = None, extend: bool = False, parent: str | None = None,
               window: int | None = None) -> dict:
    """Preprocess ``dataset`` with ``config`` (a path or the config as a mapping, as a deployment passes it; or
    the ``Config`` ``prepflow run`` parsed, used as it is) into a GPU-ready artifact under ``output``.
    ``dataset_fingerprint``: the dataset's sha256 when the caller has already hashed it (``prepflow run`` does,
    to look for a published artifact), so it is read once. ``extend``: a child of ``parent`` (default:
    ``output``'s LATEST) with the new files only (``flows.extend``)."""
    if extend:
        return _extend(config, dataset, output, cache_dir, npartitions, dask_address, parent, window)
    ctx = RunContext(config_value(config), as_dataset(dataset), StageCache(_shared_path(cache_dir)), npartitions, output,
                     dataset_fingerprint)
    # The flow run carries the run's tags (flows/run_labels.py); its task runs none. Prefect asks its API for
    # tag concurrency slots before each tagged task run and releases them after, two requests per task.
    with TagsContext(current_tags=set()), dask_run.client(dask_address):
        # a bad config, suite or DAG fails in run_graph's checks, before any task
        results = run_graph(ctx, _prefect_call, local=not dask_address)
        stages = list(results.values())
        summary = PipelineResult(results["publish"].artifact, stages).summary()
        if "files" in summary:  # a folder, glob or list: the run's tags say how many files it read
            _tag_run(f"files:{summary['files']['total']}", f"new-files:{summary['files']['new']}")
        statistics_artifact(stages)
        drift_artifact(summary.get("drift") or {})  # the skew of the validation and test splits
        summary["report_path"] = _data(report_task(summary))  # on a worker of the cluster, if any
    get_run_logger().info("artifact %s (%s)", summary["artifact_id"], summary["artifact_path"])
    return summary


def _extend(config, dataset, output, cache_dir, npartitions, dask_address, parent, window) -> dict:
    """The extend graph (``flows.extend``), each node a task; with no new file nothing runs."""
    ctx = extend_context(config, dataset, output, parent, window, _shared_path(cache_dir), npartitions)
    if isinstance(ctx, dict):  # no new file: the parent is the result
        return {**ctx, "refit_advised": []}
    with TagsContext(current_tags=set()), dask_run.client(dask_address):
        nodes = expand_extend(split_extend.NODE, vocab_extend.NODE, publish_extend.NODE)
        results = run_graph(ctx, _prefect_call, local=not dask_address, nodes=nodes)
        stages = list(results.values())
        art = results["publish"].artifact
        summary = summary_of(ctx, PipelineResult(art, stages).summary(), art)
        statistics_artifact(stages)
        drift_artifact(summary.get("drift") or {})
        summary["report_path"] = _data(report_task(summary))
    get_run_logger().info("artifact %s (%s), extends %s", summary["artifact_id"], summary["artifact_path"],
                          summary["parent"]["artifact_id"])
    return summary


@flow(name="apply", log_prints=True)
def apply_flow(artifact: str, dataset: str | list[str], output: str = "artifacts", split: str = "test", config: str | None = None,
               cache_dir: str = ".prepflow-cache", npartitions: int | None = None,
               dask_address: str | None = None) -> dict:
    """``prepflow apply``: encode ``dataset`` with the fitted ``artifact`` (nothing refitted) into a one-split
    artifact under ``output`` (``flows.apply``), each node a task as in ``preprocess``."""
    ctx = with_references(apply_context(artifact, dataset, output, split, config, _shared_path(cache_dir), npartitions))
    with TagsContext(current_tags=set()), dask_run.client(dask_address):
        results = run_graph(ctx, _prefect_call, local=not dask_address, nodes=expand_apply())
        summary = PipelineResult(results["publish"].artifact, list(results.values())).summary()
        statistics_artifact(list(results.values()))
        drift_artifact(summary.get("drift") or {})
        summary["report_path"] = _data(report_task(summary))
    get_run_logger().info("artifact %s (%s), fitted from %s", summary["artifact_id"], summary["artifact_path"],
                          ctx.fitted_from["artifact_id"])
    return summary


def _tag_run(*tags: str) -> None:
    """Add ``tags`` to this flow run (bookkeeping: a failing API call is a warning, never a failed run)."""
    from prefect.runtime import flow_run

    for tag in tags:
        bookkeeping.best_effort("run tag", bookkeeping.add_tag, flow_run.id, tag)
