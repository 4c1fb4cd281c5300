"""The run's summary as Markdown, for the Prefect UI's report artifact: the artifact's rows per split, its
gates, the run's stage timings, and where the HTML report is.

It reads the artifact's manifest only (a local artifact's metadata, with its inline vocabularies, and a
remote one's metadata and FeatureSpec are not fetched for this), so it needs none of ``storage.artifact``.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.errors import IntegrityError
from storage import remote
from storage.artifact_files import MANIFEST, locate
from storage.fs import strip_file_scheme


def read_manifest(path: str) -> dict:
    """The manifest of the artifact at ``path`` (a folder, an output root with ``LATEST``, or a URL)."""
    if remote.is_remote(path):
        return json.loads(remote.resolve(str(path))[1])
    manifest_path = locate(strip_file_scheme(str(path))) / MANIFEST
    try:
        return json.loads(manifest_path.read_text())
    except ValueError as exc:
        raise IntegrityError(f"{manifest_path}: unreadable manifest ({exc})") from None


def markdown_summary(location: str, run_summary: dict) -> str:
    """The Prefect markdown artifact: the run's summary and where the report is."""
    path = run_summary["artifact_path"]
    manifest = read_manifest(path)
    lines = [f"# prepflow report: artifact `{manifest['artifact_id']}`", "",
             f"**Report:** `{location}`" + ("" if "://" in location else f" ([open]({Path(location).resolve().as_uri()}))"),
             "",
             f"Artifact: `{run_summary['artifact_path']}`", "",
             "| split | rows |", "|---|---|"]
    lines += [f"| {s} | {n} |" for s, n in (manifest.get("rows") or {}).items()]
    gates = manifest.get("validation") or {}
    if gates:
        lines += ["", "| gate | status | expectations | failed |", "|---|---|---|---|"]
        lines += [f"| {g} | {'passed' if d.get('success') else '**failed**'} | {d.get('evaluated')} | "
                  f"{d.get('failed')} |" for g, d in gates.items()]
    stages = run_summary.get("stages") or []
    if stages:
        lines += ["", "| stage | seconds | cached |", "|---|---|---|"]
        lines += [f"| {s['name']} | {float(s['seconds']):.3f} | {'yes' if s['cached'] else 'no'} |" for s in stages]
    return "\n".join(lines) + "\n"
