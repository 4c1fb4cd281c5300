"""``prepflow validate`` (``validate_dataset``): the raw gate of each config (the stage graph up to
``validate_raw``: ingest, infer_types, the gate) and the given suites on the raw table; a usable CI data
gate. ``flows.validate`` runs the same as a Prefect flow, for deployments."""

from __future__ import annotations

import functools

from core.errors import ConfigError
from expectations import gx_suites, runner
from expectations.suites import referenced_columns
from storage.cache import StageCache
from tasks.config.loader import load_config, parse_config
from tasks.config.suites import NUMERIC_EXPECTATIONS, load_suite_file
from tasks.dataset.files import as_dataset
from tasks.dataset.files import label as dataset_label
from tasks.dataset.info import dataset_columns
from tasks.graph import execute, run_graph
from tasks.runtime.context import RunContext
from tasks.validate.stage import check_config, needs_gx


def _suite_only_config(dataset: str, named: list[tuple[str, dict]]):
    """A config that ingests the dataset's columns (all, where the header tells them; else those the
    suites name) and runs only the given suites on the raw table."""

    numeric = {e.get("kwargs", {}).get("column") for _p, s in named for e in s["expectations"]
               if e.get("type") in NUMERIC_EXPECTATIONS}
    available = dataset_columns(dataset)
    columns = available if available else list(dict.fromkeys(c for _p, s in named for c in referenced_columns(s)))
    if not columns:
        raise ConfigError(f"{dataset_label(dataset)}: cannot tell the dataset's columns and the suites name none")
    features = [{"name": c, "type": "number" if c in numeric else "category"} for c in columns]
    return parse_config({"input_features": features,
                         "validation": {"raw": [p for p, _s in named], "generated": False}}, "--suite")


def validate_dataset(dataset, configs: list[str] = (), suites: list[str] = (),
                     cache_dir: str = ".prepflow-cache", npartitions: int | None = None) -> dict:
    """``prepflow validate``: the raw gate of each config (generated + its user suites) and the
    ``suites`` on the raw table. Returns ``{"dataset", "success", "gates": [...]}``; a gate with
    ``on_failure: warn`` does not make the whole result fail."""

    if not configs and not suites:
        raise ConfigError("prepflow validate needs --config CONFIG or --suite FILE (either may be repeated)")
    dataset = as_dataset(dataset)
    named = [(str(p), load_suite_file(p)) for p in suites]  # usage errors before any data is read
    loaded = [(str(c), load_config(c)) for c in configs]
    for _path, config in loaded:
        check_config(config)
    if any(runner.needs_gx(s) for _p, s in named) or any(needs_gx(c) for _p, c in loaded):
        gx_suites.preload()  # GX's import overlaps the ingest
    runs = list(loaded)
    if named:
        runs.append(("--suite", _suite_only_config(dataset, named)))
    gates = []
    for label, config in runs:
        ctx = RunContext(config, dataset, StageCache(cache_dir), npartitions)
        # the graph up to the raw gate (ingest, infer_types), results collected rather than enforced
        results = run_graph(ctx, functools.partial(execute, enforce=False), until="validate_raw")
        gate = results["validate_raw"].results()
        gates.append({**gate, "config": label, "on_failure": config.validation.on_failure})
    success = all(g["success"] or g["on_failure"] == "warn" for g in gates)
    return {"dataset": dataset, "success": success, "gates": gates}
