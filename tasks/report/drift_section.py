"""The report's drift panel: each feature's drift (``prepflow apply``) or skew (a run's validation and test
splits against its train split), with the fitted and the new distribution side by side (the fractions of
the reference's decile bins, or of its most frequent ids), from the run summary's ``drift`` entries
(``tasks.drift.stage``). Features whose status is not ``ok`` come first."""

from __future__ import annotations

from html import escape

RANK = {"fail": 0, "warn": 1, "ok": 2}


def _fractions(values: list[float]) -> str:
    return " ".join(f"{v:.3f}" for v in values)


def drift_section(run_summary: dict | None, fitted_from: dict | None = None) -> str:
    """The panel's HTML; empty when the run measured nothing."""
    drift = (run_summary or {}).get("drift") or {}
    if not drift:
        return ""
    intro = (f"<p>Applied with the fitted state of artifact <span class=\"mono\">{escape(fitted_from['artifact_id'])}"
             "</span>: each feature against its fitted (train split) distribution.</p>" if fitted_from else
             "<p>Skew: each feature's validation and test splits against its train split (the worst shown).</p>")
    head = ("<tr><th>feature</th><th>split</th><th>statistic</th><th>value</th><th>threshold</th><th>status</th>"
            "<th>fitted (bins or top ids)</th><th>new</th></tr>")
    rows = []
    for name, entry in sorted(drift.items(), key=lambda kv: (RANK.get(kv[1]["status"], 3), kv[0])):
        others = ", ".join(f"{c['statistic']} {c['value']:.4g}" for c in entry.get("checks", [])
                           if c["statistic"] != entry["statistic"])
        rows.append(
            f"<tr class=\"drift-{escape(entry['status'])}\"><td>{escape(name)}</td>"
            f"<td>{escape(entry.get('split', '') or '')}</td>"
            f"<td>{escape(entry['statistic'])}{' (' + escape(others) + ')' if others else ''}</td>"
            f"<td class=\"num\">{entry['value']:.4g}</td><td class=\"num\">{entry['threshold']}</td>"
            f"<td><strong>{escape(entry['status'])}</strong></td>"
            f"<td class=\"mono\">{escape(_fractions(entry.get('fitted', [])))}</td>"
            f"<td class=\"mono\">{escape(_fractions(entry.get('new', [])))}</td></tr>")
    return f"{intro}<table>{head}{''.join(rows)}</table>"
