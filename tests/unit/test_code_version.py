"""Which modules a stage's cache version covers (core/code_version.py): its module, what it imports
directly, and through a dispatcher (``CODE_VERSION_FOLLOWS_IMPORTS``) what the dispatcher imports."""

from __future__ import annotations

import pytest

from core.code_version import hashed_modules
from tasks.graph import NODES


@pytest.mark.parametrize("stage", ["balance", "vocab", "encode"])
def test_stages_that_read_prepared_partitions_follow_the_code_that_prepares_them(stage):
    module = next(n.module for n in NODES if n.name == stage)
    covered = hashed_modules(module)
    assert {"tasks.prepared", "tasks.timeseries_windows", "tasks.custom_stages", "tasks.frame"} <= set(covered)


def test_a_module_that_is_not_a_dispatcher_stops_at_its_direct_imports():
    covered = set(hashed_modules("tasks.ingest"))
    assert "tasks.ingest" in covered
    assert "tasks.timeseries_windows" not in covered and "tasks.encode" not in covered
