"""``prepflow inspect``: an artifact's splits, rows, features, columns, channels and statistics."""

from __future__ import annotations

import argparse
import json

from flows.cli.commands import command


def _setup_inspect(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact", help="artifact folder or URL (or an output root with LATEST)")
    p.add_argument("--verify", action="store_true", help="check every file's sha256 against the manifest "
                   "(a URL is downloaded again and checked)")
    p.add_argument("--json", action="store_true")


@command("inspect", _setup_inspect)
def cmd_inspect(args: argparse.Namespace) -> int:
    from storage.artifact import Artifact

    art = Artifact.open(args.artifact, verify=args.verify)
    info = art.describe()
    if args.json:
        print(json.dumps(info))
        return 0
    where = art.path if info["url"] == str(art.path) else f"{info['url']}, cached at {art.path}"
    print(f"artifact {info['artifact_id']}  ({where})")
    print(f"created {info['created_at']}, prepflow {info['prepflow_version']}, fingerprint "
          f"{info['dataset_fingerprint'][:16]}")
    if info["fitted_from"]:  # an artifact of `prepflow apply`: the artifact whose fitted state encoded it
        print(f"fitted from {info['fitted_from']['artifact_id']}  ({info['fitted_from']['path']})")
    if info["dataset_files"]:  # a folder's or glob's files, in name order: what the artifact covers
        print(f"files ({len(info['dataset_files'])}):")
        for f in info["dataset_files"]:
            print(f"  {f['name']:<32} {f['rows']:>10} rows  fingerprint {f['fingerprint'][:16]}")
    print("splits:")
    for split_name, n in info["rows"].items():
        print(f"  {split_name:<11} {n:>10} rows  ({', '.join(info['formats'].get(split_name, []))})")
    print("features:")
    for name, feature in info["features"].items():
        role = "output" if feature["output"] else "input"
        print(f"  {name:<24} {feature['type'] or '?':<14} {role:<6} column '{feature['column']}'")
    print("columns:")
    for name, spec in info["columns"].items():
        extra = f", cardinality {spec['cardinality']}" if "cardinality" in spec else ""
        extra += f", {spec['media']}" if "media" in spec else ""  # e.g. image (lazy): decoded items, not slots
        print(f"  {name:<24} {spec['dtype']:<14} shape {tuple(spec['shape'])}{extra}")
    print("channels:")
    for channel, names in info["channels"].items():
        print(f"  {channel:<12} {', '.join(names)}")
    if info["statistics"]:
        print("statistics:")
        for name, value in info["statistics"].items():
            print(f"  {name}: {value}")
    if args.verify:
        print(f"verified: {len(art.manifest['files'])} files match manifest.json")
    return 0
