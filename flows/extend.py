"""``prepflow run --extend``: a child artifact of the parent's fit, its vocabularies extended by the new files.

The new files (``flows.extend_context``) go through ``expand_extend`` (another node list for
``tasks.graph.run_graph``, from apply's): ingest of the new files
only -> their splits by row -> the parent's fill values -> the parent's metadata with its vocabularies
extended -> encode -> media_cache -> the encoded gate -> drift against the parent's fit -> a publish that
links the parent's shards and adds the new rows. With no new file nothing runs: the parent is the result.
"""

from __future__ import annotations

from flows.extend_context import extend_context, summary_of
from tasks.graph import PipelineResult, run_graph
from tasks.graph import expand_extend as graph_extend
from tasks.publish import extend as publish_extend
from tasks.report.page import write_report_or_warn
from tasks.runtime import dask_run
from tasks.runtime.node import Node
from tasks.split import extend as split_extend
from tasks.vocab import extend as vocab_extend


def expand_extend() -> list[Node]:
    """``--extend``'s node list (``tasks.graph.expand_extend`` with the extend nodes)."""
    return graph_extend(split_extend.NODE, vocab_extend.NODE, publish_extend.NODE)


def extend_in_process(config, dataset, output: str = "artifacts", parent: str | None = None,
                      window: int | None = None, cache_dir: str = ".prepflow-cache", npartitions: int | None = None,
                      dask_address: str | None = None, report: bool = True) -> dict:
    """The extend graph in this process; returns the summary (``mode``, ``parent``, ``refit_advised``)."""
    ctx = extend_context(config, dataset, str(output), parent, window, cache_dir, npartitions)
    if isinstance(ctx, dict):  # no new file: the parent is the result, no stage ran
        return {**ctx, "refit_advised": []}
    with dask_run.client(dask_address):
        results = run_graph(ctx, local=not dask_address, nodes=expand_extend())
    summary = extend_summary(ctx, results)
    if report:
        summary["report_path"] = write_report_or_warn(summary)
    return summary


def extend_summary(ctx, results: dict) -> dict:
    """``--json``'s summary of an extend (``flows.extend_context.summary_of``)."""
    return summary_of(ctx, PipelineResult(results["publish"].artifact, list(results.values())).summary(),
                      results["publish"].artifact)
