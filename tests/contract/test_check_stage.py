"""Every built-in node passes ``check_stage`` alone (tests/stage_check.py), from its declared inputs on a tiny
table with a number, a category, an image and an untyped column: its output is of its declared type, a
second call hits the cache, and a change of the config slice it reads misses."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from flows.apply import apply_context
from storage.cache import StageCache
from tasks.config.constants import BUILTIN_STAGES
from tasks.config.loader import parse_config
from tasks.fitted import stage as fitted
from tasks.graph import execute, expand_apply, run_graph
from tasks.infer_types import stage as infer_types
from tasks.runtime.context import RunContext
from tests.helpers import write_csv
from tests.stage_check import check_stage

N = 30
CONFIG = {
    "input_features": [
        {"name": "x", "type": "number", "preprocessing": {"normalization": "zscore"}},
        {"name": "c", "type": "category"},
        {"name": "photo", "type": "image", "preprocessing": {"height": 6, "width": 6}},
        {"name": "u"},  # untyped: infer_types decides
    ],
    "output_features": [{"name": "label", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 1}},
}


def _set(path: tuple, value):
    def change(config: dict) -> dict:
        config = copy.deepcopy(config)
        node = config
        for k in path[:-1]:
            node = node.setdefault(k, {}) if isinstance(k, str) else node[k]
        if isinstance(node, list) and path[-1] == len(node):
            node.append(value)
        else:
            node[path[-1]] = value
        return config
    return change


# one config change at a time, in the order check_stage tries them (each node takes the first that changes its key)
CHANGES = [
    _set(("preprocessing", "split", "seed"), 2),
    _set(("preprocessing", "fit_on"), "all"),
    _set(("input_features", 0, "preprocessing", "normalization"), "minmax"),
    _set(("input_features", 2, "preprocessing", "height"), 5),
    _set(("preprocessing", "oversample_minority"), 0.9),
    _set(("validation", "generated"), False),
    # before infer_types only (the later nodes' context is typed by infer_types' recorded output):
    _set(("input_features", 3), {"name": "u2", "column": "u"}),  # the untyped feature renamed
    _set(("input_features", 4), {"name": "w"}),  # another column read
]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Each node's context and inputs as the run's loop hands them, by node name (and infer_types' output)."""
    root = tmp_path_factory.mktemp("tiny")
    (root / "img").mkdir()
    rng = np.random.default_rng(0)
    for i in range(N):
        Image.fromarray(rng.integers(0, 256, (6 + i % 3, 7, 3), dtype=np.uint8)).save(root / "img" / f"{i}.png")
    data = write_csv(pd.DataFrame({"x": rng.normal(size=N), "c": [f"v{i % 4}" for i in range(N)],
                                   "photo": [f"img/{i}.png" for i in range(N)], "u": np.arange(N) % 7 * 1.5,
                                   "w": np.arange(N) % 2,
                                   "label": [i % 3 == 0 for i in range(N)]}), root / "data.csv")
    seen = {}

    def record(node, ctx, inputs):
        seen[node.name] = (node, ctx, inputs)
        return execute(node, ctx, inputs)

    ctx = RunContext(parse_config(CONFIG), str(data), StageCache(root / "cache"), 1, str(root / "out"))
    results = run_graph(ctx, record)
    return seen, results["infer_types"], str(data), results["publish"].artifact["artifact_path"]


@pytest.mark.parametrize("name", BUILTIN_STAGES)
def test_every_built_in_node_passes_check_stage_alone(recorded, name, tmp_path):
    seen, types, dataset, _artifact = recorded
    node, ctx, inputs = seen[name]
    typed = BUILTIN_STAGES.index(name) > BUILTIN_STAGES.index("infer_types")

    def changed(change):
        def context() -> RunContext:
            other = RunContext(parse_config(change(CONFIG)), dataset, ctx.cache, ctx.npartitions, ctx.output)
            return infer_types.NODE.retype(other, types) if typed else other
        return context

    changes = [changed(c) for c in (CHANGES[:-2] if typed else CHANGES)]
    used = check_stage(node, ctx, inputs, changes, tmp_path)
    assert used != "passthrough", f"{name}: the tiny table has media, so media_cache computes an entry"


@pytest.mark.parametrize("name", sorted(fitted.NODES))
def test_every_fitted_node_passes_check_stage_alone(recorded, name, tmp_path_factory, tmp_path):
    _seen, _types, dataset, artifact = recorded
    root = tmp_path_factory.mktemp("apply")

    def context(split: str = "test") -> RunContext:
        return apply_context(artifact, dataset, str(root / "out"), split, None, str(root / "cache"), 1)

    seen = {}

    def record(node, ctx, inputs):
        seen[node.name] = (node, ctx, inputs)
        return execute(node, ctx, inputs)

    run_graph(context(), record, until="vocab", nodes=expand_apply())  # the fitted nodes and what they read
    node, ctx, inputs = seen[name]
    assert node is fitted.NODES[name]
    check_stage(node, ctx, inputs, [lambda: context("validation")], tmp_path)
