"""Fewer Dask tasks per partition: each task that only one other task needs runs inside it.

A stage's per-partition work is built as a chain of ``dask.delayed`` calls: read the part, prepare it
(cast, fill), then the stage's own function, which also takes values shared by every partition (the
features, the split, the fitted states). Dask's own linear fusion (``optimization.fuse.delayed``) skips
such a chain: it only fuses a task with exactly one dependency, and the shared values are dependencies
too. So every link was a task of its own, and every task costs the scheduler CPU (and the workers too).
Fusing them about halves a run's tasks and cuts the scheduler's and the workers' CPU; the flow process's
CPU does not move, as its cost is per partition, not per task (figures: benchmarks/RESULTS.md and
benchmarks/SCALING.md).

``fuse_private_chains`` fuses a task into its dependent when it is that dependent's only *private*
dependency (one no other task needs) and is not itself a requested result: the read and the preparation
run inside the stage's task, which keeps its key. Shared values stay separate tasks (each is sent to a
worker once), and a task with several private dependencies (a merge of partitions' results, a tree
level) is never fused with them, so the parallelism of every stage is unchanged. A fused task runs the
same functions on the same values in the same order, so results are the same.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from typing import Iterator

import dask
from dask._task_spec import Task, convert_legacy_graph
from dask.core import flatten, reverse_dict
from dask.delayed import optimize as delayed_optimize
from dask.utils import ensure_dict


def fuse_private_chains(dsk, keys, **kwargs) -> dict:
    """Dask's optimization of a delayed graph (``dask.delayed.optimize``: culling), then every task that is
    the only private dependency of its single dependent fused into it (see the module's doc). The requested
    ``keys`` and every task that stays keep their keys."""
    # (a value given to ``delayed`` with traverse=False is still a legacy tuple task: converted)
    graph = convert_legacy_graph(ensure_dict(delayed_optimize(dsk, keys, **kwargs)))
    outputs = set(flatten(keys))
    dependencies = {k: node.dependencies for k, node in graph.items()}
    dependents = reverse_dict(dependencies)

    def fusable(k) -> bool:
        node = graph.get(k)
        return (isinstance(node, Task) and not node.block_fusion and k not in outputs
                and len(dependents.get(k, ())) == 1)

    into = {}  # task -> the dependent it runs inside
    for key, node in graph.items():
        if isinstance(node, Task):
            private = [k for k in dependencies[key] if fusable(k)]
            if len(private) == 1:
                into[private[0]] = key
    groups: dict = defaultdict(list)
    for k in into:
        root = k
        while root in into:
            root = into[root]
        groups[root].append(k)
    out = {k: node for k, node in graph.items() if k not in into}
    for root, members in groups.items():
        out[root] = Task.fuse(*(graph[m] for m in members), graph[root], key=root)
    return out


@contextlib.contextmanager
def fused() -> Iterator[None]:
    """``dask.compute`` of delayed values inside this block fuses private chains (``fuse_private_chains``)."""
    with dask.config.set(delayed_optimize=fuse_private_chains):
        yield
