"""Readable reports of gate results (the JSON ``tasks.validate.stage`` stores): what failed, where, examples.

One line per failed expectation: the expectation, its column(s), how many values were unexpected
out of how many non-missing values (GX's ``unexpected_percent`` is a share of those), and up to
``EXAMPLES`` example values with their rows (0-based input rows, ``__row__``, for the raw gate, as
everywhere in prepflow's messages; 0-based positions in the encoded output for the encoded gate).
Aggregates show the observed value instead. Column names and values come from the data: each is quoted cut
and escaped (``core.errors.quoted``).
"""

from __future__ import annotations

from core.errors import quoted, shown

EXAMPLES = 5


def _columns(kwargs: dict) -> str:
    for key in ("column", "column_A"):
        if key in kwargs:
            cols = [kwargs[key]] + ([kwargs["column_B"]] if "column_B" in kwargs else [])
            return ", ".join(quoted(c) for c in cols)
    if "column_list" in kwargs:
        return ", ".join(quoted(c) for c in kwargs["column_list"])
    return "(table)"


def _bounds(kwargs: dict) -> str:
    rest = {k: v for k, v in kwargs.items()
            if k not in ("column", "column_A", "column_B", "column_list", "result_format", "catch_exceptions")}
    return ", ".join(f"{k}={v!r}" for k, v in rest.items())


def describe_failure(result: dict, gate: str) -> str:
    kind, kwargs = result["expectation_type"], result["kwargs"]
    head = f"{kind} on {_columns(kwargs)}"
    args = _bounds(kwargs)
    if args:
        head += f" ({args})"
    if "exception" in result:
        return f"{head}: error: {shown(result['exception'])}"
    res = result.get("result", {})
    if "unexpected_count" in res:
        total = res.get("element_count")
        missing = res.get("missing_count") or 0
        pct = res.get("unexpected_percent")
        if missing and total is not None:
            line = f"{head}: {res['unexpected_count']} unexpected of {total - missing} non-missing values"
            line += f" ({pct:.3g}%)" if pct is not None else ""
            line += f" in {total} rows"
        else:
            line = f"{head}: {res['unexpected_count']} unexpected of {total}"
            line += f" ({pct:.3g}%)" if pct is not None else ""
        values = res.get("partial_unexpected_list") or []
        index = res.get("partial_unexpected_index_list") or []
        if values:
            where = "row" if gate == "raw" else "encoded row"
            examples = [f"{quoted(v)} ({where} {i})" if isinstance(i, int) else quoted(v)
                        for v, i in zip(values[:EXAMPLES], (index + [None] * EXAMPLES)[:EXAMPLES], strict=False)]
            line += "; e.g. " + ", ".join(examples)
        return line
    if "observed_value" in res:
        return f"{head}: observed {quoted(res['observed_value'])}"
    details = {k: v for k, v in res.items() if k != "details"}
    return f"{head}: {details}" if details else head


def format_gate(gate: dict) -> str:
    """The failures of one gate (``tasks.validate.stage.gate_json``), one per line."""
    lines = [f"gate '{gate['gate']}': {gate['failed']} of {gate['evaluated']} expectations failed "
             f"({gate['rows']} rows)"]
    for suite in gate["suites"]:
        for result in suite["results"]:
            if not result["success"]:
                lines.append(f"  [{suite['source']}] {describe_failure(result, gate['gate'])}")
    return "\n".join(lines)


def markdown(gates: list[dict]) -> str:
    """Gate results as Markdown (the Prefect UI artifact)."""
    out = ["# prepflow validation", ""]
    for gate in gates:
        status = "passed" if gate["success"] else "**failed**"
        out.append(f"## gate `{gate['gate']}`: {status} ({gate['evaluated'] - gate['failed']}/{gate['evaluated']} "
                   f"expectations, {gate['rows']} rows)")
        out.append("")
        out.append("| suite | expectation | column | success | detail |")
        out.append("|---|---|---|---|---|")
        for suite in gate["suites"]:
            for r in suite["results"]:
                detail = "" if r["success"] else describe_failure(r, gate["gate"]).split(": ", 1)[-1]
                out.append(f"| {suite['source']} | {r['expectation_type']} | {_columns(r['kwargs'])} | "
                           f"{'yes' if r['success'] else 'NO'} | {detail.replace('|', '/')} |")
        out.append("")
    return "\n".join(out)
