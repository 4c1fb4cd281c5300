"""The custom stages' plan, for the rest of the pipeline: which stages a config runs and in what order
(``names``), the DAG checked before any data is read (``check``), which columns ingest reads for them
(``ingest_columns``) and the features their steps fit instead of fill_missing (``raw_view``). Running the
stages is ``tasks.custom.steps``; building and checking the DAG is ``tasks.custom.dag``."""

from __future__ import annotations

import copy
import os

from core.errors import DataError
from tasks.custom.dag import StagePlan, build_plan
from tasks.dataset.info import dataset_columns

STATES_KEY = "__custom_stages__"  # in missing.json: the stage plan with fitted states


def plan_of(config) -> StagePlan:
    return build_plan(config)


def check(config, dataset) -> StagePlan:
    """Validate the custom stages' DAG before any data is read (with the dataset's header when cheap)."""
    if not config.stages:
        return StagePlan([], {}, {})
    csv = config.preprocessing.csv
    return build_plan(config, _dataset_columns(dataset, csv.delimiter if csv else None))


def _dataset_columns(dataset, delimiter: str | None) -> list[str] | None:
    if not isinstance(dataset, (str, os.PathLike, list)):
        return [str(c) for c in dataset.columns] if hasattr(dataset, "columns") else None
    try:
        return dataset_columns(dataset if isinstance(dataset, list) else str(dataset), delimiter)
    except DataError:  # an unknown extension: ingest reports it
        return None


def made_columns(config) -> dict[str, str]:
    """Column -> name of the custom stage that makes it."""
    if not config.stages:
        return {}
    plan = plan_of(config)
    return {c: plan.stages[i].name for c, i in plan.made_by.items()}


def ingest_columns(config, columns: dict[str, str]) -> dict[str, str]:
    """Ingest's columns without the ones stages make, plus the dataset columns stages read."""
    if not config.stages:
        return columns
    plan = plan_of(config)
    out = {c: k for c, k in columns.items() if c not in plan.made_by}
    for column, kind in plan.raw_columns.items():
        out[column] = kind if out.get(column, kind) == kind else "string"
    return out


def raw_view(ctx):
    """``ctx`` without the features whose column a custom stage makes (their steps fit those), for
    fill_missing; ``ctx`` itself when there are no custom stages."""
    made = made_columns(ctx.config)
    if not made:
        return ctx
    view = copy.copy(ctx)
    view.config = ctx.config.model_copy(update={
        section: [f for f in getattr(ctx.config, section) if f.source_column not in made]
        for section in ("input_features", "output_features")})
    view.features = [f for f in ctx.features if f.column not in made]
    return view


def names(config) -> list[str]:
    """The custom stages' names in the order they run."""
    return [p.name for p in plan_of(config).stages] if config.stages else []
