"""What a run shows in the Prefect UI: merged statistics (a table) and gate results (Markdown).

Artifact keys (Prefect requires lowercase letters, digits and dashes) stay the same from run to
run, so the UI keeps each key's history: ``prepflow-statistics``, ``prepflow-validation-raw``,
``prepflow-validation-encoded``, ``prepflow-validation`` (the ``validate`` flow) and ``prepflow-report``
(where the HTML data report is, ``tasks/report.py``).
"""

from __future__ import annotations

STATISTICS_KEY = "prepflow-statistics"
VALIDATION_KEY = "prepflow-validation"
REPORT_KEY = "prepflow-report"


def statistics_table(stats: dict) -> list[dict]:
    from tasks.statistics import summary_rows

    return [{"statistic": name, "value": value} for name, value in summary_rows(stats)]


def statistics_artifact(stages: list) -> None:
    """The statistics of every stage, merged, as a table artifact."""
    from prefect.artifacts import create_table_artifact

    from tasks.pipeline import merged_statistics

    create_table_artifact(key=STATISTICS_KEY, table=statistics_table(merged_statistics(stages)),
                          description="prepflow statistics, merged over partitions and stages")


def validation_artifact(gates: list[dict], key: str | None = None) -> None:
    """Gate results (``tasks.validate.gate_json``) as a Markdown artifact."""
    from prefect.artifacts import create_markdown_artifact

    from expectations.report import markdown

    if key is None:
        key = f"{VALIDATION_KEY}-{gates[0]['gate']}" if len(gates) == 1 else VALIDATION_KEY
    failed = [g["gate"] for g in gates if not g["success"]]
    create_markdown_artifact(key=key, markdown=markdown(gates),
                             description=f"failed gate(s): {', '.join(failed)}" if failed else "all gates passed")


def report_artifact(location: str, summary: dict) -> None:
    """Where the run's HTML data report is, with the run's summary, as a Markdown artifact."""
    from prefect.artifacts import create_markdown_artifact

    from tasks.report import markdown_summary

    create_markdown_artifact(key=REPORT_KEY, markdown=markdown_summary(location, summary),
                             description=f"prepflow data report: {location}")


def print_statistics(console, artifact_path: str) -> None:
    """The run's merged statistics (from the artifact's manifest.json) as a table on ``console``."""
    import json
    from pathlib import Path

    from rich.table import Table

    manifest = Path(str(artifact_path)) / "manifest.json"
    if "://" in str(artifact_path) or not manifest.is_file():
        return
    stats = json.loads(manifest.read_text()).get("statistics") or {}
    if not stats:
        return
    table = Table(title="statistics")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for row in statistics_table(stats):
        table.add_row(row["statistic"], row["value"])
    console.print(table)


def print_validation(report: dict) -> None:
    """``prepflow validate``'s readable report: one line per gate, one per failed expectation."""
    from expectations.report import format_gate

    print(f"prepflow validate {report['dataset']}")
    for gate in report["gates"]:
        status = "passed" if gate["success"] else "FAILED" if gate["on_failure"] == "fail" else "failed (warn)"
        print(f"  {status}: gate '{gate['gate']}' of {gate['config']}: {gate['evaluated']} expectations, "
              f"{gate['failed']} failed, {gate['rows']} rows")
        if not gate["success"]:
            for line in format_gate(gate).splitlines()[1:]:
                print(f"  {line}")
    print("data gate passed" if report["success"] else "data gate FAILED")
