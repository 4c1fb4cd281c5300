"""Huge CSV lines at a bounded cost (tasks/dataset/csv_limits.py): a header line over
``PREPFLOW_CSV_MAX_HEADER_BYTES`` and any line over ``PREPFLOW_CSV_MAX_LINE_BYTES`` are one error naming the
line, the limit and how to raise it, found without holding the line whole; every reading path (the whole
local file, the byte ranges, a compressed stream, the slow pass that locates a bad row) keeps to it."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.errors import ConfigError, DataError
from tasks.dataset import csv_dialect, csv_limits
from tasks.ingest import csv_lines
from tasks.ingest import csv_ranges as ingest_csv
from tasks.ingest import stage as ingest
from tasks.ingest.spec import IngestSpec
from tests.cli_inprocess import ERROR, runner
from tests.conftest import ROOT

CONFIG = ("input_features:\n  - {name: age, type: number}\n  - {name: review, type: text}\n"
          "output_features:\n  - {name: label, type: binary}\n")
ROWS = 5  # short rows before and after the long one: the long row is line ROWS + 2


@pytest.fixture
def prepflow(capfd, monkeypatch):
    yield from runner(capfd, monkeypatch)


def long_cell_csv(path: Path, cell_bytes: int, quoted: bool = False) -> Path:
    """A CSV whose row ``ROWS + 2`` (line numbers as an editor counts) holds one ``cell_bytes`` text cell."""
    opener = gzip.open if path.suffix == ".gz" else open
    quote = b'"' if quoted else b""
    with opener(path, "wb") as fh:
        fh.write(b"age,review,label\n")
        fh.writelines(b"%d,word%d other,%d\n" % (20 + i, i, i % 2) for i in range(ROWS))
        block = b"token " * (1 << 16)
        fh.write(b"25," + quote)
        for at in range(0, cell_bytes, len(block)):
            fh.write(block[: cell_bytes - at])
        fh.write(quote + b",1\n")
        fh.writelines(b"%d,word%d other,%d\n" % (30 + i, i, i % 2) for i in range(ROWS))
    return path


def one_error(result, *needles: str) -> str:
    return result.one_error(*needles)


def published(out: Path) -> list[str]:
    """What a failed run left where a reader looks (its hidden working files aside)."""
    return [p.name for p in out.iterdir() if not p.name.startswith(".")] if out.exists() else []


def commands(tmp_path: Path, data: Path) -> dict[str, list]:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    return {"infer": ["infer", data],
            "run": ["run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "c"],
            "validate": ["validate", data, "--config", config]}


# ---- the header line ------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["infer", "run", "validate"])
def test_a_header_line_over_the_limit_is_one_error_naming_the_limit(prepflow, tmp_path, command):
    """No line end in the first MiB and more: today's answer was a message about a column cut in two (infer)
    or minutes of work before 'duplicate column names' (run)."""
    data = tmp_path / "wide.csv"
    names = [f"column_{i:06d}_" + "x" * 40 for i in range(csv_limits.DEFAULT_HEADER_BYTES // 50 + 100)]
    data.write_text(",".join(names))
    assert data.stat().st_size > csv_limits.DEFAULT_HEADER_BYTES
    start = time.perf_counter()
    result = prepflow(*commands(tmp_path, data)[command])
    assert time.perf_counter() - start < 10
    one_error(result, str(data), "line 1 (header)", csv_limits.mib(csv_limits.DEFAULT_HEADER_BYTES),
              csv_limits.HEADER_BYTES_ENV)
    assert published(tmp_path / "out") == []


def test_the_header_limit_is_raised_by_its_environment_variable(tmp_path, monkeypatch):
    data = tmp_path / "wide.csv"
    names = [f"c{i:07d}" for i in range(csv_limits.DEFAULT_HEADER_BYTES // 9 + 1000)]
    data.write_text(",".join(names) + "\n" + ",".join("1" for _ in names) + "\n")
    with pytest.raises(DataError, match=csv_limits.HEADER_BYTES_ENV):
        csv_dialect.header(str(data))
    monkeypatch.setenv(csv_limits.HEADER_BYTES_ENV, str(2 * csv_limits.DEFAULT_HEADER_BYTES))
    assert csv_dialect.header(str(data))[0] == names
    monkeypatch.setenv(csv_limits.HEADER_BYTES_ENV, "1000")  # below the default: a shorter header is refused
    data.write_text(",".join(names[:200]) + "\n1\n")
    with pytest.raises(DataError, match="1000 bytes"):
        csv_dialect.header(str(data))
    monkeypatch.setenv(csv_limits.HEADER_BYTES_ENV, "lots")
    with pytest.raises(ConfigError, match=csv_limits.HEADER_BYTES_ENV):
        csv_dialect.header(str(data))


def test_a_header_ending_the_file_within_the_limit_is_read(tmp_path):
    data = tmp_path / "h.csv"
    data.write_bytes(b"\xef\xbb\xbfa,b,c")
    assert csv_dialect.header(str(data))[0] == ["a", "b", "c"]


# ---- any line -----------------------------------------------------------------------------------------------

LIMIT = 2 << 20  # a small line limit, so that a cell a few times over it stays a small file


@pytest.mark.parametrize("quoted", [False, True])
@pytest.mark.parametrize("name", ["data.csv", "data.csv.gz"])
def test_a_line_over_the_limit_is_one_error_naming_the_line_and_the_limit(prepflow, tmp_path, name, quoted):
    """A local file read whole, a quoted one, a compressed stream: each refuses the cell by line."""
    data = long_cell_csv(tmp_path / name, 4 * LIMIT, quoted)
    result = prepflow(*commands(tmp_path, data)["run"], env={csv_limits.LINE_BYTES_ENV: str(LIMIT)})
    one_error(result, f"{data}: line {ROWS + 2}: longer than 2 MiB", csv_limits.LINE_BYTES_ENV)
    assert published(tmp_path / "out") == []


def test_a_line_under_the_limit_is_read(prepflow, tmp_path):
    data = long_cell_csv(tmp_path / "data.csv", LIMIT // 2 + (1 << 20) // 2)  # over pyarrow's 1 MiB block
    result = prepflow(*commands(tmp_path, data)["run"], env={csv_limits.LINE_BYTES_ENV: str(LIMIT)})
    assert result.code == 0, result.text[-2000:]


def test_byte_ranges_stop_looking_for_a_row_end_past_the_limit(tmp_path, monkeypatch):
    """A range whose last row runs past the limit does not read it to its end: the error names the line."""
    data = long_cell_csv(tmp_path / "data.csv", 4 * LIMIT)
    spec = IngestSpec(columns={"age": "float64", "review": "string", "label": "string"}, format="csv",
                      line_bytes=LIMIT)
    units = ingest_csv.plan([str(data)], spec, range_bytes=1 << 20)
    assert len(units) > 4 and not any(u.whole for u in units)
    with pytest.raises(csv_lines.LineTooLong):
        ingest_csv.owned_bytes(units[0], LIMIT)
    with pytest.raises(DataError, match=rf"line {ROWS + 2}: longer than 2 MiB") as info:
        ingest_csv.write_parts(str(data), spec, tmp_path / "parts", ingest.read_batches, range_bytes=1 << 20)
    assert "byte range" not in str(info.value)  # each range the line crosses reports it: the same message


def test_locating_a_bad_row_holds_no_more_than_the_limit(tmp_path):
    """The slow pass reads a stream that counts what it hands out: it stops within the limit and a chunk
    of the long line's start."""
    raw = b"a,b\n1,2\n3," + b"x" * (8 * LIMIT) + b"\n5,6\n"

    class Counted(io.BytesIO):
        handed = 0

        def read(self, n=-1):
            data = super().read(n)
            Counted.handed += len(data)
            return data

    dialect = csv_dialect.Dialect(",", "\n", "config")
    spec = IngestSpec(columns={"a": "float64", "b": "string"}, format="csv")
    error = ingest_csv.locate_problem("f.csv", lambda: Counted(raw), dialect, spec, "straddling object", limit=LIMIT)
    assert "f.csv: line 3: longer than 2 MiB" in str(error)
    assert Counted.handed <= LIMIT + 2 * csv_lines.CHUNK


def test_lines_and_first_long_line_agree_with_a_plain_split():
    raw = b"ab\ncdef\n\nxyz"
    assert list(csv_lines.lines(io.BytesIO(raw), b"\n", 4)) == [(0, b"ab"), (3, b"cdef"), (8, b""), (9, b"xyz")]
    assert csv_lines.first_long_line(io.BytesIO(raw), 4) is None
    assert csv_lines.first_long_line(io.BytesIO(raw), 3) == 3
    assert csv_lines.first_long_line(io.BytesIO(b"a\r" + b"b" * 10), 5, chunk_bytes=3) == 2


def test_a_line_limit_below_a_mebibyte_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv(csv_limits.LINE_BYTES_ENV, "1000")
    with pytest.raises(ConfigError, match=csv_limits.LINE_BYTES_ENV):
        csv_limits.line_bytes()


# ---- what a real process costs --------------------------------------------------------------------------

@pytest.mark.parametrize("quoted", [False, True])
def test_a_cell_far_over_the_limit_is_refused_in_bounded_memory_and_time(tmp_path, quoted):
    """A real ``prepflow run`` on a 140 MB cell (over 128 MiB: the quoted file is streamed, the other one cut
    into byte ranges): peak RSS (its own and its children's) and wall time. It was read whole (6.8 GB,
    exit 0) or refused after reading it whole (2.6 GB)."""
    data = long_cell_csv(tmp_path / "data.csv", 140_000_000, quoted)
    args = [str(a) for a in commands(tmp_path, data)["run"]]
    code = ("import resource, sys\nfrom flows.cli import main\ncode = main(sys.argv[1:])\n"
            # VmHWM, not RUSAGE_SELF: ru_maxrss keeps the forking pytest process's peak across exec
            "own = int(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM')))\n"
            "peak = max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "print('peak-kb', peak, file=sys.stderr)\nsys.exit(code)")
    limit = 16 << 20
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "PREPFLOW_PREFECT": "off",
                               csv_limits.LINE_BYTES_ENV: str(limit)})
    seconds = time.perf_counter() - start
    data.unlink()
    errors = [line for line in proc.stderr.splitlines() if line.startswith(ERROR)]
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr[-2000:]
    assert f"line {ROWS + 2}: longer than 16 MiB" in errors[0], errors[0]
    peak_mb = int(proc.stderr.split("peak-kb")[-1].split()[0]) / 1024
    assert peak_mb < 500 and seconds < 10, (peak_mb, seconds)
