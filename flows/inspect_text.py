"""What plain ``prepflow inspect`` prints: an artifact's ``describe()`` as lines of text.

Everything in those lines but prepflow's own words comes from the artifact's manifest, metadata and
feature spec, which whoever wrote the artifact chose. Every such value goes through
``core.errors.shown``: a name is cut to a bounded length and its control characters (ESC, CR, LF, bidi
overrides, ...) are written as escapes, so a crafted name can neither drive the terminal nor print a line
of its own (a fake ``verified:`` line). Statistics values are escaped but not cut (a histogram is long).
"""

from __future__ import annotations

from collections.abc import Iterator

from core.errors import shown


def _all(value: object) -> str:
    """``value`` escaped, not cut (a statistic's list of counts)."""
    text = str(value)
    return shown(text, len(text))


def inspect_lines(info: dict, path: object, files_verified: int | None) -> Iterator[str]:
    """The lines of plain ``inspect`` for ``info`` (``Artifact.describe()``) of the artifact at ``path``;
    ``files_verified``: how many files ``--verify`` checked (None: not asked)."""
    where = shown(path) if info["url"] == str(path) else f"{shown(info['url'])}, cached at {shown(path)}"
    yield f"artifact {shown(info['artifact_id'])}  ({where})"
    yield (f"created {shown(info['created_at'])}, prepflow {shown(info['prepflow_version'])}, fingerprint "
           f"{shown(str(info['dataset_fingerprint'])[:16])}")
    fitted = info["fitted_from"]
    if fitted:  # an artifact of `prepflow apply`: the artifact whose fitted state encoded it
        yield f"fitted from {shown(fitted['artifact_id'])}  ({shown(fitted['path'])})"
    if info.get("lineage"):  # an extend: its parents back to the last refit, nearest first
        yield "lineage (extend of):"
        for parent in info["lineage"]:
            state = "missing" if parent.get("missing") else shown(parent.get("mode"))
            yield f"  {shown(parent['artifact_id'])}  {state}  ({shown(parent['path'])})"
    if info.get("refit_advised"):
        yield "refit advised: " + "; ".join(shown(r) for r in info["refit_advised"])
    if info.get("dropped_files"):
        yield "dropped by the window: " + ", ".join(shown(f["name"]) for f in info["dropped_files"])
    if info["dataset_files"]:  # a folder's or glob's files, in name order: what the artifact covers
        yield f"files ({len(info['dataset_files'])}):"
        for f in info["dataset_files"]:
            yield (f"  {shown(f['name']):<32} {shown(f['rows']):>10} rows  fingerprint "
                   f"{shown(str(f['fingerprint'])[:16])}")
    yield "splits:"
    for split_name, n in info["rows"].items():
        formats = ", ".join(shown(f) for f in info["formats"].get(split_name, []))
        yield f"  {shown(split_name):<11} {shown(n):>10} rows  ({formats})"
    yield "features:"
    for name, feature in info["features"].items():
        role = "output" if feature["output"] else "input"
        yield (f"  {shown(name):<24} {shown(feature['type'] or '?'):<14} {role:<6} "
               f"column '{shown(feature['column'])}'")
    yield "columns:"
    for name, spec in info["columns"].items():
        extra = f", cardinality {shown(spec['cardinality'])}" if "cardinality" in spec else ""
        extra += f", {shown(spec['media'])}" if "media" in spec else ""  # e.g. image (lazy): decoded items
        yield f"  {shown(name):<24} {shown(spec['dtype']):<14} shape {shown(tuple(spec['shape']))}{extra}"
    yield "channels:"
    for channel, names in info["channels"].items():
        yield f"  {shown(channel):<12} {', '.join(shown(n) for n in names)}"
    if info["statistics"]:
        yield "statistics:"
        for name, value in info["statistics"].items():
            yield f"  {shown(name)}: {_all(value)}"
    if files_verified is not None:
        yield f"verified: {files_verified} files match manifest.json"
