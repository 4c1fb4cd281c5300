"""``prepflow.run``: the pipeline from Python (a notebook, a script), with the CLI's options and result,
so a Python caller gets what the command line gives.

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

It runs the stage graph in this process (with the Dask scheduler of ``dask_address``, or a local one),
without the Prefect API: ``prepflow run`` with ``PREPFLOW_PREFECT=off``. A notebook needs no Prefect
server, and a DataFrame is no flow parameter the Prefect API could record. A rerun with the same inputs
reads every stage from the cache and finds the artifact already published.
"""

from __future__ import annotations

import os

from core.errors import ConfigError


def run(config, dataset, output: str | os.PathLike = "artifacts", *, cache_dir: str | os.PathLike = ".prepflow-cache",
        npartitions: int | None = None, dask_address: str | None = None, extend: bool = False,
        parent: str | os.PathLike | None = None, window: int | None = None) -> dict:
    """Preprocess ``dataset`` with ``config`` and publish the artifact under ``output``; ``prepflow run
    --json``'s summary (see the module docstring). ``extend``: a child of ``parent`` (default: ``output``'s
    LATEST) that keeps its fit and rows and adds the new files (``flows.extend``); ``window``: the newest N files."""
    if extend:
        from flows.extend import extend_in_process  # heavy (the stages): when an extend is asked for

        return extend_in_process(config, dataset, str(output), None if parent is None else str(parent), window,
                                 str(cache_dir), npartitions, dask_address)
    if parent is not None or window is not None:
        raise ConfigError("parent and window apply to an extend (extend=True)")
    from flows import console, without_prefect  # heavy (the stages): when a run is asked for
    from flows.output_target import check_cache_dir, check_output
    from tasks.config.loader import load_config, parse_config

    if npartitions is not None and npartitions < 1:
        raise ConfigError(f"npartitions must be at least 1, got {npartitions}")
    parsed = parse_config(config, "config") if isinstance(config, dict) else load_config(config)
    output, cache_dir = str(output), str(cache_dir)
    check_output(output)
    check_cache_dir(cache_dir)
    with console.collected_warnings() as collected:
        summary = without_prefect.run_config(parsed, dataset, output, cache_dir, npartitions, dask_address)
    summary = {**summary, "dropped": console.dropped_rows(console.read_manifest(summary["artifact_path"]))}
    return {**summary, "warnings": list(collected.lines)} if collected.lines else summary


def apply(artifact, dataset, output: str | os.PathLike = "artifacts", *, split: str = "test", config=None,
          cache_dir: str | os.PathLike = ".prepflow-cache", npartitions: int | None = None,
          dask_address: str | None = None) -> dict:
    """Encode ``dataset`` with the fitted ``artifact`` (nothing refitted) into a one-split artifact under
    ``output``; ``prepflow apply --json``'s summary (``artifact_path``, ``artifact_id``, ``rows``, ``drift``,
    ``warnings`` when there were any). ``config``: a ``validation:`` section only (a file or a mapping)."""
    from flows import console
    from flows.apply import apply_context, apply_in_process  # heavy (the stages): when an apply is asked for
    from flows.output_target import check_cache_dir, check_output

    # a bad artifact, split or npartitions is refused before the output and cache folders are made (as the CLI)
    checked = apply_context(artifact, dataset, str(output), split, config, str(cache_dir), npartitions)
    artifact = checked.fitted_from["path"]  # the artifact checked, even if an output root's LATEST moves on
    check_output(str(output))
    check_cache_dir(str(cache_dir))
    with console.collected_warnings() as collected:  # the drift warnings, as --json's and prepflow.run's
        summary = apply_in_process(artifact, dataset, str(output), split, config, str(cache_dir), npartitions,
                                   dask_address)
    return {**summary, "warnings": list(collected.lines)} if collected.lines else summary
