"""``prepflow apply``: encode new data with a published artifact's fitted state (fit once, transform many).

Nothing is refitted. The new rows go through the run's own graph with the fitting nodes replaced by the
artifact's state (``tasks.graph.expand_apply``, ``tasks.fitted.stage``): ingest -> split (every row in
``split``) -> fill_missing/vocab (the artifact's metadata) -> encode -> media_cache -> the encoded gate ->
drift -> publish, so the rows equal ``Preprocessor.load(artifact).transform(rows)`` and stage caching,
Dask and determinism are the run's. The output is an artifact of one split whose manifest names the
artifact it was fitted from (``fitted_from``).

``flows.preprocess.apply_flow`` is the Prefect flow (a task per node, as ``preprocess``); ``apply_in_process``
the same graph in this process (the Python API, and the fallback without a Prefect API).
"""

from __future__ import annotations

from flows.apply_context import MANIFEST, apply_config, apply_context, open_fitted, with_references  # noqa: F401
from tasks.graph import PipelineResult, expand_apply, run_graph
from tasks.report.page import write_report_or_warn
from tasks.runtime import dask_run


def summary_of(results: dict) -> dict:
    """``--json``: artifact path, id, rows, the stages, and the drift entries of the applied split."""
    return PipelineResult(results["publish"].artifact, list(results.values())).summary()


def apply_in_process(artifact, dataset, output: str = "artifacts", split: str = "test", config=None,
                     cache_dir: str = ".prepflow-cache", npartitions: int | None = None,
                     dask_address: str | None = None, report: bool = True) -> dict:
    """The apply graph in this process, with the data report; returns the summary."""
    ctx = with_references(apply_context(artifact, dataset, output, split, config, cache_dir, npartitions))
    with dask_run.client(dask_address):
        results = run_graph(ctx, local=not dask_address, nodes=expand_apply())
    summary = summary_of(results)
    if report:
        summary["report_path"] = write_report_or_warn(summary)
    return summary
