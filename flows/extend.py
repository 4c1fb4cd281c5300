"""``prepflow run --extend``: a child artifact of the parent's fit, its vocabularies extended by the new files.

The new files (``flows.extend_context``) go through ``expand_extend`` (another node list for
``tasks.graph.run_graph``, from apply's): ingest of the new files
only -> their splits by row -> the parent's fill values -> the parent's metadata with its vocabularies
extended -> encode -> media_cache -> the encoded gate -> drift against the parent's fit -> a publish that
links the parent's shards and adds the new rows. With no new file nothing runs: the parent is the result.
"""

from __future__ import annotations

import dataclasses

from flows.extend_context import extend_context
from tasks.fitted import stage as fitted
from tasks.graph import PipelineResult, artifact_code_versions, expand_apply, run_graph
from tasks.publish import extend as publish_extend
from tasks.report.page import write_report_or_warn
from tasks.runtime import dask_run
from tasks.runtime.node import Node
from tasks.split import extend as split_extend
from tasks.vocab import extend as vocab_extend


# declared here rather than in tasks.graph beside expand_apply: the extend nodes import publish's helpers, one
# module deeper than the graph's longest import chain allows
def expand_extend() -> list[Node]:
    """``prepflow run --extend``'s nodes: apply's (the parent's fill values and statistics, no balancing), with
    the new rows' splits by row (``tasks.split.extend``), the parent's vocabularies extended by the new files'
    values (``tasks.vocab.extend``) and a publish that links the parent's shards (``tasks.publish.extend``)."""
    replaced = {n.name: n for n in (split_extend.NODE, vocab_extend.NODE)}
    nodes: list[Node] = []
    for n in expand_apply():
        if n.name == publish_extend.NODE.name:
            versions = {**artifact_code_versions(), **{m.module: m.code_version for m in
                                                       (fitted.FILL_MISSING, split_extend.NODE, vocab_extend.NODE,
                                                        publish_extend.NODE)}}
            nodes.append(dataclasses.replace(publish_extend.NODE, inputs=tuple(m.name for m in nodes),
                                             args=(versions,)))
        else:
            nodes.append(replaced.get(n.name, n))
    return nodes


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
    """``--json``'s summary of an extend: a run's, with ``mode``, ``parent``, ``new_rows``, ``refit_advised``."""
    art = results["publish"].artifact
    summary = PipelineResult(art, list(results.values())).summary()
    summary.update(mode="extend", extended=True, parent=art["parent"], new_rows=art["new_rows"],
                   refit_advised=art["refit_advised"],
                   files={"total": len(ctx.extend["kept"]) + len(ctx.extend["new"]), "new": len(ctx.extend["new"]),
                          "dropped": [f["name"] for f in ctx.extend["dropped"]]})
    return summary
