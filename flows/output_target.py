"""``prepflow run --output`` and ``--cache-dir``, checked before any stage runs: a local folder must be
creatable and writable (it is created when missing, and a probe file is written and removed), a URL's
bucket must be reachable. Anything else is one ``ConfigError`` naming the
option and the reason, so a run never computes every stage to fail at publish, nor fails in its first
stage with a bare ``PermissionError``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import fsspec

from core.errors import ConfigError
from storage.fs import filesystem, is_url, storage_options, strip_file_scheme

BUCKET_PROTOCOLS = ("s3", "s3a", "gs", "gcs", "az", "abfs")  # stores whose URL starts with a bucket


def _error(output: str, reason: str, option: str = "--output") -> ConfigError:
    return ConfigError(f"{option} {output}: {reason}")


def check_output(output: str) -> None:
    """Raise ``ConfigError`` unless artifacts can be written under ``output``."""
    check_writable(output, "--output")


def check_cache_dir(cache_dir: str) -> None:
    """Raise ``ConfigError`` unless stage cache entries can be written under ``cache_dir``."""
    check_writable(cache_dir, "--cache-dir")


def check_writable(target: str, option: str) -> None:
    """Raise ``ConfigError`` naming ``option`` unless files can be written under ``target`` (a folder
    or URL)."""
    if is_url(target) and not target.startswith("file://"):
        if target.split("://", 1)[0] in BUCKET_PROTOCOLS:  # others (memory://) have nothing to reach
            _check_bucket(target, option)
        return
    folder = Path(strip_file_scheme(target))
    if folder.exists() and not folder.is_dir():
        raise _error(target, "exists and is not a folder", option)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _error(target, f"cannot create the folder ({exc.strerror or type(exc).__name__})", option) from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".prepflow-write-check-", dir=folder)
    except OSError as exc:
        raise _error(target, f"cannot write in the folder ({exc.strerror or type(exc).__name__})", option) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"prepflow")
    except OSError as exc:
        raise _error(target, f"cannot write in the folder ({exc.strerror or type(exc).__name__})", option) from None
    finally:
        Path(probe).unlink(missing_ok=True)


def _check_bucket(output: str, option: str = "--output") -> None:
    """The URL's bucket (its first path component) exists and answers: one request, not retried (S3: a
    closed endpoint fails in a second or two instead of botocore's ~20 s of retries)."""
    protocol, _, rest = output.partition("://")
    bucket = rest.split("/", 1)[0]
    if not bucket:
        raise _error(output, "the URL names no bucket", option)
    try:
        if protocol in ("s3", "s3a"):
            fs = fsspec.filesystem("s3", **storage_options(), skip_instance_cache=True,
                                   config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 10})
        else:
            fs = filesystem(output)
        fs.info(bucket)
    except FileNotFoundError:
        raise _error(output, f"bucket '{bucket}' does not exist", option) from None
    except PermissionError as exc:
        raise _error(output, f"access to bucket '{bucket}' denied ({_first_line(exc)})", option) from None
    except Exception as exc:  # endpoint, network, credentials: fsspec backends raise their own types
        raise _error(output, f"cannot reach bucket '{bucket}' ({type(exc).__name__}: {_first_line(exc)})",
                     option) from None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
