"""What each stage writes, as typed handles on its cache entry: the one place that knows the files.

A handle reads its entry's files and writes them (Kedro's datasets): a stage's computation hands its data
to its output type's writers (``SplitAssignment.write(out, assign)``) and never names a file itself.

A stage declares its output type (``tasks.runtime.node.Node.output``); the runner hands each stage its
parents' outputs as these handles (Kedro's catalog: a stage never imports another stage to find its
input). A handle is a ``StageResult`` (what every stage returns, and what Prefect tasks pass between them: the cache
key, the entry's folder, whether it came from the cache, its statistics, which the runner writes as
statistics.json) with readers and writers for the entry's files:

    Ingested         ingest          data/part-*.arrow (Arrow IPC, ``__row__`` numbered), ingest.json; a folder's
                                     files in ingest_file/<key>/ (data/, file.json)
    Types            infer_types     types.json: the inferred type and reason of each untyped feature
    SplitAssignment  split           split.npy: int8 per input row, 0 train, 1 validation, 2 test, -1 not sampled
    MissingStates    fill_missing    missing.json: each feature's missing-value state (and custom stages' states)
                     (a custom stage)  + stage.json: the custom stage with its fitted state
    Multiplicity     balance         multiplicity.npy: uint32 per input row (training rows), absent: no balancing;
                                     balance.json
    Fitted           vocab           training_set_metadata.json (+ metadata_summary.json, vocab/*.parquet)
    Encoded          encode          <split>/part-NNNNN.arrow and rows-NNNNN.npy, encode.json
    MediaCached      media_cache     the (Fitted, Encoded) pair: its own entry when it decoded media (+ media_cache.json),
                                     else vocab's and encode's outputs passed through
    GateResult       validate_*      validation.json, suite-NN.json
    Drifted          drift           drift.json: each feature's drift (apply) or skew (a run's splits)
    Published        publish         the artifact (``artifact``: path, id, rows per split)

Readers that hand data to Dask tasks return handles that pickle as their paths (``MappedArray``), so
the flow process reads no per-row array it does not ask for.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from core.errors import DataError
from storage import vocab_store
from storage.hashing import stable_hash
from storage.npy import MappedArray
from tasks.runtime import fitted_metadata
from tasks.runtime.part_files import parts_in
from tasks.runtime.statistics import Statistics

INGEST_FILE = "ingest.json"
SPLIT_FILE = "split.npy"
MULTIPLICITY_FILE = "multiplicity.npy"
BALANCE_FILE = "balance.json"
MISSING_FILE = "missing.json"
STAGE_FILE = "stage.json"  # a custom stage's own fitted state, beside its missing.json
FILE_INFO = "file.json"  # a per-file ingest entry's fingerprint and rows
TYPES_FILE = "types.json"
ENCODE_FILE = "encode.json"
GATE_FILE = "validation.json"
DRIFT_FILE = "drift.json"
MEDIA_STATE_FILE = "media_cache.json"
STATS_FILE = "statistics.json"  # every entry's statistics, written by the runner (tasks.runtime.cached)
FILE_ENTRIES = "ingest_file"  # the cache folder of the per-file ingest entries


@dataclass
class StageResult:
    stage: str
    key: str
    path: str
    cached: bool
    seconds: float = 0.0
    statistics: dict = field(default_factory=dict)
    artifact: dict | None = None  # publish only: artifact_path, artifact_id, rows, reused

    def to_json(self) -> dict:
        return {"stage": self.stage, "key": self.key, "path": self.path, "cached": self.cached,
                "seconds": round(self.seconds, 4), "statistics": self.statistics,
                **({"artifact": self.artifact} if self.artifact is not None else {})}

    @classmethod
    def from_json(cls, data: dict) -> "StageResult":
        return cls(**data)


@dataclass
class Output(StageResult):
    """A stage's result with readers for its entry (see the module docstring)."""

    @classmethod
    def of(cls, result: StageResult):
        """``result`` as this output type (the same entry)."""
        return result if type(result) is cls else cls(**{f.name: getattr(result, f.name) for f in fields(StageResult)})

    @classmethod
    def at(cls, path: str | Path):
        """The output whose entry is the folder ``path`` (for code that is handed only the folder)."""
        return cls("", "", str(path), True)

    @property
    def folder(self) -> Path:
        return Path(self.path)


@dataclass
class Ingested(Output):
    """The ingested table: Arrow IPC parts, rows numbered by ``__row__`` (0-based input position)."""

    @staticmethod
    def data(out: Path) -> Path:
        """The folder of the Arrow IPC parts in the entry ``out``."""
        return out / "data"

    @staticmethod
    def part_file(data_dir: str | Path, index: int) -> Path:
        """The ``index``-th Arrow IPC part in a data folder (``data``), named to sort in row order."""
        return Path(data_dir) / f"part-{index:05d}.arrow"

    @staticmethod
    def write_info(out: Path, info: dict) -> None:
        """The entry's description: ``fingerprint``, ``rows``, ``spec``, and a folder's ``files``."""
        (out / INGEST_FILE).write_text(json.dumps(info))

    @staticmethod
    def write_file_info(entry: Path, info: dict) -> None:
        """A per-file entry's ``fingerprint`` and ``rows`` (``FILE_ENTRIES``)."""
        (entry / FILE_INFO).write_text(json.dumps(info))

    @staticmethod
    def file_info(entry: Path) -> dict | None:
        """A per-file entry's ``fingerprint`` and ``rows``; None when the entry is gone."""
        path = entry / FILE_INFO
        return json.loads(path.read_text()) if path.is_file() else None

    def _info(self) -> dict:
        return json.loads((self.folder / INGEST_FILE).read_text())

    @property
    def parts(self) -> list[tuple[str, int]]:
        """Every ingested part (Arrow IPC) in row order, as ``(path, row offset)``: a part's stored ``__row__``
        plus the offset is the row's position in the dataset (``tasks.runtime.frame`` adds it when reading).
        A dataset of several files is ingested file by file (``FILE_ENTRIES``: one cache entry per file, its rows
        numbered from 0), so a file's entry does not depend on the files before it."""
        info = self._info()
        if "files" not in info:
            return parts_in(self.data(self.folder))
        root = self.folder.parent.parent  # the cache folder: <cache>/<stage>/<key>
        return [part for f in info["files"] for part in parts_in(self.data(root / FILE_ENTRIES / f["key"]), f["offset"])]

    def file_parts(self, f: dict) -> list[tuple[str, int]]:
        """One file's parts (``f``: an item of ``files``), with its row offset."""
        return parts_in(self.data(self.folder.parent.parent / FILE_ENTRIES / f["key"]), f["offset"])

    @property
    def files_read(self) -> int:
        """How many of the dataset's files this run read (the others' entries were reused): 0 on a hit."""
        return 0 if self.cached else self._info().get("read", 0)

    @property
    def schema_drift(self) -> list[dict]:
        """The files whose columns differ from the first file's (``schema_drift: allow``): file, column, change."""
        return self._info().get("schema_drift", [])

    @property
    def files(self) -> list[dict]:
        """The dataset's files (several: a folder or glob) in name order: ``name``, ``fingerprint``, ``rows``,
        ``offset`` (rows before it), ``key`` (its entry); ``[]`` for one file or a DataFrame."""
        return self._info().get("files", [])

    @property
    def num_rows(self) -> int:
        return self._info()["rows"]

    @property
    def fingerprint(self) -> str:
        """The dataset's fingerprint (a hash of its bytes)."""
        return self._info()["fingerprint"]


@dataclass
class Types(Output):
    @staticmethod
    def write(out: Path, decisions: dict) -> None:
        (out / TYPES_FILE).write_text(json.dumps({"features": decisions}, sort_keys=True, indent=1))

    def types(self) -> dict[str, dict]:
        """Feature name -> ``{"type", "reason", "preprocessing"}`` for every feature the config left untyped."""
        return json.loads((self.folder / TYPES_FILE).read_text())["features"]


@dataclass
class SplitAssignment(Output):
    @staticmethod
    def file(out: Path) -> Path:
        """Where the assignment goes in the entry ``out`` (for Dask tasks writing it in place)."""
        return out / SPLIT_FILE

    @staticmethod
    def write(out: Path, assign) -> None:
        np.save(out / SPLIT_FILE, assign)

    def assignment(self) -> MappedArray:
        """The split of every input row (int8: 0/1/2, -1 not sampled), memory-mapped where it is read."""
        return MappedArray(self.folder / SPLIT_FILE)


@dataclass
class MissingStates(Output):
    @staticmethod
    def write(out: Path, states: dict) -> None:
        (out / MISSING_FILE).write_text(json.dumps(states, sort_keys=True, indent=1))

    @staticmethod
    def write_stage(out: Path, state: dict) -> None:
        """A custom stage's planned stage with its fitted state (``stage_state``)."""
        (out / STAGE_FILE).write_text(json.dumps(state, sort_keys=True, indent=1))

    def stage_state(self) -> dict:
        return json.loads((self.folder / STAGE_FILE).read_text())

    def states(self) -> dict:
        """Feature name -> its missing-value state (``computed_fill_value``, ...); with custom stages, also
        their fitted plan (``tasks.custom.plan.STATES_KEY``)."""
        return json.loads((self.folder / MISSING_FILE).read_text())


@dataclass
class Multiplicity(Output):
    @staticmethod
    def file(out: Path) -> Path:
        """Where the multiplicities go in the entry ``out`` (written in place by Dask tasks)."""
        return out / MULTIPLICITY_FILE

    @staticmethod
    def write_info(out: Path, info: dict) -> None:
        """Whether balancing ran (``enabled``) and on which ``label``."""
        (out / BALANCE_FILE).write_text(json.dumps(info))

    def multiplicity(self) -> MappedArray | None:
        """How many times each input row is published (uint32; training rows), or None: no balancing."""
        path = self.folder / MULTIPLICITY_FILE
        return MappedArray(path) if path.exists() else None


@dataclass
class Fitted(Output):
    """The fitted metadata of every feature (``tasks.runtime.fitted_metadata``)."""

    def metadata(self) -> dict:
        """Without the inline vocabularies: what the flow process needs (vocabulary sizes, Parquet
        vocabulary references, sequence lengths)."""
        return fitted_metadata.read_summary(self.path)

    @staticmethod
    def read_full(path: str | Path, resolve_files: bool = False) -> dict:
        """The metadata of the entry at ``path`` with its inline vocabularies (for encoding, on a worker);
        ``resolve_files``: with the absolute ``vocab_path`` of each Parquet vocabulary (never published)."""
        metadata = fitted_metadata.read_full(path)
        return vocab_store.resolve(metadata, str(path)) if resolve_files else metadata

    def copy_metadata(self, dest: Path) -> None:
        """``training_set_metadata.json`` copied into ``dest`` as written (the bytes ``json.dumps`` of the
        loaded metadata would give, without parsing the vocabularies)."""
        shutil.copyfile(self.folder / fitted_metadata.METADATA_FILE, dest / fitted_metadata.METADATA_FILE)

    def file_sources(self, metadata: dict) -> list[tuple[str, str]]:
        """``(absolute path in the entry, path in the artifact)`` of each Parquet vocabulary ``metadata``
        references; a DataError names one that is missing."""
        sources = []
        for rel in vocab_store.files(metadata):
            src = self.folder.absolute() / rel
            if not src.is_file():
                raise DataError(f"{src}: vocabulary file referenced by {fitted_metadata.METADATA_FILE} is missing")
            sources.append((str(src), rel))
        return sources

    def copy_files(self, metadata: dict, dest: Path, link: bool = False) -> None:
        """The Parquet vocabularies ``metadata`` references, copied into ``dest``; ``link``: hard-linked where
        the file system allows (cache entries are never changed in place)."""
        for src, rel in self.file_sources(metadata):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            if link:
                try:
                    os.link(src, dest / rel)
                    continue
                except OSError:  # another file system, or links not supported: copy
                    pass
            shutil.copyfile(src, dest / rel)


@dataclass
class Encoded(Output):
    """Encoded rows per split: ``<split>/part-NNNNN.arrow`` with the input rows in ``rows-NNNNN.npy``."""

    def split_parts(self, split_name: str) -> list[Path]:
        return sorted((self.folder / split_name).glob("part-*.arrow"))

    @staticmethod
    def part_file(split_dir: str | Path, name: int | str) -> Path:
        """A split's part ``name`` (a partition's index, or a string sorting among them)."""
        return Path(split_dir) / (f"part-{name:05d}.arrow" if isinstance(name, int) else f"part-{name}.arrow")

    @staticmethod
    def rows_file(part: str | Path) -> Path:
        """The input rows of each row of ``part``, saved beside it (``part-X.arrow`` -> ``rows-X.npy``)."""
        part = Path(part)
        return part.with_name(part.name.replace("part-", "rows-", 1).rsplit(".", 1)[0] + ".npy")

    def row_counts(self) -> dict[str, int]:
        return json.loads((self.folder / ENCODE_FILE).read_text())["rows"]

    @staticmethod
    def write_info(out: Path, rows: dict[str, int], parts: int) -> None:
        """The rows per split and how many parts were written."""
        (out / ENCODE_FILE).write_text(json.dumps({"rows": rows, "parts": parts}))


@dataclass
class MediaCached(Output):
    """media_cache's output: the ``(fitted, encoded)`` pair the encoded gate and publish read. When it decoded
    media its entry holds both (the metadata with the codecs, the rewritten parts); without media features
    the pair is vocab's and encode's outputs, passed through (``passed``)."""

    passed: tuple[Fitted, Encoded] | None = None

    @classmethod
    def passing(cls, fitted: Fitted, encoded: Encoded) -> "MediaCached":
        """The output of a media_cache with nothing to decode: vocab's and encode's outputs as they are."""
        return cls("media_cache", encoded.key, encoded.path, encoded.cached, 0.0, {}, passed=(fitted, encoded))

    def fitted(self) -> Fitted:
        if self.passed is not None:
            return self.passed[0]
        return Fitted(self.stage, self.key, self.path, self.cached, self.seconds, self.statistics)

    def encoded(self) -> Encoded:
        """The encoded rows; a rewriting entry's statistics merged with encode's (whose row counters the gate
        reads), as the entry recorded them."""
        if self.passed is not None:
            return self.passed[1]
        encode = json.loads((self.folder / MEDIA_STATE_FILE).read_text())["encode_statistics"]
        merged = Statistics.from_json(encode).merge(Statistics.from_json(self.statistics)).to_json()
        return Encoded(self.stage, self.key, self.path, self.cached, self.seconds, merged)

    @staticmethod
    def write_state(out: Path, state: dict) -> None:
        """What was decoded: the media ``content`` hash, the ``code_version``, the ``features``, and the
        ``encode_statistics`` of the parts it rewrote."""
        (out / MEDIA_STATE_FILE).write_text(json.dumps(state, sort_keys=True))

    def fingerprint(self, base: str) -> str:
        """The artifact's dataset fingerprint: the table's (``base``), combined with the media content hash."""
        state_file = self.folder / MEDIA_STATE_FILE
        if not state_file.is_file():
            return base
        state = json.loads(state_file.read_text())
        return stable_hash([base, state["content"], state["code_version"]], 64)


@dataclass
class GateResult(Output):
    @staticmethod
    def write(out: Path, result: dict, suites: list[dict]) -> None:
        """The gate's results, and each suite it ran (``suite-NN.json``, in order)."""
        (out / GATE_FILE).write_text(json.dumps(result, sort_keys=True, indent=1, default=str))
        for i, suite in enumerate(suites):
            (out / f"suite-{i:02d}.json").write_text(json.dumps(suite, sort_keys=True, indent=1))

    def results(self) -> dict:
        """The gate's results: ``gate``, ``success``, ``rows``, ``evaluated``, ``failed``, ``suites``."""
        return json.loads((self.folder / GATE_FILE).read_text())


@dataclass
class Drifted(Output):
    @staticmethod
    def write(out: Path, result: dict) -> None:
        (out / DRIFT_FILE).write_text(json.dumps(result, sort_keys=True, indent=1))

    def results(self) -> dict:
        """``mode`` (run | apply); ``drift`` (apply: feature -> entry) or ``skew`` (run: split -> feature -> entry)."""
        return json.loads((self.folder / DRIFT_FILE).read_text())

    def entries(self) -> dict[str, dict]:
        """Feature -> its entry (``statistic``, ``value``, ``threshold``, ``status``, ...); in a run the worst of
        its validation and test splits', with ``split``."""
        data = self.results()
        if data["mode"] == "apply":
            return data["drift"]
        rank = {"ok": 0, "warn": 1, "fail": 2}
        out: dict[str, dict] = {}
        for split, entries in data["skew"].items():
            for feature, entry in entries.items():
                if feature not in out or rank[entry["status"]] > rank[out[feature]["status"]]:
                    out[feature] = {**entry, "split": split}
        return out


@dataclass
class Published(Output):
    """publish's result: ``key`` is the artifact id, ``path`` its folder, ``artifact`` the summary."""
