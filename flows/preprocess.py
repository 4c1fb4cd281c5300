"""The main Prefect flow: ``preprocess`` chains the stage tasks over Dask.

Each task is a thin wrapper around a pure stage function in ``tasks/`` (which does its own
content-addressed caching). Tasks pass ``StageResult`` dicts (keys and paths), never Dask
collections. A stage served from the cache finishes in a ``Completed`` state named ``Cached``, so
the Prefect UI shows reused stages as Cached. Prefect's own result caching is off: our keys hash
file *content*, Prefect's would hash a path's string and hit a stale entry after a rewrite.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.states import Completed, State

from flows.resilience import retry_options
from storage.cache import StageCache
from tasks import balance, custom_stages, encode, fill_missing, infer_types, ingest, media_cache, split, vocab
from tasks.config import load_config
from tasks.context import RunContext, StageResult, timed
from core.errors import ConfigError
from tasks.pipeline import PipelineResult, publish_stage

# Transient I/O (S3, network filesystems) is retried with exponential backoff; prepflow's own errors
# and other failures are not (flows/resilience.py).
TASK_OPTS = {"persist_result": False, "cache_policy": None, **retry_options()}
DASK_CONNECT_TIMEOUT = os.environ.get("PREPFLOW_DASK_CONNECT_TIMEOUT", "30s")


def _state(result: StageResult):
    data = result.to_json()
    if result.cached:
        return Completed(data=data, name="Cached", message=f"{result.stage}: reused cache entry {result.key}")
    return data


def _data(value):
    """A task that returned a State hands the State to the flow; unwrap it to its data."""
    return value.result() if isinstance(value, State) else value


def _ctx(params: dict) -> RunContext:
    ctx = RunContext(load_config(params["config"]), params["dataset"], StageCache(params["cache_dir"]),
                     params.get("npartitions"), params["output"])
    if params.get("inferred_types"):  # stages after infer_types see every feature typed
        infer_types.apply(ctx, params["inferred_types"])
    return ctx


@task(name="ingest", **TASK_OPTS)
def ingest_task(params: dict):
    return _state(timed(lambda: ingest.run(_ctx(params))))  # fingerprinting included


def _stage_task(name: str, fn):
    @task(name=name, **TASK_OPTS)
    def run(params: dict, *parents: dict):
        return _state(timed(lambda: fn(_ctx(params), *[StageResult.from_json(p) for p in parents])))

    return run


infer_types_task = _stage_task("infer_types", infer_types.run)
split_task = _stage_task("split", split.run)
fill_missing_task = _stage_task("fill_missing", fill_missing.run)
balance_task = _stage_task("balance", balance.run)
vocab_task = _stage_task("vocab", vocab.run)
encode_task = _stage_task("encode", encode.run)
media_cache_task = _stage_task("media_cache", media_cache.run)


@task(name="custom_stage", **TASK_OPTS)
def custom_stage_task(params: dict, index: int, *parents: dict):
    """The cached step of the ``index``-th custom stage (tasks/custom_stages.py); runs are named after it."""
    return _state(timed(lambda: custom_stages.run(_ctx(params), index, *[StageResult.from_json(p) for p in parents])))


def _gate_task(name: str, stage: str):
    """A data-quality gate: its results go to the Prefect UI, then a failing ``fail`` gate raises
    ``ValidationFailed`` and the flow stops before publish."""

    @task(name=name, **TASK_OPTS)
    def run(params: dict, *parents: dict):
        from flows.reporting import validation_artifact
        from tasks import validate

        start = time.perf_counter()
        ctx = _ctx(params)
        result = getattr(validate, stage)(ctx, *[StageResult.from_json(p) for p in parents])
        result.seconds = time.perf_counter() - start  # the whole gate, not only its cached step
        validation_artifact([validate.load(result)])
        validate.enforce(ctx, result)
        return _state(result)

    return run


validate_raw_task = _gate_task("validate_raw", "run_raw")
validate_encoded_task = _gate_task("validate_encoded", "run_encoded")


@task(name="publish", **TASK_OPTS)
def publish_task(params: dict, results: list[dict]):
    start = time.perf_counter()
    art, pub = publish_stage(_ctx(params), [StageResult.from_json(r) for r in results])
    pub.seconds = time.perf_counter() - start
    data = {"artifact": art, "stage": pub.to_json()}
    return Completed(data=data, name="Cached", message="artifact already published") if pub.cached else data


@task(name="report", **TASK_OPTS)
def report_task(summary: dict) -> str | None:
    """The HTML data report beside the artifact (tasks/report.py) with this run's stage timings, and a
    Prefect markdown artifact that points to it. A report that cannot be built is a warning, not a
    failed run: the artifact is published either way."""
    from flows.reporting import report_artifact
    from tasks import report

    existing = Path(summary["artifact_path"]).parent / (summary["artifact_id"] + report.REPORT_SUFFIX)
    if "://" not in summary["artifact_path"] and existing.is_file() and all(s["cached"] for s in summary["stages"]):
        return Completed(data=str(existing), name="Cached", message="report of the reused artifact kept")
    try:
        location = report.write_report(summary["artifact_path"], summary)
    except Exception as exc:  # logged with its traceback; the run's product is the artifact
        get_run_logger().warning("report not written: %s: %s", type(exc).__name__, exc, exc_info=True)
        return None
    report_artifact(location, summary)
    return location


def _dask_client(address: str | None):
    """A distributed Client, set as the default scheduler: every ``dask.compute`` of the stages
    (``tasks.frame.compute``) then runs on the cluster. Without an address: Dask's local scheduler."""
    if not address:
        return contextlib.nullcontext()
    from distributed import Client

    try:
        return Client(address, timeout=DASK_CONNECT_TIMEOUT)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--dask-address {address}: cannot reach the Dask scheduler ({exc})") from None


def _shared_path(path: str) -> str:
    """Dask workers resolve paths in their own working directory: pass the cache folder absolute."""
    return path if "://" in str(path) else os.path.abspath(path)


@flow(name="preprocess", log_prints=True)
def preprocess(config: str, dataset: str, output: str = "artifacts", cache_dir: str = ".prepflow-cache",
               npartitions: int | None = None, dask_address: str | None = None) -> dict:
    """Preprocess ``dataset`` with ``config`` into a GPU-ready artifact under ``output``."""
    params = {"config": config, "dataset": dataset, "output": output, "cache_dir": _shared_path(cache_dir),
              "npartitions": npartitions}
    from tasks import validate

    validate.check_config(load_config(config))  # fail on a bad config or suite before anything runs
    custom_stages.check(load_config(config), dataset)  # and on a malformed custom-stage DAG
    validate.preload(load_config(config), local=False if dask_address else None)  # GX's import overlaps ingest
    with _dask_client(dask_address):
        ing = ingest_task(params)
        inf = _data(infer_types_task(params, ing))
        params = {**params, "inferred_types": inf["path"]}
        raw = validate_raw_task(params, ing)
        spl = split_task(params, ing)
        mis = fill_missing_task(params, ing, spl)
        cus = []  # one task per custom stage; the last one's states and plan feed the stages after it
        for i, name in enumerate(custom_stages.names(load_config(config))):
            cus.append(custom_stage_task.with_options(name=name)(params, i, ing, spl, cus[-1] if cus else mis))
        fil = cus[-1] if cus else mis
        bal = balance_task(params, ing, spl, fil)
        fit = vocab_task(params, ing, spl, fil)
        enc = encode_task(params, ing, spl, fil, bal, fit)
        med = media_cache_task(params, fit, enc)
        fit_out, enc_out = media_cache.outputs(*(StageResult.from_json(_data(r)) for r in (med, fit, enc)))
        encv = validate_encoded_task(params, spl, bal, fit_out.to_json(), enc_out.to_json())
        results = [_data(r) for r in (ing, inf, raw, spl, mis, *cus, bal, fit, enc, med, encv)]
        pub = _data(publish_task(params, results))
    stages = [StageResult.from_json(r) for r in results] + [StageResult.from_json(pub["stage"])]
    summary = PipelineResult(pub["artifact"], stages).summary()
    from flows.reporting import statistics_artifact

    statistics_artifact(stages)
    summary["report_path"] = _data(report_task(summary))
    get_run_logger().info("artifact %s (%s)", summary["artifact_id"], summary["artifact_path"])
    return summary
