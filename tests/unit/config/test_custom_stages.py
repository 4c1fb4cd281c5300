"""Custom stages and feature types (DESIGN section 9, issue 12): the DAG checks (one test per error,
each raised before any data is read), the run-time checks (output type, statistics), fitting,
caching on the plugin's code, serving, entry points and the CLI end to end."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from core.errors import (
    BadInputOrOutputError,
    BadTopologyError,
    ConfigError,
    DuplicateNameError,
    InvalidDAGError,
    InvalidStatisticsError,
    InvalidTransformOutputError,
    InvalidTypeSignatureError,
    NotConnectedError,
    TypeMismatchError,
)
from prepflow import Artifact, Preprocessor
from tasks.config.loader import parse_config
from tasks.custom import steps as custom_stages
from tasks.custom.dag import build_plan
from tests.custom_stage_helpers import ensure_example_plugin, frame
from tests.helpers import run, write_config, write_csv

H = "tests.custom_stage_helpers"
COLUMNS = list(frame(3).columns)


@pytest.fixture(scope="module", autouse=True)
def example_plugin():
    ensure_example_plugin()


def config(stages: list[dict], features: list[dict] = (), **extra) -> dict:
    return {"stages": stages,
            "input_features": [{"name": "distance", "type": "number"}, {"name": "city", "type": "category"},
                               *features],
            "output_features": [{"name": "label", "type": "binary"}], **extra}


def typed(inputs: dict, outputs: dict, after: str = "fill_missing", name: str | None = None) -> dict:
    spec = {"uses": f"{H}:Typed", "after": after, "params": {"inputs": inputs, "outputs": outputs}}
    return {**spec, "name": name} if name else spec


def plan(cfg: dict, columns: list[str] | None = COLUMNS):
    return build_plan(parse_config(cfg), columns)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_csv(frame(), tmp_path_factory.mktemp("data") / "trips.csv")


# ---- the API ------------------------------------------------------------------------------------------

def test_stage_is_exported_and_the_design_example_runs(dataset, tmp_path):
    from tasks import Stage
    from tests.custom_stage_helpers import LogDistance

    assert issubclass(LogDistance, Stage)
    cfg = config([{"uses": f"{H}:LogDistance", "after": "fill_missing", "params": {}}],
                 [{"name": "log_distance", "type": "number", "preprocessing": {"normalization": "none"}}])
    result = run(cfg, dataset, tmp_path)
    names = [s.stage for s in result.stages]
    assert names.index("fill_missing") < names.index("log_distance") < names.index("balance")
    art = Artifact.open(result.artifact["artifact_path"])
    meta = art.metadata
    published = art.read_split("train")
    # the stage read the *filled* distance (fill_with_mean), so no log_distance is missing
    mean = meta["distance"]["preprocessing"]["computed_fill_value"]
    raw = frame()["distance"].to_numpy()
    rows = _input_rows(result, "train")
    expected = np.log1p(np.where(np.isnan(raw[rows]), mean, raw[rows])).astype(np.float32)
    assert np.array_equal(published["log_distance"], expected)


def _input_rows(result, split: str) -> np.ndarray:
    enc = next(s for s in result.stages if s.stage == "encode")
    return np.concatenate([np.load(p) for p in sorted(Path(enc.path, split).glob("rows-*.npy"))])


# ---- DAG checks: one per error, all before data is read --------------------------------------------

def test_every_dag_error_is_a_config_error():
    for cls in (InvalidDAGError, DuplicateNameError, BadTopologyError, NotConnectedError, BadInputOrOutputError,
                TypeMismatchError, InvalidTypeSignatureError, InvalidStatisticsError, InvalidTransformOutputError):
        assert issubclass(cls, ConfigError) and cls("x").exit_code == 2


@pytest.mark.parametrize("stage, pattern", [
    ({"uses": "no_such_module:Stage"}, r"stages\[0\]\.uses: cannot load custom stage 'no_such_module:Stage'"),
    ({"uses": "havresine"}, r"'havresine' is not 'pkg.module:Class' nor a registered prepflow.stages entry point "
                            r"\(registered: .*haversine"),
    ({"uses": f"{H}:NotAStage"}, r"not a subclass of tasks.Stage"),
    ({"uses": "haversine", "params": {"lat_1": "x"}}, r"stages\[0\]\.params\.lat_1: unknown key; did you mean 'lat1'"),
    ({"uses": f"{H}:LogDistance", "after": "fill_mising"}, r"unknown stage 'fill_mising'; did you mean 'fill_missing'"),
    ({"uses": f"{H}:LogDistance", "after": "vocab"}, r"runs after 'vocab': custom stages transform rows before the fit"),
    ({"uses": f"{H}:LogDistance", "name": "bad name!"}, r"stages\[0\]\.name: 'bad name!' is not a valid stage name"),
])
def test_invalid_dag_spec(stage, pattern):
    with pytest.raises(InvalidDAGError, match=pattern):
        plan(config([stage], [{"name": "log_distance", "type": "number"}]))


def test_duplicate_stage_names():
    stages = [{"uses": f"{H}:LogDistance"}, {"uses": f"{H}:LogDistance"}]
    with pytest.raises(DuplicateNameError, match=r"stages\[0\] and stages\[1\] are both named 'log_distance'"):
        plan(config(stages, [{"name": "log_distance", "type": "number"}]))
    with pytest.raises(DuplicateNameError, match=r"'encode' is the name of a built-in stage"):
        plan(config([{"uses": f"{H}:LogDistance", "name": "encode"}], [{"name": "log_distance", "type": "number"}]))


def test_duplicate_columns():
    stages = [typed({"distance": "float64"}, {"d2": "float64"}, name="a"),
              typed({"distance": "float64"}, {"d2": "float64"}, name="b")]
    with pytest.raises(DuplicateNameError, match=r"column 'd2' is made by both stage 'a' and stage 'b'"):
        plan(config(stages, [{"name": "d2", "type": "number"}]))
    with pytest.raises(DuplicateNameError, match=r"makes column 'carrier', which the dataset already has"):
        plan(config([typed({"distance": "float64"}, {"carrier": "string"})], [{"name": "carrier", "type": "category"}]))


def test_type_mismatch_between_stages_names_both_stages_and_the_column():
    stages = [typed({"city": "string"}, {"code": "string"}, name="make_code"),
              typed({"code": "float64"}, {"score": "float64"}, after="make_code", name="score_code")]
    with pytest.raises(TypeMismatchError, match=r"stage 'score_code' reads column 'code' as 'float64', but stage "
                                                r"'make_code' makes it as 'string'"):
        plan(config(stages, [{"name": "score", "type": "number"}]))


def test_type_mismatch_with_a_feature():
    stage = typed({"distance": "float64"}, {"d_text": "float64"}, name="d_text_maker")
    with pytest.raises(TypeMismatchError, match=r"stage 'd_text_maker' makes column 'd_text' as 'float64', but the "
                                                r"text feature 'd_text' reads it"):
        plan(config([stage], [{"name": "d_text", "type": "text"}]))
    reads_feature_as_text = typed({"distance": "string"}, {"x": "float64"}, name="reader")
    with pytest.raises(TypeMismatchError, match=r"stage 'reader' reads column 'distance' as 'string', but after "
                                                r"fill_missing it holds number feature 'distance'"):
        plan(config([reads_feature_as_text], [{"name": "x", "type": "number"}]))


def test_cycle_and_reading_a_later_stage():
    stages = [typed({"distance": "float64"}, {"a_out": "float64"}, after="b", name="a"),
              typed({"a_out": "float64"}, {"b_out": "float64"}, after="a", name="b")]
    with pytest.raises(BadTopologyError, match=r"cycle: 'a' runs after 'b' runs after 'a'"):
        plan(config(stages, [{"name": "b_out", "type": "number"}]))
    stages = [typed({"b_out": "float64"}, {"a_out": "float64"}, name="a"),
              typed({"distance": "float64"}, {"b_out": "float64"}, name="b")]
    with pytest.raises(BadTopologyError, match=r"stage 'a' reads column 'b_out', which stage 'b' makes after it; "
                                               r"run 'b' first \(set 'after: b' on 'a'\)"):
        plan(config(stages, [{"name": "a_out", "type": "number"}]))
    raw_reads_filled = [typed({"distance": "float64"}, {"b_out": "float64"}, name="b"),
                        typed({"b_out": "float64"}, {"a_out": "float64"}, after="ingest", name="a")]
    with pytest.raises(BadTopologyError, match=r"stage 'a' reads column 'b_out', which stage 'b' makes after it"):
        plan(config(raw_reads_filled, [{"name": "a_out", "type": "number"}]))


def test_unconnected_stage():
    with pytest.raises(NotConnectedError, match=r"stage 'log_distance' is not connected: no feature and no later "
                                                r"stage reads any of its output columns \['log_distance'\]"):
        plan(config([{"uses": f"{H}:LogDistance"}]))


def test_missing_input_or_output():
    with pytest.raises(BadInputOrOutputError, match=r"declares no input columns \(input_type is empty\)"):
        plan(config([typed({}, {"x": "float64"})], [{"name": "x", "type": "number"}]))
    with pytest.raises(BadInputOrOutputError, match=r"declares no output columns"):
        plan(config([typed({"distance": "float64"}, {})]))
    with pytest.raises(BadInputOrOutputError, match=r"stage 'haversine' reads column 'lat_2', which no earlier stage "
                                                    r"makes and the dataset does not have \(did you mean 'lat2'\?\)"):
        plan(config([{"uses": "haversine", "params": {"lat2": "lat_2"}}], [{"name": "distance_km", "type": "number"}]))
    with pytest.raises(BadInputOrOutputError, match=r"preprocessing.split.column: 'x' is made by stage 'typed'"):
        plan(config([typed({"distance": "float64"}, {"x": "string"})], [{"name": "x", "type": "category"}],
                     preprocessing={"split": {"type": "fixed", "column": "x"}}))


def test_invalid_type_signature():
    with pytest.raises(InvalidTypeSignatureError, match=r"input_type\['distance'\]: 'flaot64' is not a dtype or a "
                                                        r"feature type; did you mean 'float64'\?"):
        plan(config([typed({"distance": "flaot64"}, {"x": "float64"})], [{"name": "x", "type": "number"}]))
    with pytest.raises(InvalidTypeSignatureError, match=r"output_type must be a mapping"):
        plan(config([typed({"distance": "float64"}, ["x"])], [{"name": "x", "type": "number"}]))
    with pytest.raises(InvalidTypeSignatureError, match=r"stage 'add_only' .* defines add \(it fits\) but not "
                                                        r"create or merge"):
        plan(config([{"uses": f"{H}:AddOnly"}], [{"name": "distance_centered", "type": "number"}]))


def test_untyped_feature_on_a_made_column():
    with pytest.raises(InvalidDAGError, match=r"feature 'log_distance' reads column 'log_distance', which stage "
                                              r"'log_distance' makes: give the feature a 'type'"):
        plan(config([{"uses": f"{H}:LogDistance"}], [{"name": "log_distance"}]))


def test_dag_errors_are_raised_before_any_data_is_read(dataset, tmp_path):
    cfg = config([{"uses": f"{H}:LogDistance", "after": "vocab"}], [{"name": "log_distance", "type": "number"}])
    with pytest.raises(InvalidDAGError):
        run(cfg, dataset, tmp_path)
    assert not (tmp_path / "cache" / "ingest").exists()


# ---- run-time checks --------------------------------------------------------------------------------------

def test_output_of_the_wrong_type_names_stage_partition_and_column(dataset, tmp_path):
    cfg = config([{"uses": f"{H}:WrongDtype"}], [{"name": "bad", "type": "number"}])
    with pytest.raises(InvalidTransformOutputError, match=r"stage 'wrong_dtype', partition \d \(input rows \d+-\d+\): "
                                                          r"column 'bad' holds string values \(.*\), but output_type "
                                                          r"declares 'float64'"):
        run(cfg, dataset, tmp_path, npartitions=5)


def test_statistics_that_are_not_statistics_objects(dataset, tmp_path):
    cfg = config([{"uses": f"{H}:BadStatistics"}], [{"name": "ok", "type": "number"}])
    with pytest.raises(InvalidStatisticsError, match=r"stage 'bad_statistics' emitted dict \{'rows': \d+\}; "
                                                     r"statistics must be tasks.runtime.statistics Counter or Histogram"):
        run(cfg, dataset, tmp_path)


def test_statistics_that_do_not_merge_across_partitions(dataset, tmp_path):
    cfg = config([{"uses": f"{H}:ShiftingHistogram"}], [{"name": "ok", "type": "number"}])
    with pytest.raises(InvalidStatisticsError, match=r"stage 'shifting_histogram': its statistics do not merge across "
                                                     r"partitions .*the same bucket starts"):
        run(cfg, dataset, tmp_path, npartitions=3)


def test_a_transform_that_assigns_in_place_does_not_touch_the_features(dataset, tmp_path):
    cfg = config([{"uses": f"{H}:MutatesInput"}],
                 [{"name": "doubled", "type": "number", "preprocessing": {"normalization": "none"}}])
    cfg["input_features"][0]["preprocessing"] = {"normalization": "none"}
    train = Artifact.open(run(cfg, dataset, tmp_path).artifact["artifact_path"]).read_split("train")
    assert np.array_equal(train["doubled"], train["distance"] * 2)


def test_a_stage_keeps_every_row(dataset, tmp_path):
    cfg = config([{"uses": f"{H}:DropsRows"}], [{"name": "ok", "type": "number"}])
    with pytest.raises(InvalidTransformOutputError, match=r"stage 'drops_rows', partition 0 .*returned \d+ rows for "
                                                          r"\d+; a stage keeps every row"):
        run(cfg, dataset, tmp_path)


# ---- fitting, statistics, phases -------------------------------------------------------------------------

def test_fitted_stage_state_is_json_fitted_on_training_rows(dataset, tmp_path):
    cfg = config([{"uses": "frequency_encode", "after": "ingest", "params": {"column": "carrier"}},
                  {"uses": f"{H}:Centered"}],
                 [{"name": "carrier_freq", "type": "number", "preprocessing": {"normalization": "none"}},
                  {"name": "distance_centered", "type": "number"}])
    result = run(cfg, dataset, tmp_path, npartitions=3)
    by_name = {s.stage: s for s in result.stages}
    assert [s.stage for s in result.stages][5:7] == ["frequency_encode", "centered"]
    df = frame()
    split = np.load(Path(by_name["split"].path) / "split.npy")
    train = df.loc[split == 0]
    state = custom_stages.load_state(by_name["frequency_encode"])["state"]
    assert state == {"counts": {k: int(v) for k, v in sorted(train["carrier"].value_counts().items())},
                     "total": len(train)}
    centered = custom_stages.load_state(by_name["centered"])["state"]
    filled = df["distance"].fillna(Artifact.open(result.artifact["artifact_path"]).metadata["distance"]
                                   ["preprocessing"]["computed_fill_value"])
    assert centered["n"] == len(train) and centered["mean"] == pytest.approx(filled[split == 0].mean(), abs=1e-6)
    published = Artifact.open(result.artifact["artifact_path"]).read_split("test")
    rows = _input_rows(result, "test")
    expected = df["carrier"].iloc[rows].map(state["counts"]).to_numpy(dtype=np.float64) / state["total"]
    assert np.array_equal(published["carrier_freq"], expected.astype(np.float32))
    stats = json.loads((Path(result.artifact["artifact_path"]) / "manifest.json").read_text())["statistics"]
    assert stats["frequency_encode.unseen"]["count"] == 0


def test_raw_phase_stage_reads_a_column_no_feature_names(tmp_path):
    df = frame()
    data = write_csv(df, tmp_path / "d.csv")
    cfg = {"stages": [{"uses": f"{H}:Shout", "after": "ingest"}],
           "input_features": [{"name": "city_upper", "type": "category"}]}
    result = run(cfg, data, tmp_path)
    meta = Artifact.open(result.artifact["artifact_path"]).metadata
    assert set(meta["city_upper"]["str2idx"]) == {"<UNK>", "PARIS", "LIMA", "OSLO", "QUITO"}
    ingest = next(s for s in result.stages if s.stage == "ingest")
    assert json.loads((Path(ingest.path) / "ingest.json").read_text())["spec"]["columns"] == {"city": "string"}
    stats = json.loads((Path(result.artifact["artifact_path"]) / "manifest.json").read_text())["statistics"]
    assert stats["shout.rows"]["count"] == len(df)  # every sampled row, once


# ---- caching on the plugin's code --------------------------------------------------------------------------

PLUGIN_SOURCE = '''
from tasks import Stage


class Scale(Stage):
    input_type = {"distance": "number"}
    output_type = {"scaled": "float64"}

    def transform(self, df):
        return df.assign(scaled=df["distance"] * FACTOR)


FACTOR = 2.0
'''


def test_editing_the_plugin_recomputes_the_stage_and_what_follows(dataset, tmp_path, monkeypatch):
    plugin_dir = tmp_path / "plugin_src"
    plugin_dir.mkdir()
    source = plugin_dir / "scale_plugin_for_test.py"
    source.write_text(PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(plugin_dir))
    monkeypatch.setenv("PREPFLOW_PLUGIN_PATH", str(plugin_dir))  # a plugin outside the project (core.plugins)
    cfg = config([{"uses": "scale_plugin_for_test:Scale", "after": "fill_missing"}],
                 [{"name": "scaled", "type": "number", "preprocessing": {"normalization": "none"}}])
    first = run(cfg, dataset, tmp_path)
    assert not any(s.cached for s in first.stages)
    again = run(cfg, dataset, tmp_path)
    assert all(s.cached for s in again.stages)

    source.write_text(PLUGIN_SOURCE.replace("FACTOR = 2.0", "FACTOR = 3.0  # edited"))
    importlib.reload(sys.modules["scale_plugin_for_test"])
    edited = run(cfg, dataset, tmp_path)
    cached = {s.stage: s.cached for s in edited.stages}
    assert all(cached[s] for s in ("ingest", "infer_types", "validate_raw", "split", "fill_missing"))
    assert not any(cached[s] for s in ("scale", "balance", "vocab", "encode", "validate_encoded", "publish"))
    assert edited.artifact["artifact_id"] != first.artifact["artifact_id"]
    before = Artifact.open(first.artifact["artifact_path"]).read_split("train")["scaled"]
    after = Artifact.open(edited.artifact["artifact_path"]).read_split("train")["scaled"]
    np.testing.assert_allclose(after, before.astype(np.float64) * 1.5, rtol=1e-6)  # 3x instead of 2x

    changed_params = config([{"uses": "haversine", "params": {"output": "km"}}], [{"name": "km", "type": "number"}])
    run(changed_params, dataset, tmp_path)
    changed_params["stages"][0]["params"]["radius_km"] = 6378.137
    cached = {s.stage: s.cached for s in run(changed_params, dataset, tmp_path).stages}
    assert cached["fill_missing"] and not cached["haversine"] and not cached["encode"]


# ---- the example plugin: entry points, custom feature type, serving -------------------------------------

PLUGIN_CONFIG = {
    "stages": [{"uses": "haversine", "after": "fill_missing"},
               {"uses": "frequency_encode", "after": "ingest", "params": {"column": "carrier"}}],
    "input_features": [{"name": "distance_km", "type": "number", "preprocessing": {"missing_value_strategy": "ffill"}},
                       {"name": "carrier_freq", "type": "number"},
                       {"name": "carrier", "type": "category"},
                       {"name": "notes", "type": "hashed_tokens", "preprocessing": {"num_buckets": 64}},
                       {"name": "notes_by_path", "column": "notes",
                        "type": "prepflow_example_plugin.features:HashedTokens"}],
    "output_features": [{"name": "label", "type": "binary"}],
    "publish": {"formats": ["parquet", "npy"]},
}


def test_example_plugin_is_published_validated_and_served_bit_for_bit(dataset, tmp_path):
    result = run(PLUGIN_CONFIG, dataset, tmp_path, npartitions=3)
    path = result.artifact["artifact_path"]
    art = Artifact.open(path)
    assert art.metadata["notes"]["type"] == "hashed_tokens"
    manifest = json.loads((Path(path) / "manifest.json").read_text())
    assert manifest["validation"]  # the encoded gate ran over the custom feature's ids
    assert {"haversine.missing_coordinates", "haversine.distance_km", "frequency_encode.unseen"} <= set(
        manifest["statistics"])
    pre = Preprocessor.load(path, trust_plugins=["prepflow_example_plugin"])  # its plugins, trusted
    assert set(pre.input_columns) == {"carrier", "notes", "lat1", "lon1", "lat2", "lon2"}
    served = pre.transform(frame())  # every row in one call: ffill fills from the same neighbours
    for split in ("train", "validation", "test"):
        rows = _input_rows(result, split)
        published = art.read_split(split)
        assert np.array_equal(published.pop("__row__"), rows)  # the published input positions, no served column
        for column, values in published.items():
            assert np.array_equal(np.asarray(values), served[column][rows]), (split, column)


@pytest.mark.parametrize("type_name, pattern", [
    ("no_such_module:Feature", r"^config: input_features\[0\]\.type: cannot load custom feature type "
                               r"'no_such_module:Feature': cannot import module 'no_such_module'"),
    (f"{H}:Missing", rf"^config: input_features\[0\]\.type: cannot load custom feature type '{H}:Missing': "
                     rf"module '{H}' has no attribute 'Missing'"),
    (f"{H}:NotAStage", rf"^config: input_features\[0\]\.type: '{H}:NotAStage' is <class '{H}\.NotAStage'>, "
                       r"not a subclass of tasks.features.FeatureType$"),
    ("hashed_tokns", r"^config: input_features\[0\]\.type: unknown feature type 'hashed_tokns'"),
])
def test_invalid_custom_feature_type(type_name, pattern):
    with pytest.raises(ConfigError, match=pattern):
        parse_config({"input_features": [{"name": "x", "type": type_name}],
                      "output_features": [{"name": "y", "type": "binary"}]})


def test_stage_that_is_not_a_class_names_what_it_is():
    with pytest.raises(InvalidDAGError, match=rf"^stages\[0\]\.uses: '{H}:frame' is <function frame at .*>, "
                                              r"not a subclass of tasks.Stage$"):
        plan(config([{"uses": f"{H}:frame"}], [{"name": "log_distance", "type": "number"}]))


def test_custom_feature_type_code_is_in_the_cache_key(dataset, tmp_path):
    from prepflow_example_plugin.features import HashedTokens

    from core.code_version import class_version
    from core.plugins import code_version
    from storage.cache import StageCache
    from tasks.features.category import CategoryFeature
    from tasks.runtime.context import RunContext

    ctx = RunContext(parse_config(PLUGIN_CONFIG), str(dataset), StageCache(tmp_path / "c"))
    slices = {s["name"]: s for s in ctx.features_slice()}
    assert slices["notes"]["code"] == code_version(HashedTokens)  # a plugin type: its module's source
    assert slices["carrier"]["code"] == class_version(CategoryFeature)  # a built-in type: its modules' trees
    assert slices["notes"]["code"] != slices["carrier"]["code"]


def test_code_version_is_the_module_source_hash_unless_a_version_is_declared():
    import hashlib
    import inspect

    from prepflow_example_plugin import stages

    from core.plugins import code_version
    from tasks.config.plugins import code_key
    from tests.custom_stage_helpers import LogDistance

    expected = hashlib.sha256(inspect.getsource(stages).encode()).hexdigest()
    assert code_version(stages.Haversine) == f"sha256:{expected}"
    versioned = type("Versioned", (LogDistance,), {"version": "2024-06"})
    assert code_version(versioned) == "version:2024-06"
    plain = parse_config(config([])).model_dump(mode="json", exclude_none=True)
    assert code_key(plain) == {}  # plugin-free configs keep their artifact ids
    assert set(code_key(parse_config(PLUGIN_CONFIG).model_dump(mode="json", exclude_none=True))["plugins"]) == {
        "stage:haversine", "stage:frequency_encode", "feature:hashed_tokens",
        "feature:prepflow_example_plugin.features:HashedTokens"}


# ---- the CLI -----------------------------------------------------------------------------------------------

@pytest.mark.integration  # real processes: prepflow run with its local Prefect server, or fresh interpreters
def test_cli_runs_the_plugin_end_to_end_and_rejects_a_bad_dag_before_reading(cli, dataset, tmp_path):
    cfg = write_config(PLUGIN_CONFIG, tmp_path / "config.yaml")
    result = cli("run", cfg, "--dataset", dataset, "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache",
                 "--json")
    assert result.returncode == 0, result.stderr
    summary = result.json()
    stages = [s["name"] for s in summary["stages"]]
    assert stages.index("fill_missing") < stages.index("frequency_encode") < stages.index("haversine") < \
        stages.index("balance")
    assert Artifact.open(summary["artifact_path"]).metadata["distance_km"]["type"] == "number"

    bad = json.loads(json.dumps(PLUGIN_CONFIG))
    bad["stages"][0]["after"] = "haversine"
    failed = cli("run", write_config(bad, tmp_path / "bad.yaml"), "--dataset", dataset, "--output", tmp_path / "out",
                 "--cache-dir", tmp_path / "cache2")
    assert failed.returncode == 2, failed.stderr
    assert "custom stages form a cycle: 'haversine' runs after 'haversine'" in failed.stderr
    assert not (tmp_path / "cache2").exists()
