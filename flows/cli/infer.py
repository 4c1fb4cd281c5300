"""``prepflow infer``: print a config with an inferred type per column and the reason."""

from __future__ import annotations

import argparse

from core.errors import ConfigError
from flows.cli.commands import command


def _setup_infer(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", nargs="+", help="dataset: a file, folder or glob (path or fsspec URL), or several files")
    p.add_argument("--target", default=None, help="the column to predict (becomes the output feature)")
    p.add_argument("--npartitions", type=int, default=None, help="Dask partitions for the profiling pass")
    p.add_argument("--config", default=None, help="a config whose media_root (a feature's, or defaults.image/"
                                                  "audio) says where relative media paths resolve, as in `run`")
    p.add_argument("--cache-dir", default=".prepflow-cache",
                   help="stage cache folder, for media-cache: references (default .prepflow-cache)")


@command("infer", _setup_infer)
def cmd_infer(args: argparse.Namespace) -> int:
    """Print a config (YAML) with a type per column and a comment saying why (flows/infer.py)."""
    from flows.infer import infer_dataset, render_config
    from tasks.config.loader import load_config

    if args.npartitions is not None and args.npartitions < 1:
        raise ConfigError(f"--npartitions must be at least 1, got {args.npartitions}")
    config = load_config(args.config) if args.config else None
    inferred, rows = infer_dataset(args.dataset, args.target, args.npartitions, config, args.cache_dir)
    print(render_config(inferred, args.dataset, rows, config), end="")
    return 0
