"""``prepflow.run``: the pipeline from Python (a notebook, a script), with the CLI's options and result
(issue 43, item 11).

    import prepflow
    summary = prepflow.run("config.yaml", "data.csv", "artifacts")          # a path or URL
    summary = prepflow.run(config_dict, pandas_or_dask_df, "artifacts")     # a DataFrame
    art = prepflow.Artifact.open(summary["artifact_path"])

``config``: a YAML file or a mapping (the same schema). ``dataset``: a path, folder, glob or fsspec URL,
a pandas DataFrame, or a Dask DataFrame (its partitions are read on the Dask workers, as files are:
``tasks.ingest.dask_frame``). The options are ``prepflow run``'s. The result is ``prepflow run --json``'s
object: ``artifact_path``, ``artifact_id``, ``rows`` per split, ``stages``, ``report_path``, ``dropped``
(every row left out, and why), ``warnings`` when there were any. Failures raise the CLI's errors
(``core.errors``): ``ConfigError`` (the CLI's exit 2), ``DataError`` / ``ValidationFailed`` (exit 1).

A path or URL runs as ``prepflow run`` does: the Prefect flow on the local (or ``PREFECT_API_URL``) server,
reusing an artifact already published for the same inputs (``prefect=False``: the in-process runner of
the same stage graph, no Prefect API). A DataFrame always runs in process: a flow's parameters are
recorded by the Prefect API, which a DataFrame is not for.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from core.errors import ConfigError


def run(config, dataset, output: str | os.PathLike = "artifacts", *, cache_dir: str | os.PathLike = ".prepflow-cache",
        npartitions: int | None = None, dask_address: str | None = None, prefect: bool | None = None) -> dict:
    """Preprocess ``dataset`` with ``config`` and publish the artifact under ``output``; ``prepflow run
    --json``'s summary (see the module docstring)."""
    from flows import cli, console, without_prefect  # heavy (stages, Prefect): when a run is asked for
    from flows.output_target import check_cache_dir, check_output
    from tasks.config.loader import load_config, parse_config
    from tasks.ingest.dataframe import is_frame

    if npartitions is not None and npartitions < 1:
        raise ConfigError(f"npartitions must be at least 1, got {npartitions}")
    parsed = parse_config(config, "config") if isinstance(config, dict) else load_config(config)
    output, cache_dir = str(output), str(cache_dir)
    check_output(output)
    check_cache_dir(cache_dir)
    in_process = is_frame(dataset) or prefect is False or os.environ.get("PREPFLOW_PREFECT") == "off"
    with console.collected_warnings() as collected:
        if in_process:
            summary = without_prefect.run_config(parsed, dataset, output, cache_dir, npartitions, dask_address)
        else:
            if isinstance(config, dict):  # the flow takes a file (its parameters are recorded in the UI)
                config = _config_file(config, cache_dir)
            args = argparse.Namespace(config=str(config), dataset=str(dataset), output=output, cache_dir=cache_dir,
                                      npartitions=npartitions, dask_address=dask_address, always_run_flow=False,
                                      verbose=False, json=True)
            summary = cli._run(args, parsed, time.perf_counter())
    summary = {**summary, "dropped": console.dropped_rows(cli._manifest(summary["artifact_path"]))}
    return {**summary, "warnings": list(collected.lines)} if collected.lines else summary


def _config_file(config: dict, cache_dir: str) -> Path:
    """A mapping written as YAML under the cache folder, named by its content."""
    import yaml

    from storage.hashing import stable_hash

    folder = Path(cache_dir) / "configs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stable_hash(config, length=16)}.yaml"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(yaml.safe_dump(config, sort_keys=False))
        os.replace(tmp, path)
    return path
