"""``prepflow`` in this process: ``flows.cli.main`` with its stdout and stderr captured (pytest's capfd,
so what Prefect, rich and Python write to the file descriptors counts too), without the Prefect API
(``PREPFLOW_PREFECT=off``: the in-process runner of the same stage graph). It is the same code path
as the ``prepflow`` command without ~4 s of imports per call."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from flows import cli, console

ERROR = "prepflow: error:"


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def error_lines(self) -> list[str]:
        return [line for line in self.lines if line.startswith(ERROR)]

    def one_error(self, *needles: str) -> str:
        """The run's one ``prepflow: error:`` line (exit 1 or 2, no traceback), holding each of ``needles``."""
        assert self.code in (1, 2), self.text[-2000:]
        errors = self.error_lines()
        assert len(errors) == 1 and "Traceback" not in self.text, self.text[-2000:]
        for needle in needles:
            assert needle in errors[0], errors[0]
        return errors[0]


def runner(capfd, monkeypatch):
    """The body of a test module's ``prepflow`` fixture (``yield from runner(capfd, monkeypatch)``): yields
    ``prepflow(*args, env=None) -> Run``, restores Prefect's console logging after the test."""
    monkeypatch.setenv("PREPFLOW_PREFECT", "off")
    monkeypatch.delenv("PREPFLOW_DEBUG", raising=False)
    # quiet_prefect_console sets it for the process: set here, so that the test restores it
    monkeypatch.setenv(console.CONSOLE_LEVEL_ENV, "CRITICAL")

    def run(*args, env: dict | None = None) -> Run:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        capfd.readouterr()
        code = cli.main([str(a) for a in args])
        out, err = capfd.readouterr()
        return Run(code, out, err)

    yield run
    _restore_prefect_console(monkeypatch)


def _restore_prefect_console(monkeypatch) -> None:
    """Prefect's console handler back at its logging.yml level for the tests that follow."""
    from prefect.logging.configuration import setup_logging  # heavy optional dependency: prefect

    monkeypatch.delenv(console.CONSOLE_LEVEL_ENV, raising=False)
    setup_logging()
    logging.captureWarnings(False)


def stage_entries(cache: Path) -> list[str]:
    """The stage cache's entries (``<stage>/<key>`` folders), temporary ones excluded."""
    if not cache.exists():
        return []
    return sorted(f"{p.parent.name}/{p.name}" for p in cache.glob("*/*")
                  if p.is_dir() and not p.name.startswith(".") and not p.parent.name.startswith("."))
