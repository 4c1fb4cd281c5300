"""``prepflow run --extend``: the parent's fit and rows kept, vocabularies extended, new files only
(DESIGN section 10, "Extend")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ConfigError, ValidationFailed
from flows.api import run
from storage.artifact import Artifact
from tasks.config.constants import SPLIT_NAMES
from tasks.serving.preprocessor import Preprocessor
from tasks.vocab.extend import extend_vocabulary
from tests.helpers import InProcess, artifact_files, write_config, write_csv

CONFIG = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
          "output_features": [{"name": "y", "type": "binary"}]}
BASE = ["a", "b", "c", "d"]


def day(seed: int, n: int = 300, extra: dict[str, int] | None = None, shift: float = 0.0) -> pd.DataFrame:
    """``n`` rows of BASE categories, with ``extra`` values repeated as many times as given."""
    rng = np.random.default_rng(seed)
    values = list(rng.choice(BASE, n - sum((extra or {}).values())))
    for value, count in (extra or {}).items():
        values += [value] * count
    values = list(rng.permutation(values))
    return pd.DataFrame({"x": (rng.normal(size=n) + shift).round(4), "c": values, "y": rng.integers(0, 2, n)})


@pytest.fixture
def data(tmp_path) -> Path:
    folder = tmp_path / "data"
    write_csv(day(0), folder / "day_0.csv")
    write_csv(day(1), folder / "day_1.csv")
    return folder


def _parent(data: Path, tmp_path: Path, config=CONFIG) -> dict:
    return run(config, data, tmp_path / "out", cache_dir=tmp_path / "cache")


def _extend(data: Path, tmp_path: Path, config=CONFIG, out: str = "out", **kwargs) -> dict:
    return run(config, data, tmp_path / out, cache_dir=tmp_path / "cache", extend=True, **kwargs)


def _by_row(art: Artifact) -> dict[str, np.ndarray]:
    """Every split's columns with a ``split`` column, ordered by ``__row__``."""
    parts = [dict(art.read_split(s), split=np.full(art.num_rows(s), i)) for i, s in enumerate(SPLIT_NAMES)]
    merged = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    order = np.argsort(merged["__row__"], kind="stable")
    return {k: v[order] for k, v in merged.items()}


def test_category_vocabulary_keeps_the_parent_prefix_and_appends_by_count(data, tmp_path):
    parent = _parent(data, tmp_path)
    write_csv(day(2, extra={"zz": 30, "new": 30, "most": 50}), data / "day_2.csv")
    child = _extend(data, tmp_path)
    before = Artifact.open(parent["artifact_path"]).metadata["c"]["idx2str"]
    after = Artifact.open(child["artifact_path"]).metadata["c"]["idx2str"]
    assert after[:len(before)] == before
    # counted over the new files' fit (train) rows: "most" first; "new" and "zz" tie or not, bytes break ties
    added = after[len(before):]
    freq = Artifact.open(child["artifact_path"]).metadata["c"]["str2freq"]
    assert sorted(added) == ["most", "new", "zz"]
    assert added == sorted(added, key=lambda v: (-freq[v], v.encode()))
    assert child["mode"] == "extend" and child["parent"]["artifact_id"] == parent["artifact_id"]


@settings(max_examples=60, deadline=None)
@given(parent=st.lists(st.text(min_size=1, max_size=3), unique=True, max_size=6),
       new=st.dictionaries(st.text(min_size=1, max_size=3), st.integers(1, 9), max_size=10),
       min_frequency=st.integers(1, 4), most_common=st.integers(1, 10))
def test_extension_is_a_prefix_in_count_then_bytes_order_within_the_cap(parent, new, min_frequency, most_common):
    parent = [v for v in parent if v != "<UNK>"][:most_common]
    meta = {"idx2str": ["<UNK>", *parent], "str2freq": {"<UNK>": 0, **{v: 5 for v in parent}},
            "vocab_size": 1 + len(parent)}
    grown, past_cap, at_cap = extend_vocabulary(meta, new, min_frequency, most_common)
    added = grown["idx2str"][len(meta["idx2str"]):]
    assert grown["idx2str"][:len(meta["idx2str"])] == meta["idx2str"]
    assert all(grown["str2freq"][v] >= min_frequency and v not in meta["idx2str"] for v in added)
    assert added == sorted(added, key=lambda v: (-grown["str2freq"][v], v.encode()))
    assert len(grown["idx2str"]) - 1 <= most_common and grown["vocab_size"] == len(grown["idx2str"])
    eligible = [v for v, n in new.items() if v not in meta["idx2str"] and n >= min_frequency]
    assert past_cap == sum(new[v] for v in eligible if v not in added)
    assert at_cap == (len(grown["idx2str"]) - 1 >= most_common)


def test_parent_rows_are_byte_identical_and_linked_new_rows_equal_transform(data, tmp_path):
    parent = _parent(data, tmp_path)
    new = day(2, extra={"e": 40})
    write_csv(new, data / "day_2.csv")
    child = _extend(data, tmp_path)
    p_art, c_art = Artifact.open(parent["artifact_path"]), Artifact.open(child["artifact_path"], verify=True)
    p_rows, c_rows = _by_row(p_art), _by_row(c_art)
    n_parent = len(p_rows["__row__"])
    for name, values in p_rows.items():  # joined by __row__: the parent's rows, ids and splits unchanged
        assert np.array_equal(c_rows[name][:n_parent], values), name
    for split in SPLIT_NAMES:  # the parent's shards are linked, not rewritten
        for rel in p_art.manifest["files"]:
            if rel.startswith(f"{split}/"):
                assert (c_art.path / rel).stat().st_ino == (p_art.path / rel).stat().st_ino
    assert np.array_equal(c_rows["__row__"][n_parent:], np.arange(n_parent, n_parent + len(new)))
    expected = Preprocessor.load(child["artifact_path"]).transform(pd.read_csv(data / "day_2.csv"))
    for name in ("x", "c", "y"):
        assert np.array_equal(c_rows[name][n_parent:], expected[name]), name
    assert (c_rows["c"][n_parent:] == c_art.metadata["c"]["str2idx"]["e"]).any()  # "e" got its own id
    assert c_art.metadata["x"] == p_art.metadata["x"]  # the parent's statistics, unchanged
    ranges = [f["row_range"] for f in c_art.manifest["dataset_files"]]
    assert ranges == [[0, 300], [300, 600], [600, 900]]
    assert c_art.manifest["mode"] == "extend" and p_art.manifest["mode"] == "refit"
    assert c_art.manifest["parent"] == {"artifact_id": parent["artifact_id"],
                                        "path": str(Path(parent["artifact_path"]).resolve())}


def test_id_map_of_the_parent_is_the_identity(data, tmp_path):
    parent = _parent(data, tmp_path)
    write_csv(day(2, extra={"e": 40}), data / "day_2.csv")
    child = _extend(data, tmp_path)
    mapping = Artifact.open(child["artifact_path"]).id_map(parent["artifact_path"])
    size = Artifact.open(parent["artifact_path"]).metadata["c"]["vocab_size"]
    assert np.array_equal(mapping["c"], np.arange(size, dtype=np.int32))


def test_new_rows_split_by_seed_and_row_id(data, tmp_path):
    from tasks.split.extend import random_ids

    _parent(data, tmp_path)
    write_csv(day(2), data / "day_2.csv")
    child = _by_row(Artifact.open(_extend(data, tmp_path)["artifact_path"]))
    new = child["__row__"] >= 600
    assert np.array_equal(child["split"][new], random_ids(child["__row__"][new], [0.7, 0.1, 0.2], 42))


def test_missing_or_rewritten_parent_file_is_refused(data, tmp_path, capfd):
    config = write_config(CONFIG, tmp_path / "config.yaml")
    _parent(data, tmp_path)
    write_csv(day(2), data / "day_2.csv")
    shutil.move(data / "day_0.csv", tmp_path / "day_0.csv")
    args = ["run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache",
            "--extend"]
    missing = InProcess(capfd, *args)
    errors = [line for line in missing.stderr.splitlines() if line.startswith("prepflow: error:")]
    assert missing.returncode == 2 and len(errors) == 1 and "day_0.csv" in errors[0]
    write_csv(day(7), data / "day_0.csv")  # the same name, other bytes
    rewritten = InProcess(capfd, *args)
    errors = [line for line in rewritten.stderr.splitlines() if line.startswith("prepflow: error:")]
    assert rewritten.returncode == 2 and len(errors) == 1 and "day_0.csv" in errors[0] and "changed" in errors[0]
    assert len(list((tmp_path / "out").glob("*/manifest.json"))) == 1  # nothing published


def test_config_difference_is_refused_naming_the_key(data, tmp_path):
    _parent(data, tmp_path)
    write_csv(day(2), data / "day_2.csv")
    changed = json.loads(json.dumps(CONFIG))
    changed["input_features"][1]["preprocessing"] = {"most_common": 3}
    with pytest.raises(ConfigError, match=r"input_features\[1\]\.preprocessing\.most_common"):
        _extend(data, tmp_path, config=changed)
    allowed = {**CONFIG, "validation": {"drift": {"action": "warn"}}}  # validation may differ
    assert _extend(data, tmp_path, config=allowed)["extended"]


def test_no_new_file_publishes_nothing(data, tmp_path):
    parent = _parent(data, tmp_path)
    before = sorted(p.name for p in (tmp_path / "out").iterdir())
    again = _extend(data, tmp_path)
    assert again["artifact_id"] == parent["artifact_id"] and again["stages"] == [] and not again["extended"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == before


def test_window_drops_the_oldest_files_rows(data, tmp_path):
    _parent(data, tmp_path)
    write_csv(day(2), data / "day_2.csv")
    child = _extend(data, tmp_path, window=2)
    art = Artifact.open(child["artifact_path"], verify=True)
    rows = _by_row(art)["__row__"]
    assert rows.min() == 300 and rows.max() == 899 and len(rows) == 600
    assert [f["name"] for f in art.manifest["dropped_files"]] == ["day_0.csv"]
    assert [f["name"] for f in art.manifest["dataset_files"]] == ["day_1.csv", "day_2.csv"]
    assert sum(art.manifest["rows"].values()) == 600


def test_the_same_extend_on_1_3_7_partitions_is_byte_identical(data, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    _parent(data, tmp_path)
    write_csv(day(2, extra={"e": 40, "f": 20}), data / "day_2.csv")
    children = []
    for n in (1, 3, 7):
        shutil.copytree(tmp_path / "out", tmp_path / f"out{n}")
        summary = run(CONFIG, data, tmp_path / f"out{n}", cache_dir=tmp_path / f"cache{n}", extend=True,
                      npartitions=n)
        children.append(artifact_files(summary["artifact_path"]))
    manifests = [json.loads(c.pop("manifest.json")) for c in children]
    for m in manifests:  # the parent's path differs between the copies; everything else is the same
        m.pop("parent")
    assert children[0] == children[1] == children[2]
    assert manifests[0] == manifests[1] == manifests[2]


def test_drift_fail_refuses_and_refit_is_advised_at_the_cap(data, tmp_path):
    _parent(data, tmp_path)
    write_csv(day(2, shift=4.0), data / "day_2.csv")
    failing = {**CONFIG, "validation": {"drift": {"action": "fail"}}}
    with pytest.raises(ValidationFailed, match="drift gate failed"):
        _extend(data, tmp_path, config=failing)
    assert len(list((tmp_path / "out").glob("*/manifest.json"))) == 1  # nothing published
    child = _extend(data, tmp_path)
    assert any(r.startswith("x: psi") for r in child["refit_advised"])


def test_a_vocabulary_at_its_cap_leaves_new_values_unk_and_advises_a_refit(tmp_path):
    capped = json.loads(json.dumps(CONFIG))
    capped["input_features"][1]["preprocessing"] = {"most_common": 5}
    folder = tmp_path / "data"
    write_csv(day(0), folder / "day_0.csv")
    _parent(folder, tmp_path, capped)
    write_csv(day(2, extra={"e": 60, "f": 40}), folder / "day_2.csv")
    child = _extend(folder, tmp_path, capped)
    meta = Artifact.open(child["artifact_path"]).metadata["c"]
    assert meta["idx2str"][-1] == "e" and "f" not in meta["str2idx"]
    assert any("c: vocabulary at its cap" in r for r in child["refit_advised"])
    stats = Artifact.open(child["artifact_path"]).manifest["statistics"]
    assert stats["vocab.unk_past_cap.c"]["count"] > 0


def test_inspect_prints_the_chain_back_to_the_last_refit(data, tmp_path, capfd):
    parent = _parent(data, tmp_path)
    write_csv(day(2), data / "day_2.csv")
    first = _extend(data, tmp_path)
    write_csv(day(3), data / "day_3.csv")
    second = _extend(data, tmp_path)
    assert second["parent"]["artifact_id"] == first["artifact_id"]
    shown = InProcess(capfd, "inspect", second["artifact_path"])
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    start = lines.index("lineage (extend of):")
    assert [line.split()[:2] for line in lines[start + 1:start + 3]] == [[first["artifact_id"], "extend"],
                                                                        [parent["artifact_id"], "refit"]]


def test_a_vocabulary_stored_as_a_file_is_extended_as_a_prefix(data, tmp_path, monkeypatch):
    from storage import vocab_store
    from tasks.features import category
    from tasks.vocab import extend

    monkeypatch.setattr(category, "INLINE_MAX", 3)  # every vocabulary here goes to a Parquet file
    monkeypatch.setattr(extend, "INLINE_MAX", 3)
    parent = _parent(data, tmp_path)
    write_csv(day(2, extra={"e": 40, "f": 30}), data / "day_2.csv")
    child = _extend(data, tmp_path)

    def values(summary):
        art = Artifact.open(summary["artifact_path"], verify=True)
        rel = art.metadata["c"]["vocab_file"]["path"]
        return vocab_store.read(art.path / rel)["value"].to_pylist()

    before, after = values(parent), values(child)
    assert after[:len(before)] == before and after[len(before):] == ["e", "f"]
    rows = _by_row(Artifact.open(child["artifact_path"]))
    expected = Preprocessor.load(child["artifact_path"]).transform(pd.read_csv(data / "day_2.csv"))
    assert np.array_equal(rows["c"][600:], expected["c"])


def test_the_report_says_a_refit_is_advised(tmp_path):
    capped = json.loads(json.dumps(CONFIG))
    capped["input_features"][1]["preprocessing"] = {"most_common": 4}
    folder = tmp_path / "data"
    write_csv(day(0), folder / "day_0.csv")
    _parent(folder, tmp_path, capped)
    write_csv(day(2, extra={"e": 60}), folder / "day_2.csv")
    child = _extend(folder, tmp_path, capped)
    page = Path(child["report_path"]).read_text()
    assert "refit advised" in page and "c: vocabulary at its cap" in page and "extend of" in page


def test_an_object_store_output_is_refused_before_any_data_is_read(data, tmp_path):
    with pytest.raises(ConfigError, match="object store"):
        run(CONFIG, data, "s3://bucket/out", cache_dir=tmp_path / "cache", extend=True)


def test_a_set_feature_is_refused_naming_it(data, tmp_path):
    with_set = {**CONFIG, "input_features": [*CONFIG["input_features"], {"name": "s", "type": "set", "column": "c"}]}
    _parent(data, tmp_path, with_set)
    write_csv(day(2), data / "day_2.csv")
    with pytest.raises(ConfigError, match="feature 's' is of type set"):
        _extend(data, tmp_path, config=with_set)


def test_the_extend_nodes_keep_the_stage_contract(data, tmp_path):
    import dataclasses

    from flows.extend import expand_extend
    from flows.extend_context import extend_context
    from tasks.graph import run_graph
    from tasks.split import extend as split_extend
    from tasks.vocab import extend as vocab_extend
    from tests.stage_check import check_stage

    _parent(data, tmp_path)
    write_csv(day(2, extra={"e": 40}), data / "day_2.csv")
    ctx = extend_context(CONFIG, data, str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    results = run_graph(ctx, nodes=expand_extend(), until="fill_missing")

    def other(**split) -> object:
        pre = ctx.config.preprocessing
        config = ctx.config.model_copy(update={"preprocessing": pre.model_copy(
            update={"split": pre.split.model_copy(update=split)})})
        return dataclasses.replace(ctx, config=config)

    check_stage(split_extend.NODE, ctx, [results["ingest"]], [lambda: other(seed=7)], tmp_path / "split")
    check_stage(vocab_extend.NODE, ctx, [results[n] for n in vocab_extend.NODE.inputs],
                [lambda: dataclasses.replace(ctx, extend={**ctx.extend, "parent": {**ctx.extend["parent"],
                                                                                     "artifact_id": "other"}})],
                tmp_path / "vocab")


def test_an_untyped_config_extends_the_artifact_it_typed(data, tmp_path):
    untyped = {**CONFIG, "input_features": [{"name": "x"}, {"name": "c"}]}
    parent = _parent(data, tmp_path, untyped)
    write_csv(day(2), data / "day_2.csv")
    child = _extend(data, tmp_path, config=untyped)
    assert child["extended"] and child["parent"]["artifact_id"] == parent["artifact_id"]


def test_a_one_row_file_extends_whatever_split_it_lands_in(data, tmp_path):
    parent = _parent(data, tmp_path)
    write_csv(day(2, n=1), data / "day_2.csv")
    child = _extend(data, tmp_path)
    assert sum(child["rows"].values()) == sum(parent["rows"].values()) + 1
    assert sum(child["new_rows"].values()) == 1
