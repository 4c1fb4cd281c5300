"""The custom stages' DAG: built from ``config.stages`` and validated before any data is read.

Built-in stages run in a fixed order (``tasks.config.constants.BUILTIN_STAGES``, as ``tasks.graph`` declares them). A custom stage is placed by
``after:``, a built-in stage or another custom stage, and runs inside the per-partition preparation
that every later stage shares (``tasks.custom.steps``), in one of two phases:

* ``raw`` (after ingest, infer_types, validate_raw or split): on the columns as ingest read them,
  before any feature is cast; what it makes is read by features like a dataset column;
* ``filled`` (after fill_missing or balance): on the features' typed, filled values (a column named
  like a feature holds that feature's values) and on dataset columns no feature names.

Stages run in ``BUILTIN_STAGES`` order of their anchors; stages after the same anchor in config
order, each followed by the stages that name it in ``after:``. Output columns must be new names.

Checks (errors named after Magenta's ``dag_pipeline``, all ``ConfigError`` subclasses):
``InvalidDAGError`` (unknown ``uses``/``after``, bad params, an anchor after the fit),
``DuplicateNameError`` (two stages of one name, a column made twice or already there),
``BadTopologyError`` (an ``after:`` cycle; a stage reading a column that a later stage makes),
``InvalidTypeSignatureError`` (``input_type``/``output_type`` not column -> dtype/feature type),
``BadInputOrOutputError`` (no inputs or outputs; an input nothing provides),
``TypeMismatchError`` (producer and reader of a column disagree; names both and the column),
``NotConnectedError`` (nothing reads any of a stage's outputs).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from pydantic import ValidationError

from core.errors import (
    BadInputOrOutputError,
    BadTopologyError,
    DuplicateNameError,
    InvalidDAGError,
    InvalidStatisticsError,
    InvalidTransformOutputError,
    InvalidTypeSignatureError,
    NotConnectedError,
    TypeMismatchError,
)
from core.options import format_validation_error
from core.plugins import STAGES_GROUP, code_version, entry_points, load_subclass
from tasks.config.constants import BUILTIN_STAGES
from tasks.custom.stage import FEATURE_KINDS, Stage, compatible, feature_accepts, spec_kind

__all__ = ["BadInputOrOutputError", "BadTopologyError", "DuplicateNameError", "InvalidDAGError",
           "InvalidStatisticsError", "InvalidTransformOutputError", "InvalidTypeSignatureError",
           "NotConnectedError", "TypeMismatchError", "PlannedStage", "StagePlan", "build_plan"]

RAW_ANCHORS = ("ingest", "infer_types", "validate_raw", "split")
FILLED_ANCHORS = ("fill_missing", "balance")
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
RESERVED_COLUMNS = ("__row__", "__split__")


def load_stage_class(uses: str, where: str) -> type[Stage]:
    return load_subclass(uses, STAGES_GROUP, Stage, where=f"{where}.uses", what="custom stage",
                         base_name="tasks.Stage", error=InvalidDAGError)


@dataclass
class PlannedStage:
    """One custom stage in the plan: the instance, where it runs and what it was resolved to read."""

    stage: Stage
    uses: str
    after: str
    params: dict
    code: str
    phase: str = ""  # "raw" | "filled"
    state: dict | None = None  # the fitted state (stages that fit)
    dataset_inputs: list[str] = field(default_factory=list)  # dataset columns it reads (coerced to its types)
    passthrough: list[str] = field(default_factory=list)  # filled phase: inputs taken from the raw partition

    @property
    def name(self) -> str:
        return self.stage.name

    @property
    def inputs(self) -> dict[str, str]:
        return dict(self.stage.input_type)

    @property
    def outputs(self) -> dict[str, str]:
        return dict(self.stage.output_type)

    @property
    def fits(self) -> bool:
        return self.stage.fits

    def key_json(self) -> dict:
        """What the stage's cache key holds: its code and params (not its fitted state, an output)."""
        return {"name": self.name, "uses": self.uses, "after": self.after, "params": self.params, "code": self.code,
                "input_type": self.inputs, "output_type": self.outputs}

    def to_json(self) -> dict:
        return {**self.key_json(), "phase": self.phase, "state": self.state, "dataset_inputs": self.dataset_inputs,
                "passthrough": self.passthrough}

    @classmethod
    def from_json(cls, data: dict) -> "PlannedStage":
        stage = _instantiate(data["uses"], data["params"], data["name"], "stage plan")
        return cls(stage, data["uses"], data["after"], data["params"], data["code"], data["phase"], data["state"],
                   list(data["dataset_inputs"]), list(data["passthrough"]))


@dataclass
class StagePlan:
    stages: list[PlannedStage]
    made_by: dict[str, int]  # column -> index (in ``stages``) of the stage that makes it
    raw_columns: dict[str, str]  # dataset columns only stages read -> how ingest reads them

    def __bool__(self) -> bool:
        return bool(self.stages)

    def index(self, name: str) -> int:
        return next(i for i, p in enumerate(self.stages) if p.name == name)

    def maker(self, column: str) -> int | None:
        return self.made_by.get(column)


def _instantiate(uses: str, params: dict, name: str | None, where: str) -> Stage:
    cls = load_stage_class(uses, where)
    try:
        stage = cls(**params)
    except ValidationError as exc:
        raise InvalidDAGError(format_validation_error(exc, cls.Params, prefix=f"{where}.params.",
                                                      owner=f"stage {uses!r}")) from None
    except (TypeError, ValueError) as exc:
        raise InvalidDAGError(f"{where}.params: {cls.__qualname__} does not accept {params!r} ({exc})") from None
    if name is None:
        name = uses if ":" not in uses and uses in entry_points(STAGES_GROUP) else cls.default_name()
    if not NAME_RE.match(name):
        raise InvalidDAGError(f"{where}.name: {name!r} is not a valid stage name (a letter, then letters, digits, "
                              "'_' or '-'; at most 64)")
    stage.name = name
    stage._emitted = []
    return stage


def _planned(spec: Any, i: int) -> PlannedStage:
    where = f"stages[{i}]"
    stage = _instantiate(spec.uses, dict(spec.params), spec.name, where)
    try:
        code = code_version(type(stage))
    except OSError as exc:
        raise InvalidDAGError(f"{where}.uses: {exc}") from None
    return PlannedStage(stage, spec.uses, spec.after, dict(spec.params), code)


def _check_names(planned: list[PlannedStage]) -> None:
    seen: dict[str, int] = {}
    for i, p in enumerate(planned):
        if p.name in BUILTIN_STAGES:
            raise DuplicateNameError(f"stages[{i}]: {p.name!r} is the name of a built-in stage; give the custom "
                                     "stage another 'name'")
        if p.name in seen:
            raise DuplicateNameError(f"stages[{seen[p.name]}] and stages[{i}] are both named {p.name!r}; stage "
                                     "names must be unique (set 'name:' on one of them)")
        seen[p.name] = i


def _order(planned: list[PlannedStage]) -> list[PlannedStage]:
    by_name = {p.name: p for p in planned}
    for i, p in enumerate(planned):
        if p.after not in BUILTIN_STAGES and p.after not in by_name:
            close = difflib.get_close_matches(p.after, [*BUILTIN_STAGES, *by_name], n=1)
            raise InvalidDAGError(f"stages[{i}].after: unknown stage {p.after!r}"
                                  + (f"; did you mean {close[0]!r}?" if close else "")
                                  + f"; expected a built-in stage ({', '.join(RAW_ANCHORS + FILLED_ANCHORS)}) "
                                  "or the name of another custom stage")
    for p in planned:
        path, current = [p.name], p
        while current.after in by_name:
            current = by_name[current.after]
            if current.name in path:
                cycle = path[path.index(current.name):] + [current.name]
                raise BadTopologyError("custom stages form a cycle: " + " runs after ".join(f"'{n}'" for n in cycle))
            path.append(current.name)
        root = current.after
        if root not in RAW_ANCHORS + FILLED_ANCHORS:
            raise InvalidDAGError(f"stage {p.name!r} runs after {root!r}: custom stages transform rows before the "
                                  f"fit, so 'after' must be (or lead to) one of {', '.join(RAW_ANCHORS + FILLED_ANCHORS)}")
        p.phase = "raw" if root in RAW_ANCHORS else "filled"
    children: dict[str, list[PlannedStage]] = {}
    for p in planned:
        children.setdefault(p.after, []).append(p)
    order: list[PlannedStage] = []

    def visit(name: str) -> None:
        for child in children.get(name, []):
            order.append(child)
            visit(child.name)

    for anchor in BUILTIN_STAGES:
        visit(anchor)
    return order


def _check_signatures(order: list[PlannedStage]) -> None:
    for p in order:
        if p.stage.fits:  # it defines add: a fitted stage is a whole combiner (tasks.runtime.combine)
            missing = [m for m in ("create", "merge") if getattr(type(p.stage), m) is getattr(Stage, m)]
            if missing:
                raise InvalidTypeSignatureError(f"{p.stage.describe()} defines add (it fits) but not "
                                                f"{' or '.join(missing)}: a fitted stage defines create, add and "
                                                "merge (extract defaults to the accumulator)")
        for attr, what in (("input_type", "input"), ("output_type", "output")):
            declared = getattr(p.stage, attr, None)
            if not isinstance(declared, Mapping) or not all(isinstance(k, str) and k for k in declared):
                raise InvalidTypeSignatureError(f"{p.stage.describe()}: {attr} must be a mapping of column name -> "
                                                f"dtype or feature type, got {declared!r}")
            if not declared:
                raise BadInputOrOutputError(f"{p.stage.describe()} declares no {what} columns ({attr} is empty); "
                                            "a stage reads at least one column and makes at least one")
            for column, spec in declared.items():
                try:
                    spec_kind(spec)
                except ValueError as exc:
                    raise InvalidTypeSignatureError(f"{p.stage.describe()}: {attr}[{column!r}]: {exc}") from None
                if column in RESERVED_COLUMNS and what == "output":
                    raise InvalidTypeSignatureError(f"{p.stage.describe()}: output_type names {column!r}, a column "
                                                    "prepflow keeps for itself")


def _hint(column: str, columns: list[str]) -> str:
    close = difflib.get_close_matches(column, columns, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def build_plan(config: Any, dataset_columns: list[str] | None = None) -> StagePlan:
    """Load, order and validate ``config.stages``; ``dataset_columns`` (when cheap to know) lets a
    missing input be reported before ingest."""
    if not config.stages:
        return StagePlan([], {}, {})
    order = _order(_planned_all(config))
    _check_signatures(order)
    made_by: dict[str, int] = {}
    for i, p in enumerate(order):
        for column in p.outputs:
            if column in made_by:
                raise DuplicateNameError(f"column {column!r} is made by both stage {order[made_by[column]].name!r} "
                                         f"and stage {p.name!r}; a column is made once")
            if dataset_columns is not None and column in dataset_columns:
                raise DuplicateNameError(f"stage {p.name!r} makes column {column!r}, which the dataset already has; "
                                         "give the output another name")
            made_by[column] = i
    features = list(config.features)
    filled_made = {c for c, i in made_by.items() if order[i].phase == "filled"}
    frame_features = {f.name: f for f in features if f.source_column not in filled_made}
    for column, i in made_by.items():
        if order[i].phase == "filled" and column in frame_features:
            f = frame_features[column]
            raise DuplicateNameError(f"stage {order[i].name!r} makes column {column!r}, which after fill_missing "
                                     f"holds feature {f.name!r} (column {f.source_column!r}); give the output "
                                     "another name")
    consumers: dict[int, list[str]] = {i: [] for i in range(len(order))}
    raw_columns: dict[str, str] = {}
    for i, p in enumerate(order):
        for column, spec in p.inputs.items():
            source = _resolve_input(order, i, column, made_by, frame_features, dataset_columns)
            want = spec_kind(spec)
            if isinstance(source, int):
                consumers[source].append(f"stage {p.name!r}")
                maker = order[source]
                if not compatible(spec_kind(maker.outputs[column]), want):
                    raise TypeMismatchError(f"stage {p.name!r} reads column {column!r} as {spec!r}, but stage "
                                            f"{maker.name!r} makes it as {maker.outputs[column]!r}")
                if p.phase == "filled" and maker.phase == "raw":
                    p.passthrough.append(column)
            elif source == "feature":
                f = frame_features[column]
                have = FEATURE_KINDS.get(f.type or "", "object")
                if not compatible(have, want):
                    raise TypeMismatchError(f"stage {p.name!r} reads column {column!r} as {spec!r}, but after "
                                            f"fill_missing it holds {f.type} feature {f.name!r} ({have} values)")
            else:  # a dataset column
                p.dataset_inputs.append(column)
                if p.phase == "filled":
                    p.passthrough.append(column)
                kind = "float64" if want in ("float", "int") else "string"
                raw_columns[column] = kind if raw_columns.get(column, kind) == kind else "string"
    for f in features:
        i = made_by.get(f.source_column)
        if i is None:
            continue
        maker = order[i]
        if f.type is None:
            raise InvalidDAGError(f"feature {f.name!r} reads column {f.source_column!r}, which stage {maker.name!r} "
                                  "makes: give the feature a 'type' (type inference reads only the dataset's columns)")
        spec = maker.outputs[f.source_column]
        accepts = feature_accepts(f.type)
        if not any(compatible(spec_kind(spec), a) for a in accepts):
            raise TypeMismatchError(f"stage {maker.name!r} makes column {f.source_column!r} as {spec!r}, but the "
                                    f"{f.type} feature {f.name!r} reads it and takes {' or '.join(sorted(accepts))} "
                                    "values")
        consumers[i].append(f"feature {f.name!r}")
    split_column = config.preprocessing.split.column
    if split_column and split_column in made_by:
        raise BadInputOrOutputError(f"preprocessing.split.column: {split_column!r} is made by stage "
                                    f"{order[made_by[split_column]].name!r}; the split reads the dataset's columns")
    for i, p in enumerate(order):
        if not consumers[i]:
            raise NotConnectedError(f"stage {p.name!r} is not connected: no feature and no later stage reads any of "
                                    f"its output columns {sorted(p.outputs)}; add a feature for one "
                                    f"(input_features: [{{name: {next(iter(p.outputs))}, type: ...}}]) or remove "
                                    "the stage")
    return StagePlan(order, made_by, raw_columns)


def _planned_all(config: Any) -> list[PlannedStage]:
    planned = [_planned(spec, i) for i, spec in enumerate(config.stages)]
    _check_names(planned)
    return planned


def _resolve_input(order: list[PlannedStage], i: int, column: str, made_by: dict[str, int],
                   frame_features: dict, dataset_columns: list[str] | None) -> int | str:
    """Where stage ``i``'s input ``column`` comes from: an earlier stage's index, ``"feature"`` (a
    feature's filled values, filled phase) or ``"dataset"``."""
    p = order[i]
    if p.phase == "filled" and column in frame_features:
        return "feature"
    maker = made_by.get(column)
    if maker is not None:
        if maker == i:
            raise BadTopologyError(f"stage {p.name!r} reads column {column!r}, which it makes itself")
        if maker > i:
            raise BadTopologyError(f"stage {p.name!r} reads column {column!r}, which stage {order[maker].name!r} makes "
                                   f"after it; run {order[maker].name!r} first (set 'after: {order[maker].name}' on "
                                   f"{p.name!r})")
        return maker
    if dataset_columns is not None and column not in dataset_columns:
        raise BadInputOrOutputError(f"stage {p.name!r} reads column {column!r}, which no earlier stage makes and the "
                                    f"dataset does not have{_hint(column, list(dataset_columns))}; its columns are "
                                    f"{list(dataset_columns)}")
    return "dataset"
