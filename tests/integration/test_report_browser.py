"""The data report in a real browser (headless Chromium, Debian's package; ``make browser`` installs it).

``prepflow run`` (the Prefect flow, local server) writes ``<output>/<artifact_id>.report.html`` with the
run's stage timings and publishes a ``prepflow-report`` markdown artifact naming it. Chromium opens the
file from disk, takes a screenshot (kept as ``report.png`` in the test's tmp folder) and dumps the DOM
it built: every section and every feature's plot is there, as rendered SVG. Its net log shows no
request made for the page, and a control page with an external image and stylesheet shows that the
net-log check sees such requests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import numpy as np
import pytest

from tests.html_page import Page, external_references

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "titanic"
CHROMIUM = shutil.which("chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND"]
PLOTS = {"number": ["hist"], "category": ["tokens"], "binary": []}



@pytest.fixture(autouse=True)
def needs_chromium():
    """The integration lane runs these with Chromium installed (`.ci/run` calls `make browser`); without it
    they fail, never skip."""
    if CHROMIUM is None:
        pytest.fail("no chromium on PATH: `make browser` (as root) installs Debian's package", pytrace=False)


def open_in_chromium(page: Path, tmp: Path, height: int = 3000) -> tuple[str, Path, Path]:
    """(DOM after load, screenshot, net log) of ``page`` opened from disk in a fresh profile."""
    run_dir = tmp / f"chromium-{uuid.uuid4().hex[:8]}"
    run_dir.mkdir()
    shot, netlog = run_dir / "screenshot.png", run_dir / "netlog.json"
    proc = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={run_dir / 'profile'}", f"--window-size=1200,{height}",
         f"--log-net-log={netlog}", f"--screenshot={shot}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, shot, netlog


def page_requests(netlog: Path) -> list[str]:
    """URLs requested for a file:// page, from Chromium's net log: URL requests whose network
    isolation key is the page's (``file://``). Requests Chromium makes for itself (update checks, its
    clock) carry another key."""
    text = netlog.read_text()
    try:
        log = json.loads(text)
    except ValueError:  # a log cut short at exit: close the event list
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log.get("events", []):
        params = event.get("params") or {}
        if event.get("type") == start and str(params.get("network_isolation_key", "")).startswith("file://"):
            urls.append(params.get("url", ""))
    return [u for u in urls if not u.startswith(("file:", "data:"))]


def report_markdown() -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.local_server import ensure_server

    with temporary_settings(updates={PREFECT_API_URL: ensure_server()}), get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["prepflow-report"])))
    assert found, "no prepflow-report artifact"
    return max(found, key=lambda a: a.created).data


def test_report_renders_in_chromium_and_fetches_nothing(cli, tmp_path):
    out = tmp_path / "artifacts"
    result = cli("run", EXAMPLE / "config.yaml", "--dataset", EXAMPLE / "titanic.csv", "--output", out,
                 "--cache-dir", tmp_path / "cache", "--json")
    assert result.returncode == 0, result.stderr
    summary = result.json()
    report = Path(summary["report_path"])
    assert report == out / f"{summary['artifact_id']}.report.html" and report.is_file()
    assert f"`{report}`" in report_markdown()
    again = cli("run", EXAMPLE / "config.yaml", "--dataset", EXAMPLE / "titanic.csv", "--output", out,
                "--cache-dir", tmp_path / "cache")  # reused artifact: no flow, the same report
    assert again.returncode == 0 and str(report) in again.stdout.replace("\n", ""), again.stdout

    dom, shot, netlog = open_in_chromium(report, tmp_path)
    shutil.copy(shot, tmp_path / "report.png")
    page = Page(dom)
    ids = page.ids()
    for section in ("summary", "balance", "features", "quality", "stages", "statistics"):
        assert f"section-{section}" in ids, section
    metadata = json.loads((Path(summary["artifact_path"]) / "training_set_metadata.json").read_text())
    assert metadata.pop("__row__")["type"] == "row_id"  # the published row ids: described, no feature, no plot
    plots = {f"plot-{name}-{kind}" for name, meta in metadata.items() for kind in PLOTS[meta["type"]]}
    plots |= {"plot-Survived-balance", "plot-stages"}
    assert plots <= ids, plots - ids
    for name in metadata:
        assert f"feature-{name}" in ids, name
    figures = dom.split('<figure class="plot" id="')[1:]
    rendered = {f.split('"', 1)[0] for f in figures if "<svg" in f.split("</figure>", 1)[0]}
    assert plots <= rendered, plots - rendered
    assert external_references(page) == []
    assert page_requests(netlog) == []

    from PIL import Image

    image = np.asarray(Image.open(shot).convert("L"), dtype=np.float64)
    assert image.shape == (3000, 1200) and image.std() > 10  # something was drawn, not a blank page


MEASURE = """<script>
const svg = document.querySelector("svg"), legend = svg.querySelector("g.legend").getBBox();
const bars = [...svg.querySelectorAll("rect")].map(r => r.getBBox());
document.getElementById("out").textContent = JSON.stringify({legend: [legend.x, legend.y, legend.width,
  legend.height], bars: bars.map(b => [b.x, b.y, b.width, b.height])});
</script>"""


def test_the_histogram_legend_is_clear_of_every_bar_as_rendered(tmp_path):
    """The legend's box as Chromium lays out its text (``getBBox``), not as estimated from the SVG."""
    from tests.unit.report.test_report import RIGHT_HEAVY, marked_histograms

    page = tmp_path / "histogram.html"
    page.write_text(f'<!DOCTYPE html><html><body>{marked_histograms(RIGHT_HEAVY)}<pre id="out"></pre>{MEASURE}'
                    "</body></html>")
    dom, _shot, _netlog = open_in_chromium(page, tmp_path, height=400)
    boxes = json.loads(dom.split('<pre id="out">', 1)[1].split("</pre>", 1)[0])
    lx, ly, lw, lh = boxes["legend"]
    assert lw > 100 and lh > 5  # both entries laid out
    assert len(boxes["bars"]) == 2 * len(RIGHT_HEAVY)
    for x, y, w, h in boxes["bars"]:
        assert x + w <= lx or x >= lx + lw or y + h <= ly or y >= ly + lh, ((x, y, w, h), boxes["legend"])


def test_the_net_log_check_sees_requests_a_page_makes(tmp_path):
    page = tmp_path / "control.html"
    page.write_text('<!DOCTYPE html><html><head><link rel="stylesheet" href="https://cdn.invalid/a.css"></head>'
                    '<body><img src="http://example.invalid/x.png"></body></html>')
    dom, _shot, netlog = open_in_chromium(page, tmp_path, height=400)
    assert set(page_requests(netlog)) == {"https://cdn.invalid/a.css", "http://example.invalid/x.png"}
    assert len(external_references(Page(dom))) == 3
