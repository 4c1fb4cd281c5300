"""The in-process runner of the stage graph (``tasks.graph``): no Prefect, no server.

``run_pipeline(ctx)`` runs every node of the config's graph in order in this process; it is what unit
and contract tests, notebooks and benchmarks call. ``flows.preprocess`` is the other runner of the same
graph, one Prefect task per node; ``tests/contract/test_runners_agree.py`` checks both publish the same
bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tasks import steps
from tasks.custom import plan as custom_plan
from tasks.graph import STAGES, expand
from tasks.infer_types import stage as infer_types
from tasks.runtime.context import RunContext, StageResult, timed
from tasks.steps import merged_statistics
from tasks.validate import stage as validate

__all__ = ["STAGES", "PipelineResult", "merged_statistics", "run_pipeline"]


@dataclass
class PipelineResult:
    artifact: dict
    stages: list[StageResult] = field(default_factory=list)

    def summary(self) -> dict:
        return {**{k: self.artifact[k] for k in ("artifact_path", "artifact_id", "rows")},
                "stages": [{"name": s.stage, "seconds": round(s.seconds, 3), "cached": s.cached}
                           for s in self.stages]}


def run_pipeline(ctx: RunContext) -> PipelineResult:
    steps.preflight(ctx)
    results: dict[str, StageResult] = {}
    for node in expand(custom_plan.names(ctx.config)):
        result = timed(node.resolve(), ctx, *node.args, *(results[p] for p in node.parents))
        results[node.name] = result
        if node.retypes:  # later stages see every feature typed
            ctx = infer_types.apply(ctx, result)
        if node.gate:  # a failing `fail` gate stops the run here
            validate.enforce(ctx, result)
    return PipelineResult(results["publish"].artifact, list(results.values()))
