"""The context of an apply: the fitted artifact opened and checked, its config with the apply's own
``validation:`` section, the run context naming it (``fitted_from``), and the drift references an older
artifact lacks. ``flows.apply`` runs the graph in this process and ``flows.preprocess.apply_flow`` as a
Prefect flow; both start from here, before any data is read.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from core.errors import ConfigError, DataError
from core.yaml_load import load_yaml
from storage import remote
from storage.artifact import Artifact
from storage.artifact_files import size_problems
from storage.cache import StageCache
from storage.safe_paths import check_id
from tasks.config.constants import SPLIT_NAMES
from tasks.config.loader import parse_config
from tasks.dataset.files import as_dataset
from tasks.drift import stage as drift
from tasks.fitted.stage import read_metadata
from tasks.runtime.context import RunContext

MANIFEST = "manifest.json"


def open_fitted(artifact: str | os.PathLike) -> Artifact:
    """The fitted artifact, refused with one line when it is not a complete artifact."""
    text = str(artifact)
    if "://" not in text:
        path = Path(text)
        if not path.exists():
            raise DataError(f"{text}: no such artifact folder")
        if not (path / MANIFEST).is_file() and not (path / "LATEST").is_file():
            raise DataError(f"{path / MANIFEST}: missing; {text} is not a complete prepflow artifact")
    elif remote.is_remote(text):  # the artifact's own URL (an output root through its LATEST), which fitted_from
        text = remote.resolve(text)[0]  # names (the root's LATEST moves on) and --output is compared with
    art = _open(text)
    check_id(art.manifest.get("artifact_id"), str(art.path / MANIFEST))
    if "config" not in art.manifest:
        raise DataError(f"{art.path / MANIFEST}: no 'config'; not a complete prepflow artifact")
    problems = size_problems(art.path, art.manifest)  # one stat per listed file (a download was checked whole)
    if problems and remote.is_remote(text):  # the artifact cache's copy damaged: downloaded again, checked whole
        art = _open(text, verify=True)
        problems = size_problems(art.path, art.manifest)
    if problems:
        raise DataError(f"{art.path}: not a complete prepflow artifact: {len(problems)} file(s) listed in {MANIFEST} "
                        f"missing or not of their listed size: " + "; ".join(problems[:5]))
    read_metadata(art.path)  # a missing or unreadable training_set_metadata.json: one line naming it
    return art


def _open(text: str, verify: bool = False) -> Artifact:
    try:
        return Artifact.open(text, verify=verify)
    except (OSError, KeyError) as exc:
        raise DataError(f"{text}: not a complete prepflow artifact ({exc})") from None


def apply_config(art: Artifact, config: str | os.PathLike | dict | None):
    """The fitted artifact's config, with the ``validation:`` section of ``config`` (a file or mapping, which
    may carry nothing else) in place of its own."""
    data = dict(art.manifest["config"])
    if config is not None:
        source = str(config) if not isinstance(config, dict) else "config"
        if isinstance(config, dict):
            given = config
        else:
            try:
                given = load_yaml(Path(config).read_text(encoding="utf-8")) or {}
            except FileNotFoundError:
                raise ConfigError(f"{config}: config file not found") from None
            except yaml.YAMLError as exc:
                raise ConfigError(f"{config}: not valid YAML ({str(exc).splitlines()[0]})") from None
        if not isinstance(given, dict):
            raise ConfigError(f"{source}: expected a mapping with a 'validation' section")
        extra = sorted(k for k in given if k != "validation")
        if extra:
            raise ConfigError(f"{source}: apply takes a 'validation:' section only (the features, preprocessing "
                              f"and publish settings are the fitted artifact's); remove {extra}")
        data["validation"] = given.get("validation") or {}
    parsed = parse_config(data, source if config is not None else f"{art.path / MANIFEST}: config")
    if parsed.stages:
        raise ConfigError(f"{art.path}: the artifact was made with custom stages ({[s.uses for s in parsed.stages]});"
                          " prepflow apply does not replay them yet: use Preprocessor.load(artifact).transform")
    return parsed


def apply_context(artifact, dataset, output: str, split: str = "test", config=None,
                  cache_dir: str = ".prepflow-cache", npartitions: int | None = None) -> RunContext:
    """The run context of an apply: the artifact's typed config, the new dataset, ``fitted_from``."""
    if split not in SPLIT_NAMES:
        raise ConfigError(f"--split must be one of {list(SPLIT_NAMES)}, got '{split}'")
    if npartitions is not None and npartitions < 1:
        raise ConfigError(f"npartitions must be at least 1, got {npartitions}")
    art = open_fitted(artifact)
    if remote.is_remote(art.url):  # on a store: the output root is the artifact URL's parent
        fitted_root = str(output).rstrip("/") == art.url.rstrip("/").rsplit("/", 1)[0]
    else:
        fitted_root = "://" not in str(output) and Path(output).resolve() == Path(art.path).resolve().parent
    if fitted_root:
        raise ConfigError(f"--output {output} is the fitted artifact's output root: its LATEST would then name the "
                          "applied artifact; give apply an output of its own")
    parsed = apply_config(art, config)
    cache = cache_dir if "://" in str(cache_dir) else os.path.abspath(cache_dir)
    path = art.url if "://" in art.url else str(Path(art.path).resolve())
    return RunContext(parsed, as_dataset(dataset), StageCache(cache), npartitions, str(output),
                      fitted_from={"artifact_id": art.artifact_id, "path": path, "local": str(art.path.resolve()),
                                   "split": split})


def with_references(ctx: RunContext) -> RunContext:
    """An artifact that predates drift references (``drift.reference.*`` in its manifest statistics): the
    references made here from its train split, once, for the drift node."""
    art = Artifact.open(ctx.fitted_from["local"])
    absent = drift.missing_references(ctx, art.manifest)
    if absent and art.num_rows("train"):
        columns = art.read_split("train", absent)
        metadata = {name: meta for name, meta in art.metadata.items() if name in absent}
        ctx.fitted_from["reference"] = drift.references(ctx, metadata, [{n: columns[n] for n in absent if n in columns}],
                                                        art.num_rows("train")).to_json()
    return ctx
