"""balance: oversample the minority or undersample the majority class of the training split.

Ludwig semantics: exactly one binary or category output feature; only training rows change.
``oversample_minority: r`` grows the minority class to ``int(r * majority)`` rows; prepflow keeps
every original minority row and adds seeded draws with replacement (Ludwig replaces the class by
a sample, which can lose rows). ``undersample_majority: r`` shrinks the majority class to
``int(minority / r)`` rows, drawn without replacement. If the classes are already at least that
balanced nothing changes.

Output ``multiplicity.npy``: uint32 per input row, how many times the row appears in the
published training split (rows keep input order, duplicates adjacent). No balancing: no file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from core.code_version import module_version
from core.errors import ConfigError
from tasks import fill_missing, frame
from tasks import ingest as ingest_mod
from tasks import split as split_mod
from tasks.prepared import filled_partitions
from tasks.statistics import Statistics

CODE_VERSION = module_version(__name__)  # this module and what it imports directly (core.code_version)


def label_feature(ctx) -> str:
    outputs = [f for f in ctx.config.output_features if f.type in ("binary", "category")]
    if len(ctx.config.output_features) != 1 or len(outputs) != 1:
        raise ConfigError("preprocessing.balance: balancing needs exactly one output feature of type binary or "
                          f"category, the config has {[(f.name, f.type) for f in ctx.config.output_features]}")
    return outputs[0].name


def _train_labels(prepared, name):
    f = prepared.frame
    train = f.loc[f[frame.SPLIT] == 0]
    return train[ingest_mod.ROW].to_numpy(dtype=np.int64), train[name].astype("string").to_numpy(dtype=object)


def run(ctx, ingest, split, missing):
    from tasks.context import run_cached

    cfg = ctx.config.preprocessing.balance
    seed = ctx.config.preprocessing.split.seed
    enabled = cfg.oversample_minority is not None or cfg.undersample_majority is not None
    label = label_feature(ctx) if enabled else None
    config_slice = {"balance": cfg.model_dump(), "seed": seed, "label": label}

    def compute(out: Path) -> Statistics:
        stats = Statistics()
        if not enabled:
            (out / "balance.json").write_text(json.dumps({"enabled": False}))
            return stats
        assign = split_mod.load(split)
        states = fill_missing.load(missing)
        parts = frame.partitions(ingest_mod.data_dir(ingest.path), ctx.npartitions)
        prepared = filled_partitions(parts, ctx.features, assign, states)
        from dask import delayed

        pairs = frame.compute([delayed(_train_labels)(p, label) for p in prepared])
        rows = np.concatenate([p[0] for p in pairs]) if pairs else np.zeros(0, np.int64)
        labels = np.concatenate([p[1] for p in pairs]) if pairs else np.zeros(0, object)
        classes, counts = np.unique(labels.astype(str), return_counts=True)
        mult = np.ones(len(assign), dtype=np.uint32)
        for c, n in zip(classes, counts, strict=False):
            stats.counter(f"balance.class_count_before.{c}", int(n))
        if len(classes) >= 2:
            order = sorted(range(len(classes)), key=lambda i: (counts[i], classes[i]))
            minority, majority = order[0], order[-1]
            rng = np.random.default_rng(seed)
            if cfg.oversample_minority is not None:
                target = int(counts[majority] * cfg.oversample_minority)
                pool = np.sort(rows[labels.astype(str) == classes[minority]])
                extra = target - len(pool)
                if extra > 0:
                    picks = pool[rng.integers(0, len(pool), size=extra)]
                    np.add.at(mult, picks, 1)
            else:
                target = int(counts[minority] / cfg.undersample_majority)
                pool = np.sort(rows[labels.astype(str) == classes[majority]])
                if target < len(pool):
                    drop = rng.permutation(len(pool))[: len(pool) - target]
                    mult[pool[drop]] = 0
        np.save(out / "multiplicity.npy", mult)
        (out / "balance.json").write_text(json.dumps({"enabled": True, "label": label}))
        for c in classes:
            sel = rows[labels.astype(str) == c]
            stats.counter(f"balance.class_count_after.{c}", int(mult[sel].sum()))
        return stats

    return run_cached(ctx, "balance", CODE_VERSION, [ingest.key, split.key, missing.key], config_slice, compute)


def load(result) -> np.ndarray | None:
    path = Path(result.path) / "multiplicity.npy"
    return np.load(path, mmap_mode="r") if path.exists() else None
