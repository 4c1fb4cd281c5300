"""Bookkeeping never fails a data run: which failures are the Prefect API's (flows/bookkeeping.py), and how a
run is named and tagged (flows/run_labels.py)."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefect.exceptions import PrefectHTTPStatusError

from core.errors import ConfigError, DataError
from flows import bookkeeping
from flows.run_labels import config_hash, file_name, run_name, run_tags
from tasks.config.loader import parse_config

CONFIG = {"input_features": [{"name": "age", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}]}


def _status_error(code: int) -> PrefectHTTPStatusError:
    request = httpx.Request("POST", "http://127.0.0.1:4200/api/flow_runs/")
    response = httpx.Response(code, request=request, text="Service Unavailable")
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as exc:
        return PrefectHTTPStatusError.from_httpx_error(exc)
    raise AssertionError("no error raised")


@pytest.mark.parametrize("code", [500, 502, 503, 504, 408, 429])
def test_server_errors_are_api_failures(code):
    assert bookkeeping.is_api_failure(_status_error(code))


@pytest.mark.parametrize("code", [400, 404, 409, 422])
def test_client_errors_are_not(code):
    assert not bookkeeping.is_api_failure(_status_error(code))


@pytest.mark.parametrize("exc", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"),
                                 httpx.RemoteProtocolError("closed")])
def test_transport_errors_are_api_failures(exc):
    assert bookkeeping.is_api_failure(exc)


def test_a_cause_counts_but_prepflow_errors_never_do():
    try:
        try:
            raise _status_error(503)
        except PrefectHTTPStatusError as inner:
            raise RuntimeError("flow run state not set") from inner
    except RuntimeError as outer:
        assert bookkeeping.is_api_failure(outer)
    assert not bookkeeping.is_api_failure(DataError("data.csv: line 4, column 'age': expected a number"))
    assert not bookkeeping.is_api_failure(ValueError("a bug"))
    assert not bookkeeping.is_api_failure(ConfigError("bad"))


def test_best_effort_notes_api_failures_and_raises_the_rest(monkeypatch):
    monkeypatch.setattr(bookkeeping, "_incomplete", [])

    def unreachable():
        raise httpx.ConnectError("refused")

    assert bookkeeping.best_effort("report artifact", unreachable) is None
    assert bookkeeping.incomplete() == ["report artifact: ConnectError: refused"]
    with pytest.raises(ZeroDivisionError):
        bookkeeping.best_effort("statistics artifact", lambda: 1 / 0)
    assert bookkeeping.best_effort("tag", lambda: 7) == 7


def test_a_run_is_named_and_tagged_from_dataset_and_config():
    config = parse_config(CONFIG)
    digest = config_hash(config)
    assert len(digest) == 12 and int(digest, 16) >= 0
    assert run_name("data/flights.csv", "conf/c.yaml", config) == f"flights.csv · c.yaml · {digest[:6]}"
    assert run_name("s3://bucket/raw/flights.csv", "c.yaml", config).startswith("flights.csv · ")
    assert run_tags("https://host/x/flights.parquet?x=1", config) == [
        "prepflow", "dataset:flights.parquet", f"config:{digest}"]


@settings(deadline=None, max_examples=20)
@given(st.integers(min_value=1, max_value=10_000))
def test_the_config_hash_follows_the_content(top_k):
    base = parse_config(CONFIG)
    changed = parse_config({**CONFIG, "input_features": [
        {"name": "age", "type": "number"}, {"name": "c", "type": "category", "preprocessing": {"most_common": top_k}}]})
    assert config_hash(base) != config_hash(changed)
    assert config_hash(parse_config(dict(reversed(list(CONFIG.items()))))) == config_hash(base)


@pytest.mark.parametrize("given_path,name", [("a/b/c.csv", "c.csv"), ("c.csv", "c.csv"),
                                              ("s3://b/k/d.parquet", "d.parquet"), ("C:\\data\\e.csv", "e.csv")])
def test_file_name(given_path, name):
    assert file_name(given_path) == name
