"""Prefect task retries on the real flow: a transient I/O failure is retried, a user error is not.

The dataset is read through ``flaky://``, an fsspec filesystem whose next opens fail as told
(a connection reset, as a flaky S3/NFS mount gives, or a permission error), so the ``ingest`` task
meets the failure exactly where it would in production (``storage.fs.open_input``).
"""

from __future__ import annotations

import time

import fsspec
import pandas as pd
import pytest
from fsspec.implementations.local import LocalFileSystem

from tests.helpers import write_config, write_csv

pytestmark = pytest.mark.integration


class FlakyFileSystem(LocalFileSystem):
    protocol = ("flaky",)
    fail_next: list[Exception] = []
    opens = 0

    @classmethod
    def _strip_protocol(cls, path):
        path = str(path)
        return super()._strip_protocol(path[len("flaky://"):] if path.startswith("flaky://") else path)

    def _open(self, path, mode="rb", **kwargs):
        type(self).opens += 1
        if type(self).fail_next:
            raise type(self).fail_next.pop(0)
        return super()._open(path, mode, **kwargs)


@pytest.fixture
def flaky(monkeypatch):
    fsspec.register_implementation("flaky", FlakyFileSystem, clobber=True)
    FlakyFileSystem.fail_next, FlakyFileSystem.opens = [], 0
    # no waiting between attempts in the test (the backoff itself is checked in tests/unit)
    import flows.preprocess as pre

    monkeypatch.setattr(pre, "stage_task", pre.stage_task.with_options(retry_delay_seconds=0.1,
                                                                        retry_jitter_factor=None))
    yield FlakyFileSystem


@pytest.fixture
def small(tmp_path):
    df = pd.DataFrame({"x": [float(i % 7) for i in range(40)], "y": [str(i % 2) for i in range(40)]})
    csv = write_csv(df, tmp_path / "small.csv")
    config = write_config({"input_features": [{"name": "x", "type": "number"}],
                           "output_features": [{"name": "y", "type": "category"}]}, tmp_path / "config.yaml")
    return csv, config


@pytest.fixture
def prefect_api():
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.local_server import ensure_server

    with temporary_settings(updates={PREFECT_API_URL: ensure_server()}):
        yield
        # Ship this process's pending logs and events now, while the session's server is still up;
        # at interpreter exit it is gone and Prefect's workers would retry for a minute.
        from prefect.events.worker import EventsWorker
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=10)
        EventsWorker.drain_all(timeout=10)


def _ingest_run_count(flow_run_id, timeout: float = 20.0) -> int:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    deadline = time.monotonic() + timeout
    while True:
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
        ingest = [r for r in runs if r.name.startswith("ingest-")]
        if ingest and ingest[0].state and ingest[0].state.is_final() or time.monotonic() > deadline:
            return ingest[0].run_count if ingest else 0
        time.sleep(0.3)


def test_transient_io_failure_is_retried(flaky, small, tmp_path, prefect_api):
    from flows.preprocess import preprocess

    csv, config = small
    flaky.fail_next = [ConnectionResetError(104, "Connection reset by peer"), TimeoutError("read timed out")]
    state = preprocess(config=str(config), dataset=f"flaky://{csv}", output=str(tmp_path / "out"),
                       cache_dir=str(tmp_path / "cache"), return_state=True)
    assert state.is_completed(), state
    assert flaky.fail_next == []
    assert _ingest_run_count(state.state_details.flow_run_id) == 3  # two failures, then success


def test_user_errors_are_not_retried(flaky, small, tmp_path, prefect_api):
    from flows.preprocess import preprocess

    csv, config = small
    flaky.fail_next = [PermissionError(13, "AccessDenied")] * 4
    state = preprocess(config=str(config), dataset=f"flaky://{csv}", output=str(tmp_path / "out"),
                       cache_dir=str(tmp_path / "cache"), return_state=True)
    assert state.is_failed(), state
    assert flaky.opens == 1
    assert "cannot open" in str(state.message) or "PermissionError" in str(state.message)
    assert _ingest_run_count(state.state_details.flow_run_id) == 1
