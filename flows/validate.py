"""The ``validate`` Prefect flow: ``prepflow validate`` as a flow, for deployments and CI data gates.

The same work as ``prepflow validate`` (``flows.validation.validate_dataset``): the raw gate of each
config and the given suites on the raw table. The gate results are a Markdown artifact
(``prepflow-validation``); a failing gate fails the flow run with ``ValidationFailed``.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from core.errors import ValidationFailed
from expectations.report import format_gate
from flows.reporting import validation_artifact
from flows.validation import validate_dataset


@flow(name="validate", log_prints=True)
def validate(dataset: str | list[str], configs: list[str] | None = None, suites: list[str] | None = None,
             cache_dir: str = ".prepflow-cache", npartitions: int | None = None) -> dict:
    """Validate ``dataset`` against the gates of ``configs`` and the expectation ``suites``."""
    report = validate_dataset(dataset, configs or [], suites or [], cache_dir=cache_dir, npartitions=npartitions)
    validation_artifact(report["gates"], key="prepflow-validation")
    logger = get_run_logger()
    for gate in report["gates"]:
        logger.info("%s gate '%s' (%s): %s", "passed" if gate["success"] else "FAILED", gate["gate"],
                    gate["config"], f"{gate['evaluated']} expectations, {gate['failed']} failed")
    if not report["success"]:
        failed = [g for g in report["gates"] if not g["success"] and g["on_failure"] == "fail"]
        raise ValidationFailed("\n".join(format_gate(g) for g in failed), gate=failed[0]["gate"], report=report)
    return report
