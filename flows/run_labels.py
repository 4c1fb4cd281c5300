"""How a ``prepflow run`` is named and tagged in the Prefect UI, so that a person can find it.

Name: ``<dataset file> · <config file> · <config hash, 6 hex>``, e.g. ``flights.csv · c.yaml · 1a2b3c``.
Tags: ``prepflow``, ``dataset:<dataset file>``, ``config:<config hash, 12 hex>``, and once the run has
published, ``artifact:<artifact id>`` (``flows/bookkeeping.py:RunRecord.finish``). The config hash is
the hash of the parsed, normalized config (the same content the artifact id hashes), so two edits of
one YAML file get two hashes and a reformatted file keeps its hash.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import urlparse

from storage.hashing import stable_hash
from tasks.publish.stage import normalized_config


def file_name(path_or_url) -> str:
    """The last path component of a path or URL (``s3://b/data/flights.csv`` -> ``flights.csv``); a list of
    files: the first one's and how many more (``day_0.parquet+8``)."""
    if isinstance(path_or_url, (list, tuple)):
        return f"{file_name(sorted(path_or_url)[0])}+{len(path_or_url) - 1}" if path_or_url else "?"
    path = urlparse(path_or_url).path if "://" in path_or_url else path_or_url
    return PurePosixPath(path.replace("\\", "/")).name or path_or_url


def config_hash(config) -> str:
    return stable_hash(normalized_config(config), length=12)


def run_name(dataset, config_path: str, config) -> str:
    return f"{file_name(dataset)} · {file_name(config_path)} · {config_hash(config)[:6]}"


def run_tags(dataset, config) -> list[str]:
    return ["prepflow", f"dataset:{file_name(dataset)}", f"config:{config_hash(config)}"]


def parameters_run_name() -> str:
    """The name of a run a deployment starts (``prepflow serve``; the ``preprocess`` flow's
    ``flow_run_name``), from the run's parameters as Prefect gives them: the same as a CLI run's
    (``prepflow run`` names its runs itself). A deployment's parameters are JSON, so its config is a path or a
    mapping, parsed here for the name and again by the flow; a parsed ``Config`` is used as it is. A config
    that cannot be read still names the run by its file; the flow then fails on it with its one-line error."""
    from prefect.runtime import flow_run  # Prefect: imported by the flow already

    from tasks.config.loader import load_config, parse_config
    from tasks.config.schema import Config

    params = flow_run.parameters or {}
    dataset, config = params.get("dataset") or "?", params.get("config")
    source = config if isinstance(config, str) else "config"
    if isinstance(config, Config):  # parsed by the caller: named from it, never parsed again
        return run_name(dataset, source, config)
    try:
        parsed = parse_config(config, "config") if isinstance(config, dict) else load_config(config)
    except Exception:  # named anyway: the run reports the config's error itself
        return f"{file_name(dataset)} · {file_name(source)}"
    return run_name(dataset, source, parsed)
