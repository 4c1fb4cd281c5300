"""The report's Features section: one block per feature (its published columns, missing values and
their fill, fitted values, out-of-vocabulary rates and the plot for its type; image and audio features
show a few of the artifact's own rows)."""

from __future__ import annotations

from typing import Any

from core.errors import PrepflowError
from tasks.report.markup import Raw, esc, figure, fmt, kv_table, note, plots_module, table
from tasks.report.view import (
    SPLITS,
    ArtifactView,
    class_names,
    counter,
    fitted_values,
    histogram,
    length_stat,
    missing_text,
    published_columns,
    sample_rows,
    top_tokens,
)

SAMPLE_IMAGES = 16
SEQUENCE_TYPES = ("sequence", "text")
TOKEN_TYPES = ("category", "set", "bag", "sequence", "text")


def features_section(view: ArtifactView, features: list[tuple[str, bool]], ids: dict[str, str]) -> str:
    return "".join(feature_block(view, name, is_output, ids[name]) for name, is_output in features)



def oov_rows(view: ArtifactView, name: str) -> list[list[Any]]:
    stats = view.statistics
    rows = []
    for split in SPLITS:
        oov, total = counter(stats, f"encode.oov.{split}.{name}"), counter(stats, f"encode.rows_out.{split}")
        if oov is not None:
            rate = f"{oov / total:.2%}" if total else "-"
            rows.append([split, Raw(f'<td class="num">{oov}</td>'), Raw(f'<td class="num">{total}</td>'),
                         Raw(f'<td class="num">{rate}</td>')])
    return rows



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
        before, after = histogram(stats, f"encode.values.{name}"), histogram(stats, f"encode.encoded.{name}")
        if before and after:
            plot_id = f"plot-{slug}-hist"
            svg = plots_module().number_histograms(plot_id, before, after, meta)
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
            out.append(figure(plot_id, name, plots_module().token_bars(plot_id, tokens, title),
                              f"{name}: most frequent values in the rows the vocabulary was fitted on"))
            plots += 1
        rows = oov_rows(view, name)
        if rows:
            what = "rows that are <UNK>" if kind == "category" else "rows with at least one <UNK> token"
            out.append(f"<p><b>Out of vocabulary</b> ({esc(what)}):</p>")
            out.append(table(["split", "OOV rows", "rows", "OOV rate"], rows, "oov"))
    if kind == "binary" and not is_output:
        series = {s: [int(c) for c in h["counts"][1:3]] for s in SPLITS
                  if (h := histogram(stats, f"encode.classes.{s}.{name}")) is not None}
        if series:
            plot_id = f"plot-{slug}-values"
            svg = plots_module().class_bars(plot_id, class_names(meta), series, f"{name}: rows per value")
            out.append(figure(plot_id, name, svg, f"{name}: published values per split"))
            plots += 1
    if kind in SEQUENCE_TYPES or kind == "audio":
        found = length_stat(stats, name)
        if found is not None:
            hist, truncated = found
            limit = meta.get("max_sequence_length") if kind in SEQUENCE_TYPES else meta.get("max_length")
            plot_id = f"plot-{slug}-lengths"
            unit = "tokens" if kind in SEQUENCE_TYPES else "frames"
            svg = plots_module().length_histogram(plot_id, hist, limit, truncated, unit)
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
        uri = plots_module().contact_sheet(list(rows), meta.get("num_channels"))
        body = f'<img class="pixels" src="{uri}" alt="{esc(name)}: first {len(rows)} {esc(split)} images">'
        return figure(plot_id, name, body, f"{name}: the first {len(rows)} {split} images as published "
                                           f"({meta.get('height')}x{meta.get('width')}, "
                                           f"{meta.get('num_channels')} channel(s))"), ""
    plot_id = f"plot-{slug}-spectrogram"
    uri = plots_module().spectrogram(plot_id, rows[0], meta)
    body = f'<img src="{uri}" alt="{esc(name)}: spectrogram of the first {esc(split)} row">'
    return figure(plot_id, name, body, f"{name}: the first {split} row as published"), ""


