"""The stage graph as plain function calls (no Prefect): the reference the flow must match.

``STAGES`` lists the stages in order; ``run_pipeline`` runs them in-process and is what unit and
contract tests call. ``flows/preprocess.py`` wraps the same stage functions as Prefect tasks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tasks import (
    balance,
    custom_stages,
    encode,
    fill_missing,
    infer_types,
    ingest,
    media_cache,
    publish,
    split,
    vocab,
)
from tasks.context import RunContext, StageResult, timed
from tasks.statistics import Statistics

STAGES = ("ingest", "infer_types", "validate_raw", "split", "fill_missing", "balance", "vocab", "encode",
          "media_cache", "validate_encoded", "publish")


@dataclass
class PipelineResult:
    artifact: dict
    stages: list[StageResult] = field(default_factory=list)

    def summary(self) -> dict:
        return {**{k: self.artifact[k] for k in ("artifact_path", "artifact_id", "rows")},
                "stages": [{"name": s.stage, "seconds": round(s.seconds, 3), "cached": s.cached}
                           for s in self.stages]}


def merged_statistics(results: list[StageResult]) -> dict:
    total = Statistics()
    for r in results:
        total = total.merge(Statistics.from_json(r.statistics))
    return total.to_json()


def publish_stage(ctx: RunContext, results: list[StageResult]) -> tuple[dict, StageResult]:
    start = time.perf_counter()
    fingerprint = ingest.fingerprint_of(next(r for r in results if r.stage == "ingest"))
    enc = next(r for r in results if r.stage == "encode")
    fit = next(r for r in results if r.stage == "vocab")
    med = next((r for r in results if r.stage == "media_cache"), None)
    if med is not None:  # decoded media: its entry replaces encode's and vocab's; content joins the id
        fingerprint = media_cache.fingerprint(med, fingerprint)
        fit, enc = media_cache.outputs(med, fit, enc)
    from tasks import validate

    art = publish.run(ctx, fingerprint, enc, fit, merged_statistics(results),
                      validation=validate.manifest_entry(results))
    media_cache.ensure_memmaps(ctx, art)
    return art, StageResult("publish", art["artifact_id"], art["artifact_path"], art["reused"],
                            time.perf_counter() - start)


def run_pipeline(ctx: RunContext) -> PipelineResult:
    from tasks import validate

    validate.check_config(ctx.config)  # every suite loads before any data is read
    custom_stages.check(ctx.config, ctx.dataset)  # the custom stages' DAG too
    validate.preload(ctx.config)  # GX's slow import overlaps ingest
    ing = timed(ingest.run, ctx)  # fingerprinting is part of ingest's cost
    inf = timed(infer_types.run, ctx, ing)
    infer_types.apply(ctx, inf)  # later stages read the config with every feature typed
    raw = timed(validate.run_raw, ctx, ing)
    validate.enforce(ctx, raw)  # a failing gate stops the run here (on_failure: fail)
    spl = timed(split.run, ctx, ing)
    mis = timed(fill_missing.run, ctx, ing, spl)
    cus = custom_stages.run_all(ctx, ing, spl, mis)  # one step per custom stage ([] without any)
    fil = cus[-1] if cus else mis  # its missing.json holds every fill state and the fitted stage plan
    bal = timed(balance.run, ctx, ing, spl, fil)
    fit = timed(vocab.run, ctx, ing, spl, fil)
    enc = timed(encode.run, ctx, ing, spl, fil, bal, fit)
    med = timed(media_cache.run, ctx, fit, enc)
    encv = timed(validate.run_encoded, ctx, spl, bal, *media_cache.outputs(med, fit, enc))
    validate.enforce(ctx, encv)
    results = [ing, inf, raw, spl, mis, *cus, bal, fit, enc, med, encv]
    art, pub = publish_stage(ctx, results)
    return PipelineResult(art, [*results, pub])
