"""``core.combiner``'s fit protocol run over Dask partitions: ``fit``, or its parts ``accumulate``, ``merged``
and ``merge_extract`` (the protocol and when to use which: ``core.combiner``)."""

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


