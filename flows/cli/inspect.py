"""``prepflow inspect``: an artifact's splits, rows, features, columns, channels and statistics."""

from __future__ import annotations

import argparse
import json

from flows.cli.commands import command


def _setup_inspect(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact", help="artifact folder or URL (or an output root with LATEST)")
    p.add_argument("--verify", action="store_true", help="check every file's sha256 against the manifest "
                   "(a URL is downloaded again and checked)")
    p.add_argument("--id-map", metavar="PARENT", help="what moved in each vocabulary since PARENT (an artifact "
                   "folder or URL): ids kept in place, moved, values that left (now <UNK>), values new here")
    p.add_argument("--json", action="store_true")


@command("inspect", _setup_inspect)
def cmd_inspect(args: argparse.Namespace) -> int:
    from flows.inspect_text import inspect_lines
    from storage.artifact import Artifact

    art = Artifact.open(args.artifact, verify=args.verify)
    if args.id_map:
        return _print_id_map(art, Artifact.open(args.id_map), args.json)
    info = art.describe()
    if args.json:
        print(json.dumps(info))
        return 0
    for line in inspect_lines(info, art.path, len(art.manifest["files"]) if args.verify else None):
        print(line)
    return 0


def _print_id_map(art, parent, as_json: bool) -> int:
    from storage import id_map

    moves = id_map.moves_between(art, parent)
    if as_json:
        print(json.dumps({"artifact_id": art.artifact_id, "parent": parent.artifact_id, "features": moves}))
        return 0
    print(f"id map of {art.artifact_id} from parent {parent.artifact_id}")
    for name, m in moves.items():
        print(f"  {name:<24} {m['parent_size']:>8} -> {m['new_size']:<8} kept {m['kept']}, moved {m['moved']}, "
              f"left -> <UNK> {m['left']}, new {m['new']}")
    return 0
