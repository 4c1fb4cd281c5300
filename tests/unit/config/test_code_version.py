"""Which modules a stage's cache version covers (core/code_version.py): its module, what it imports
directly, and through a dispatcher (``CODE_VERSION_FOLLOWS_IMPORTS``) what the dispatcher imports."""

from __future__ import annotations

import json

import pytest

from core import code_version
from core.code_version import hashed_modules
from tasks.graph import NODES


@pytest.mark.parametrize("stage", ["balance", "vocab", "encode"])
def test_stages_that_read_prepared_partitions_follow_the_code_that_prepares_them(stage):
    module = next(n.module for n in NODES if n.name == stage)
    covered = hashed_modules(module)
    assert {"tasks.custom.prepared", "tasks.runtime.timeseries_windows", "tasks.custom.apply", "tasks.runtime.frame"} <= set(covered)


def test_a_module_that_is_not_a_dispatcher_stops_at_its_direct_imports():
    covered = set(hashed_modules("tasks.ingest.stage"))
    assert "tasks.ingest.stage" in covered
    assert "tasks.runtime.timeseries_windows" not in covered and "tasks.encode.stage" not in covered


@pytest.mark.parametrize(("stage", "parts", "their_imports"), [
    ("tasks.media_cache.stage",
     {"tasks.media_cache.sources", "tasks.media_cache.hashing", "tasks.media_cache.decoding", "tasks.media_cache.rewriting"},
     {"tasks.runtime.frame", "storage.fs", "tasks.features.media", "tasks.runtime.dask_run"}),
    ("tasks.validate.stage", {"tasks.validate.views"}, {"storage.npy", "tasks.runtime.frame", "tasks.runtime.outputs"}),
])
def test_a_stage_split_into_files_is_versioned_with_what_its_parts_import(stage, parts, their_imports):
    """A stage's parts in their own modules (media_cache's hashing, decoding and rewriting; validate's views): the
    code they call (the part writer, the positioned write, the media feature's codec) still versions the stage."""
    covered = set(hashed_modules(stage))
    assert parts <= covered
    assert their_imports <= covered

def _source(tmp_path, text: str):
    path = tmp_path / "mod.py"
    path.write_text(text)
    return path


def test_a_parse_is_kept_by_content_and_read_back_without_parsing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = _source(tmp_path, '"""Doc."""\nimport tasks.runtime.frame\nX = 1\n')
    first = code_version._cached_parse("tasks.mod", path)
    assert first["imports"] == ["tasks.runtime.frame"] and len(list((tmp_path / "xdg" / "prepflow" / "code-versions").iterdir())) == 1

    def no_parse(*args):
        raise AssertionError("parsed again")

    monkeypatch.setattr(code_version, "_parse", no_parse)
    assert code_version._cached_parse("tasks.mod", path) == first  # read back, not parsed
    path.write_text('"""Doc."""\nimport tasks.runtime.frame\nX = 2\n')  # an edit: other bytes, another entry
    with pytest.raises(AssertionError, match="parsed again"):
        code_version._cached_parse("tasks.mod", path)


def test_edits_change_the_digest_and_docstrings_do_not(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    base = code_version._cached_parse("tasks.mod", _source(tmp_path, '"""Doc."""\nX = 1\n'))["digest"]
    reworded = code_version._cached_parse("tasks.mod", _source(tmp_path, '"""Other doc."""\nX = 1\n'))["digest"]
    edited = code_version._cached_parse("tasks.mod", _source(tmp_path, '"""Doc."""\nX = 2\n'))["digest"]
    assert base == reworded != edited


def test_an_unusable_cache_only_costs_the_parse(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # mkdir fails under a file
    path = _source(tmp_path, "import tasks.runtime.frame\n")
    assert code_version._cached_parse("tasks.mod", path)["imports"] == ["tasks.runtime.frame"]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    code_version._cached_parse("tasks.mod", path)
    (entry,) = (tmp_path / "xdg" / "prepflow" / "code-versions").iterdir()
    entry.write_text("{not json")  # a damaged entry is parsed again and rewritten
    assert code_version._cached_parse("tasks.mod", path)["imports"] == ["tasks.runtime.frame"]
    assert json.loads(entry.read_text())["imports"] == ["tasks.runtime.frame"]


def test_a_feature_types_code_joins_the_artifact_id(monkeypatch):
    """A change in a built-in feature type's code gives a new artifact id (not only new stage cache keys): a
    rerun into an output that holds the old artifact must not return it."""
    from tasks.config import plugins
    from tasks.graph import artifact_code_versions
    from tasks.publish.stage import artifact_id

    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}]}
    before = artifact_id("fp", config, artifact_code_versions())
    real = plugins.class_version
    monkeypatch.setattr(plugins, "class_version", lambda cls: real(cls) + ("-edited" if cls.__name__ == "NumberFeature"
                                                                         else ""))
    assert artifact_id("fp", config, artifact_code_versions()) != before
    only_category = {"input_features": [{"name": "c", "type": "category"}]}
    monkeypatch.setattr(plugins, "class_version", real)
    kept = artifact_id("fp", only_category, artifact_code_versions())
    monkeypatch.setattr(plugins, "class_version", lambda cls: real(cls) + ("-edited" if cls.__name__ == "NumberFeature"
                                                                         else ""))
    assert artifact_id("fp", only_category, artifact_code_versions()) == kept  # a type the config does not use
