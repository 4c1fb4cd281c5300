"""``prepflow report``: rebuild the HTML data report beside an artifact."""

from __future__ import annotations

import argparse
import json

from flows.cli.commands import command


def _setup_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact", help="artifact folder or URL (or an output root with LATEST)")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line of stdout")


@command("report", _setup_report)
def cmd_report(args: argparse.Namespace) -> int:
    """(Re)build ``<output>/<artifact_id>.report.html`` from the artifact alone (tasks/report/page.py); stage
    timings and cache hits come only from a run (``prepflow run`` writes them into its report)."""
    from tasks.report.page import write_report

    location = write_report(args.artifact)
    print(json.dumps({"report_path": location}) if args.json else f"report: {location}")
    return 0
