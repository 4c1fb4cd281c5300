"""``check_feature_type(cls, values)``: the contract every feature type, built-in or plugin, must keep.

Run it in a plugin's tests with a sample of raw values (missing ones included)::

    from flows.feature_contract import check_feature_type
    check_feature_type(HashedTokens, ["a b", None, "c"], {"buckets": 8})

It prepares the values the way the pipeline does (read as ingest reads a CSV column: ``""``, ``NA``,
``null``, ... are missing; ``cast``, the missing-value state fitted with the ``missing_combiner()``,
``normalize`` and the fill, then the metadata fitted with ``fit_combiner(state)``, then ``encode``
per partition; both fits are ``tasks.runtime.combine`` combiners: ``create`` + ``add`` per partition,
``merge``, ``extract``) and checks:

1. **partition invariance**: for 1, 2, 3 and 5 contiguous partitions, accumulators merged in a seeded
   shuffled order, and for every row added to one accumulator in turn (single-row batches, which also
   checks ``merge`` with ``create()``'s empty accumulator), the fill state, the metadata and every
   encoded array are identical;
2. **JSON round trip**: the fill state and the metadata are JSON (no NaN, numpy scalars or tuples)
   and encoding with their JSON copy gives the same arrays;
3. **not fitted**: when ``extract`` writes metadata, ``encode`` with ``{}`` raises
   ``core.errors.NotFittedError`` (a type with no fitted state encodes the same with ``{}``);
4. **declared columns**: ``output_columns(metadata)`` names every encoded column with its dtype
   and per-row shape;
5. **serving parity**: ``tasks.serving.preprocessor.Preprocessor``, built from the metadata entry the
   vocab stage writes (type, column, options, fill state), transforms the raw rows to the same
   bytes (rows a ``drop_row`` strategy removes are left out of the request).

Media types (image, audio) take paths (relative ones against the working directory or ``media_root``):
the check finalizes their codec from the fit rows' files as the ``media_cache`` stage does
(``finalize_media``) and compares the decoded tensors; decoding is the ``media_cache`` stage's in a
run, so the partitions' ``encode`` there is the serving one.

A broken property raises ``FeatureContractError`` naming it; the result is the fitted metadata.
It lives in ``flows`` because it drives the serving ``Preprocessor``, which only the top layer may
import (``.importlinter``).
"""

from __future__ import annotations

import json
import os
import random
from functools import reduce
from typing import Any, Sequence

import numpy as np

from core.combiner import Combiner
from core.errors import NotFittedError
from core.lazy import pandas as pd
from storage.media import MediaError, read_bytes, resolve
from tasks.config.constants import ROW
from tasks.features import REGISTRY
from tasks.features.base import FeatureType
from tasks.features.media import MediaFeature
from tasks.runtime.frame import carries, cast_partition, first_last_valid, normalize_and_fill
from tasks.serving.preprocessor import Preprocessor
from tasks.serving.preprocessor import _as_ingested as as_ingested  # the column as ingest hands it to cast

PARTITIONS = (1, 2, 3, 5)


class FeatureContractError(AssertionError):
    """A feature type breaks a property of the contract (the message names the type and the property)."""


def type_ref(cls: type[FeatureType]) -> str:
    """The config ``type`` naming ``cls``: its registered name, else ``pkg.module:Class``."""
    if REGISTRY.get(cls.type_name) is cls:
        return cls.type_name
    return f"{cls.__module__}:{cls.__qualname__}"


def check_feature_type(cls: type[FeatureType], values: Sequence[Any] | pd.Series, preprocessing: dict | None = None,
                       *, partitions: Sequence[int] = PARTITIONS, seed: int = 0) -> dict:
    """Check the contract (see the module docstring) on ``values``; returns the fitted metadata."""
    raw = pd.Series(values) if not isinstance(values, pd.Series) else values.reset_index(drop=True)
    options = cls.Preprocessing.model_validate(preprocessing or {})
    feature = cls("f", "f", options)
    where = f"{type_ref(cls)} ({cls.__qualname__})"

    def fail(prop: str, detail: str) -> None:
        raise FeatureContractError(f"{where}: {prop}: {detail}")

    runs = {k: _pipeline(feature, raw, k, seed) for k in sorted(set(partitions) | {1})}
    base = runs[1]
    for k, run in runs.items():
        for part in ("state", "metadata"):
            if run[part] != base[part]:
                fail("partition invariance", f"the {part} fitted over {k} partitions differs from 1 partition's:\n"
                                             f"{run[part]}\n{base[part]}")
    rowwise = _pipeline(feature, raw, 1, seed, row_by_row=True)
    for part in ("state", "metadata"):
        if rowwise[part] != base[part]:
            fail("partition invariance", f"the {part} fitted by adding one row at a time to one accumulator differs "
                                         f"from one batch's:\n{rowwise[part]}\n{base[part]}")
        _same_arrays(run["encoded"], base["encoded"], lambda d, k=k: fail("partition invariance",
                                                                          f"{k} partitions encode differently: {d}"))
    state, metadata, prepared = json.loads(base["state"]), json.loads(base["metadata"]), base["prepared"]

    direct = feature.encode(prepared, base["metadata_object"])
    _same_arrays(direct, base["encoded"], lambda d: fail("JSON round trip",
                                                         f"encoding with the JSON copy of the metadata differs: {d}"))
    if metadata:
        try:
            feature.encode(prepared, {})
        except NotFittedError:
            pass
        except Exception as exc:  # noqa: BLE001 (the contract reports what was raised instead)
            fail("not fitted", f"encode with empty metadata raised {type(exc).__name__}: {exc}, not NotFittedError")
        else:
            fail("not fitted", "encode with empty metadata did not raise NotFittedError")
    else:
        _same_arrays(feature.encode(prepared, {}), base["encoded"],
                     lambda d: fail("not fitted", f"no fitted metadata, yet encode with {{}} differs: {d}"))

    declared = {c.name: c for c in feature.output_columns(metadata)}
    if set(declared) != set(base["encoded"]):
        fail("declared columns", f"output_columns names {sorted(declared)}, encode made {sorted(base['encoded'])}")
    for name, arr in base["encoded"].items():
        spec = declared[name]
        if arr.dtype != np.dtype(spec.dtype) or arr.shape[1:] != tuple(spec.shape):
            fail("declared columns", f"column {name!r} is {arr.dtype} {arr.shape[1:]}, declared {spec.dtype} "
                                     f"{tuple(spec.shape)}")

    entry = {**metadata, "type": type_ref(cls), "column": "f",
             "preprocessing": {**options.model_dump(mode="json"), **base["media_preprocessing"],
                               "missing_value_strategy": state["missing_value_strategy"],
                               "computed_fill_value": state["computed_fill_value"]}}
    kept = base["rows"]
    pre = Preprocessor({"f": json.loads(json.dumps(entry))}, trust_plugins=True)  # the class under test: trusted
    served = pre.transform(pd.DataFrame({"f": raw.iloc[kept].tolist()}))
    _same_arrays(served, base["encoded"], lambda d: fail("serving parity", f"the Preprocessor's output differs: {d}"))
    return metadata


def _pipeline(feature: FeatureType, raw: pd.Series, k: int, seed: int, row_by_row: bool = False) -> dict:
    """Prepare, fit and encode ``raw`` over ``k`` contiguous partitions, as the stages do; ``row_by_row``:
    each fit adds one row at a time to one accumulator (``add`` on a non-empty accumulator)."""
    n = len(raw)
    bounds = [0, *sorted(random.Random(seed + k).sample(range(1, n), min(k - 1, max(n - 1, 0)))), n]
    frame = pd.DataFrame({"f": as_ingested(raw, feature.read_as(), "f"), ROW: np.arange(n, dtype=np.int64)})
    assign = np.zeros(n, dtype=np.int8)  # every row in the training split
    casted = [cast_partition(frame.iloc[a:b].reset_index(drop=True), [feature], assign)
              for a, b in zip(bounds, bounds[1:], strict=False)]
    fit = [c["f"].dropna() if feature.missing_strategy == "drop_row" else c["f"] for c in casted]  # as fill_missing
    state = json.loads(json.dumps(_fit(feature.missing_combiner(), fit, seed, row_by_row), allow_nan=False,
                                  sort_keys=True))
    carry: list[dict | None] = [None] * len(casted)
    if state["missing_value_strategy"] in ("ffill", "bfill"):
        keep = {"f": {**state, "missing_value_strategy": "keep"}}
        edges = [first_last_valid(normalize_and_fill(c.copy(), [feature], keep).frame, ["f"]) for c in casted]
        carry = carries(edges, ["f"])
    prepared = [normalize_and_fill(c.copy(), [feature], {"f": state}, carry[i]).frame for i, c in enumerate(casted)]
    # each value indexed by its input row, as the vocab stage fits (orders by first occurrence need it)
    metadata_object = _fit(feature.fit_combiner(state), [p["f"].set_axis(p[ROW].to_numpy()) for p in prepared],
                           seed, row_by_row)
    media_preprocessing: dict = {}
    if isinstance(feature, MediaFeature):  # what the media_cache stage adds: the codec, from the fit rows' files
        update = feature.finalize_media(_media_sample(feature, pd.concat([p["f"] for p in prepared])))
        media_preprocessing = update.pop("preprocessing", {})
        metadata_object = {**metadata_object, **update}
    metadata = json.dumps(metadata_object, allow_nan=False, sort_keys=True)
    fitted = json.loads(metadata)
    pieces = [feature.encode(p["f"], fitted) for p in prepared]
    encoded = {name: np.concatenate([p[name] for p in pieces]) for name in pieces[0]}
    whole = pd.concat([p["f"] for p in prepared], ignore_index=True)
    return {"state": json.dumps(state, sort_keys=True), "metadata": metadata, "metadata_object": metadata_object,
            "encoded": encoded, "prepared": whole, "media_preprocessing": media_preprocessing,
            "rows": np.concatenate([p[ROW].to_numpy() for p in prepared]).astype(np.int64)}


def _media_sample(feature: MediaFeature, values: pd.Series):
    for raw in values.dropna().tolist():
        try:
            yield read_bytes(resolve(str(raw), os.getcwd(), feature.options.media_root))
        except MediaError:
            continue


def _fit(combiner: Combiner, batches: list[pd.Series], seed: int, row_by_row: bool) -> Any:
    """``create`` + ``add`` per batch, ``merge`` in a seeded shuffled order, ``extract``; ``row_by_row``: every
    row of every batch added in turn to one accumulator."""
    if row_by_row:
        acc = combiner.create()
        for batch in batches:
            for i in range(len(batch)):
                acc = combiner.add(acc, batch.iloc[i:i + 1])
        return combiner.extract(acc)
    accs = [combiner.add(combiner.create(), b) for b in batches]
    random.Random(seed).shuffle(accs)
    return combiner.extract(reduce(combiner.merge, accs))


def _same_arrays(got: dict[str, np.ndarray], want: dict[str, np.ndarray], fail) -> None:
    if set(got) != set(want):
        fail(f"columns {sorted(got)} against {sorted(want)}")
    for name, arr in want.items():
        other = np.asarray(got[name])
        if other.dtype != arr.dtype or other.shape != arr.shape or other.tobytes() != arr.tobytes():
            fail(f"column {name!r}: {other.dtype} {other.shape} against {arr.dtype} {arr.shape}")
