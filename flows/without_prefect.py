"""``prepflow run`` without the Prefect API: the fallback when bookkeeping fails.

When the Prefect server cannot be reached (or keeps failing after the client's retries), the data run
still finishes: the same stages run in this process through ``tasks.graph.run_pipeline`` (the
in-process runner of the same stage graph). Stages the flow already finished are served from the
stage cache, so nothing is computed twice; the artifact is the one the flow would have published.
"""

from __future__ import annotations

import os

from storage.cache import StageCache
from tasks.config.loader import load_config
from tasks.dataset.files import as_dataset
from tasks.graph import run_pipeline
from tasks.report.page import write_report_or_warn
from tasks.runtime import dask_run
from tasks.runtime.context import RunContext


def run(config_path: str, dataset, output: str, cache_dir: str, npartitions: int | None,
        dask_address: str | None) -> dict:
    """The pipeline in-process, with the data report; returns the run summary (as the flow does)."""
    return run_config(load_config(config_path), dataset, output, cache_dir, npartitions, dask_address)


def run_config(config, dataset, output: str, cache_dir: str, npartitions: int | None,
               dask_address: str | None) -> dict:
    """``run`` with a parsed config; ``dataset`` may be a list of files, a pandas or Dask DataFrame (``prepflow.run``)."""
    cache = cache_dir if "://" in cache_dir else os.path.abspath(cache_dir)
    ctx = RunContext(config, as_dataset(dataset), StageCache(cache), npartitions, output)
    with dask_run.client(dask_address):
        result = run_pipeline(ctx)
    summary = result.summary()
    summary["report_path"] = write_report_or_warn(summary)
    return summary
