"""report: one self-contained HTML page per artifact, ``<output>/<artifact_id>.report.html``.

Built from what the artifact holds: ``manifest.json`` (row counts, config, statistics, gate
results), ``training_set_metadata.json`` and ``feature_spec.yaml``. No second pass over the data:
the plots read statistics the encode stage recorded for them (``tasks/encode/feature_stats.py``); only
image and audio features read a few of the artifact's own rows (a contact sheet, one spectrogram).

Sections: dataset summary, class balance, one section per feature (type, published columns,
missing values and their fill, fitted values, the plot for its type), data-quality gates, stage
timings and cache hits (when a flow run hands its summary over; ``prepflow report`` regenerates
the page without them) and every statistic.

The page fetches nothing: plots are inline SVG or PNG ``data:`` URIs, the CSS is inline, there is
no script, and a Content-Security-Policy (``default-src 'none'``) makes the browser refuse any
fetch that slipped in. Each plot is a ``<figure class="plot" id="plot-<feature>-<kind>">``.

Where it lives: beside the artifact, not inside it. The artifact is immutable and its manifest
lists every file's sha256; a report inside would have to be written before the manifest (so no
stage timings, which differ from run to run), would tie the artifact's bytes to matplotlib's SVG
output, and could never be regenerated. Beside it, the artifact stays byte-identical for any
partitioning and the report can be rewritten at will.

This module assembles and writes the page; the values it shows are read by ``tasks.report.view``, the
sections are built in ``tasks.report.sections`` and ``tasks.report.features`` (``drift_section`` for
drift) from the HTML primitives of ``tasks.report.markup``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

from core.errors import DataError, IntegrityError
from core.yaml_load import load_yaml
from storage import artifact_read, remote
from storage.artifact import Artifact
from storage.artifact_files import json_object, yaml_problem
from storage.fs import filesystem
from storage.safe_paths import check_id
from storage.split_binary import prepflow_view
from storage.tmpdirs import TempFile, sweep
from tasks.config.constants import REPORT_SUFFIX, REPORT_TEMP_NAME
from tasks.report.drift_section import drift_section
from tasks.report.features import features_section
from tasks.report.markup import CSP, STYLE, esc
from tasks.report.run_summary import markdown_summary  # noqa: F401  (the Prefect UI's summary, kept importable here)
from tasks.report.sections import (
    balance_section,
    quality_section,
    stages_section,
    statistics_section,
    summary_section,
)
from tasks.report.view import ROW_COLUMN, ArtifactView, features_in_order, slugs


def open_view(location: str | Path) -> ArtifactView:
    """The artifact at ``location`` (a folder, an output root with ``LATEST``, or a URL)."""

    if remote.is_remote(location):  # the small files only, each checked against the manifest as a download is
        url, manifest_bytes = remote.resolve(str(location))
        manifest = artifact_read.parse_manifest(manifest_bytes, remote.join(url, artifact_read.MANIFEST))
        fs = filesystem(url)
        name = artifact_read.METADATA_FILE
        metadata = json_object(artifact_read.fetch_small(fs, url, manifest, name), remote.join(url, name),
                               "every feature's fitted metadata")
        metadata.pop(ROW_COLUMN, None)  # the row id column's entry, no feature (as Artifact.metadata)
        name = artifact_read.FEATURE_SPEC
        try:  # a split_binary artifact's file is NVIDIA's spec; prepflow's own is kept inside it
            spec = prepflow_view(load_yaml(artifact_read.fetch_small(fs, url, manifest, name)))
        except yaml.YAMLError as exc:
            raise IntegrityError(f"{remote.join(url, name)}: not valid YAML ({yaml_problem(exc)})") from None
        return ArtifactView(url, manifest, metadata, spec)

    art = Artifact.open(location)
    return ArtifactView(str(art.path), art.manifest, art.metadata, art.feature_spec, art)


def report_location(view: ArtifactView) -> str:
    """``<output>/<artifact_id>.report.html``: beside the artifact folder."""
    name = check_id(view.artifact_id, f"{view.location}: manifest.json") + REPORT_SUFFIX  # a plain file name
    if view.artifact is None:
        return view.location.rstrip("/").rsplit("/", 1)[0] + "/" + name
    return str(Path(view.location).parent / name)


def write_report(location: str | Path, run_summary: dict | None = None) -> str:
    """Build the report of the artifact at ``location`` and write it (atomically) beside the artifact.

    ``run_summary`` (``PipelineResult.summary()``) adds the stage timings and cache hits of that run.
    Returns where the report was written.
    """
    view = open_view(location)
    target = report_location(view)
    page = build_html(view, run_summary).encode("utf-8")

    if remote.is_remote(target):
        try:
            filesystem(target).pipe_file(target, page)
        except Exception as exc:
            raise DataError(f"{target}: cannot write the report ({type(exc).__name__}: {exc})") from exc
        return target

    path = Path(target)
    # the temporary ``.<artifact_id>.report.html.<hex>`` is locked while written (storage.tmpdirs); publish and
    # the next report into the same folder sweep the ones of killed runs
    sweep(path.parent, REPORT_TEMP_NAME)
    try:
        with TempFile(path.parent, f".{path.name}.") as tmp:  # locked while it exists
            tmp.write_bytes(page)
            os.replace(tmp, path)
    except OSError as exc:
        raise DataError(f"{path}: cannot write the report ({exc})") from exc
    return str(path)


def write_report_or_warn(summary: dict) -> str | None:
    """``write_report`` of a run's or an apply's summary, where the artifact is the product: a report that
    fails is a warning on stderr (and no ``report_path``), never a failed run."""
    try:
        return write_report(summary["artifact_path"], summary)
    except Exception as exc:
        print(f"prepflow: warning: report not written: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def build_html(view: ArtifactView, run_summary: dict | None = None) -> str:
    features = features_in_order(view)
    ids = slugs([n for n, _o in features])
    sections = [
        ("section-summary", "Dataset summary", summary_section(view)),
        ("section-balance", "Class balance", balance_section(view, features, ids)),
        ("section-features", "Features", features_section(view, features, ids)),
        ("section-quality", "Data-quality gates", quality_section(view)),
        ("section-drift", "Drift and skew", drift_section(run_summary, view.manifest.get("fitted_from"))),
        ("section-stages", "Stage timings and cache hits", stages_section(run_summary)),
        ("section-statistics", "All statistics", statistics_section(view)),
    ]
    sections = [s for s in sections if s[0] not in ("section-balance", "section-drift") or s[2]]  # empty: no panel
    nav = "".join(f'<li><a href="#{sid}">{esc(title)}</a></li>' for sid, title, _b in sections)
    nav += "".join(f'<li><a href="#feature-{ids[n]}">{esc(n)}</a></li>' for n, _o in features)
    body = "".join(f'<section id="{sid}"><h2>{esc(title)}</h2>{content}</section>' for sid, title, content in sections)
    m = view.manifest
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>prepflow report {esc(view.artifact_id)}</title><style>{STYLE}</style></head><body>"
        f"<header><h1>prepflow report: artifact <span class=\"mono\">{esc(view.artifact_id)}</span></h1>"
        f"<p>created {esc(m.get('created_at', '?'))} by prepflow {esc(m.get('prepflow_version', '?'))}, "
        f"{esc(view.location)}</p></header>"
        f'<main><nav id="contents"><ul>{nav}</ul></nav>{body}</main></body></html>\n'
    )
