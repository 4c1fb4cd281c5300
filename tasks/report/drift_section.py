"""The report's drift panel: each feature's drift (``prepflow apply``) or skew (a run's validation and test
splits against its train split), from the run summary's ``drift`` entries (``tasks.drift.stage``): a table of
every feature (statistic, value, its sampling noise, threshold, status; features whose status is not ``ok``
first), then, for each feature that is not ``ok``, the fitted and the new distribution drawn side by side (the
fractions of the reference's decile bins, which stay readable for heavy-tailed numbers, or of its most frequent
ids)."""

from __future__ import annotations

from html import escape

from tasks.report import svg

RANK = {"fail": 0, "warn": 1, "ok": 2}
FITTED_COLOR = "#A0A0A0"
NEW_COLOR = {"fail": "#C44E52", "warn": "#DD8452", "ok": "#55A868"}


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)


def _noise(entry: dict) -> str:
    return f"{entry['noise']:.4g}" if isinstance(entry.get("noise"), (int, float)) else ""


def distribution_figure(name: str, entry: dict) -> str:
    """The fitted and new fractions of one feature as grouped bars, in a ``<figure>`` with its caption."""
    fitted, new = entry.get("fitted") or [], entry.get("new") or []
    labels = entry.get("bins") or [str(i) for i in range(len(fitted))]
    n = min(len(fitted), len(new), len(labels))
    plot_id = f"plot-drift-{_slug(name)}"
    number = entry["statistic"] == "psi"
    where = f"the {entry['split']} split" if entry.get("split") else "the new rows"
    body = svg.paired_columns(
        plot_id, labels[:n], [("fitted (train)", fitted[:n], FITTED_COLOR),
                              (where.removeprefix("the "), new[:n], NEW_COLOR.get(entry["status"], "#4C72B0"))],
        f"{name}: {entry['statistic']} {entry['value']:.4g} (noise {_noise(entry) or '?'})", "fraction of rows")
    caption = (f"{name}: the share of the train split's values in each of its decile bins (raw values) and of "
               f"{where}'s" if number else
               f"{name}: the share of each of the most frequent ids in the train split and in {where}")
    return (f'<figure class="plot drift-plot" id="{escape(plot_id)}" data-feature="{escape(name)}">{body}'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def drift_section(run_summary: dict | None, fitted_from: dict | None = None) -> str:
    """The panel's HTML; empty when the run measured nothing."""
    drift = (run_summary or {}).get("drift") or {}
    if not drift:
        return ""
    intro = (f"<p>Applied with the fitted state of artifact <span class=\"mono\">{escape(fitted_from['artifact_id'])}"
             "</span>: each feature against its fitted (train split) distribution.</p>" if fitted_from else
             "<p>Skew: each feature's validation and test splits against its train split (the worst shown).</p>")
    intro += ("<p>Noise: what the statistic reaches by sampling alone at the sizes compared; a status counts only "
              "what passes it (value - noise against the threshold).</p>")
    head = ("<tr><th>feature</th><th>split</th><th>statistic</th><th>value</th><th>noise</th><th>threshold</th>"
            "<th>status</th></tr>")
    rows, figures = [], []
    for name, entry in sorted(drift.items(), key=lambda kv: (RANK.get(kv[1]["status"], 3), kv[0])):
        others = ", ".join(f"{c['statistic']} {c['value']:.4g}" for c in entry.get("checks", [])
                           if c["statistic"] != entry["statistic"])
        rows.append(
            f"<tr class=\"drift-{escape(entry['status'])}\"><td>{escape(name)}</td>"
            f"<td>{escape(entry.get('split', '') or '')}</td>"
            f"<td>{escape(entry['statistic'])}{' (' + escape(others) + ')' if others else ''}</td>"
            f"<td class=\"num\">{entry['value']:.4g}</td><td class=\"num\">{_noise(entry)}</td>"
            f"<td class=\"num\">{entry['threshold']}</td>"
            f"<td><strong>{escape(entry['status'])}</strong></td></tr>")
        if entry["status"] != "ok" and entry.get("fitted") and entry.get("new"):
            figures.append(distribution_figure(name, entry))
    return f"{intro}<table>{head}{''.join(rows)}</table>{''.join(figures)}"
