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
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import yaml

from core.errors import DataError, IntegrityError, PrepflowError
from expectations.report import describe_failure
from storage import artifact_read, npy, remote
from storage.artifact import Artifact
from storage.artifact_files import arrow_to_numpy, yaml_problem
from storage.fs import filesystem
from storage.media import open_media_columns
from storage.safe_paths import check_id
from storage.split_binary import prepflow_view
from storage.tmpdirs import TempFile, sweep
from tasks.config.constants import REPORT_SUFFIX, REPORT_TEMP_NAME, SPLIT_NAMES
from tasks.report.drift_section import drift_section
from tasks.runtime import fitted_metadata
from tasks.runtime.statistics import summary_rows

ROW_COLUMN = "__row__"  # every split's input row positions (tasks.publish.rows)

# The report's temporary name beside it: ``.<artifact_id>.report.html.<hex>`` (locked while written,
# storage.tmpdirs; publish and the next report into the same folder sweep the ones of killed runs).
TOP_TOKENS = 20
TOP_CLASSES = 20
SAMPLE_IMAGES = 16
SEQUENCE_TYPES = ("sequence", "text")
TOKEN_TYPES = ("category", "set", "bag", "sequence", "text")
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
SPLITS = SPLIT_NAMES
GATE_ORDER = ("raw", "encoded")
GATE_KWARGS_HIDDEN = {"column", "column_list", "result_format", "catch_exceptions", "meta"}


@dataclass
class ArtifactView:
    """What a report reads: the artifact's three small files, and the artifact for media samples."""

    location: str  # folder or URL of the artifact
    manifest: dict
    metadata: dict
    feature_spec: dict
    artifact: Any = None  # storage.artifact.Artifact for local artifacts (media samples); None for URLs

    @property
    def artifact_id(self) -> str:
        return self.manifest["artifact_id"]

    @property
    def statistics(self) -> dict:
        return self.manifest.get("statistics") or {}


def open_view(location: str | Path) -> ArtifactView:
    """The artifact at ``location`` (a folder, an output root with ``LATEST``, or a URL)."""

    if remote.is_remote(location):  # the small files only, each checked against the manifest as a download is
        url, manifest_bytes = remote.resolve(str(location))
        manifest = artifact_read.parse_manifest(manifest_bytes, remote.join(url, artifact_read.MANIFEST))
        fs = filesystem(url)
        name = artifact_read.METADATA_FILE
        metadata = artifact_read.json_of(artifact_read.fetch_small(fs, url, manifest, name), remote.join(url, name))
        if not isinstance(metadata, dict):
            raise IntegrityError(f"{remote.join(url, name)}: not a mapping of features")
        metadata.pop(ROW_COLUMN, None)  # the row id column's entry, no feature (as Artifact.metadata)
        name = artifact_read.FEATURE_SPEC
        try:  # a split_binary artifact's file is NVIDIA's spec; prepflow's own is kept inside it
            spec = prepflow_view(yaml.safe_load(artifact_read.fetch_small(fs, url, manifest, name)))
        except yaml.YAMLError as exc:
            raise IntegrityError(f"{remote.join(url, name)}: not valid YAML ({yaml_problem(exc)})") from None
        return ArtifactView(url, manifest, metadata, spec)

    art = Artifact.open(location)
    return ArtifactView(str(art.path), art.manifest, art.metadata, art.feature_spec, art)


def _plots():
    """tasks.report.plots, imported when a report draws (matplotlib, a heavy optional dependency: ~0.45 CPU s
    to import, which a flow process whose report is built on a Dask worker never pays)."""
    from tasks.report import plots as report_plots

    return report_plots


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
    sweep(path.parent, REPORT_TEMP_NAME)  # reports of killed runs
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


# ---- reading statistics ------------------------------------------------------------------------------

def _count(stats: dict, name: str) -> int | None:
    item = stats.get(name)
    return None if item is None or item.get("kind") != "counter" else int(item["count"])


def _hist(stats: dict, name: str) -> dict | None:
    item = stats.get(name)
    return item if item is not None and item.get("kind") == "histogram" else None


def _length_stat(stats: dict, feature: str) -> tuple[dict, int | None] | None:
    """``<stage>.length.<feature>`` (encode for sequences and text, media_cache for audio)."""
    for stage in ("encode", "media_cache"):
        hist = _hist(stats, f"{stage}.length.{feature}")
        if hist is not None:
            return hist, _count(stats, f"{stage}.truncated.{feature}")
    return None


def features_in_order(view: ArtifactView) -> list[tuple[str, bool]]:
    """(name, is_output) in the config's order."""
    config = view.manifest.get("config") or {}
    out = [(f["name"], False) for f in config.get("input_features", [])]
    out += [(f["name"], True) for f in config.get("output_features", [])]
    known = {n for n, _o in out}
    return [(n, o) for n, o in out if n in view.metadata] + [(n, False) for n in view.metadata if n not in known]


def slugs(names: list[str]) -> dict[str, str]:
    """HTML-id-safe, unique names per feature."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        base = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "feature"
        slug, i = base, 2
        while slug in used:
            slug, i = f"{base}-{i}", i + 1
        used.add(slug)
        out[name] = slug
    return out


def class_names(meta: dict) -> list[str]:
    if meta.get("type") == "binary":
        return [str(x) for x in meta.get("bool2str") or ["false", "true"]]
    return [str(x) for x in meta.get("idx2str", [])]


def class_counts(stats: dict, feature: str, meta: dict) -> dict[str, list[int]]:
    """Published rows per class id and split, and the training split before balancing when it ran."""
    n = len(class_names(meta))
    series: dict[str, list[int]] = {}
    before = {k.split(".", 2)[2]: v["count"] for k, v in stats.items() if k.startswith("balance.class_count_before.")}
    if before:
        if meta.get("type") == "binary":
            series["train before balancing"] = [int(before.get("False", 0)), int(before.get("True", 0))]
        else:
            ids = meta.get("str2idx", {})
            counts = [0] * n
            for label, c in before.items():
                counts[ids.get(label, 0)] += int(c)
            series["train before balancing"] = counts
    for split in SPLITS:
        hist = _hist(stats, f"encode.classes.{split}.{feature}")
        if hist is not None:
            label = "train (published)" if split == "train" and before else split
            series[label] = [int(c) for c in hist["counts"][1:1 + n]]
    return series


# ---- HTML ---------------------------------------------------------------------------------------------

def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def table(header: list[str], rows: list[list[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(c if isinstance(c, Raw) else f"<td>{esc(fmt(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def kv_table(rows: list[list[Any]]) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th>" + (v if isinstance(v, Raw) else f"<td>{esc(fmt(v))}</td>") + "</tr>"
                   for k, v in rows)
    return f'<table class="kv"><tbody>{body}</tbody></table>'


class Raw(str):
    """A table cell that is already HTML."""


def badge(ok: bool, yes: str = "passed", no: str = "failed") -> Raw:
    return Raw(f'<td><span class="badge {"ok" if ok else "bad"}">{esc(yes if ok else no)}</span></td>')


def figure(plot_id: str, feature: str | None, body: str, caption: str) -> str:
    data = f' data-feature="{esc(feature)}"' if feature is not None else ""
    return (f'<figure class="plot" id="{esc(plot_id)}"{data}>{body}'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


STYLE = """
body{font-family:"DejaVu Sans",system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;margin:0;color:#1f2328;
background:#f6f8fa;font-size:14px;line-height:1.45}
main{max-width:1040px;margin:0 auto;padding:16px 24px 48px}
header{background:#24292f;color:#fff;padding:16px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c9d1d9;font-size:13px}
section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 20px;margin:16px 0}
h2{font-size:17px;margin:4px 0 10px;border-bottom:1px solid #d8dee4;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}h3 .type{font-weight:normal;color:#57606a;font-size:13px;margin-left:6px}
article.feature{border-top:1px solid #eaeef2;padding-top:4px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}th,td{border:1px solid #d0d7de;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f6f8fa}tbody tr:nth-child(even){background:#fbfcfd}
table.kv th{width:170px;background:#f6f8fa;font-weight:600}table.kv{min-width:640px}td.num{text-align:right}
code,.mono{font-family:"DejaVu Sans Mono",ui-monospace,monospace;font-size:12px;word-break:break-all}
.badge{display:inline-block;padding:0 8px;border-radius:10px;font-size:12px;font-weight:bold}
.badge.ok{background:#dafbe1;color:#116329}.badge.bad{background:#ffebe9;color:#a40e26}
figure.plot{margin:8px 0 14px}figure.plot svg,figure.plot img{max-width:100%;height:auto;display:block}
figure.plot img.pixels{image-rendering:pixelated}
figcaption{color:#57606a;font-size:12px;margin-top:2px}
p.note{color:#57606a;font-style:italic;margin:4px 0}
nav ul{columns:3;margin:4px 0;padding-left:18px}nav a{color:#0969da;text-decoration:none}
details summary{cursor:pointer;color:#0969da}
"""


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


# ---- sections -------------------------------------------------------------------------------------------

def summary_section(view: ArtifactView) -> str:
    m, stats = view.manifest, view.statistics
    config = m.get("config") or {}
    pre = config.get("preprocessing") or {}
    rows = m.get("rows") or {}
    published = sum(int(v) for v in rows.values())
    n_in, n_out = len(config.get("input_features", [])), len(config.get("output_features", []))
    input_rows = _count(stats, "ingest.rows_out")
    dropped = sum(v["count"] for k, v in stats.items() if k.startswith("fill_missing.rows_dropped."))
    kv = [
        ["artifact id", Raw(f'<td class="mono">{esc(m.get("artifact_id"))}</td>')],
        ["dataset fingerprint", Raw(f'<td class="mono">{esc(m.get("dataset_fingerprint"))}</td>')],
        ["config hash", Raw(f'<td class="mono">{esc(m.get("config_hash"))}</td>')],
        ["input rows", "?" if input_rows is None else input_rows],
        ["published rows", f"{published} (rows dropped by missing values: {dropped}; not sampled: "
                           f"{_count(stats, 'split.rows_not_sampled') or 0})"],
        ["columns", f"{n_in} input and {n_out} output features -> {len(view.feature_spec.get('feature_spec', {}))} "
                    "published columns"],
        ["row id", f"{ROW_COLUMN}: each row's 0-based position in the input (oversampled copies repeat it)"
                   if ROW_COLUMN in view.feature_spec.get("feature_spec", {}) else "none (an artifact made before it)"],
        ["split", json.dumps(pre.get("split", {}), sort_keys=True)],
        ["fitted on", pre.get("fit_on", "train")],
        ["balance", json.dumps(pre.get("balance") or {}, sort_keys=True) if pre.get("balance") else "none"],
        ["formats", ", ".join((config.get("publish") or {}).get("formats", []))],
        ["encoding / schema", f"{m.get('encoding_version')} / {m.get('schema_version')}"],
        *([["fitted from", f"{m['fitted_from']['artifact_id']} ({m['fitted_from']['path']}): prepflow apply"]]
          if m.get("fitted_from") else []),
    ]
    ordered = [s for s in SPLITS if s in rows] + [s for s in rows if s not in SPLITS]
    split_rows = [[s, Raw(f'<td class="num">{int(rows[s])}</td>'),
                   Raw(f'<td class="num">{(int(rows[s]) / published if published else 0):.1%}</td>')]
                  for s in ordered]
    return (kv_table(kv) + "<h3>Splits</h3>" + table(["split", "rows", "share"], split_rows, "splits"))


def balance_section(view: ArtifactView, features: list[tuple[str, bool]], ids: dict[str, str]) -> str:
    parts = []
    balanced = bool((view.manifest.get("config") or {}).get("preprocessing", {}).get("balance"))
    for name, is_output in features:
        meta = view.metadata[name]
        if not is_output or meta.get("type") not in ("binary", "category"):
            continue  # a regression target has no classes: no panel
        series = class_counts(view.statistics, name, meta)
        if not series or not class_names(meta):
            parts.append(note(f"{name}: no class counts recorded (artifact made before prepflow recorded them)"))
            continue
        names = class_names(meta)
        seen = [i for i in range(len(names)) if any(s[i] for s in series.values())]  # no empty <UNK> class
        keep = sorted(sorted(seen, key=lambda i: -max(s[i] for s in series.values()))[:TOP_CLASSES])
        shown = {k: [v[i] for i in keep] for k, v in series.items()}
        title = f"{name}: rows per class" + ("" if balanced else " (no balancing configured)")
        plot_id = f"plot-{ids[name]}-balance"
        svg = _plots().class_bars(plot_id, [names[i] for i in keep], shown, title)
        more = f"; the {TOP_CLASSES} largest of {len(seen)} classes" if len(seen) > TOP_CLASSES else ""
        parts.append(figure(plot_id, name, svg, f"class balance of output feature {name} per split{more}"))
        header = ["class", *series]
        parts.append(table(header, [[names[i], *[s[i] for s in series.values()]] for i in keep]))
    return "".join(parts)  # empty for a regression target: build_html leaves the section out


def features_section(view: ArtifactView, features: list[tuple[str, bool]], ids: dict[str, str]) -> str:
    return "".join(feature_block(view, name, is_output, ids[name]) for name, is_output in features)


SKIP_META = fitted_metadata.VOCABULARY_KEYS | {"preprocessing", "type", "column", "codec", "str2bool"}


def fitted_values(meta: dict) -> list[list[Any]]:
    rows = []
    for key in sorted(meta):
        value = meta[key]
        if key in SKIP_META:
            continue
        if isinstance(value, list):
            if len(value) > 12:
                continue
            value = ", ".join(fmt(v) for v in value)
        elif isinstance(value, dict):
            continue
        rows.append([key, fmt(value)])
    return rows


def missing_text(view: ArtifactView, name: str, meta: dict) -> str:
    stats = view.statistics
    pre = meta.get("preprocessing") or {}
    strategy = pre.get("missing_value_strategy") or "?"
    fill = pre.get("computed_fill_value")
    missing_fit = _count(stats, f"fill_missing.missing_in_fit_rows.{name}")
    filled = _count(stats, f"fill_missing.filled.{name}")
    dropped = _count(stats, f"fill_missing.rows_dropped.{name}")
    fit_on = ((view.manifest.get("config") or {}).get("preprocessing") or {}).get("fit_on", "train")
    fit_rows = _count(stats, "split.rows.train") if fit_on == "train" else _count(stats, "ingest.rows_out")
    shown = json.dumps(fill, ensure_ascii=False) if isinstance(fill, str) else fmt(fill)
    how = f"strategy {strategy}" + (f" = {shown}" if fill is not None else "")
    if strategy == "drop_row":  # nothing is filled: rows with a missing value are left out
        if not dropped:
            return "none (strategy drop_row: a row missing this value would be dropped)"
        share = f" ({dropped / rows_in:.1%} of {rows_in} input rows)" if (rows_in := _count(stats, "ingest.rows_out")) else ""
        return f"{dropped} rows dropped{share}: strategy drop_row leaves out every row missing this value"
    if not missing_fit and not filled and not dropped:
        return f"none in the published rows ({how} would fill them)"
    parts = []
    if missing_fit is not None:
        share = f" ({missing_fit / fit_rows:.1%})" if fit_rows else ""
        parts.append(f"{missing_fit} missing in the {fit_rows if fit_rows is not None else '?'} rows the fill was "
                     f"fitted on (fit_on: {fit_on}){share}")
    if filled is not None:
        parts.append(f"{filled} values filled in all rows, {how}")
    else:
        parts.append(how)
    if dropped:
        parts.append(f"{dropped} rows dropped")
    return "; ".join(parts)


def oov_rows(view: ArtifactView, name: str) -> list[list[Any]]:
    stats = view.statistics
    rows = []
    for split in SPLITS:
        oov, total = _count(stats, f"encode.oov.{split}.{name}"), _count(stats, f"encode.rows_out.{split}")
        if oov is not None:
            rate = f"{oov / total:.2%}" if total else "-"
            rows.append([split, Raw(f'<td class="num">{oov}</td>'), Raw(f'<td class="num">{total}</td>'),
                         Raw(f'<td class="num">{rate}</td>')])
    return rows


def top_tokens(meta: dict) -> tuple[list[tuple[str, int]], int]:
    freq = meta.get("str2freq") or {}
    order = meta.get("idx2str") or sorted(freq, key=lambda t: -freq[t])
    # The counts in vocabulary order, one array: the sort of a vocabulary of 10^5 tokens runs in numpy
    raw = np.fromiter((freq.get(t, 0) for t in order), dtype=np.float64, count=len(order))
    kept = np.flatnonzero(raw > 0)
    top = kept[np.argsort(-np.trunc(raw[kept]), kind="stable")[:TOP_TOKENS]]  # stable: vocabulary order
    return [(order[i], int(freq[order[i]])) for i in top], max(len(kept) - TOP_TOKENS, 0)


def published_columns(feature_spec: dict) -> dict[str, dict]:
    """Each published column's dtype and shape as a reader gets it: a lazy or lazy_cached media column
    (an int64 slot as stored) as its decoded items, from its ``media`` chunk, with that chunk's ``mode``
    (what ``storage.media.item_specs`` gives the loader)."""
    columns = dict(feature_spec.get("feature_spec") or {})
    for chunks in (feature_spec.get("source_spec") or {}).values():
        for chunk in chunks:
            for column in chunk["features"] if chunk.get("type") == "media" else []:
                if column in columns:
                    columns[column] = {**columns[column], "dtype": chunk["dtype"], "shape": list(chunk["shape"]),
                                       "mode": chunk.get("mode")}
    return columns


def feature_block(view: ArtifactView, name: str, is_output: bool, slug: str) -> str:
    meta, stats = view.metadata[name], view.statistics
    kind = meta.get("type", "?")
    columns = published_columns(view.feature_spec)
    cols = [[c, spec.get("dtype", "").removeprefix("torch."), "x".join(map(str, spec.get("shape", []))) or "scalar",
             spec.get("cardinality", "") or (f"{kind} ({spec['mode']})" if "mode" in spec else "")]
            for c, spec in columns.items() if c == name or c == f"{name}_char"]
    out = [f'<article class="feature" id="feature-{slug}"><h3>{esc(name)}<span class="type">{esc(kind)}'
           f'{" (output)" if is_output else ""}</span></h3>']
    out.append(f"<p><b>Missing values:</b> {esc(missing_text(view, name, meta))}</p>")
    if cols:
        out.append(table(["published column", "dtype", "shape", "cardinality / media"], cols))
    fitted = fitted_values(meta)
    if fitted:
        out.append(f"<details><summary>fitted values</summary>{kv_table(fitted)}</details>")
    plots = 0
    if kind in ("number", "numerical"):
        before, after = _hist(stats, f"encode.values.{name}"), _hist(stats, f"encode.encoded.{name}")
        if before and after:
            plot_id = f"plot-{slug}-hist"
            svg = _plots().number_histograms(plot_id, before, after, meta)
            below, above = before["counts"][0], before["counts"][-1]
            outside = (f"; outside the fitted range [{fmt(meta.get('min'))}, {fmt(meta.get('max'))}]: {below} below, "
                       f"{above} above (not drawn)") if below or above else ""
            out.append(figure(plot_id, name, svg, f"{name}: every published row (all splits, oversampled rows "
                                                  f"included) before and after {meta.get('normalization')}; "
                                                  f"buckets span the fitted min to max{outside}"))
            plots += 1
    if kind in TOKEN_TYPES:
        tokens, more = top_tokens(meta)
        if tokens:
            plot_id = f"plot-{slug}-tokens"
            title = f"top {len(tokens)} of {len(tokens) + more} tokens (vocab_size {meta.get('vocab_size', '?')})"
            out.append(figure(plot_id, name, _plots().token_bars(plot_id, tokens, title),
                              f"{name}: most frequent values in the rows the vocabulary was fitted on"))
            plots += 1
        rows = oov_rows(view, name)
        if rows:
            what = "rows that are <UNK>" if kind == "category" else "rows with at least one <UNK> token"
            out.append(f"<p><b>Out of vocabulary</b> ({esc(what)}):</p>")
            out.append(table(["split", "OOV rows", "rows", "OOV rate"], rows, "oov"))
    if kind == "binary" and not is_output:
        series = {s: [int(c) for c in h["counts"][1:3]] for s in SPLITS
                  if (h := _hist(stats, f"encode.classes.{s}.{name}")) is not None}
        if series:
            plot_id = f"plot-{slug}-values"
            svg = _plots().class_bars(plot_id, class_names(meta), series, f"{name}: rows per value")
            out.append(figure(plot_id, name, svg, f"{name}: published values per split"))
            plots += 1
    if kind in SEQUENCE_TYPES or kind == "audio":
        found = _length_stat(stats, name)
        if found is not None:
            hist, truncated = found
            limit = meta.get("max_sequence_length") if kind in SEQUENCE_TYPES else meta.get("max_length")
            plot_id = f"plot-{slug}-lengths"
            unit = "tokens" if kind in SEQUENCE_TYPES else "frames"
            svg = _plots().length_histogram(plot_id, hist, limit, truncated, unit)
            out.append(figure(plot_id, name, svg, f"{name}: row lengths, max length marked"))
            plots += 1
    if kind in ("image", "audio"):
        media, why = media_figure(view, name, slug, meta)
        out.append(media if media else note(why))
        plots += bool(media)
    if kind == "binary" and is_output:
        out.append(note("class counts per split: see Class balance"))
    elif not plots and kind not in ("image", "audio"):
        out.append(note(f"no plot for {kind} features; their fitted values are listed above"))
    out.append("</article>")
    return "".join(out)


def sample_rows(view: ArtifactView, name: str, limit: int):
    """Up to ``limit`` rows of column ``name`` from the first non-empty split, read from the artifact's
    files (``.npy`` memory-mapped, else the first Parquet row group); a lazy media column's slots are
    decoded through ``storage.media`` (no torch import, unlike the loader)."""

    art = view.artifact
    for split in SPLITS:
        if int((view.manifest.get("rows") or {}).get(split, 0)) == 0:
            continue
        chunks = art.chunks(split)
        artifact_read.check_chunks(art.path, view.manifest["files"], chunks)  # listed, inside, of their size
        npy_files = {f: file for c in chunks if c["type"] == "npy"
                     for f, file in zip(c["features"], c["files"], strict=True)}
        if name in npy_files:
            column = np.asarray(npy.load(art.path / npy_files[name], mmap_mode="r")[:limit])
        else:
            first = next(c for c in chunks if c["type"] == "parquet")["files"][0]
            table_ = pq.ParquetFile(art.path / first).read_row_group(0, columns=[name])
            column = arrow_to_numpy(table_.column(name))[:limit]
        media = next((c for c in chunks if c["type"] == "media" and name in c["features"]), None)
        if media is not None:
            column = open_media_columns(art.path, {name: media}, {name: column})[name][:]
        return split, column
    return None, None


def media_figure(view: ArtifactView, name: str, slug: str, meta: dict) -> tuple[str, str]:
    """(figure HTML, "") or ("", why there is none)."""

    if view.artifact is None:
        return "", f"{name}: media samples are shown for local artifacts only ({view.location} is remote)"
    kind = meta.get("type")
    try:
        split, rows = sample_rows(view, name, SAMPLE_IMAGES if kind == "image" else 1)
    except (PrepflowError, OSError, ValueError, KeyError) as exc:
        return "", f"{name}: samples unavailable ({type(exc).__name__}: {exc})"
    if rows is None or len(rows) == 0:
        return "", f"{name}: no published rows to show"
    if kind == "image":
        plot_id = f"plot-{slug}-samples"
        uri = _plots().contact_sheet(list(rows), meta.get("num_channels"))
        body = f'<img class="pixels" src="{uri}" alt="{esc(name)}: first {len(rows)} {esc(split)} images">'
        return figure(plot_id, name, body, f"{name}: the first {len(rows)} {split} images as published "
                                           f"({meta.get('height')}x{meta.get('width')}, "
                                           f"{meta.get('num_channels')} channel(s))"), ""
    plot_id = f"plot-{slug}-spectrogram"
    uri = _plots().spectrogram(plot_id, rows[0], meta)
    body = f'<img src="{uri}" alt="{esc(name)}: spectrogram of the first {esc(split)} row">'
    return figure(plot_id, name, body, f"{name}: the first {split} row as published"), ""


def quality_section(view: ArtifactView) -> str:
    found = view.manifest.get("validation") or {}
    if not found:
        return note("no data-quality gate ran for this artifact")
    gates = {g: found[g] for g in sorted(found, key=lambda g: (GATE_ORDER.index(g) if g in GATE_ORDER else 9, g))}
    out = [table(["gate", "status", "expectations", "failed", "rows"],
                 [[g, badge(bool(d.get("success"))), d.get("evaluated"), d.get("failed"), d.get("rows")]
                  for g, d in gates.items()], "gates")]
    for gate_name, gate in gates.items():
        rows = []
        for suite in gate.get("suites", []):
            for r in suite.get("results", []):
                kwargs = r.get("kwargs") or {}
                column = kwargs.get("column") or ", ".join(kwargs.get("column_list") or []) or "(table)"
                res = r.get("result") or {}
                detail = "" if r.get("success") else describe_failure(r, gate_name).split(": ", 1)[-1]
                if not detail and "unexpected_count" in res:
                    detail = f"{res['unexpected_count']} unexpected of {res.get('element_count', '?')}"
                elif not detail and res.get("observed_value") is not None:  # schema checks observe nothing
                    detail = f"observed {res['observed_value']!r}"
                bounds = ", ".join(f"{k}={fmt(v)}" for k, v in sorted(kwargs.items()) if k not in GATE_KWARGS_HIDDEN)
                detail = "; ".join(p for p in (bounds, detail) if p)
                rows.append([suite.get("source", suite.get("name", "")), r.get("expectation_type"), column,
                             badge(bool(r.get("success")), "pass", "FAIL"), detail])
        out.append(f'<h3 id="gate-{esc(gate_name)}">gate {esc(gate_name)}</h3>')
        out.append(table(["suite", "expectation", "column", "result", "detail"], rows, "expectations"))
    return "".join(out)


def stages_section(run_summary: dict | None) -> str:
    stages = (run_summary or {}).get("stages") or []
    if not stages:
        return note("not recorded: this report was built without a flow run (prepflow report); the report "
                    "written by prepflow run shows each stage's seconds and cache hits")
    hits = sum(1 for s in stages if s["cached"])
    svg = _plots().stage_bars("plot-stages", stages)
    total = sum(float(s["seconds"]) for s in stages)
    rows = [[s["name"], Raw(f'<td class="num">{float(s["seconds"]):.3f}</td>'), "yes" if s["cached"] else "no"]
            for s in stages]
    return (figure("plot-stages", None, svg, f"seconds per stage ({total:.2f} s in all); {hits} of {len(stages)} "
                                             "stages served from the cache (grey)")
            + table(["stage", "seconds", "cached"], rows, "stages"))


def statistics_section(view: ArtifactView) -> str:
    rows = summary_rows(view.statistics)
    return (f"<details><summary>{len(rows)} statistics, merged over partitions and stages</summary>"
            + table(["statistic", "value"], rows, "statistics") + "</details>")


# ---- Prefect UI -------------------------------------------------------------------------------------------

def markdown_summary(location: str, run_summary: dict) -> str:
    """The Prefect markdown artifact: the run's summary and where the report is."""
    path = run_summary["artifact_path"]
    # the manifest only: a local artifact's metadata (its inline vocabularies) is not parsed for this
    manifest = open_view(path).manifest if remote.is_remote(path) else Artifact.open(path).manifest
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
