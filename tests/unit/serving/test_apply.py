"""prepflow apply: an artifact's fitted state applied to new data (nothing refitted), issue 39."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import prepflow
from core.errors import ConfigError, DataError
from storage.artifact import Artifact
from tasks.serving.preprocessor import Preprocessor
from tests.helpers import artifact_files, run, without_created_at, write_csv
from tests.html_page import Page

CONFIG = {
    "input_features": [
        {"name": "price", "type": "number"},
        {"name": "color", "type": "category"},
        {"name": "tags", "type": "set"},
        {"name": "note", "type": "text"},
    ],
    "output_features": [{"name": "label", "type": "binary"}],
}


def frame(n: int, seed: int, shift: float = 0.0, unseen: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    colors = rng.choice(["red", "green", "blue", "black"], n, p=[0.4, 0.3, 0.2, 0.1]).astype(object)
    colors[rng.random(n) < unseen] = "purple"
    price = rng.normal(10.0, 2.0, n) + shift * 2.0
    price[rng.random(n) < 0.05] = np.nan
    words = np.array(["cheap", "fast", "good", "new", "old", "rare"])
    tags = [" ".join(rng.choice(words, rng.integers(1, 3), replace=False)) for _ in range(n)]
    notes = [" ".join(rng.choice(words, rng.integers(1, 6))) for _ in range(n)]
    return pd.DataFrame({"price": price, "color": colors, "tags": tags, "note": notes,
                         "label": rng.integers(0, 2, n).astype(bool)})


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("fit")
    result = run(CONFIG, write_csv(frame(600, 1), tmp / "train.csv"), tmp)
    return Path(result.artifact["artifact_path"])


def apply(fitted: Path, rows: pd.DataFrame, tmp: Path, **kw) -> dict:
    data = write_csv(rows, tmp / "new.csv")
    return prepflow.apply(fitted, data, tmp / "applied", cache_dir=tmp / "cache", **kw)


def test_apply_equals_preprocessor_transform(fitted, tmp_path):
    rows = frame(300, 2, unseen=0.2)  # unseen categories too
    summary = apply(fitted, rows, tmp_path)
    art = Artifact.open(summary["artifact_path"], verify=True)
    assert summary["rows"] == {"test": 300}
    expected = Preprocessor.load(fitted).transform(pd.read_csv(tmp_path / "new.csv"))
    got = art.read_split("test")
    for name, want in expected.items():
        np.testing.assert_array_equal(np.asarray(got[name]), want, err_msg=name)
    assert set(expected) >= {"price", "color", "tags", "note", "label"}


@pytest.mark.parametrize("split", ["test", "validation"])
def test_apply_publishes_the_applied_split_alone(fitted, tmp_path, split):
    summary = apply(fitted, frame(120, 21), tmp_path, split=split)
    path = Path(summary["artifact_path"])
    art = Artifact.open(path, verify=True)
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["rows"] == {split: 120} == summary["rows"]
    assert art.splits == [split] and list(art.feature_spec["source_spec"]) == [split]
    assert art.feature_spec["metadata"]["rows"] == {split: 120}
    assert {rel.split("/", 1)[0] for rel in manifest["files"] if "/" in rel} <= {split, "vocab"}
    assert art.describe()["rows"] == {split: 120}
    batch = next(iter(art.batches(split, batch_size=200, shuffle=False)))
    assert len(next(iter(batch.values()))) == 120
    with pytest.raises(DataError, match="no split 'train'"):
        art.read_split("train")
    assert len(Preprocessor.load(path).transform(pd.read_csv(tmp_path / "new.csv"))["price"]) == 120
    assert "Drift and skew" in Path(summary["report_path"]).read_text()


def test_manifest_names_the_fitted_artifact(fitted, tmp_path):
    summary = apply(fitted, frame(50, 3), tmp_path)
    manifest = json.loads((Path(summary["artifact_path"]) / "manifest.json").read_text())
    assert manifest["fitted_from"] == {"artifact_id": Artifact.open(fitted).artifact_id, "path": str(fitted.resolve())}
    assert Artifact.open(summary["artifact_path"]).feature_spec["channel_spec"] == \
        Artifact.open(fitted).feature_spec["channel_spec"]


def test_drift_entries_on_shifted_and_unseen_data(fitted, tmp_path):
    summary = apply(fitted, frame(400, 4, shift=3.0, unseen=0.4), tmp_path)  # price +3 std, 40% unseen colors
    drift = summary["drift"]
    assert drift["price"]["statistic"] == "psi" and drift["price"]["value"] > 0.25 and drift["price"]["status"] == "fail"
    color = {c["statistic"]: c for c in drift["color"]["checks"]}
    assert color["oov_rate"]["value"] == pytest.approx(0.4, abs=0.08) and color["oov_rate"]["status"] == "fail"
    assert drift["color"]["status"] == "fail"


def test_no_drift_on_data_like_the_train_split(fitted, tmp_path):
    summary = apply(fitted, frame(600, 5), tmp_path)
    assert {f: e["status"] for f, e in summary["drift"].items()} == dict.fromkeys(summary["drift"], "ok")
    assert {"price", "color", "tags", "note", "label"} <= set(summary["drift"])


def test_drift_action_fail_publishes_nothing(fitted, tmp_path):
    with pytest.raises(DataError, match="drift gate failed.*price"):
        apply(fitted, frame(300, 6, shift=3.0), tmp_path, config={"validation": {"drift": {"action": "fail"}}})
    assert not (tmp_path / "applied").exists() or not any((tmp_path / "applied").iterdir())


def test_apply_artifact_is_byte_identical_for_any_partitioning(fitted, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    data = write_csv(frame(500, 7, unseen=0.1), tmp_path / "new.csv")
    outs = [prepflow.apply(fitted, data, tmp_path / f"out{n}", cache_dir=tmp_path / f"cache{n}", npartitions=n)
            for n in (1, 3, 7)]
    files = [without_created_at(artifact_files(s["artifact_path"])) for s in outs]
    assert outs[0]["artifact_id"] == outs[1]["artifact_id"] == outs[2]["artifact_id"]
    assert files[0] == files[1] == files[2]


def test_apply_rerun_reuses_every_stage(fitted, tmp_path):
    first = apply(fitted, frame(100, 8), tmp_path)
    second = apply(fitted, frame(100, 8), tmp_path)
    assert first["artifact_id"] == second["artifact_id"]
    assert all(s["cached"] for s in second["stages"] if s["name"] != "publish")


def test_not_an_artifact_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"manifest.json: missing; .* is not a complete prepflow artifact"):
        prepflow.apply(tmp_path / "empty", tmp_path / "x.csv", tmp_path / "out")


def test_missing_metadata_is_one_line(fitted, tmp_path):
    import shutil

    copy = tmp_path / "art"
    shutil.copytree(fitted, copy)
    (copy / "training_set_metadata.json").unlink()
    with pytest.raises(DataError, match="training_set_metadata.json: missing"):
        prepflow.apply(copy, tmp_path / "x.csv", tmp_path / "out")


def test_dataset_missing_a_feature_column(fitted, tmp_path):
    with pytest.raises(DataError, match="color") as info:
        apply(fitted, frame(50, 9).drop(columns=["color"]), tmp_path)
    assert "\n" not in str(info.value).strip()
    assert not (tmp_path / "applied").exists() or not any((tmp_path / "applied").glob("*/manifest.json"))


def test_apply_config_takes_validation_only(fitted, tmp_path):
    with pytest.raises(ConfigError, match="validation:' section only"):
        apply(fitted, frame(10, 10), tmp_path, config={"input_features": []})
    with pytest.raises(ConfigError, match="validation.drift.numbr: unknown key"):
        apply(fitted, frame(10, 10), tmp_path, config={"validation": {"drift": {"numbr": {"warn": 1}}}})
    with pytest.raises(ConfigError, match=r"validation.drift.features: \['nope'\]"):
        apply(fitted, frame(10, 10), tmp_path, config={"validation": {"drift": {"features": {"nope": {"fail": 1}}}}})


def test_per_feature_override(fitted, tmp_path):
    summary = apply(fitted, frame(400, 11, shift=0.5), tmp_path,
                    config={"validation": {"drift": {"features": {"price": {"warn": 0.0001, "fail": 0.001}}}}})
    assert summary["drift"]["price"]["status"] == "fail" and summary["drift"]["price"]["threshold"] == 0.001


def test_run_records_skew_of_validation_and_test_splits(tmp_path):
    train = frame(900, 12)
    result = run({**CONFIG, "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2]}}},
                 write_csv(train, tmp_path / "d.csv"), tmp_path)
    drifted = next(s for s in result.stages if s.stage == "drift")
    skew = drifted.results()["skew"]
    assert set(skew) == {"validation", "test"}
    assert set(skew["test"]) >= {"price", "color", "tags", "note"}
    assert all(e["status"] == "ok" for split in skew.values() for e in split.values())
    summary = result.summary()
    assert summary["drift"]["price"]["split"] in ("validation", "test")
    manifest = json.loads((Path(result.artifact["artifact_path"]) / "manifest.json").read_text())
    assert "drift.reference.price" in manifest["statistics"]


def test_report_shows_fitted_and_new_distributions_of_drifted_features(fitted, tmp_path):
    summary = apply(fitted, frame(300, 13, shift=3.0), tmp_path)
    page = Path(summary["report_path"]).read_text()
    assert "Drift and skew" in page and "fitted from" in page
    row = page[page.index('<tr class="drift-fail"><td>price</td>'):]
    row = row[:row.index("</tr>")]
    entry = summary["drift"]["price"]
    assert "psi" in row and f'<td class="num">{entry["noise"]:.4g}</td>' in row
    # the fitted and the new distributions drawn side by side: two bars per decile bin, named by raw values
    elements = Page(page).elements
    at = elements.index(("figure", next(a for t, a in elements if a.get("id") == "plot-drift-price")))
    end = next(i for i, (t, _a) in enumerate(elements[at + 1:], at + 1) if t == "figcaption")
    drawn = elements[at:end]
    bins = len(entry["fitted"])
    assert bins == len(entry["bins"]) >= 5 and len(entry["new"]) == bins
    heights = [float(a["height"]) for t, a in drawn if t == "rect" and a.get("fill") != "white"]
    assert len(heights) == 2 * bins + 2  # the bars, and the legend's two swatches
    bars = heights[:2 * bins]
    fitted, new = bars[:bins], bars[bins:]
    assert max(new) / max(fitted) == pytest.approx(max(entry["new"]) / max(entry["fitted"]), rel=0.05)
    assert entry["bins"][0].startswith("< ") and entry["bins"][-1].startswith(">= ")
    labels = "".join(Page(page[page.index('id="plot-drift-price"'):]).text[:200])
    assert entry["bins"][1] in labels
    assert 'id="plot-drift-color"' not in page or summary["drift"]["color"]["status"] != "ok"


def test_drift_table_rows_for_the_prefect_ui():
    from flows.reporting import drift_table

    entry = {"statistic": "psi", "value": 0.3, "noise": 0.02, "threshold": 0.25, "status": "fail", "checks": [],
             "fitted": [0.5, 0.5], "new": [0.9, 0.1]}
    rows = drift_table({"price": entry})
    assert rows == [{"feature": "price", "statistic": "psi", "value": 0.3, "noise": 0.02, "threshold": 0.25,
                     "status": "fail", "fitted": [0.5, 0.5], "new": [0.9, 0.1]}]
    assert drift_table({"price": {**entry, "split": "test"}})[0]["feature"] == "price"


def test_skew_fail_in_a_run_stops_before_publish(tmp_path):
    train, test = frame(600, 14), frame(200, 15, shift=3.0)
    data = pd.concat([train.assign(split=0), test.assign(split=2)], ignore_index=True)
    config = {**CONFIG, "preprocessing": {"split": {"type": "fixed", "column": "split"}},
              "validation": {"drift": {"action": "fail"}}}
    with pytest.raises(DataError, match=r"drift gate failed.*price: psi .* \(fail, test split\)"):
        run(config, write_csv(data, tmp_path / "d.csv"), tmp_path)
    assert not list((tmp_path / "out").glob("*/manifest.json"))
    warned = run({**config, "validation": {"drift": {"action": "warn"}}}, tmp_path / "d.csv", tmp_path)
    assert warned.summary()["drift"]["price"] == {**warned.summary()["drift"]["price"], "status": "fail",
                                                  "split": "test"}


def test_output_root_of_the_fitted_artifact_is_refused(fitted, tmp_path):
    with pytest.raises(ConfigError, match="fitted artifact's output"):
        prepflow.apply(fitted, write_csv(frame(10, 16), tmp_path / "n.csv"), fitted.parent)


def test_an_artifact_without_references_gets_them_from_its_train_split(fitted, tmp_path):
    import shutil

    old = tmp_path / "old" / fitted.name
    shutil.copytree(fitted, old)
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["statistics"] = {k: v for k, v in manifest["statistics"].items() if not k.startswith("drift.")}
    (old / "manifest.json").write_text(json.dumps(manifest))
    rows = frame(300, 17, shift=1.0, unseen=0.1)
    want = apply(fitted, rows, tmp_path / "a")["drift"]
    got = apply(old, rows, tmp_path / "b")["drift"]
    assert got == want and want["price"]["status"] != "ok"
