"""Type inference: a table of crafted columns, one per failure mode Ludwig's users hit, plus the
things the stage must guarantee (full pass, partition independence, `prepflow infer` output,
`prepflow run` on untyped features gives the same artifact as the hand-typed config)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from core.errors import ConfigError, DataError
from flows.cli import main as cli_main
from flows.infer import infer_dataset
from tasks.config.loader import load_config
from tasks.graph import execute
from tasks.infer_types import profile, rules
from tasks.infer_types import stage as infer_types
from tasks.ingest import spec as ingest_spec
from tasks.ingest import stage as ingest
from tasks.runtime import frame
from tests.helpers import run, write_csv

N = 1000
RNG = np.random.default_rng(2024)


def _with_missing(values, share=0.1):
    values = pd.Series(values, dtype=object)
    values[RNG.random(len(values)) < share] = None
    return values


WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches near old "
         "river banks").split()
TAGS = ["red", "green", "blue", "small", "large", "cheap", "new", "used"]

# (column, values, expected type or None = excluded, pattern the reason must match)
CASES = [
    # numeric ids inferred as category and vice versa
    ("age", RNG.integers(0, 81, N), "number", r"distinct integers \(0\.\.80\)"),
    ("zip", [f"{z:05d}" for z in RNG.choice([2134, 2139, 501, 10001, 94110], N)], "category", r"leading zeros"),
    ("zip_code", RNG.choice([10001, 94110, 60614, 73301], N), "category", r"name 'zip_code' suggests a code"),
    ("store", RNG.choice([40512, 40877, 51230, 66001, 70400, 88112], N), "category", r"name 'store' suggests a code"),
    ("shelf", RNG.choice([40512, 40877, 51230, 66001, 70400, 88112], N), "category", r"fixed-width 5-digit codes"),
    ("year", RNG.integers(1990, 2021, N), "number", r"distinct integers \(1990\.\.2020\)"),
    ("user_id", RNG.integers(0, 50, N), "category", r"suggests a code"),
    ("two_codes", RNG.choice([1, 2], N), "binary", r"two distinct values .*true label '2': the larger number"),
    ("price", np.round(RNG.exponential(20, N), 2), "number", r"distinct numeric values"),
    ("late_floats", [*range(1, 11), *np.round(RNG.normal(5, 2, N - 10), 3)], "number", r"numeric values"),
    ("late_letters", [*map(str, range(100, 120)), *(f"A{i % 30}" for i in range(N - 20))], "category",
     r"distinct values"),
    ("score_with_junk", [*(str(x) for x in RNG.integers(0, 100, N - 5)), *["?"] * 5], "category",
     r"not numbers, so not a number column"),
    # exactly two values: binary, with the true label chosen and explained
    ("sex", RNG.choice(["male", "female"], N, p=[0.65, 0.35]), "binary",
     r"two distinct values \('male' 6\d%, 'female' 3\d%\); true label 'female': the rarer value"),
    ("outcome", RNG.choice(["churn", "stay"], N, p=[0.8, 0.2]), "binary", r"true label 'churn': .*positive outcome"),
    ("minus_one_one", RNG.choice(["-1", "1"], N), "binary", r"true label '1': the larger number"),
    # multi-value strings
    ("genres", ["|".join(sorted(set(RNG.choice(["Action", "Comedy", "Drama", "Sci-Fi", "Film-Noir",
                                                 "(no genres listed)"], RNG.integers(1, 4))))) for _ in range(N)],
     "set", r"combinations of 6 pipe-separated tokens \(e\.g\. "),
    ("labels_semicolon", [";".join(sorted(set(RNG.choice(TAGS, RNG.integers(1, 4))))) for _ in range(N)], "set",
     r"8 semicolon-separated tokens"),
    ("city_state", [f"city{c}" + (", DC" if c % 9 == 0 else "") for c in RNG.integers(0, 300, N)], "category",
     r"distinct"),  # a comma in a few values is not a list
    ("amount", [f"{x:,}" for x in RNG.integers(0, 10**6, N)], "category",
     r"thousands separators \(e\.g\. '\d+,\d\d\d'.*\): remove the separators to use them as numbers"),
    # epoch timestamps in a column named like a time
    ("timestamp", RNG.integers(964_982_703, 1_537_799_250, N), "date",
     r"^epoch seconds \(20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\.\.2018-\d\d-\d\d [\d:]+ UTC\) in a column named like a time$"),
    ("created_at_ms", RNG.integers(1_600_000_000_000, 1_700_000_000_000, N), "date", r"epoch milliseconds"),
    ("runtime", RNG.integers(80, 200, N), "number", r"distinct integers"),  # named like a time, minutes
    # heavy tails
    ("followers", np.floor(RNG.lognormal(3, 2.5, N)).astype(int), "number",
     r"heavy right tail .*consider preprocessing: \{normalization: log1p\}"),
    ("temperature", np.round(RNG.normal(20, 5, N), 1), "number", r"^\d+ distinct numeric values \([-\d.]+\)$"),
    # booleans spelled many ways
    ("yes_no", _with_missing(RNG.choice(["yes", "no"], N)), "binary", r"boolean values.*missing"),
    ("y_n_mixed_case", RNG.choice(["Y", "N", "y", "n"], N), "binary", r"boolean values"),
    ("one_zero", RNG.choice([0, 1], N), "binary", r"boolean values"),
    ("true_false", RNG.choice(["TRUE", "false", "True"], N), "binary", r"boolean values"),
    ("all_yes", RNG.choice(["yes", "Yes", "y"], N), None, r"every value means the same boolean"),
    # single-value and empty columns
    ("constant", ["A"] * N, None, r"single value \('A'\)"),
    ("constant_with_missing", _with_missing(["A"] * N, 0.5), None, r"single value"),
    ("all_missing", [None] * N, None, r"every value is missing"),
    # ID-like columns
    ("passenger_id", np.arange(1, N + 1), None, r"ID-like .*sequential"),
    ("ticket", RNG.permutation(np.arange(10**6, 10**6 + 7 * N, 7)), None, r"ID-like .*named like an identifier"),
    ("serial", RNG.permutation(np.arange(10**6, 10**6 + 7 * N, 7)), None, r"ID-like .*fixed-width 7-digit"),
    ("order_ref", RNG.permutation(np.arange(10**6, 10**6 + 7 * N, 7)).astype(str), None, r"no arithmetic meaning"),
    ("count", RNG.permutation(np.arange(10**6, 10**6 + 7 * N, 7)) // RNG.integers(1, 10**4, N), "number",
     r"distinct integers"),  # unique, but widths vary: a quantity
    ("invoice_no", RNG.permutation(N) * 3 + 17, None, r"ID-like .*named like an identifier \('invoice_no'\)"),
    ("FlightNum", RNG.integers(1, 7000, N), "category", r"name 'FlightNum' suggests a code or an identifier"),
    ("flight_number", RNG.choice(RNG.integers(1, 7000, 300), N), "category", r"not a quantity"),
    ("uuid", [f"{RNG.integers(0, 16**8):08x}-1a2b-4c3d-8e9f-{i:012x}" for i in range(N)], None, r"UUIDs"),
    ("token", [f"tok{RNG.integers(0, 10**9)}x{i}" for i in range(N)], None, r"ID-like .*distinct values"),
    # cardinality of strings
    ("city", [f"city{c}" for c in RNG.integers(0, 700, N)], "category", r"high-cardinality"),
    ("phrase", RNG.choice(["New York", "San Francisco", "Los Angeles", "Salt Lake City"], N), "category",
     r"distinct (short )?phrases"),
    ("review", [" ".join(RNG.choice(WORDS, RNG.integers(4, 15))) for _ in range(N)], "text", r"free text"),
    ("tags", [" ".join(sorted(set(RNG.choice(TAGS, RNG.integers(1, 4))))) for _ in range(N)], "set",
     r"combinations of 8 space-separated tokens"),
    ("small_vocab_text", [" ".join(RNG.choice(WORDS[:6], RNG.integers(4, 9))) for _ in range(N)], "text",
     r"free text"),  # few words, but they repeat within a value: not a set
    # other modalities
    ("when", (pd.Timestamp("2020-01-01") + pd.to_timedelta(RNG.integers(0, 900, N), unit="D")).strftime("%m/%d/%Y"),
     "date", r"parses as a date"),
    ("when_iso", (pd.Timestamp("2021-06-01") + pd.to_timedelta(RNG.integers(0, 10**6, N), unit="s")).astype(str),
     "date", r"parses as a date"),
    ("photo", [f"images/{i:04d}.JPG" for i in range(N)], "image",  # the files exist (made by `crafted`)
     r"^all 1,000 values are image file paths ending in \.jpg; all 1,000 distinct files exist$"),
    ("clip", [f"s3://bucket/a/{i}.wav" for i in range(N)], "audio",
     r"^all 1,000 values are audio file URLs ending in \.wav \(URLs are not fetched: extension only\)$"),
    ("embedding", [" ".join(f"{x:.3f}" for x in RNG.normal(size=4)) for _ in range(N)], "vector",
     r"a list of 4 numbers"),
    ("json_list", [str(RNG.integers(0, 9, 3).tolist()) for _ in range(N)], "vector", r"a list of 3 numbers"),
    ("ragged", [" ".join(map(str, RNG.normal(size=RNG.integers(2, 6)).round(2))) for _ in range(N)], "timeseries",
     r"a list of numbers, of 2 to 5 values"),
]


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    df = pd.DataFrame({name: pd.Series(values, dtype=object) for name, values, _t, _r in CASES})
    df["target_unique"] = np.arange(N) + 1  # ID-like, but a target
    folder = tmp_path_factory.mktemp("infer")
    (folder / "images").mkdir()
    for path in df["photo"]:
        (folder / path).touch()  # existence is what inference checks; decoding is media_cache's
    return write_csv(df, folder / "crafted.csv")


@pytest.fixture(scope="module")
def decisions(crafted):
    inferred, rows = infer_dataset(str(crafted), target="target_unique")
    assert rows == N
    return {i.name: i for i in inferred}


@pytest.mark.parametrize("name,expected,pattern", [(c[0], c[2], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_inferred_type_and_reason(decisions, name, expected, pattern):
    item = decisions[name]
    assert item.type == expected, item.reason
    assert re.search(pattern, item.reason), item.reason


def test_a_target_is_never_excluded(decisions):
    item = decisions["target_unique"]
    assert item.output and item.type == "number" and "because it is the target" in item.reason


def test_inference_is_independent_of_partitioning(crafted, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "PART_ROWS", 128)
    columns = [c[0] for c in CASES]
    spec = ingest_spec.IngestSpec({c: "string" for c in columns}, "csv")
    ingest_spec.write_parts(ingest.read_batches(str(crafted), spec), spec, tmp_path / "data", str(crafted))
    results, sketches = [], []
    for npartitions in (1, 3, 8):
        profiles = infer_types.profile_columns(frame.parts_in(tmp_path / "data"), columns, npartitions)
        results.append({c: rules.decide(c, profiles[c]).to_json() for c in columns})
        sketches.append({c: (profiles[c]["hll"], profiles[c]["counts"], profiles[c]["token_counts"],
                             profiles[c]["sample"], profiles[c]["media_sample"], profiles[c]["media_ext"])
                         for c in columns})
    assert results[0] == results[1] == results[2]
    for other in sketches[1:]:
        for c in columns:
            assert np.array_equal(sketches[0][c][0], other[c][0]) and sketches[0][c][1:] == other[c][1:]


def test_hyperloglog_estimates_distinct_counts_and_merges_exactly():
    values = np.array([f"v{i}" for i in range(60_000)], dtype=object)
    whole = profile.hll_registers(profile._hashes(values))
    halves = np.maximum(profile.hll_registers(profile._hashes(values[::2])),
                        profile.hll_registers(profile._hashes(values[1::2])))
    assert np.array_equal(whole, halves)
    assert abs(profile.hll_estimate(whole) - 60_000) < 0.03 * 60_000
    assert profile.hll_estimate(profile.hll_registers(profile._hashes(values[:100]))) in range(97, 104)


def test_distinct_counts_cover_every_row_not_a_head_sample():
    # 12,000 rows: the first 10,000 hold 3 values, the rest are unique: a head sample calls it a category
    values = pd.Series([*np.repeat(["a", "b", "c"], [4000, 3000, 3000]), *(f"id{i}" for i in range(2000))],
                       dtype="string")
    prof = profile.profile_values(values)
    count, exact = profile.distinct(prof)
    assert count == 2003 and exact
    big = pd.Series([f"id{i % 29_000}" for i in range(30_000)], dtype="string")  # beyond exact value counts
    count, exact = profile.distinct(profile.profile_values(big))
    assert exact and count == 29_000  # the set of value hashes


def test_distinct_counts_are_exact_across_partitions_and_never_above_the_row_count(monkeypatch):
    values = pd.Series([f"u{i}" for i in range(20_000)], dtype="string")  # 20,000 unique values
    parts = [profile.profile_values(values[i::3].reset_index(drop=True)) for i in range(3)]
    merged = profile.merge_profiles(profile.merge_profiles(parts[0], parts[1]), parts[2])
    assert profile.distinct(merged) == (20_000, True)
    monkeypatch.setattr(profile, "EXACT_DISTINCT_CAP", 5_000)  # beyond it: HyperLogLog, capped at the rows
    prof = profile.profile_values(values)
    count, exact = profile.distinct(prof)
    assert not exact and count <= 20_000 and abs(count - 20_000) < 600
    item = rules.decide("user", prof)
    assert item.type is None and re.search(r"ID-like \(~\d+ distinct values in 20000 rows", item.reason)
    assert int(re.search(r"~(\d+)", item.reason).group(1)) <= 20_000


def test_native_parquet_types(tmp_path):
    df = pd.DataFrame({
        "flag": RNG.random(200) < 0.5,
        "n": RNG.integers(0, 1000, 200),
        "x": RNG.normal(size=200),
        "ts": pd.date_range("2020-01-01", periods=200, freq="h"),
        "vec": [RNG.normal(size=3) for _ in range(200)],
        "label": RNG.choice(["a", "b", "c"], 200),
        "zero_one": RNG.choice([0, 1], 200), "one_two": RNG.choice([1, 2], 200), "sex": RNG.choice(["m", "f"], 200),
    })
    path = tmp_path / "data.parquet"
    df.to_parquet(path)
    inferred = {i.name: i for i in infer_dataset(str(path), target="label")[0]}
    assert {k: i.type for k, i in inferred.items()} == {
        "flag": "binary", "n": "number", "x": "number", "ts": "date", "vec": "vector", "label": "category",
        "zero_one": "binary", "one_two": "category", "sex": "binary"}
    assert "stored as numbers" in inferred["one_two"].reason  # the binary type reads stored numbers as 0/1 only


def test_prepflow_infer_prints_a_config_that_loads(crafted, tmp_path, capsys):
    from tasks.features import REGISTRY

    assert cli_main(["infer", str(crafted), "--target", "target_unique"]) == 0
    text = capsys.readouterr().out
    data = yaml.safe_load(text)
    assert len(data["input_features"]) == sum(1 for c in CASES if c[2])
    assert "  - name: age\n    type: number  # " in text
    assert re.search(r"^#  - name: passenger_id  # ID-like", text, re.M)
    # types other engineers are still adding (image, audio, ...) are left out of the load check
    data["input_features"] = [f for f in data["input_features"] if f["type"] in REGISTRY]
    (tmp_path / "inferred.yaml").write_text(yaml.safe_dump(data))
    config = load_config(tmp_path / "inferred.yaml")
    assert [f.name for f in config.output_features] == ["target_unique"]


def test_prepflow_infer_unknown_target_is_a_usage_error(crafted, capsys):
    assert cli_main(["infer", str(crafted), "--target", "Age"]) == 2
    assert "did you mean 'age'" in capsys.readouterr().err


TITANIC_TYPED = {
    "input_features": [{"name": "Pclass", "type": "category"},
                       {"name": "Sex", "type": "binary", "preprocessing": {"fallback_true_label": "female"}},
                       {"name": "Age", "type": "number", "preprocessing": {"normalization": "minmax"}},
                       {"name": "Fare", "type": "number"}, {"name": "Embarked", "type": "category"}],
    "output_features": [{"name": "Survived", "type": "binary"}],
    "preprocessing": {"split": {"type": "stratify", "column": "Survived"}},
}


def test_run_with_untyped_features_uses_the_same_inference(titanic_csv, tmp_path):
    untyped = yaml.safe_load(yaml.safe_dump(TITANIC_TYPED))
    for f in untyped["input_features"] + untyped["output_features"]:
        f.pop("type")
    typed = run(TITANIC_TYPED, titanic_csv, tmp_path / "typed")
    inferred = run(untyped, titanic_csv, tmp_path / "untyped", npartitions=3)
    assert inferred.artifact["artifact_id"] == typed.artifact["artifact_id"]
    assert [s.stage for s in inferred.stages][:2] == ["ingest", "infer_types"]
    again = run(untyped, titanic_csv, tmp_path / "untyped", npartitions=3)
    assert all(s.cached for s in again.stages)
    stats = next(s for s in inferred.stages if s.stage == "infer_types").statistics
    assert {k: v["count"] for k, v in stats.items()} == {"infer_types.category": 2, "infer_types.number": 2,
                                                        "infer_types.binary": 2}


def test_run_rejects_an_untyped_feature_that_inference_excludes(titanic_csv, tmp_path):
    config = {"input_features": [{"name": "PassengerId"}, {"name": "Age", "type": "number"}],
              "output_features": [{"name": "Survived", "type": "binary"}]}
    with pytest.raises(DataError, match=r"feature 'PassengerId' .* has no type and inference would exclude it: "
                                        r"ID-like .*give it a 'type'"):
        run(config, titanic_csv, tmp_path)


def test_balance_with_an_untyped_number_output_is_rejected_after_inference(titanic_csv, tmp_path):
    config = {"input_features": [{"name": "Sex", "type": "category"}], "output_features": [{"name": "Fare"}],
              "preprocessing": {"oversample_minority": 0.5}}
    with pytest.raises(ConfigError, match=r"exactly one output feature of type binary or category"):
        run(config, titanic_csv, tmp_path)


# ---- image and audio: every value a media path, the sampled files exist ------------------------------

def _media_table(folder: Path, names: list[str], **extra) -> Path:
    """``data.csv`` in ``folder`` with a column ``media`` of ``names`` (empty files made for them)."""
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).touch()
    return write_csv(pd.DataFrame({"media": names, **extra}), folder / "data.csv")


def test_a_media_column_with_one_missing_file_is_excluded_naming_the_file(tmp_path):
    names = [f"img/{i:03d}.{'png' if i % 4 else 'jpeg'}" for i in range(40)]
    data = _media_table(tmp_path / "d", names, y=np.arange(40) % 2)
    decisions = {i.name: i for i in infer_dataset(str(data))[0]}
    assert decisions["media"].type == "image"
    assert decisions["media"].reason == "all 40 values are image file paths ending in .jpeg/.png; all 40 distinct files exist"
    (tmp_path / "d" / "img" / "017.png").unlink()
    item = {i.name: i for i in infer_dataset(str(data))[0]}["media"]
    assert item.type is None
    missing = tmp_path / "d" / "img" / "017.png"
    assert item.reason == (f"excluded: all 40 values are image file paths ending in .jpeg/.png, but 1 of the 40 sampled "
                           f"files does not exist or cannot be used (e.g. 'img/017.png': no file {missing}); relative "
                           f"paths resolve against {tmp_path / 'd'}. Fix the paths, or give it type: image (with "
                           "on_decode_error: skip_row to drop those rows)")
    # as the target it is kept, as a category, saying why
    target = {i.name: i for i in infer_dataset(str(data), target="media")[0]}["media"]
    assert target.type == "category" and "'img/017.png': no file" in target.reason
    assert target.reason.endswith("kept as category because it is the target")


def test_media_files_are_checked_on_a_bounded_sample_the_same_for_any_partitioning(tmp_path, monkeypatch):
    monkeypatch.setattr(profile, "MEDIA_SAMPLE", 10)
    monkeypatch.setattr(ingest, "PART_ROWS", 16)
    names = [f"clips/{i:03d}.wav" for i in range(60)]
    data = _media_table(tmp_path / "d", [*names, *names[:20]])  # 80 rows, 60 distinct values
    # the sample: the 10 distinct values with the lowest stable hashes, not the first rows or folder
    order = np.argsort(profile._hashes(np.array(names, dtype=object)), kind="stable")
    sampled = {names[i] for i in order[:10]}
    assert sampled != set(sorted(names)[:10])
    spec = ingest_spec.IngestSpec({"media": "string"}, "csv")
    ingest_spec.write_parts(ingest.read_batches(str(data), spec), spec, tmp_path / "parts", str(data))
    for npartitions in (1, 2, 5):
        prof = infer_types.profile_columns(frame.parts_in(tmp_path / "parts"), ["media"], npartitions)["media"]
        assert {v for _h, v in prof["media_sample"]} == sampled and prof["media_ext"] == {"wav": 80}
    item = {i.name: i for i in infer_dataset(str(data), npartitions=3)[0]}["media"]
    assert (item.type, item.reason) == ("audio", "all 80 values are audio file paths ending in .wav; the 10 sampled "
                                                 "files (of 60 distinct) exist")
    (tmp_path / "d" / next(n for n in names if n not in sampled)).unlink()  # outside the sample: not seen
    assert {i.name: i for i in infer_dataset(str(data))[0]}["media"].type == "audio"
    (tmp_path / "d" / min(sampled)).unlink()  # inside it
    item = {i.name: i for i in infer_dataset(str(data))[0]}["media"]
    assert item.type is None and "1 of the 10 sampled files does not exist" in item.reason
    assert repr(min(sampled)) in item.reason


@pytest.mark.parametrize("values,expected", [
    (["a.png", "b.wav", "c.png"] * 10, "category"),  # image and audio mixed: neither
    ([*(f"p{i}.png" for i in range(29)), "n/a"], None),  # one value is not a path: not an image column (ID-like)
    ([f"s{i}.m4a" for i in range(30)], None),  # soundfile cannot read m4a: not audio
    ([f"https://cdn.example.com/x/{i}.WebP?w=64" for i in range(30)], "image"),  # URL, query string, any case
    ([f"f{i}.mp3" for i in range(10)] + [f"f{i}.FLAC" for i in range(10)], "audio"),
])
def test_media_rules(tmp_path, values, expected):
    prof = profile.profile_values(pd.Series(values, dtype="string"))
    for v in values:
        if "://" not in v and "/" not in v:
            (tmp_path / v).touch()
    item = rules.decide("c", prof, media_place=rules.MediaPlace(str(tmp_path)))
    assert item.type == expected, item.reason


def test_media_paths_resolve_like_the_media_stage(tmp_path):
    (tmp_path / "root" / "pics").mkdir(parents=True)
    (tmp_path / "outside.png").touch()
    for i in range(3):
        (tmp_path / "root" / "pics" / f"{i}.png").touch()
    inside = [f"pics/{i}.png" for i in range(3)]
    place = rules.MediaPlace(str(tmp_path), {"image": "root"})
    assert rules.check_media_files(inside, "image", place).missing == []
    assert rules.check_media_files(inside, "image", rules.MediaPlace(str(tmp_path))).local == 3
    escaped = rules.check_media_files(["../outside.png", str(tmp_path / "outside.png")], "image", place)
    assert escaped.local == 2 and all("outside media_root" in why for _raw, why in escaped.missing)
    urls = rules.check_media_files(["s3://b/a.png", "x.png"], "image", rules.MediaPlace("s3://b/data"))
    assert (urls.urls, urls.local, urls.missing) == (2, 0, [])  # relative under a URL dataset: a URL, not fetched
    prof = profile.profile_values(pd.Series(inside * 3, dtype="string"))
    reason = rules.decide("c", prof, media_place=place).reason
    assert reason == "all 9 values are image file paths ending in .png; all 3 distinct files exist"
    item = rules.decide("c", prof, media_place=rules.MediaPlace(str(tmp_path / "elsewhere")))
    assert item.type is None and "3 of the 3 sampled files do not exist" in item.reason


def test_prepflow_infer_prints_image_and_audio_with_their_reasons(tmp_path, capsys):
    names = [f"img/{i}.png" for i in range(12)]
    sounds = [f"snd/{i}.flac" for i in range(12)]
    data = _media_table(tmp_path / "d", names, voice=sounds, label=[i % 2 for i in range(12)])
    (tmp_path / "d" / "snd").mkdir()
    for s in sounds:
        (tmp_path / "d" / s).touch()
    assert cli_main(["infer", str(data), "--target", "label"]) == 0
    text = capsys.readouterr().out
    assert ("  - name: media\n    type: image  # all 12 values are image file paths ending in .png; all 12 distinct "
            "files exist\n") in text
    assert "  - name: voice\n    type: audio  # all 12 values are audio file paths ending in .flac" in text
    (tmp_path / "inferred.yaml").write_text(text)
    config = load_config(tmp_path / "inferred.yaml")
    assert [(f.name, f.type) for f in config.input_features] == [("media", "image"), ("voice", "audio")]


# ---- where media paths resolve: an in-memory DataFrame, a config's media_root, the media cache -------

def _frame_ctx(df, config: dict, tmp: Path):
    from storage.cache import StageCache
    from tasks.config.loader import parse_config
    from tasks.runtime.context import RunContext

    return RunContext(parse_config(config), df, StageCache(tmp / "cache"), None, str(tmp / "out"))


def _stage_decision(df, config: dict, tmp: Path) -> rules.Inferred:
    """The pipeline's infer_types stage (after ingest) on an in-memory frame, in a fresh cache."""
    ctx = _frame_ctx(df, config, tmp)
    item = execute(infer_types.NODE, ctx, [execute(ingest.NODE, ctx, [])]).types()["media"]
    return rules.Inferred(**item)


def _config_file(config: dict, tmp: Path) -> str:
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


@pytest.mark.parametrize("dask", [False, True], ids=["pandas", "dask"])
def test_an_in_memory_frame_checks_its_media_files_like_a_csv(tmp_path, monkeypatch, dask):
    monkeypatch.chdir(tmp_path)  # a DataFrame's relative paths resolve against the working directory
    names = [f"img/{i:03d}.{'png' if i % 4 else 'jpeg'}" for i in range(40)]
    csv = _media_table(tmp_path, names, y=np.arange(40) % 2)  # the same table as a file in that folder
    df = pd.read_csv(csv)
    if dask:
        import dask.dataframe as dd

        df = dd.from_pandas(df, npartitions=3)
    config = {"input_features": [{"name": "media"}], "output_features": [{"name": "y", "type": "binary"}]}
    item = {i.name: i for i in infer_dataset(df)[0]}["media"]
    assert (item.type, item.reason) == ("image", "all 40 values are image file paths ending in .jpeg/.png; all 40 "
                                                 "distinct files exist")
    assert {i.name: i for i in infer_dataset(str(csv))[0]}["media"] == item
    assert _stage_decision(df, config, tmp_path / "ok") == item
    (tmp_path / "img" / "017.png").unlink()
    item = {i.name: i for i in infer_dataset(df)[0]}["media"]
    assert item.type is None
    assert item.reason == (f"excluded: all 40 values are image file paths ending in .jpeg/.png, but 1 of the 40 sampled "
                           f"files does not exist or cannot be used (e.g. 'img/017.png': no file "
                           f"{tmp_path / 'img' / '017.png'}); relative paths resolve against {tmp_path}. Fix the "
                           "paths, or give it type: image (with on_decode_error: skip_row to drop those rows)")
    assert {i.name: i for i in infer_dataset(str(csv))[0]}["media"] == item
    ctx = _frame_ctx(df, config, tmp_path / "missing")
    with pytest.raises(DataError, match=r"'media' .* inference would exclude it: .*'img/017\.png': no file"):
        infer_types.apply(ctx, execute(infer_types.NODE, ctx, [execute(ingest.NODE, ctx, [])]))


def test_an_in_memory_frame_resolves_against_the_configs_media_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = [f"img/{i}.png" for i in range(12)]
    for name in names:
        (tmp_path / "root" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "root" / name).touch()
    df = pd.DataFrame({"media": names, "y": [i % 2 for i in range(12)]})
    config = {"input_features": [{"name": "media"}], "output_features": [{"name": "y", "type": "binary"}],
              "defaults": {"image": {"preprocessing": {"media_root": "root"}}}}  # relative: to the working dir
    assert {i.name: i for i in infer_dataset(df)[0]}["media"].type is None  # ./img/ has nothing
    item = {i.name: i for i in infer_dataset(df, config=_config_file(config, tmp_path))[0]}["media"]
    assert (item.type, item.reason) == ("image", "all 12 values are image file paths ending in .png; all 12 "
                                                 "distinct files exist")
    assert _stage_decision(df, config, tmp_path / "stage") == item


def test_prepflow_infer_resolves_media_paths_under_the_configs_media_root(tmp_path, capsys):
    names = [f"img/{i}.png" for i in range(12)]
    _media_table(tmp_path / "d" / "pics", names)  # the files: d/pics/img/*.png
    data = write_csv(pd.DataFrame({"media": names, "label": [i % 2 for i in range(12)]}), tmp_path / "d" / "data.csv")
    config = _config_file({"input_features": [{"name": "media", "preprocessing": {"media_root": "pics"}}],
                               "output_features": [{"name": "label"}]}, tmp_path)
    assert cli_main(["infer", str(data), "--target", "label"]) == 0  # d/img/ does not exist
    assert "no file " + str(tmp_path / "d" / "img") in capsys.readouterr().out
    assert cli_main(["infer", str(data), "--target", "label", "--config", config]) == 0
    text = capsys.readouterr().out
    assert ("  - name: media\n    type: image  # all 12 values are image file paths ending in .png; all 12 distinct "
            "files exist\n    preprocessing: {media_root: pics}\n") in text
    (tmp_path / "inferred.yaml").write_text(text)
    inferred = load_config(tmp_path / "inferred.yaml")  # the printed config resolves them the same way
    assert [(f.name, f.type, f.preprocessing["media_root"]) for f in inferred.input_features] == [
        ("media", "image", "pics")]
    assert cli_main(["infer", str(data), "--config", str(tmp_path / "nothing.yaml")]) == 2


def test_prepflow_infer_resolves_media_cache_references_under_the_cache_dir(tmp_path, capsys):
    refs = [f"media-cache:photo/{i}.png" for i in range(12)]
    data = write_csv(pd.DataFrame({"media": refs, "label": [i % 2 for i in range(12)]}), tmp_path / "data.csv")
    assert cli_main(["infer", str(data), "--cache-dir", str(tmp_path / "cache")]) == 0
    assert f"no file {tmp_path / 'cache' / 'media' / 'photo'}/" in capsys.readouterr().out  # excluded, saying where
    (tmp_path / "cache" / "media" / "photo").mkdir(parents=True)
    for i in range(12):
        (tmp_path / "cache" / "media" / "photo" / f"{i}.png").touch()
    assert cli_main(["infer", str(data), "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "type: image  # all 12 values are image file paths ending in .png; all 12 distinct" in capsys.readouterr().out
