"""What ``prepflow run`` prints (issue 21 items 4-6): one error line, a screen of output, stage lines.

The fast tests run ``flows.cli.main`` in this process without the Prefect API (tests/cli_inprocess.py);
the integration ones run the ``prepflow`` command with its local Prefect server, whose log lines must
stay quiet unless ``--verbose``.
"""

from __future__ import annotations

import logging
import re
import socket
import warnings
from pathlib import Path

import pytest

from core.errors import ConfigError
from flows import cli
from flows.console import StageLines, WarningCollector, collected_warnings
from flows.output_target import check_output
from tests.cli_inprocess import runner, stage_entries
from tests.conftest import EXAMPLE, run_cli

TITANIC = (EXAMPLE / "config.yaml", EXAMPLE / "titanic.csv")
PREFECT_LOG_LINE = re.compile(r"\| (INFO|WARNING|ERROR|DEBUG) +\| ")


@pytest.fixture
def prepflow(capfd, monkeypatch):
    yield from runner(capfd, monkeypatch)


def _titanic(prepflow, tmp_path: Path, *flags, cache: str = "cache", output: str = "out"):
    config, data = TITANIC
    return prepflow("run", config, "--dataset", data, "--output", tmp_path / output,
                    "--cache-dir", tmp_path / cache, *flags)


def _stage_lines(result) -> list[str]:
    return [line for line in result.err.splitlines() if line.startswith("stage ")]  # stderr: not the table


def test_default_run_fits_a_screen_with_a_line_per_stage_start_and_end(prepflow, tmp_path):
    result = _titanic(prepflow, tmp_path)
    assert result.code == 0, result.text
    assert len(result.lines) <= 45, result.text
    assert not [line for line in result.lines if PREFECT_LOG_LINE.search(line)], result.text
    assert "statistic" not in result.text  # the table only with --stats
    assert re.search(r"^artifact: .*out/[0-9a-f]{24}  \(", result.out, re.M), result.out
    assert re.search(r"^prepflow run [0-9a-f]{24}$", result.out, re.M), result.out
    lines = _stage_lines(result)
    started = [m.group(1) for line in lines if (m := re.match(r"stage (\w+): started$", line))]
    done = [m.group(1) for line in lines if (m := re.match(r"stage (\w+): done in [\d.]+ s(, [\d,]+ rows)?, "
                                                               r"cached: no$", line))]
    assert started == done and {"ingest", "split", "fill_missing", "vocab", "encode"} <= set(started)
    assert len(lines) == 2 * len(started)  # non-TTY, stages of a second: no progress lines
    for i, stage in enumerate(started):  # each stage ends before the next starts
        assert lines[2 * i] == f"stage {stage}: started" and lines[2 * i + 1].startswith(f"stage {stage}: done in")
    assert "stage ingest: done in" in result.err and ", 891 rows, cached: no" in result.err
    for stage in ("ingest", "publish"):  # the stage table
        assert re.search(rf"^{stage} +[\d.]+ +no", result.out, re.M), result.out

    again = _titanic(prepflow, tmp_path, output="out2")  # same cache: every stage served from it
    assert again.code == 0, again.text
    # every stage from the cache; publish, last, writes the artifact into the new output
    assert done[-1] == "publish"
    assert [line.rsplit(" ", 1)[-1] for line in _stage_lines(again) if ": done in" in line] == \
        ["yes"] * (len(done) - 1) + ["no"]

    reused = _titanic(prepflow, tmp_path, output="out2")  # published already: nothing runs, one line says so
    assert reused.code == 0 and _stage_lines(reused) == [], reused.text
    assert ("already published for this dataset and config: nothing ran (--always-run-flow runs the flow anyway)"
            in reused.lines), reused.text


def test_stats_prints_the_statistics_table(prepflow, tmp_path):
    result = _titanic(prepflow, tmp_path, "--stats")
    assert result.code == 0, result.text
    assert "statistics" in result.out and re.search(r"ingest\.rows_out\W+891", result.out), result.out


def test_debug_prints_the_traceback_once_and_one_error_line(prepflow, tmp_path):
    config, _data = TITANIC
    args = ("run", config, "--dataset", tmp_path / "none.csv", "--output", tmp_path / "out")
    plain = prepflow(*args)
    assert plain.code == 1 and len(plain.error_lines()) == 1 and "Traceback" not in plain.text, plain.text
    for result in (prepflow(*args, "--debug"), prepflow(*args, env={"PREPFLOW_DEBUG": "1"})):
        assert result.code == 1
        assert result.text.count("Traceback (most recent call last)") == 1, result.text
        assert result.error_lines() == plain.error_lines()


def test_an_internal_error_is_one_line_with_the_traceback_on_demand(prepflow, monkeypatch):
    def boom(_args):
        raise KeyError("no such thing")

    monkeypatch.setitem(cli.COMMANDS, "boom", (lambda p: None, boom))
    result = prepflow("boom")
    assert result.code == 1
    assert result.error_lines() == ["prepflow: error: internal error: KeyError: 'no such thing' "
                                    "(--debug or PREPFLOW_DEBUG=1 prints the traceback)"]
    assert "Traceback" not in result.text
    debug = prepflow("boom", "--debug")
    assert "Traceback (most recent call last)" in debug.text and len(debug.error_lines()) == 1


def test_output_is_created_and_checked_before_anything_runs(prepflow, tmp_path):
    check_output(str(tmp_path / "new" / "deeper"))
    assert (tmp_path / "new" / "deeper").is_dir() and list((tmp_path / "new" / "deeper").iterdir()) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"^--output .*file: exists and is not a folder$"):
        check_output(str(tmp_path / "file"))
    check_output("memory://anything/at/all")  # nothing to reach

    config, data = TITANIC
    result = prepflow("run", config, "--dataset", data, "--output", tmp_path / "file", "--cache-dir", tmp_path / "c")
    assert result.code == 2 and result.error_lines() == [f"prepflow: error: --output {tmp_path / 'file'}: exists "
                                                         "and is not a folder"]
    assert stage_entries(tmp_path / "c") == [] and "stage " not in result.text


def test_a_failed_run_prints_its_warnings_then_one_error_line(prepflow, tmp_path):
    """An all-missing category column warns (degenerate data); a three-valued binary then fails."""
    rows = [f"{20 + i},,{i % 3}" for i in range(30)]
    (tmp_path / "d.csv").write_text("age,city,label\n" + "\n".join(rows) + "\n")
    (tmp_path / "c.yaml").write_text("input_features:\n  - {name: age, type: number}\n  - {name: city, type: category}\n"
                                     "output_features:\n  - {name: label, type: binary}\n")
    result = prepflow("run", tmp_path / "c.yaml", "--dataset", tmp_path / "d.csv", "--output", tmp_path / "o",
                      "--cache-dir", tmp_path / "cache")
    assert result.code == 1 and len(result.error_lines()) == 1, result.text
    assert result.err.index("warnings (1):") < result.err.index("prepflow: error:"), result.err
    assert result.text.count("feature 'city'") == 1


# ---- the parts, on their own ---------------------------------------------------------------------------

def test_stage_lines_report_progress_every_interval_while_a_stage_runs():
    now = [100.0]
    written: list[str] = []
    lines = StageLines(written.append, interval=10, clock=lambda: now[0])
    lines.event("start", "vocab", {})
    lines.update("vocab", 3, 40)
    now[0] = 109.0
    lines.tick()  # 9 s: nothing yet
    now[0] = 110.5
    lines.tick()
    lines.tick()  # not again within the interval
    lines.update("vocab", 40, 40)
    now[0] = 121.0
    lines.tick()
    lines.event("end", "vocab", {"seconds": 21.0, "cached": False, "rows": 1234567})
    now[0] = 200.0
    lines.tick()  # no stage running: silent
    assert written == ["stage vocab: started", "stage vocab: 3/40 tasks done, 10 s",
                       "stage vocab: 40/40 tasks done, 21 s", "stage vocab: done in 21 s, 1,234,567 rows, cached: no"]


def test_stage_lines_tick_for_dask_work_outside_a_named_stage():
    """publish runs no cached step (no start/end lines) but its Dask tasks still report, named ""."""
    now = [0.0]
    written: list[str] = []
    lines = StageLines(written.append, interval=10, clock=lambda: now[0])
    lines.update("", 0, 33)
    lines.update("", 5, 33)
    now[0] = 12.0
    lines.tick()
    lines.event("start", "report", {})
    now[0] = 30.0
    lines.tick()  # only the named stage now
    assert written == ["stage working: 5/33 tasks done, 12 s", "stage report: started", "stage report: 18 s"]


def test_stage_lines_without_interval_never_tick():
    written: list[str] = []
    lines = StageLines(written.append, interval=None, clock=lambda: 1e9)
    lines.event("start", "split", {})
    lines.tick()
    lines.event("end", "split", {"seconds": 0.004, "cached": True, "rows": None})
    assert written == ["stage split: started", "stage split: done in 0.00 s, cached: yes"]


def test_warnings_are_collected_once_each_and_engine_errors_left_to_the_error_line():
    with collected_warnings() as collected:
        for _ in range(3):
            logging.getLogger("prepflow.degenerate").warning("feature 'x' (column 'x') has no value")
            warnings.warn("an old option", FutureWarning, stacklevel=1)
        logging.getLogger("prefect.flow_engine").error("Finished in state Failed('boom')")
        logging.getLogger("prefect.task_runs").warning("report not written: OSError: disk full")
        logging.getLogger("distributed.worker").warning("a worker is slow")
        logging.getLogger("prepflow.degenerate").info("not a warning")
    lines = list(collected.lines)
    # (outside a flow run, Prefect's API log handler adds a UserWarning of its own for the task_runs record)
    assert lines.count("feature 'x' (column 'x') has no value") == 1
    assert len([line for line in lines if "FutureWarning: an old option" in line]) == 1
    assert "report not written: OSError: disk full" in lines and "distributed.worker: a worker is slow" in lines
    assert not [line for line in lines if "Failed('boom')" in line or "not a warning" in line]
    assert lines.index("feature 'x' (column 'x') has no value") < lines.index("distributed.worker: a worker is slow")
    assert not any(isinstance(h, WarningCollector) for h in logging.getLogger().handlers)


# ---- with the local Prefect server -----------------------------------------------------------------------

def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.integration
def test_unreachable_bucket_is_refused_up_front(tmp_path):
    env = {"S3_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}", "AWS_ACCESS_KEY_ID": "x",
           "AWS_SECRET_ACCESS_KEY": "y", "PREPFLOW_PREFECT": "off"}
    config, data = TITANIC
    result = run_cli("run", config, "--dataset", data, "--output", "s3://prepflow-nowhere/out",
                     "--cache-dir", tmp_path / "cache", env=env)
    errors = [line for line in result.stderr.splitlines() if line.startswith("prepflow: error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr
    assert errors[0].startswith("prepflow: error: --output s3://prepflow-nowhere/out: cannot reach bucket "
                                "'prepflow-nowhere'"), errors[0]
    assert stage_entries(tmp_path / "cache") == []


@pytest.mark.integration
def test_prefect_run_is_quiet_fits_a_screen_and_fails_with_one_line(tmp_path):
    config, data = TITANIC
    result = run_cli("run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "c")
    text = result.stdout + result.stderr
    assert result.returncode == 0, text
    assert len(text.splitlines()) <= 45, text
    assert not PREFECT_LOG_LINE.search(text) and "EventsWorker" not in text and "Traceback" not in text, text
    assert "stage ingest: started" in result.stderr and "stage encode: done in" in result.stderr
    assert re.search(r"^prefect: http://\S+/runs/flow-run/[0-9a-f-]{36}$", result.stdout, re.M), result.stdout

    verbose = run_cli("run", config, "--dataset", data, "--output", tmp_path / "out2", "--cache-dir", tmp_path / "c",
                      "--verbose", "--always-run-flow")
    assert verbose.returncode == 0 and PREFECT_LOG_LINE.search(verbose.stderr), verbose.stderr

    bad = tmp_path / "bad.csv"  # a third value in the binary target: fails in a task of the flow
    bad.write_text(Path(data).read_text().replace("\n1,0,3,female,", "\n1,2,3,female,", 1))
    failed = run_cli("run", config, "--dataset", bad, "--output", tmp_path / "out3", "--cache-dir", tmp_path / "c3")
    text = failed.stdout + failed.stderr
    errors = [line for line in text.splitlines() if line.startswith("prepflow: error:")]
    assert failed.returncode == 1 and len(errors) == 1, text
    assert "'Survived'" in errors[0] and text.count("3 distinct values") == 1, text
    assert not PREFECT_LOG_LINE.search(text) and "Traceback" not in text, text
