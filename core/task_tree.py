"""Combining many Dask delayed results into one on the workers, so that the process that asks for them
receives one value whatever the number of partitions."""

from __future__ import annotations

from dask import delayed


def tree(tasks: list, merge, *args, fan_in: int = 8):
    """The results of delayed ``tasks`` combined into one delayed result on the workers: ``merge(*args,
    *results)`` over consecutive groups of ``fan_in``, level by level, so that this process receives one
    result whatever the number of partitions (encode's statistics, received and merged here one partition at
    a time, would cost this process CPU in proportion to the partitions: seconds at Criteo 1TB's).
    ``merge`` must be associative (it is applied to groups in task order, never reordered). None for no
    tasks."""
    level = list(tasks)
    while len(level) > 1:
        level = [delayed(merge)(*args, *level[i:i + fan_in]) for i in range(0, len(level), fan_in)]
    return level[0] if level else None
