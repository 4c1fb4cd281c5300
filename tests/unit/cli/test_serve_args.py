"""``prepflow serve`` arguments (flows/serve.py), checked without a Prefect server."""

from __future__ import annotations

import os

import pytest

from core.errors import ConfigError
from flows.cli import build_parser, main
from flows.serve import DEFAULT_CRON, deployment_parameters, schedules


def _args(*extra: str):
    return build_parser().parse_args(["serve", "c.yaml", "--dataset", "d.csv", "--output", "s3://b/out", *extra])


def test_defaults_nightly_and_absolute_local_paths():
    args = _args()
    assert (args.cron, args.timezone, args.name) == (DEFAULT_CRON, "UTC", "nightly")
    params = deployment_parameters(args)
    assert params == {"config": os.path.abspath("c.yaml"), "dataset": os.path.abspath("d.csv"),
                      "output": "s3://b/out", "cache_dir": os.path.abspath(".prepflow-cache")}
    args = _args("--npartitions", "4", "--dask-address", "tcp://h:8786")
    assert deployment_parameters(args)["npartitions"] == 4
    assert deployment_parameters(args)["dask_address"] == "tcp://h:8786"


def test_several_files_are_a_list_of_absolute_paths_and_name_the_run_by_the_first():
    from flows.run_labels import file_name

    args = build_parser().parse_args(["serve", "c.yaml", "--dataset", "d/day_1.csv", "d/day_0.csv", "--output", "o"])
    dataset = deployment_parameters(args)["dataset"]
    assert dataset == [os.path.abspath("d/day_1.csv"), os.path.abspath("d/day_0.csv")]
    assert file_name(dataset) == "day_0.csv+1"


def test_schedule():
    (cron,) = schedules("0 2 * * *", "Europe/Berlin")
    assert (cron.cron, cron.timezone) == ("0 2 * * *", "Europe/Berlin")
    assert schedules("", "UTC") == []


@pytest.mark.parametrize("cron, tz, flag", [("61 * * * *", "UTC", "--cron"), ("0 2 * *", "UTC", "--cron"),
                                            ("0 2 * * *", "Mars/Olympus", "--timezone")])
def test_bad_schedule_is_a_config_error(cron, tz, flag):
    with pytest.raises(ConfigError, match=flag):
        schedules(cron, tz)


def test_bad_numbers_exit_2_before_any_server(capsys, titanic_config):
    for extra in (["--npartitions", "0"], ["--limit", "0"]):
        assert main(["serve", str(titanic_config), "--dataset", "d.csv", "--output", "o", *extra]) == 2
        assert "must be at least 1" in capsys.readouterr().err
