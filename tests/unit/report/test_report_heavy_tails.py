"""Heavy-tailed numbers in the data report: logarithmic buckets (tasks/encode/feature_stats.py) drawn on a
logarithmic axis (tasks/report/svg.py), so that a lognormal column is not one bar in the first bucket."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from storage.artifact import Artifact
from tasks.encode.feature_stats import HIST_BUCKETS
from tasks.report import page as report
from tasks.runtime.statistics import Histogram
from tests.helpers import run, write_csv
from tests.html_page import Page

CONFIG = {
    "input_features": [
        {"name": "spend", "type": "number", "preprocessing": {"normalization": "zscore"}},
        {"name": "visits", "type": "number", "preprocessing": {"normalization": "minmax"}},  # >= 0, with zeros
        {"name": "height", "type": "number"},  # a normal column keeps its equal buckets
    ],
    "output_features": [{"name": "y", "type": "binary"}],
}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    rng = np.random.default_rng(7)
    n = 3000
    visits = np.floor(rng.lognormal(0.0, 2.2, n)) + rng.random(n) * 0.5
    visits[rng.random(n) < 0.2] = 0.0
    frame = pd.DataFrame({"spend": rng.lognormal(1.0, 2.0, n), "visits": visits,
                          "height": rng.normal(170, 10, n), "y": rng.integers(0, 2, n).astype(bool)})
    tmp = tmp_path_factory.mktemp("heavy")
    result = run(CONFIG, write_csv(frame, tmp / "data.csv"), tmp)
    return Artifact.open(result.artifact["artifact_path"]), frame


def test_heavy_tailed_columns_spread_over_their_buckets(artifact):
    art, frame = artifact
    stats = art.manifest["statistics"]
    for name in ("spend", "visits"):
        before, after = stats[f"encode.values.{name}"], stats[f"encode.encoded.{name}"]
        inner = np.asarray(before["counts"][1:-1])
        assert inner.max() < 0.35 * inner.sum(), name  # equal buckets put ~95% in the first
        linear, _ = np.histogram(frame[name], bins=HIST_BUCKETS)
        assert linear.max() > 0.8 * len(frame), name  # ... as the equal buckets do with this data
        assert np.count_nonzero(inner) >= HIST_BUCKETS // 2, name
        assert before["counts"][1:-1] == after["counts"][1:-1], name  # the published buckets are their images
        values = np.concatenate([art.read_split(s)[name] for s in art.splits])
        check = Histogram("x", after["starts"])
        check.add_array(values)
        assert check.counts == after["counts"], name
    height = np.diff(stats["encode.values.height"]["starts"][:-1])
    assert np.allclose(height, height[0])


def test_the_report_draws_them_on_a_log_axis(artifact):
    art, _frame = artifact
    html = report.build_html(report.open_view(art.path))
    elements = Page(html).elements
    for name, log in (("spend", True), ("visits", True), ("height", False)):
        start = next(i for i, (t, a) in enumerate(elements) if t == "figure" and a.get("id", "").endswith(
            f"{name}-hist"))
        end = next(i for i, (t, _a) in enumerate(elements[start + 1:], start + 1) if t == "figcaption")
        rects = [a for t, a in elements[start:end] if t == "rect" and float(a.get("height", 0)) > 0]
        widths, heights = [float(a["width"]) for a in rects], [float(a["height"]) for a in rects]
        assert max(widths) - min(widths) <= 0.2, name  # every bucket equally wide (SVG rounds to 0.1 px)
        assert max(heights) < 0.35 * sum(heights) / 2, name  # no bar holds most rows (two panels drawn)
        text = "".join(Page(html[html.index(f'-{name}-hist"'):]).text[:80])
        assert ("log axis" in text) == log, name
