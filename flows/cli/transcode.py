"""``prepflow transcode``: an NVIDIA FeatureSpec dataset made a prepflow artifact through ``run``."""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from flows.cli.commands import COMMANDS, build_parser, command
from flows.output_target import check_cache_dir


def _setup_transcode(p: argparse.ArgumentParser) -> None:
    p.add_argument("feature_spec", help="an NVIDIA DeepLearningExamples FeatureSpec YAML whose chunks are csv, "
                                        "split_binary (NVIDIA's raw binary files), npy or parquet (what prepflow "
                                        "publishes)")
    p.add_argument("--output", required=True, help="artifact root folder or URL")
    p.add_argument("--cache-dir", default=".prepflow-cache", help="stage cache folder (default .prepflow-cache)")
    p.add_argument("--normalization", default="none", choices=["none", "zscore", "minmax", "iq", "log1p"],
                   help="normalization of numerical features (default none: values kept as they are)")
    p.add_argument("--formats", default="npy,parquet", help="publish formats (default npy,parquet)")
    p.add_argument("--npartitions", type=int, default=None, help="Dask partitions (default: one per 256k rows)")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line of stdout")
    p.add_argument("--stats", action="store_true", help="as for `run`")
    p.add_argument("--verbose", action="store_true", help="as for `run`")


@command("transcode", _setup_transcode)
def cmd_transcode(args: argparse.Namespace) -> int:
    """FeatureSpec dataset -> one Parquet dataset + derived config (storage/featurespec.py) -> ``run``."""

    from storage.featurespec import FeatureSpecInput
    from storage.hashing import stable_hash

    check_cache_dir(args.cache_dir)  # its work folder goes there, before `run` checks it
    spec = FeatureSpecInput.load(args.feature_spec)
    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    key = stable_hash({"spec": str(spec.path.resolve()), "normalization": args.normalization, "formats": formats})
    workdir = Path(args.cache_dir) / "transcode" / key
    dataset, config = spec.prepare(workdir, normalization=args.normalization, formats=formats)
    config_path = workdir / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    run_args = ["run", str(config_path), "--dataset", str(dataset), "--output", args.output,
                "--cache-dir", args.cache_dir]
    run_args += ["--npartitions", str(args.npartitions)] if args.npartitions else []
    run_args += ["--json"] if args.json else []
    run_args += [flag for flag, on in (("--stats", args.stats), ("--verbose", args.verbose)) if on]
    _setup, cmd_run = COMMANDS["run"]  # flows.cli.run's, registered when the package is imported
    return cmd_run(build_parser().parse_args(run_args))
