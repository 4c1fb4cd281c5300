"""The data report (tasks/report/page.py) and the statistics encode records for it (tasks/encode/feature_stats.py).

The statistics are checked against the published artifact itself (histograms recomputed from the
published columns with the same bucket starts, OOV rows and class counts counted in them, sequence
lengths counted from the raw text); the page is parsed for every section and plot, for the absence
of anything it could fetch, and for identical bytes when rebuilt. Media features (image, audio) run
through the real pipeline in eager and lazy mode. The browser test is tests/integration/test_report_browser.py.
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flows.cli import main as cli_main
from storage.artifact import Artifact
from tasks.report import features as report_features
from tasks.report import page as report
from tasks.report import view as report_view
from tasks.runtime.statistics import LENGTH_BUCKETS, Histogram
from tests.helpers import run, write_csv
from tests.html_page import Page, external_references

WORDS = [f"w{i}" for i in range(30)]

CONFIG = {
    "input_features": [
        {"name": "age", "type": "number", "preprocessing": {"normalization": "zscore"}},
        {"name": "count", "type": "number", "preprocessing": {"normalization": "none"}},
        {"name": "fare", "type": "number", "preprocessing": {"normalization": "log1p"}},
        {"name": "amount", "type": "number", "preprocessing": {"normalization": "bins", "num_bins": 5}},
        {"name": "color", "type": "category", "preprocessing": {"most_common": 5}},
        {"name": "tags", "type": "set", "preprocessing": {"most_common": 8}},
        {"name": "seq", "column": "text", "type": "sequence", "preprocessing": {"max_sequence_length": 6}},
        {"name": "text", "type": "text", "preprocessing": {"max_sequence_length": 8, "most_common": 20}},
        {"name": "flag", "type": "binary"},
        {"name": "when", "type": "date"},
        {"name": "odd name ü", "column": "color", "type": "category"},
    ],
    "output_features": [{"name": "label", "type": "category"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 5}},
    "publish": {"formats": ["parquet", "npy"]},
}


def make_frame(n: int = 400, seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "age": rng.normal(40, 12, n).round(1),
        "count": rng.integers(0, 20, n).astype(float),
        "fare": rng.exponential(30, n),
        "amount": rng.gamma(2, 10, n),
        "color": rng.choice([*"abcdefgh", "$5", "<i>"], n, p=[.3, .2, .15, .1, .08, .05, .04, .03, .03, .02]),
        "tags": [" ".join(sorted(set(rng.choice(WORDS[:12], rng.integers(1, 4))))) for _ in range(n)],
        "text": [" ".join(rng.choice(WORDS, k)) for k in rng.integers(0, 12, n)],
        "flag": rng.choice(["yes", "no"], n, p=[0.3, 0.7]),
        "when": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D"),
        "label": rng.choice(["cat", "dog", "bird"], n, p=[0.6, 0.3, 0.1]),
    })
    df.loc[rng.random(n) < 0.1, "age"] = None
    df.loc[rng.random(n) < 0.05, "color"] = None
    return df


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return make_frame()


@pytest.fixture(scope="module")
def plain(frame, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plain")
    return run(CONFIG, write_csv(frame, tmp / "data.csv"), tmp, npartitions=3)


@pytest.fixture(scope="module")
def balanced(frame, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("balanced")
    config = {**CONFIG, "preprocessing": {**CONFIG["preprocessing"], "balance": {"oversample_minority": 0.5}}}
    return run(config, write_csv(frame, tmp / "data.csv"), tmp, npartitions=2)


def published(result) -> tuple[Artifact, dict, dict]:
    art = Artifact.open(result.artifact["artifact_path"])
    return art, art.manifest["statistics"], art.metadata


def recount(hist: dict, values: np.ndarray) -> list[int]:
    h = Histogram("x", hist["starts"])
    h.add_array(values)
    return h.counts


# ---- the statistics encode records ----------------------------------------------------------------

def test_number_histograms_match_the_published_columns(plain):
    art, stats, meta = published(plain)
    columns = {s: art.read_split(s) for s in art.splits}
    total = sum(art.num_rows(s) for s in art.splits)
    for name in ("age", "count", "fare", "amount"):
        values = np.concatenate([columns[s][name] for s in art.splits])
        before, after = stats[f"encode.values.{name}"], stats[f"encode.encoded.{name}"]
        assert sum(before["counts"]) == sum(after["counts"]) == total
        assert after["counts"] == recount(after, values), name
        assert before["starts"][0] in (meta[name]["min"], meta[name]["min"] - 0.5)  # from the fit, not the partition
    # normalization none: the values as read are the published values
    assert stats["encode.values.count"]["counts"] == stats["encode.encoded.count"]["counts"]
    bins = np.concatenate([columns[s]["amount"] for s in art.splits])
    assert stats["encode.encoded.amount"]["counts"][1:-1] == np.bincount(bins, minlength=meta["amount"]["num_bins"]
                                                                         ).tolist()


def test_oversampled_rows_count_in_the_histograms_as_often_as_they_are_published(balanced, frame):
    art, stats, _meta = published(balanced)
    columns = {s: art.read_split(s) for s in art.splits}
    total = sum(art.num_rows(s) for s in art.splits)
    assert total > len(frame)  # training rows were repeated
    for name in ("age", "fare", "amount"):
        values = np.concatenate([columns[s][name] for s in art.splits])
        after = stats[f"encode.encoded.{name}"]
        assert after["counts"] == recount(after, values), name
        assert sum(stats[f"encode.values.{name}"]["counts"]) == total
    for name in ("seq", "text"):
        assert sum(stats[f"encode.length.{name}"]["counts"]) == total


def test_sequence_lengths_and_truncation_count_every_row(plain, frame):
    _art, stats, meta = published(plain)
    lengths = np.array([len(t.split()) for t in frame["text"]])
    for name in ("seq", "text"):
        limit = meta[name]["max_sequence_length"]
        hist = stats[f"encode.length.{name}"]
        assert hist["starts"] == list(map(float, LENGTH_BUCKETS))
        assert hist["counts"] == recount(hist, lengths), name
        assert stats[f"encode.truncated.{name}"]["count"] == int((lengths > limit).sum()) > 0


def test_oov_rows_and_class_counts_match_the_published_columns(plain):
    art, stats, meta = published(plain)
    for split in art.splits:
        cols = art.read_split(split)
        unk = meta["tags"]["str2idx"]["<UNK>"]
        assert stats[f"encode.oov.{split}.tags"]["count"] == int((cols["tags"][:, unk] != 0).sum())
        assert stats[f"encode.oov.{split}.seq"]["count"] == int((cols["seq"] == 1).any(axis=1).sum())
        labels = stats[f"encode.classes.{split}.label"]["counts"]
        assert labels[1:-1] == np.bincount(cols["label"], minlength=meta["label"]["vocab_size"]).tolist()
        assert stats[f"encode.classes.{split}.flag"]["counts"][1:3] == np.bincount(cols["flag"].astype(int),
                                                                                   minlength=2).tolist()
    assert stats["encode.oov.test.tags"]["count"] > 0 and stats["encode.oov.test.color"]["count"] > 0


# ---- the page -----------------------------------------------------------------------------------------

EXPECTED_PLOTS = {
    "age": ["hist"], "count": ["hist"], "fare": ["hist"], "amount": ["hist"],
    "color": ["tokens"], "tags": ["tokens"], "seq": ["tokens", "lengths"], "text": ["tokens", "lengths"],
    "flag": ["values"], "label": ["tokens", "balance"], "odd name ü": ["tokens"],
}


def test_the_report_has_every_section_and_plot_and_fetches_nothing(balanced):
    path = Path(report.write_report(balanced.artifact["artifact_path"], balanced.summary()))
    art_path = Path(balanced.artifact["artifact_path"])
    assert path == art_path.parent / f"{art_path.name}.report.html"
    text = path.read_text()
    page = Page(text)
    ids = page.ids()
    for section in ("summary", "balance", "features", "quality", "stages", "statistics"):
        assert f"section-{section}" in ids
    slugs = report_view.slugs([n for n, _o in report_view.features_in_order(report.open_view(art_path))])
    assert slugs["odd name ü"] == "odd_name" and len(set(slugs.values())) == len(slugs)
    for name, kinds in EXPECTED_PLOTS.items():
        assert f"feature-{slugs[name]}" in ids, name
        for kind in kinds:
            tag, attrs = page.by_id(f"plot-{slugs[name]}-{kind}")
            assert tag == "figure" and attrs["data-feature"] == name
            assert "<svg" in text.split(f'id="plot-{slugs[name]}-{kind}"', 1)[1].split("</figure>", 1)[0]
    assert "plot-stages" in ids  # the run's summary was handed over
    assert "no plot for date features" in text
    assert "train before balancing" in text
    csp = next(a for t, a in page.elements if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert csp["content"].startswith("default-src 'none'")
    assert external_references(page) == []
    assert "i" not in {t for t, _a in page.elements}  # a token "<i>" is text, escaped
    # OOV rates on validation/test; gate results per expectation
    assert re.search(r"OOV rate", text) and "gate raw" in text and "gate encoded" in text
    assert text.count('class="badge ok">pass<') == sum(g["evaluated"] for g in
                                                         Artifact.open(art_path).manifest["validation"].values())


def test_rebuilding_gives_the_same_bytes_and_leaves_the_artifact_alone(balanced):
    art_path = balanced.artifact["artifact_path"]
    files = {p: p.read_bytes() for p in sorted(Path(art_path).rglob("*")) if p.is_file()}
    first = Path(report.write_report(art_path)).read_bytes()
    second = Path(report.write_report(art_path)).read_bytes()
    assert first == second
    assert b"not recorded" in first and b'id="plot-stages"' not in first
    assert {p: p.read_bytes() for p in sorted(Path(art_path).rglob("*")) if p.is_file()} == files
    Artifact.open(art_path, verify=True)


def test_markdown_summary_names_the_report(balanced):
    text = report.markdown_summary("/x/y.report.html", balanced.summary())
    assert "`/x/y.report.html`" in text and "| train |" in text and "| encode |" in text


def test_prepflow_report_command(balanced, capfd, tmp_path):
    """``prepflow report`` in this process (``flows.cli.main``: the command's code without an interpreter
    and ~4 s of imports per call)."""
    art_path = balanced.artifact["artifact_path"]
    capfd.readouterr()
    code = cli_main(["report", art_path, "--json"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"report_path": f"{art_path}.report.html"}
    code = cli_main(["report", str(tmp_path / "nothing")])
    assert code == 1 and "not a complete artifact" in capfd.readouterr().err


# ---- number histogram legend ------------------------------------------------------------------------

SVG_NS = "{http://www.w3.org/2000/svg}"


RIGHT_HEAVY = [1, 1, 2, 2, 3, 4, 6, 9, 120, 130]  # the last buckets the tallest: bars reach the top right


def marked_histograms(counts: list[int], meta: dict | None = None) -> str:
    """The report's number histograms (as read, published) of ``counts`` over buckets [0, 1), [1, 2), ...,
    mean and fill value marked."""
    from tasks.report import plots as report_plots

    hist = {"starts": [float(x) for x in range(len(counts) + 1)], "counts": [0, *counts, 0]}  # under, over
    meta = meta or {"mean": 8.61, "normalization": "none", "preprocessing": {"computed_fill_value": 2.5}}
    return report_plots.number_histograms("plot-x-hist", hist, hist, meta)


def legend_box(svg) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) holding the legend's line samples and labels; a label's extent is taken
    generously (0.7 em per character, the font size above the baseline and 0.3 below)."""
    legend = next(g for g in svg.iter(f"{SVG_NS}g") if g.get("class") == "legend")
    boxes = []
    for el in legend:
        if el.tag == f"{SVG_NS}line":
            x1, y1, x2, y2 = (float(el.get(k)) for k in ("x1", "y1", "x2", "y2"))
            boxes.append((min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)))
        else:
            assert el.tag == f"{SVG_NS}text" and el.get("text-anchor") == "start"
            x, y, size = float(el.get("x")), float(el.get("y")), float(el.get("font-size"))
            boxes.append((x, y - size, x + 0.7 * size * len(el.text), y + 0.3 * size))
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


@pytest.mark.parametrize("counts", [RIGHT_HEAVY, RIGHT_HEAVY[::-1], [5] * 10], ids=["right", "left", "flat"])
def test_the_histogram_legend_is_clear_of_every_bar(counts):
    import xml.etree.ElementTree as ET

    text = marked_histograms(counts)
    assert text == marked_histograms(counts)  # deterministic
    svg = ET.fromstring(text)
    labels = [t.text for g in svg.iter(f"{SVG_NS}g") for t in g.iter(f"{SVG_NS}text")]
    assert labels == ["mean 8.61", "fill value 2.5"]
    x0, y0, x1, y1 = legend_box(svg)
    bars = [tuple(float(r.get(k)) for k in ("x", "y", "width", "height")) for r in svg.iter(f"{SVG_NS}rect")]
    assert len(bars) == 2 * len(counts)
    for x, y, w, h in bars:
        assert x + w <= x0 or x >= x1 or y + h <= y0 or y >= y1, ((x, y, w, h), (x0, y0, x1, y1))
    half = float(svg.get("width")) / 2
    tops = [min(y for x, y, _w, _h in bars if (x < half) == left) for left in (True, False)]
    assert tops[0] == tops[1] > y1  # the tallest bars stop below the legend row; both panels level


def test_a_histogram_without_marks_has_no_legend():
    import xml.etree.ElementTree as ET

    svg = ET.fromstring(marked_histograms(RIGHT_HEAVY, {"normalization": "none"}))
    assert not [g for g in svg.iter(f"{SVG_NS}g") if g.get("class") == "legend"]


# ---- media ------------------------------------------------------------------------------------------

def make_media(root: Path, n: int = 20) -> Path:
    import soundfile as sf
    from PIL import Image

    (root / "img").mkdir(parents=True, exist_ok=True)
    (root / "snd").mkdir(exist_ok=True)
    rows = []
    for i in range(n):
        y, x = np.mgrid[0:12, 0:16]
        arr = np.stack([(x * 16 + i * 9) % 256, (y * 20) % 256, np.full_like(x, i * 12 % 256)], -1).astype(np.uint8)
        Image.fromarray(arr).save(root / f"img/p{i}.png")
        t = np.arange(int(0.2 * 8000)) / 8000
        sf.write(str(root / f"snd/s{i}.wav"), np.round(0.3 * np.sin(2 * np.pi * (300 + 40 * i) * t) * 32767)
                 .astype(np.int16), 8000, subtype="PCM_16")
        rows.append({"photo": f"img/p{i}.png", "voice": f"snd/s{i}.wav", "label": i % 3 == 0})
    return write_csv(pd.DataFrame(rows), root / "data.csv")


def media_config(mode: str) -> dict:
    return {"input_features": [
        {"name": "photo", "type": "image", "preprocessing": {"mode": mode}},
        {"name": "voice", "type": "audio", "preprocessing": {"mode": mode, "num_filter_bands": 16,
                                                             "audio_file_length_limit_in_s": 0.15}}],
        "output_features": [{"name": "label", "type": "binary"}],
        "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 3}}}


def test_media_sections_show_samples_from_the_artifact(tmp_path):
    from PIL import Image

    csv = make_media(tmp_path / "data")
    sheets = {}
    for mode in ("eager", "lazy"):
        result = run(media_config(mode), csv, tmp_path / mode, npartitions=2)
        page = Page(Path(report.write_report(result.artifact["artifact_path"])).read_text())
        _tag, attrs = page.by_id("plot-photo-samples")
        img = next(a for t, a in page.elements if t == "img" and a["src"].startswith("data:image/png;base64,")
                   and "photo" in a.get("alt", ""))
        png = Image.open(io.BytesIO(base64.b64decode(img["src"].split(",", 1)[1])))
        rows = min(report_features.SAMPLE_IMAGES, result.artifact["rows"]["train"])
        assert png.size == (min(rows, 8) * (16 * 6 + 2) - 2, -(-rows // 8) * (12 * 6 + 2) - 2)  # 12x16 tiles, x6
        sheets[mode] = img["src"]
        cells = [t.strip() for t in page.text if t.strip()]  # published columns: decoded items, not int64 slots
        row = ["photo", "uint8", "3x12x16"] + ([f"image ({mode})"] if mode == "lazy" else [])
        assert any(cells[i:i + len(row)] == row for i in range(len(cells))), mode
        assert "int64" not in [cells[i + 1] for i, c in enumerate(cells[:-1]) if c in ("photo", "voice")]
        assert "__row__: each row's 0-based position in the input (oversampled copies repeat it)" in cells
        assert "plot-voice-spectrogram" in page.ids() and "plot-voice-lengths" in page.ids()
        assert external_references(page) == []
    assert sheets["eager"] == sheets["lazy"]  # the same decoded pixels either way


def test_statistics_text_summarizes_many_buckets():
    from tasks.runtime.statistics import summary_rows

    h = Histogram("encode.values.x", [0, 1, 2, 3, 4, 5, 6])
    h.add_array(np.array([-1, 0, 1, 2, 3, 4, 5, 6.5]))
    assert dict(summary_rows({"encode.values.x": h.to_json()})) == {
        "encode.values.x": "8 values in 8 non-empty buckets of [0, 6), 2 outside"}
    assert json.dumps(h.to_json())  # plain JSON


def test_a_number_column_without_any_value_still_gets_its_report(tmp_path):
    """An all-missing number filled with 0.0 (a warning, tasks.split.degenerate): its histograms span a zero-width
    range; the report is written (it failed with a math domain error in its tick marks)."""
    df = pd.DataFrame({"x": [np.nan] * 40, "c": list("ab") * 20, "y": [0, 1] * 20})
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}]}
    art = run(config, write_csv(df, tmp_path / "d.csv"), tmp_path).artifact["artifact_path"]
    page = Path(report.write_report(art)).read_text()
    assert "x" in page and "<svg" in page
