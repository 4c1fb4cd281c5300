"""The report's sections other than the features: dataset summary, class balance, data-quality gates,
stage timings and cache hits, and every statistic."""

from __future__ import annotations

import json

from expectations.report import describe_failure
from tasks.report.markup import Raw, badge, esc, figure, fmt, kv_table, note, plots_module, table
from tasks.report.view import (
    ROW_COLUMN,
    SPLITS,
    ArtifactView,
    class_counts,
    class_names,
    counter,
)
from tasks.runtime.statistics import summary_rows

TOP_CLASSES = 20
GATE_ORDER = ("raw", "encoded")
GATE_KWARGS_HIDDEN = {"column", "column_list", "result_format", "catch_exceptions", "meta"}


def summary_section(view: ArtifactView) -> str:
    m, stats = view.manifest, view.statistics
    config = m.get("config") or {}
    pre = config.get("preprocessing") or {}
    rows = m.get("rows") or {}
    published = sum(int(v) for v in rows.values())
    n_in, n_out = len(config.get("input_features", [])), len(config.get("output_features", []))
    input_rows = counter(stats, "ingest.rows_out")
    dropped = sum(v["count"] for k, v in stats.items() if k.startswith("fill_missing.rows_dropped."))
    kv = [
        ["artifact id", Raw(f'<td class="mono">{esc(m.get("artifact_id"))}</td>')],
        ["dataset fingerprint", Raw(f'<td class="mono">{esc(m.get("dataset_fingerprint"))}</td>')],
        ["config hash", Raw(f'<td class="mono">{esc(m.get("config_hash"))}</td>')],
        ["input rows", "?" if input_rows is None else input_rows],
        ["published rows", f"{published} (rows dropped by missing values: {dropped}; not sampled: "
                           f"{counter(stats, 'split.rows_not_sampled') or 0})"],
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
        *([["extend of", f"{m['parent']['artifact_id']} ({m['parent']['path']}): prepflow run --extend"]]
          if m.get("mode") == "extend" and m.get("parent") else []),
        *([["refit advised", "; ".join(m["refit_advised"])]] if m.get("refit_advised") else []),
        *([["dropped by the window", ", ".join(f["name"] for f in m["dropped_files"])]]
          if m.get("dropped_files") else []),
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
        svg = plots_module().class_bars(plot_id, [names[i] for i in keep], shown, title)
        more = f"; the {TOP_CLASSES} largest of {len(seen)} classes" if len(seen) > TOP_CLASSES else ""
        parts.append(figure(plot_id, name, svg, f"class balance of output feature {name} per split{more}"))
        header = ["class", *series]
        parts.append(table(header, [[names[i], *[s[i] for s in series.values()]] for i in keep]))
    return "".join(parts)  # empty for a regression target: build_html leaves the section out



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
    svg = plots_module().stage_bars("plot-stages", stages)
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
