"""One fit protocol: mergeable accumulators, in the spirit of Beam's ``CombineFn`` / TF Transform's analyzers.

Everything prepflow fits from data is a ``Combiner``: a feature type's missing-value statistics
(``FeatureType.missing_combiner()``), its fitted metadata (``FeatureType.fit_combiner(missing_state)``)
and a custom stage's fitted state (``tasks.Stage`` is a combiner). A combiner has four methods:

* ``create() -> acc``: an empty accumulator (what no rows give);
* ``add(acc, batch) -> acc``: ``acc`` with one batch of rows added (a Series for a feature type,
  a DataFrame for a stage);
* ``merge(a, b) -> acc``: two accumulators as one; associative and commutative, so the result does
  not depend on how the rows were partitioned or in which order partitions are merged;
* ``extract(acc) -> result``: the fitted result, a JSON object.

The protocol and its in-memory helpers live here (every layer uses them: the feature types, custom
stages, the serving Preprocessor); ``tasks.runtime.combine`` runs a fit over Dask partitions: ``fit``
(per partition on the workers: ``create`` + ``add``; ``merge`` in a tree of tasks on the workers,
``merged``; then ``extract`` in the calling process), or its parts, ``accumulate`` (on a worker),
``merged`` and ``merge_extract``, when a partition's task also does other work (the vocab stage's
category counts, a custom stage's emitted statistics).
"""

from __future__ import annotations

from functools import reduce
from typing import Any, Hashable, Mapping, Sequence


class Combiner:
    """A mergeable fit (see the module docstring). Subclasses define ``create``, ``add`` and ``merge``;
    ``extract`` defaults to the accumulator itself."""

    def create(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define create()")

    def add(self, acc: Any, batch: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define add(acc, batch)")

    def merge(self, a: Any, b: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define merge(a, b)")

    def extract(self, acc: Any) -> Any:
        return acc

    def needs_values(self) -> bool:
        """Whether ``add`` reads the batch's values; a combiner that says no may be given a summary batch
        instead (a missing-value combiner: ``tasks.features.base.NullCount``). Yes by default."""
        return True


def accumulate(combiners: Mapping[Hashable, Combiner], batches: Mapping[Hashable, Any]) -> dict:
    """One partition's accumulators (on a worker): ``add(create(), batch)`` per combiner whose key is in
    ``batches`` (a key left out: the partition has no rows for it)."""
    return {key: c.add(c.create(), batches[key]) for key, c in combiners.items() if key in batches}


def merge_extract(combiners: Mapping[Hashable, Combiner], accumulators: Sequence[Mapping[Hashable, Any]]) -> dict:
    """Key -> ``extract`` of the partitions' accumulators merged in partition order. A key no partition
    accumulated is left out (the caller decides whether no rows is an error)."""
    return {key: combiners[key].extract(acc) for key, acc in merge_all(combiners, *accumulators).items()}


def merge_all(combiners: Mapping[Hashable, Combiner], *accumulators: Mapping[Hashable, Any]) -> dict:
    """Several partitions' accumulators as one, key by key, merged in the given order (a key no partition
    accumulated is left out)."""
    out = {}
    for key, c in combiners.items():
        accs = [a[key] for a in accumulators if key in a]
        if accs:
            out[key] = reduce(c.merge, accs)
    return out


def fit_batches(combiner: Combiner, batches: Sequence[Any]) -> Any:
    """``combiner`` fitted in memory over ``batches`` (one per partition), as ``fit`` does."""
    return merge_extract({0: combiner}, [accumulate({0: combiner}, {0: b}) for b in batches])[0]


class WithNulls(Combiner):
    """A missing-value combiner whose ``extract`` also gives the nulls in the fit rows (a statistic)."""

    def __init__(self, inner: Combiner):
        self.inner = inner

    def create(self):
        return self.inner.create()

    def add(self, acc, batch):
        return self.inner.add(acc, batch)

    def needs_values(self) -> bool:
        return self.inner.needs_values()

    def merge(self, a, b):
        return self.inner.merge(a, b)

    def extract(self, acc) -> tuple[dict, int]:
        return self.inner.extract(acc), acc["nulls"]
