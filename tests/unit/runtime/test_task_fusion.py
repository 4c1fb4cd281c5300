"""core.task_fusion: a task that only one other task needs runs inside it; shared values, requested results and
merges of several partitions stay tasks of their own; every graph computes the same values fused or not."""

from __future__ import annotations

import dask
from dask import delayed
from dask.utils import ensure_dict, key_split
from hypothesis import given, settings
from hypothesis import strategies as st

from core.task_fusion import fuse_private_chains, fused


def read(i):
    return [i, i + 1]


def prepare(rows, shared):
    return [r * shared["scale"] for r in rows]


def stage(rows, shared):
    return sum(rows) + shared["offset"], len(rows)


def merge(*parts):
    return sum(parts)


def _graph(partitions: int):
    shared = delayed({"scale": 3, "offset": 1}, traverse=False)
    both = [delayed(stage, nout=2)(delayed(prepare)(delayed(read, pure=True)(i), shared), shared)
            for i in range(partitions)]
    return delayed(merge)(*[b[0] for b in both]), delayed(merge)(*[b[1] for b in both])


def _tasks(outputs) -> dict[str, int]:
    """The tasks of the graph ``dask.compute(*outputs)`` would run (its steps: Dask optimizes the
    collections together, as one graph), counted by their key's name."""
    from dask._expr import FinalizeCompute

    graph = ensure_dict(FinalizeCompute(dask.base.collections_to_expr(list(outputs))).optimize().__dask_graph__())
    counts: dict[str, int] = {}
    for k in graph:
        counts[key_split(k)] = counts.get(key_split(k), 0) + 1
    return counts


def test_a_partitions_read_and_preparation_run_inside_its_stage_task():
    outputs = _graph(4)
    with fused():
        assert _tasks(outputs) == {"stage": 4, "getitem": 8, "merge": 2, "dict": 1}
    # without fusion each link is a task: read, prepare and stage per partition
    assert _tasks(outputs) == {"read": 4, "prepare": 4, "stage": 4, "getitem": 8, "merge": 2, "dict": 1}
    with fused():
        assert dask.compute(*outputs, scheduler="sync") == dask.compute(*outputs, scheduler="sync")
    assert dask.compute(*outputs, scheduler="sync") == (sum(3 * (2 * i + 1) + 1 for i in range(4)), 8)


def test_a_requested_result_is_not_fused_into_its_dependent():
    prepared = delayed(prepare)(delayed(read, pure=True)(5), {"scale": 2})
    total = delayed(merge)(prepared)
    graph = fuse_private_chains(ensure_dict(dask.base.collections_to_expr([prepared, total]).__dask_graph__()),
                                [prepared.key, total.key])
    assert prepared.key in graph and total.key in graph and len(graph) == 2  # read ran inside prepare


# A random DAG: node i adds a constant to the sum of some earlier nodes; some nodes are requested.
dags = st.integers(1, 14).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.lists(st.integers(0, max(n - 1, 0)), max_size=3), min_size=n, max_size=n),
    st.lists(st.integers(0, n - 1), min_size=1, max_size=3)))


def add(c, *xs):
    return c + sum(xs)


@settings(max_examples=80, deadline=None)
@given(dags)
def test_any_graph_computes_the_same_values_fused(dag):
    n, parents, wanted = dag
    nodes = []
    for i in range(n):
        deps = sorted({p for p in parents[i] if p < i})
        nodes.append(delayed(add, pure=True)(i * 10 + 1, *(nodes[p] for p in deps)))
    outputs = [nodes[i] for i in wanted]
    plain = dask.compute(*outputs, scheduler="sync")
    with fused():
        assert dask.compute(*outputs, scheduler="sync") == plain
        assert dask.compute(*outputs, scheduler="threads") == plain
