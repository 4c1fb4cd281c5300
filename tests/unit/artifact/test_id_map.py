"""Id maps across a refit: ``Artifact.open(NEW).id_map(PARENT)`` and ``prepflow inspect NEW --id-map PARENT``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import id_map
from storage.artifact import Artifact
from tasks.serving.preprocessor import Preprocessor
from tests.cli_inprocess import runner
from tests.helpers import run, write_csv

CONFIG = {
    "input_features": [
        {"name": "color", "type": "category"},
        {"name": "big", "type": "category"},  # a Parquet vocabulary (INLINE_MAX patched below)
        {"name": "pet", "type": "binary"},
        {"name": "tags", "type": "set"},
        {"name": "words", "type": "bag"},
        {"name": "steps", "type": "sequence"},
        {"name": "note", "type": "text"},
    ],
    "output_features": [{"name": "label", "type": "binary"}],
}
WORDS = np.array([f"w{i}" for i in range(12)])


def frame(n: int, seed: int, colors: list[str], weights: list[float], words: np.ndarray, pets=("cat", "dog")):
    rng = np.random.default_rng(seed)
    p = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    w = rng.dirichlet(np.ones(len(words)))

    def texts(k: int) -> list[str]:
        return [" ".join(rng.choice(words, rng.integers(1, k), p=w)) for _ in range(n)]

    return pd.DataFrame({"color": rng.choice(colors, n, p=p), "big": [f"b{v}" for v in rng.zipf(1.5, n) % 60],
                         "pet": rng.choice(list(pets), n), "tags": texts(4), "words": texts(5),
                         "steps": texts(6), "note": texts(7), "label": rng.integers(0, 2, n).astype(bool)})


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A parent and a refit on data whose frequencies changed: values left, arrived and changed rank."""
    from tasks.features import category

    tmp = tmp_path_factory.mktemp("idmap")
    before = frame(500, 1, ["red", "green", "blue", "black", "white"], [40, 30, 15, 10, 5], WORDS[:9])
    after = frame(500, 2, ["white", "blue", "green", "pink", "teal"], [35, 30, 20, 10, 5], WORDS[3:])
    old = category.INLINE_MAX
    category.INLINE_MAX = 20
    try:
        parent = run(CONFIG, write_csv(before, tmp / "before.csv"), tmp / "p")
        new = run(CONFIG, write_csv(after, tmp / "after.csv"), tmp / "n")
    finally:
        category.INLINE_MAX = old
    return (Artifact.open(parent.artifact["artifact_path"]), Artifact.open(new.artifact["artifact_path"]),
            tmp / "after.csv")


def test_every_parent_token_round_trips(pair):
    parent, new, _ = pair
    maps = new.id_map(parent.path)
    assert set(maps) == {"color", "big", "pet", "tags", "words", "steps", "note", "note_char"}
    assert "note_char" in new.feature_spec["feature_spec"]  # keyed by the column that holds those ids
    assert "vocab_file" in new.metadata["big"] and "vocab_file" in parent.metadata["big"]
    olds = id_map.vocabularies(parent.metadata, parent.path)
    news = id_map.vocabularies(new.metadata, new.path)
    moved = 0
    for name, mapping in maps.items():
        old_vocab, new_vocab = olds[name].to_pylist(), news[name].to_pylist()
        assert mapping.dtype == np.int32 and mapping.shape == (len(old_vocab),)
        unk = new_vocab.index(id_map.UNK) if id_map.UNK in new_vocab else id_map.MISSING
        for i, token in enumerate(old_vocab):
            assert mapping[i] == (new_vocab.index(token) if token in new_vocab else unk), (name, token)
        moved += int(np.count_nonzero(mapping != np.arange(len(mapping))))
    assert moved > 0  # the frequencies changed: ids did move
    assert int(maps["color"][olds["color"].to_pylist().index("red")]) == news["color"].to_pylist().index("<UNK>")


def test_map_carries_parent_ids_to_the_new_encoding(pair):
    parent, new, data = pair
    rows = pd.read_csv(data)
    old_ids = Preprocessor.load(parent.path).transform(rows)
    new_ids = Preprocessor.load(new.path).transform(rows)
    maps = new.id_map(parent)  # an opened Artifact works as well as a path
    for name in ("color", "big"):
        np.testing.assert_array_equal(maps[name][np.asarray(old_ids[name]).astype(np.int64)],
                                      np.where(np.isin(rows[name].astype(str), id_map.vocabularies(
                                          parent.metadata, parent.path)[name].to_pylist()),
                                          np.asarray(new_ids[name]), maps[name][0]), err_msg=name)


def test_embedding_rows_follow_their_values(pair):
    parent, new, _ = pair
    maps = new.id_map(parent.path)
    old_vocab = id_map.vocabularies(parent.metadata, parent.path)["color"].to_pylist()
    new_vocab = id_map.vocabularies(new.metadata, new.path)["color"].to_pylist()
    old_weight = np.arange(len(old_vocab), dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)
    new_weight = np.full((len(new_vocab), 3), -1.0, np.float32)
    kept = maps["color"] != maps["color"][old_vocab.index("red")]  # values still here (red left: <UNK>)
    new_weight[maps["color"][kept]] = old_weight[kept]  # docs/loader.md's recipe, restricted to kept values
    for token in ("blue", "green", "white"):
        assert new_weight[new_vocab.index(token), 0] == old_vocab.index(token)


@pytest.fixture
def prepflow(capfd, monkeypatch):
    yield from runner(capfd, monkeypatch)


def test_inspect_prints_what_moved(pair, prepflow):
    parent, new, _ = pair
    out = prepflow("inspect", new.path, "--id-map", parent.path, "--json")
    assert out.code == 0, out.text
    report = json.loads(out.out.strip().splitlines()[-1])
    color = report["features"]["color"]
    assert report["parent"] == parent.artifact_id and report["artifact_id"] == new.artifact_id
    assert color["left"] == 2 and color["new"] == 2  # red, black left; pink, teal arrived
    assert color["kept"] + color["moved"] + color["left"] == color["parent_size"] == parent.metadata["color"]["vocab_size"]
    text = prepflow("inspect", new.path, "--id-map", parent.path)
    assert text.code == 0
    line = next(x for x in text.lines if x.strip().startswith("color "))
    assert f"left -> <UNK> {color['left']}" in line and f"new {color['new']}" in line


values = st.lists(st.text(max_size=4), unique=True, max_size=30)


@settings(max_examples=200, deadline=None)
@given(values, values, st.booleans())
def test_map_ids_property(parent, new, with_unk):
    new = [id_map.UNK, *[v for v in new if v != id_map.UNK]] if with_unk else [v for v in new if v != id_map.UNK]
    mapping = id_map.map_ids(pa.array(parent, pa.string()), pa.array(new, pa.string()))
    assert mapping.dtype == np.int32 and len(mapping) == len(parent)
    for i, token in enumerate(parent):
        if token in new:
            assert new[mapping[i]] == token
        else:
            assert mapping[i] == (0 if with_unk else id_map.MISSING)
    m = id_map.moves(pa.array(parent, pa.string()), pa.array(new, pa.string()))
    assert m.kept + m.moved + m.left == len(parent)
    assert m.added == len(set(new) - set(parent)) and m.left == len(set(parent) - set(new))
