"""Which failures are worth a retry: transient I/O only (DESIGN section 7).

The stage tasks of ``flows/preprocess.py`` retry with exponential backoff when, and only when, a
failure looks transient: a dropped or refused connection, a timeout, an S3 "slow down" or 5xx, a
stale NFS handle. Everything else fails at once: prepflow's own errors (``ConfigError``,
``DataError``, ...) are the user's to fix, and so are a missing file or a denied permission; a
retry would only repeat them after a wait.

One exception to "prepflow errors are final": storage code reports a failed S3 read or upload as a
``DataError`` naming the path (``raise DataError(...) from exc``). When the error it was raised
*from* is transient, the failure is transient and is retried.

Settings (read when the flow module is imported): ``PREPFLOW_TASK_RETRIES`` (default 3) and
``PREPFLOW_RETRY_BACKOFF_SECONDS`` (default 2: waits of 2, 4, 8 s, each with up to 50 % jitter).
"""

from __future__ import annotations

import errno
import os

from prefect.tasks import exponential_backoff

from core.errors import PrepflowError

# OSError errnos that a second attempt can cure.
TRANSIENT_ERRNOS = frozenset(
    getattr(errno, name) for name in (
        "EIO", "EAGAIN", "EBUSY", "EINTR", "ETIMEDOUT", "ECONNRESET", "ECONNREFUSED", "ECONNABORTED",
        "EPIPE", "EHOSTUNREACH", "EHOSTDOWN", "ENETUNREACH", "ENETDOWN", "ENETRESET", "ESTALE", "EREMOTEIO",
        "ENOLINK", "ECOMM", "EPROTO",
    ) if hasattr(errno, name)
)

# Network exceptions of the S3/HTTP stack that are not OSErrors, matched by class name so that
# botocore, aiohttp, urllib3 and fsspec need not be imported: botocore's EndpointConnectionError,
# ConnectionClosedError, ReadTimeoutError, ConnectTimeoutError, ResponseStreamingError; aiohttp's
# ClientConnectionError, ClientPayloadError, ServerDisconnectedError; urllib3's ProtocolError;
# http.client's IncompleteRead; fsspec's FSTimeoutError.
TRANSIENT_CLASS_NAMES = frozenset({
    "EndpointConnectionError", "ConnectionClosedError", "ReadTimeoutError", "ConnectTimeoutError",
    "ResponseStreamingError", "ClientConnectionError", "ClientPayloadError", "ServerDisconnectedError",
    "ProtocolError", "IncompleteRead", "FSTimeoutError",
})

# Never transient, even though they are OSErrors: the path or the credentials are wrong.
PERMANENT_OS_ERRORS = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError,
                       NotADirectoryError)

RETRIES = int(os.environ.get("PREPFLOW_TASK_RETRIES", "3"))
BACKOFF_SECONDS = float(os.environ.get("PREPFLOW_RETRY_BACKOFF_SECONDS", "2"))


def is_transient_io_error(exc: BaseException | None, _depth: int = 0) -> bool:
    """True when ``exc`` is an I/O failure that a retry may cure (see the module docstring)."""
    if exc is None or _depth > 8 or not isinstance(exc, Exception):
        return False
    if isinstance(exc, PrepflowError):
        return is_transient_io_error(exc.__cause__, _depth + 1)
    if isinstance(exc, PERMANENT_OS_ERRORS):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, OSError) and exc.errno in TRANSIENT_ERRNOS:
        return True
    if any(cls.__name__ in TRANSIENT_CLASS_NAMES for cls in type(exc).__mro__):
        return True
    return is_transient_io_error(exc.__cause__, _depth + 1)


def retry_on_transient_io(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: retry a failed stage task only for transient I/O errors."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            exc = state.result(raise_on_failure=False)
        except Exception:  # the result is gone: do not guess
            return False
    return is_transient_io_error(exc if isinstance(exc, BaseException) else None)


def retry_options() -> dict:
    """Task options for the stage tasks: retries with exponential backoff, transient I/O only."""
    return {
        "retries": RETRIES,
        "retry_delay_seconds": exponential_backoff(backoff_factor=BACKOFF_SECONDS) if BACKOFF_SECONDS > 0 else 0,
        "retry_jitter_factor": 0.5 if BACKOFF_SECONDS > 0 else None,
        "retry_condition_fn": retry_on_transient_io,
    }
