"""Error types a user can act on.

Every error prepflow raises for a user mistake is a ``PrepflowError`` whose message names the
file, row, column or config key and what was expected. The CLI maps them to exit codes:
``ConfigError`` -> 2 (usage/config), ``DataError`` / ``ValidationFailed`` -> 1 (data).
"""

from __future__ import annotations

QUOTE_LIMIT = 160  # characters of an untrusted value a message shows
MESSAGE_LIMIT = 16_384  # characters of a whole message: a long gate report fits, a file's content does not


def shown(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``value`` as a message or a listing may show text prepflow did not write (a name from a manifest,
    metadata, config, file name or listing; a line of a file): cut to ``limit`` characters, saying how many
    more there were, and every character a terminal acts on or reorders (C0 and C1 controls such as ESC, CR
    and LF, DEL, bidi overrides and other format characters) written as its Python escape, so it can neither
    move the cursor, recolour the screen nor start a line of its own."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value[: limit * 4]).decode("utf-8", "backslashreplace")
    text = value if isinstance(value, str) else str(value)
    cut = text[:limit]
    if not cut.isprintable():
        cut = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in cut)
    more = len(text) - limit
    return f"{cut}... ({more} more characters)" if more > 0 else cut


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``value`` as ``!r`` writes it, cut to ``limit`` characters (``shown``): the form every message uses for
    a name or value it did not make itself."""
    if not isinstance(value, str):
        return shown(repr(value), limit)
    more = len(value) - limit
    return f"{value[:limit]!r}... ({more} more characters)" if more > 0 else repr(value)


def bounded(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """A whole message cut to ``limit`` characters, every character a terminal acts on but the line breaks
    between its lines escaped (``shown``). A message cut once is not cut again (an error rebuilt from its
    message after pickling)."""
    more = len(message) - limit
    if more > 64:
        message = f"{message[:limit]}... ({more} more characters)"
    if message.replace("\n", "").isprintable():
        return message
    return "\n".join(shown(line, len(line)) for line in message.split("\n"))


class PrepflowError(Exception):
    """Base class of the errors prepflow reports to users (never a bare traceback). Its message is bounded
    (``MESSAGE_LIMIT``) and escaped (``bounded``): no error carries a file's content at its full length, nor
    a control character a name brought in, whatever a message quotes and however it quotes it."""

    exit_code = 1

    def __init__(self, message: object = "", *args):
        super().__init__(bounded(message) if isinstance(message, str) else message, *args)


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
