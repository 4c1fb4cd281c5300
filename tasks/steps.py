"""The graph's steps that combine several stage modules (``tasks.graph`` names them): the checks made
before any data is read, the encoded gate (on media_cache's entry when it rewrote the parts) and publish
(which reads every stage's result)."""

from __future__ import annotations

import time

from tasks.custom import plan as custom_plan
from tasks.ingest import stage as ingest
from tasks.media_cache import stage as media_cache
from tasks.publish import stage as publish_mod
from tasks.runtime import progress
from tasks.runtime.context import RunContext, StageResult
from tasks.runtime.statistics import Statistics
from tasks.validate import stage as validate


def preflight(ctx: RunContext, local: bool = True) -> None:
    """Everything that can be known wrong before a byte of data is read: every suite the config names
    loads, the custom stages' DAG is valid, the split_binary channels hold features NVIDIA can read. Then, with a user suite and Dask in this process
    (``local``), Great Expectations starts importing in the background while the first stages run."""
    validate.check_config(ctx.config)
    custom_plan.check(ctx.config, ctx.dataset)
    publish_mod.check_split_binary(ctx)
    validate.preload(ctx.config, local)


def validate_encoded(ctx: RunContext, split, balance, fitted, encoded, media) -> StageResult:
    return validate.run_encoded(ctx, split, balance, *media_cache.outputs(media, fitted, encoded))


def merged_statistics(results: list[StageResult]) -> dict:
    total = Statistics()
    for r in results:
        total = total.merge(Statistics.from_json(r.statistics))
    return total.to_json()


def publish(ctx: RunContext, *results: StageResult) -> StageResult:
    """Write the artifact (``tasks.publish.stage``). Its result's ``key`` is the artifact id, ``path`` the
    artifact's folder, ``artifact`` what ``tasks.publish.stage.run`` returned (ids, paths, rows per split)."""
    start = time.perf_counter()
    progress.started("publish")  # publish is not a run_cached stage: its lines are said here
    by_stage = {r.stage: r for r in results}
    fingerprint = ingest.fingerprint_of(by_stage["ingest"])
    fit, enc, med = by_stage["vocab"], by_stage["encode"], by_stage.get("media_cache")
    if med is not None:  # decoded media: its entry replaces encode's and vocab's; content joins the id
        fingerprint = media_cache.fingerprint(med, fingerprint)
        fit, enc = media_cache.outputs(med, fit, enc)
    art = publish_mod.run(ctx, fingerprint, enc, fit, merged_statistics(list(results)),
                      validation=validate.manifest_entry(list(results)))
    media_cache.ensure_memmaps(ctx, art)
    result = StageResult("publish", art["artifact_id"], art["artifact_path"], art["reused"],
                         time.perf_counter() - start)
    result.artifact = art
    progress.finished("publish", result.seconds, result.cached, {})
    return result
