"""Error types a user can act on.

Every error prepflow raises for a user mistake is a ``PrepflowError`` whose message names the
file, row, column or config key and what was expected. The CLI maps them to exit codes:
``ConfigError`` -> 2 (usage/config), ``DataError`` / ``ValidationFailed`` -> 1 (data).
"""

from __future__ import annotations


class PrepflowError(Exception):
    """Base class of the errors prepflow reports to users (never a bare traceback)."""

    exit_code = 1


class ConfigError(PrepflowError):
    """The config (or a CLI argument) is wrong; raised before any data is read."""

    exit_code = 2


class DataError(PrepflowError):
    """The dataset does not match the config or cannot be read."""

    exit_code = 1


class ValidationFailed(DataError):
    """A data-quality gate with ``on_failure: fail`` did not pass; ``gate`` names it, ``report`` holds
    its results (``tasks.validate.stage.gate_json``)."""

    def __init__(self, message: str, gate: str | None = None, report: dict | None = None):
        super().__init__(message)
        self.gate = gate
        self.report = report

    def __reduce__(self):  # keeps gate and report through pickling (Dask, Prefect)
        return (type(self), (str(self), self.gate, self.report))


class IntegrityError(DataError):
    """A cache entry or an artifact file does not match its recorded sha256."""


class NotFittedError(DataError, ValueError):
    """A feature type's ``encode`` (or ``normalize``) got metadata without the fitted state it needs:
    the vocab stage (fit) has not run, or the metadata is not the one ``finalize`` produced."""


# ---- custom stages: a malformed stage DAG (named after Magenta's dag_pipeline errors) -------------

class InvalidDAGError(ConfigError):
    """The custom stages do not form a valid DAG (an unknown ``uses``/``after``, bad params, ...)."""


class DuplicateNameError(InvalidDAGError):
    """Two stages share a name, or two stages make the same column."""


class BadTopologyError(InvalidDAGError):
    """The ``after:`` links form a cycle, or a stage reads a column a later stage makes."""


class NotConnectedError(InvalidDAGError):
    """A stage none of whose output columns is read by a feature or a later stage."""


class BadInputOrOutputError(InvalidDAGError):
    """A stage declares no input or output, or reads a column that nothing provides."""


class TypeMismatchError(InvalidDAGError):
    """A column's producer (a stage, or a feature's prepared values) and its reader disagree on its type."""


class InvalidTypeSignatureError(InvalidDAGError):
    """``input_type``/``output_type`` is not a mapping of column -> dtype or feature type."""


class InvalidStatisticsError(InvalidDAGError):
    """A stage emitted something that is not a ``tasks.runtime.statistics`` Counter or Histogram (run time)."""


class InvalidTransformOutputError(InvalidDAGError):
    """A stage's transform (or fitted state) does not match what it declares (run time); the message
    names the stage, the partition and the column."""
