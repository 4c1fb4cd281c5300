"""What ``prepflow run`` shows while it runs: a line when each stage starts and ends, progress, and the
warnings of the run, collected and shown once each at the end.

* **Stage lines** (stderr), from ``tasks.runtime.progress``'s stage listener (the runner's cached step calls it)::

      stage ingest: started
      stage ingest: done in 0.41 s, 891 rows, cached: no

* **Progress**: on a terminal, a transient rich bar per running stage (Dask tasks done/total). The stage
  lines go through the bar's own Console, so they print above the bar, never through it; Prefect's log
  lines are quiet (``quiet_prefect_console``) and warnings are collected, so nothing else writes to the
  terminal while the bar is live. With ``--verbose`` (Prefect's log lines on) there is no bar. Not on a
  terminal (a CI log, a pipe): a line every ``PREPFLOW_PROGRESS_SECONDS`` (default 10) while a stage runs::

      stage vocab: 12/40 tasks done, 10 s

* **Warnings**: Python warnings (``logging.captureWarnings``) and every WARNING-or-worse log record
  (prepflow's own, e.g. ``prepflow.degenerate``, and other libraries') are collected during the run and
  printed once each, in a block after the summary. Prefect's engine errors (a failed task or flow) are
  not: the error itself is printed once, by the CLI, as ``prepflow: error: ...``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from core.errors import MESSAGE_LIMIT, ConfigError, shown
from tasks.runtime import progress

PROGRESS_SECONDS_ENV = "PREPFLOW_PROGRESS_SECONDS"
CONSOLE_LEVEL_ENV = "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"  # an override of Prefect's logging.yml


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


class StageLines:
    """The stage start/end lines and, fed by ``tick``, a progress line every ``interval`` seconds while a
    stage runs. ``write`` prints one line; ``clock`` gives the time (``time.monotonic``)."""

    def __init__(self, write: Callable[[str], None], interval: float | None = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.write, self.interval, self.clock = write, interval, clock
        self.lock = threading.Lock()
        self.running: dict[str, dict] = {}  # stage -> {"start", "last", "done", "total"}

    def event(self, event: str, stage: str, info: dict) -> None:
        """``tasks.runtime.progress``'s stage listener."""
        with self.lock:
            self.running.pop("", None)  # Dask work outside a named stage (publish's) ends when a stage begins
            if event == "start":
                now = self.clock()
                self.running[stage] = {"start": now, "last": now, "done": 0, "total": 0}
                self.write(f"stage {stage}: started")
                return
            self.running.pop(stage, None)
        rows = f", {info['rows']:,} rows" if info.get("rows") is not None else ""
        self.write(f"stage {stage}: done in {_seconds(info['seconds'])}{rows}, "
                   f"cached: {'yes' if info['cached'] else 'no'}")

    def update(self, stage: str, done: int, total: int) -> None:
        """``tasks.runtime.progress``'s reporter: Dask tasks done/total of the running stage."""
        with self.lock:
            if stage not in self.running and stage == "":  # publish's tasks: no start line, ticks still
                now = self.clock()
                self.running[stage] = {"start": now, "last": now, "done": 0, "total": 0}
            if stage in self.running:
                self.running[stage].update(done=done, total=total)

    def tick(self) -> None:
        """A progress line for each stage running for another ``interval`` seconds since its last line."""
        if self.interval is None:
            return
        now = self.clock()
        with self.lock:
            for stage, state in self.running.items():
                if now - state["last"] >= self.interval:
                    state["last"] = now
                    tasks = f"{state['done']}/{state['total']} tasks done, " if state["total"] else ""
                    self.write(f"stage {stage or 'working'}: {tasks}{_seconds(now - state['start'])}")


def progress_interval() -> float:
    value = os.environ.get(PROGRESS_SECONDS_ENV, "10")
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        raise ConfigError(f"{PROGRESS_SECONDS_ENV}={value!r}: expected a number of seconds above 0")
    return seconds


@contextlib.contextmanager
def stage_output(bar: bool) -> Iterator[None]:
    """Stage lines and progress on stderr for the block: a rich bar when ``bar`` (a terminal), else a
    line every ``progress_interval()`` seconds from a ticker thread."""
    if bar:
        cm = _with_bar()
    else:
        cm = _with_ticker(progress_interval())
    with cm:
        yield


@contextlib.contextmanager
def _listening(listener: progress.StageListener, reporter: progress.Reporter) -> Iterator[None]:
    progress.set_stage_listener(listener)
    progress.set_reporter(reporter)
    try:
        yield
    finally:
        progress.set_reporter(None)
        progress.set_stage_listener(None)


@contextlib.contextmanager
def _with_ticker(interval: float) -> Iterator[None]:
    def write(line: str) -> None:  # not print(): the flow's log_prints would turn it into a log record
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    lines = StageLines(write, interval)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(min(1.0, interval)):
            lines.tick()

    ticker = threading.Thread(target=loop, name="prepflow-progress", daemon=True)
    with _listening(lines.event, lines.update):
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()


@contextlib.contextmanager
def _with_bar() -> Iterator[None]:
    bar = Progress(TextColumn("{task.description:<16}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True)
    def write(line: str) -> None:
        bar.refresh()  # the live part is redrawn below the line as last rendered: render it now
        bar.console.print(line, markup=False, highlight=False)

    lines = StageLines(write, interval=None)
    ids: dict[str, int] = {}

    def report(stage: str, done: int, total: int) -> None:
        lines.update(stage, done, total)
        if stage not in ids:
            ids[stage] = bar.add_task(stage or "working", total=total)
        bar.update(ids[stage], completed=done, total=total)

    def event(kind: str, stage: str, info: dict) -> None:
        if kind == "end" and stage in ids:  # only running stages keep a bar
            bar.remove_task(ids.pop(stage))
        lines.event(kind, stage, info)

    with _listening(event, report), bar:
        yield


# ---- warnings ------------------------------------------------------------------------------------------

class WarningCollector(logging.Handler):
    """WARNING-or-worse records, one line each, in order, each text once. Prefect's engine errors (a task
    or flow that failed: the CLI prints that error once itself) are left out."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.lines: dict[str, None] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.split(".")[0] == "prefect" and record.levelno >= logging.ERROR:
            return
        try:
            text = record.getMessage()
        except Exception:  # a malformed record is not the run's failure
            return
        text = text.strip().splitlines()[0] if text.strip() else ""
        if record.name == "py.warnings":  # "file:line: Category: message" of warnings.formatwarning
            text = text.strip()
        elif not record.name.startswith(("prepflow", "prefect.flow_runs", "prefect.task_runs")):
            text = f"{record.name}: {text}"
        if text:
            self.lines.setdefault(text, None)


@contextlib.contextmanager
def collected_warnings() -> Iterator[WarningCollector]:
    """Collect the block's warnings (``collector.lines``) instead of printing them as they come."""
    collector = WarningCollector()
    # on the root (other libraries' warnings) and on prepflow's and Python's warnings loggers: Prefect's
    # logging set-up (dictConfig, when Prefect is first imported, which may come later in the run)
    # replaces the root's handlers but leaves those two loggers' alone; the collector keeps each text once
    loggers = [logging.getLogger(), logging.getLogger("prepflow"), logging.getLogger("py.warnings")]
    for logger in loggers:
        logger.addHandler(collector)
    logging.captureWarnings(True)
    try:
        yield collector
    finally:
        logging.captureWarnings(False)
        for logger in loggers:
            logger.removeHandler(collector)


def print_warnings(lines, file=None) -> None:
    """The warnings block: a heading and one line per warning (stdout by default)."""
    lines = list(lines)
    if not lines:
        return
    out = file or sys.stdout
    # a warning may quote the data (a column name, a value): escaped and bounded as an error line is
    out.write(f"warnings ({len(lines)}):\n" + "".join(f"  {shown(line, MESSAGE_LIMIT)}\n" for line in lines))
    out.flush()


# ---- Prefect's console handler ------------------------------------------------------------------------

def quiet_prefect_console() -> None:
    """Prefect's console log handler (its log lines, and the root logger's WARNINGs it shows, such as the
    EventsWorker's "Still processing items" at exit) at CRITICAL for this process, through Prefect's own
    logging settings: ``PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL`` (any key of Prefect's logging.yml can be
    set by such a variable), applied by Prefect's ``setup_logging`` (an incremental update once logging
    is set up). Logs still reach the Prefect API (the UI). A value the user set is kept. Call it after the
    local server is started: the server process would inherit the variable.

    Prefect sets its logging up once, when ``prefect.main`` is first imported (``from prefect import
    flow``), and reads the variable then; only a process where that already happened is set up again
    (a second setup costs CPU for nothing)."""
    os.environ.setdefault(CONSOLE_LEVEL_ENV, "CRITICAL")
    configuration = sys.modules.get("prefect.logging.configuration")
    if configuration is not None and configuration.PROCESS_LOGGING_CONFIG:
        configuration.setup_logging()


# ---- rows dropped --------------------------------------------------------------------------------------

def read_manifest(artifact_path: str) -> dict:
    """A published artifact's manifest.json (a local folder or a URL)."""
    from storage import artifact_read, remote  # only once a run has published (`--help` needs none)

    if remote.is_remote(artifact_path):
        url, data = remote.resolve(artifact_path)
        return artifact_read.parse_manifest(data, remote.join(url, artifact_read.MANIFEST))
    return artifact_read.read_manifest(artifact_path)


def dropped_rows(manifest: dict) -> dict:
    """Every row a run left out, from the artifact's statistics, so none is lost silently:
    ``{"rows": total, "of": input rows, "reasons": [{"rows", "reason", "feature"?}, ...]}``. A row missing
    in two ``drop_row`` features is counted once (under the first), so the reasons add up to ``rows``."""
    stats = manifest.get("statistics") or {}

    def count(name: str) -> int:
        stat = stats.get(name) or {}
        return int(stat.get("count") or 0)

    config = manifest.get("config") or {}
    outputs = {f.get("name") for f in config.get("output_features") or []}
    reasons: list[dict] = []
    for name in sorted(stats):
        n = count(name)
        if not n:
            continue
        if name.startswith("fill_missing.rows_dropped."):
            feature = name.removeprefix("fill_missing.rows_dropped.")
            role = "output feature" if feature in outputs else "input feature"
            reasons.append({"rows": n, "feature": feature,
                            "reason": f"with {feature} missing ({role}, missing_value_strategy: drop_row)"})
        elif name.startswith("media_cache.rows_skipped."):
            feature = name.removeprefix("media_cache.rows_skipped.")
            reasons.append({"rows": n, "feature": feature,
                            "reason": f"with {feature} not decodable (on_decode_error: skip_row)"})
    not_sampled = count("split.rows_not_sampled")
    if not_sampled:
        ratio = (config.get("preprocessing") or {}).get("sample_ratio")
        reasons.append({"rows": not_sampled, "reason": f"not sampled (sample_ratio: {ratio})"})
    return {"rows": sum(r["rows"] for r in reasons), "of": count("ingest.rows_out"), "reasons": reasons}


def dropped_line(dropped: dict) -> str:
    """One line for the run's summary: ``dropped: 9,430 of 336,776 rows (2.8%): 9,430 with arr_delay
    missing (...)``, or ``dropped: none of N rows``."""
    total, of = dropped["rows"], dropped["of"]
    if not total:
        return f"dropped: no rows (all {of:,} input rows published)"
    share = f" ({total / of:.1%})" if of else ""
    why = "; ".join(f"{r['rows']:,} {r['reason']}" for r in dropped["reasons"])
    return f"dropped: {total:,} of {of:,} rows{share}: {why}"
