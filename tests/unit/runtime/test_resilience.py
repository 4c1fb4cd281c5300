"""Which stage-task failures are retried (flows/resilience.py): transient I/O only."""

from __future__ import annotations

import errno

import pytest

from core.errors import ConfigError, DataError, IntegrityError, ValidationFailed
from flows.resilience import is_transient_io_error, retry_on_transient_io


def _raised_from(outer: Exception, cause: Exception) -> Exception:
    try:
        try:
            raise cause
        except Exception as exc:
            raise outer from exc
    except Exception as exc:
        return exc


class EndpointConnectionError(Exception):
    """Stands in for botocore.exceptions.EndpointConnectionError (matched by class name)."""


class ClientPayloadError(Exception):
    """Stands in for aiohttp.ClientPayloadError."""


@pytest.mark.parametrize("exc", [
    ConnectionResetError(errno.ECONNRESET, "reset by peer"),
    ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
    TimeoutError("read timed out"),
    OSError(errno.EBUSY, "SlowDown"),  # s3fs: 503 SlowDown / ServiceUnavailable
    OSError(errno.EIO, "InternalError"),  # s3fs: an unrecognised S3 error
    OSError(errno.ESTALE, "Stale file handle"),  # NFS
    EndpointConnectionError("Could not connect to the endpoint URL"),
    ClientPayloadError("Response payload is not completed"),
])
def test_transient_io_errors_are_retried(exc):
    assert is_transient_io_error(exc)


@pytest.mark.parametrize("exc", [
    FileNotFoundError(errno.ENOENT, "no such file"),
    PermissionError(errno.EACCES, "AccessDenied"),
    IsADirectoryError(errno.EISDIR, "is a directory"),
    OSError(errno.ENOSPC, "No space left on device"),
    OSError(errno.EINVAL, "InvalidBucketName"),
    ValueError("bad value"),
    KeyError("x"),
    MemoryError(),
    KeyboardInterrupt(),
    None,
])
def test_other_failures_are_not_retried(exc):
    assert not is_transient_io_error(exc)


@pytest.mark.parametrize("exc", [
    DataError("data.csv: line 4, column 'age': expected a number, got 'old'"),
    ConfigError("c.yaml: input_features[0].preprocesing: unknown key"),
    ValidationFailed("raw: expectation failed"),
    IntegrityError("s3://b/a: 1 file(s) do not match manifest.json"),
])
def test_prepflow_errors_are_not_retried(exc):
    assert not is_transient_io_error(exc)


def test_prepflow_error_wrapping_a_permanent_error_is_not_retried():
    exc = _raised_from(DataError("s3://b/d.csv: cannot open (PermissionError)"), PermissionError("denied"))
    assert not is_transient_io_error(exc)


def test_data_error_raised_from_a_transient_io_error_is_retried():
    """storage/ reports a failed S3 read or upload as a DataError naming the path, raised *from* the
    I/O error; a transient cause makes the failure transient."""
    exc = _raised_from(DataError("s3://b/a: cannot upload the artifact"), ConnectionResetError("reset"))
    assert is_transient_io_error(exc)
    # an error merely *during handling* of a transient one (implicit context) does not count
    try:
        try:
            raise ConnectionResetError("reset")
        except ConnectionResetError:
            raise DataError("d.csv: line 4: bad row")  # noqa: B904
    except DataError as implicit:
        assert not is_transient_io_error(implicit)


def test_cause_chain_of_a_wrapping_error():
    assert is_transient_io_error(_raised_from(RuntimeError("upload failed"), TimeoutError()))
    assert not is_transient_io_error(_raised_from(RuntimeError("bad"), ValueError()))


def test_retry_condition_reads_the_failed_state():
    from prefect.states import Failed

    assert retry_on_transient_io(None, None, Failed(data=ConnectionResetError("reset")))
    assert not retry_on_transient_io(None, None, Failed(data=DataError("bad row")))
    assert not retry_on_transient_io(None, None, Failed(data=ConfigError("bad key")))


def test_every_stage_task_retries_transient_io_with_exponential_backoff():
    import inspect

    from prefect import Task

    import flows.preprocess as pre
    from flows import resilience
    from tasks.graph import STAGES

    tasks = [obj for obj in vars(pre).values() if isinstance(obj, Task)]
    assert {t.name for t in tasks} == {"stage", "report"}  # every node of the graph runs as stage_task
    tasks += [pre.stage_task.with_options(name=stage) for stage in STAGES]  # named per node, same options
    for t in tasks:
        assert t.retries == resilience.RETRIES >= 1, t.name
        assert t.retry_condition_fn is retry_on_transient_io, t.name
        assert inspect.isfunction(t.retry_condition_fn)  # Prefect calls only plain functions
        delays = t.retry_delay_seconds
        assert len(delays) == t.retries and all(b == 2 * a for a, b in zip(delays, delays[1:], strict=False)), delays
