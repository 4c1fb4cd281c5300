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

The runners fit with ``fit`` (per partition on the workers: ``create`` + ``add``; ``merge`` in a tree
of tasks on the workers, ``merged``; then here: ``extract``), or with its parts, ``accumulate`` (on a
worker), ``merged`` and ``merge_extract``, when a partition's task also does other work (the vocab
stage's category counts, a custom stage's emitted statistics).
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Mapping, Sequence

from dask import delayed

from core.combiner import Combiner, accumulate, merge_all, merge_extract
from core.task_tree import tree
from tasks.runtime.dask_run import compute, shared


def merged(combiners, tasks: list) -> list:
    """The delayed accumulators of ``tasks`` (one per partition) merged on the workers in a tree
    (``dask_run.tree``; ``merge`` is associative): a list of one delayed accumulator, or none without tasks.
    ``combiners``: the mapping, or its ``shared`` handle."""
    return [tree(tasks, merge_all, combiners)] if tasks else []


def _partition(part: Any, combiners: Mapping, batches: Callable[..., Mapping], *args: Any) -> dict:
    return accumulate(combiners, batches(part, *args))


def accumulated(combiners: Mapping[Hashable, Combiner], parts: Sequence, batches: Callable[..., Mapping],
                *args: Any) -> list:
    """The delayed accumulators of ``parts`` (delayed partitions), merged on the workers: per partition
    ``batches(part, *args) -> {key: batch}`` and ``accumulate``, then ``merged``. A list of one, or none."""
    # the shared values as positional arguments: Dask rebuilds a tuple of delayed values as a task of its own in
    # every call (a cost per partition in this process)
    c, a = shared(dict(combiners)), [shared(x) for x in args]
    return merged(c, [delayed(_partition)(p, c, batches, *a) for p in parts])


def fit(combiners: Mapping[Hashable, Combiner], parts: Sequence, batches: Callable[..., Mapping],
        *args: Any) -> dict:
    """Fit ``combiners`` over ``parts`` (delayed partitions): ``accumulated`` on the workers, then
    ``extract`` here."""
    return merge_extract(combiners, compute(accumulated(combiners, parts, batches, *args)))


