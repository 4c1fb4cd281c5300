"""What a run shows in the Prefect UI: merged statistics (a table) and gate results (Markdown).

Artifact keys (Prefect requires lowercase letters, digits and dashes) stay the same from run to
run, so the UI keeps each key's history: ``prepflow-statistics``, ``prepflow-validation-raw``,
``prepflow-validation-encoded``, ``prepflow-validation`` (the ``validate`` flow) and ``prepflow-report``
(where the HTML data report is, ``tasks/report/page.py``, with an http link to it: ``report_link``).

Recording an artifact is bookkeeping: when the Prefect API fails (after the client's retries), it is
logged and the run's UI record is marked incomplete (``flows/bookkeeping.py``), never raised.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.table import Table

from core.errors import MESSAGE_LIMIT, shown
from expectations.report import format_gate, markdown
from flows import local_server
from flows.bookkeeping import best_effort
from tasks.dataset.files import label as dataset_label
from tasks.report.run_summary import markdown_summary
from tasks.runtime.statistics import merged, summary_rows

PRESIGNED_SECONDS = 7 * 24 * 3600  # the longest an S3 (SigV4) presigned URL may live
STATISTICS_KEY = "prepflow-statistics"
VALIDATION_KEY = "prepflow-validation"
REPORT_KEY = "prepflow-report"


def statistics_table(stats: dict) -> list[dict]:
    return [{"statistic": name, "value": value} for name, value in summary_rows(stats)]


def statistics_artifact(stages: list) -> None:
    """The statistics of every stage, merged, as a table artifact."""
    # Prefect (slow to import) only where an artifact is made: the CLI imports this module for its tables
    from prefect.artifacts import create_table_artifact


    best_effort("statistics artifact", create_table_artifact, key=STATISTICS_KEY,
                table=statistics_table(merged(stages)),
                description="prepflow statistics, merged over partitions and stages")


def validation_artifact(gates: list[dict], key: str | None = None) -> None:
    """Gate results (``tasks.validate.stage.gate_json``) as a Markdown artifact."""
    from prefect.artifacts import create_markdown_artifact  # heavy: Prefect, as above


    if key is None:
        key = f"{VALIDATION_KEY}-{gates[0]['gate']}" if len(gates) == 1 else VALIDATION_KEY
    failed = [g["gate"] for g in gates if not g["success"]]
    best_effort(f"{key} artifact", create_markdown_artifact, key=key, markdown=markdown(gates),
                description=f"failed gate(s): {', '.join(failed)}" if failed else "all gates passed")


DRIFT_KEY = "prepflow-drift"


def drift_table(drift: dict) -> list[dict]:
    """Drift entries (``{split: {feature: entry}}`` of a run, ``{feature: entry}`` of an apply) as table rows."""
    rows = []
    for key, value in sorted(drift.items()):
        entries = value.items() if "status" not in value else [(None, value)]
        for feature, entry in sorted(entries, key=lambda kv: str(kv[0])):
            rows.append({**({"split": key, "feature": feature} if feature is not None else {"feature": key}),
                         "statistic": entry["statistic"], "value": entry["value"], "noise": entry.get("noise"),
                         "threshold": entry["threshold"],
                         "status": entry["status"], **({"fitted": entry["fitted"], "new": entry["new"]}
                                                       if "fitted" in entry else {})})
    return rows


def drift_artifact(drift: dict) -> None:
    """The drift (or skew) table of a run or an apply as a table artifact (nothing when there is none)."""
    from prefect.artifacts import create_table_artifact  # heavy: Prefect, as above

    rows = drift_table(drift)
    if not rows:
        return
    worst = [r["feature"] for r in rows if r["status"] != "ok"]
    best_effort("drift artifact", create_table_artifact, key=DRIFT_KEY, table=rows,
                description=f"drift: {', '.join(worst)}" if worst else "drift: every feature ok")


def report_artifact(location: str, summary: dict) -> str:
    """The run's HTML data report as a Markdown artifact: an http link to it (``report_link``) and the run's
    summary. Call it for every run, cached or not. Returns the link."""
    from prefect.artifacts import create_markdown_artifact  # heavy: Prefect, as above


    link = report_link(location)
    lines = markdown_summary(location, summary).splitlines()
    opener = f"**[Open the data report]({link})**" + ("" if link.startswith("http") else
                                                       " (a local file: copy the link into the address bar)")
    markdown = "\n".join([lines[0], "", opener, *lines[1:]]) + "\n"
    best_effort("report artifact", create_markdown_artifact, key=REPORT_KEY, markdown=markdown,
                description=f"prepflow data report: {link}")
    return link


def report_link(location: str) -> str:
    """Where a browser opens the report: served over http by this installation's local server (the report
    is copied into the folder it serves), a presigned https/http URL for an S3 report, else ``file://``."""
    if location.startswith(("http://", "https://")):
        return location
    if location.startswith("s3://"):
        return _presigned(location) or location
    if "://" in location:
        return location
    return local_server.publish_report(location) or Path(location).resolve().as_uri()


def _presigned(location: str) -> str | None:
    """A GET URL for an S3 object that needs no credentials for 7 days, shown as HTML in the browser."""
    try:
        import botocore.session  # optional heavy dependency: only for S3 outputs (s3fs brings it)

        bucket, _, key = location.removeprefix("s3://").partition("/")
        endpoint = os.environ.get("S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")
        client = botocore.session.get_session().create_client("s3", endpoint_url=endpoint)
        return client.generate_presigned_url(
            "get_object", ExpiresIn=PRESIGNED_SECONDS,
            Params={"Bucket": bucket, "Key": key, "ResponseContentType": "text/html; charset=utf-8"})
    except Exception:  # no credentials or botocore: the s3:// location itself
        return None


def print_statistics(console, artifact_path: str) -> None:
    """The run's merged statistics (from the artifact's manifest.json) as a table on ``console``."""


    manifest = Path(str(artifact_path)) / "manifest.json"
    if "://" in str(artifact_path) or not manifest.is_file():
        return
    from storage.artifact_read import read_manifest  # the checked reader (a plain file, a plain artifact id)

    stats = read_manifest(manifest.parent).get("statistics") or {}
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

    print(f"prepflow validate {dataset_label(report['dataset'])}")
    for gate in report["gates"]:
        status = "passed" if gate["success"] else "FAILED" if gate["on_failure"] == "fail" else "failed (warn)"
        print(f"  {status}: gate '{gate['gate']}' of {gate['config']}: {gate['evaluated']} expectations, "
              f"{gate['failed']} failed, {gate['rows']} rows")
        if not gate["success"]:
            for line in format_gate(gate).splitlines()[1:]:  # values from the data: quoted and escaped
                print(f"  {shown(line, MESSAGE_LIMIT)}")
    print("data gate passed" if report["success"] else "data gate FAILED")
