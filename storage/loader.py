"""Batches of tensors from a published split: the torch side of the artifact (DESIGN section 5).

``BatchLoader`` (``Artifact.batches``) yields ``dict[channel -> torch.Tensor]``;
``storage.torch_dataset.ArtifactDataset`` (``Artifact.torch_dataset``) is a map-style
``torch.utils.data.Dataset`` over the same files. torch is imported where a tensor is first made
(importing this module, or ``storage.artifact``, does not import it: it is slow to import).

Reading. A split's columns come from its per-feature ``.npy`` files, memory-mapped
(``npy.load(mmap_mode="r")``), or, when the artifact has no ``.npy`` files, from its Parquet shards,
decoded once into memory per process. Either way a batch is gathered from index arrays with one
numpy copy per column straight into the output tensor's memory (pinned when ``pin_memory`` and CUDA
are available): no per-row Python.

Channels. The ``channel_spec`` of ``feature_spec.yaml`` names the columns of each channel. The
``numerical`` and ``categorical`` channels (``STACKED``: columns of many features) are always
stacked along dim 1, ``n x k`` also for one column (``k = 1``), so a channel's shape never depends
on how many features the config has. Another channel of one column yields that column (``n`` or
``n x shape``: a one-feature channel, the ``label``); of several columns of the same shape it is
stacked (``n x k`` or ``n x k x shape``). Stacking gives the common dtype of the columns (``bool``
and ``float32`` give ``float32``); a channel whose columns differ in shape yields a
``dict[column -> tensor]``. A stacked channel is laid out column by column: it is the
``transpose(0, 1)`` of a ``k x n`` buffer, so gathering it is one contiguous copy per column (a
row-major ``n x k`` copy costs about five times more on the CPU) and ``batch[ch][:, j]`` is
contiguous, as embedding lookups like. ``.to(device)`` keeps the layout; call ``.contiguous()``
(best on the GPU) where a kernel needs row-major memory.

Order (``storage.order``). Each epoch's order is a function of ``(seed, epoch, world_size)`` and the
loader's settings only: a permutation of the split's rows (``shuffle=True``) or input order; with
``shuffle_block=N``, a permutation of blocks of ``N`` consecutive rows (as DLRM-style loaders do: a
row-level shuffle gathers rows at random from every column file, about ten times the cost of a
sequential read; a block shuffle is ``batch_size / N`` sequential copies per column, at the price of
rows of a block always sharing a batch); with ``shuffle_window=W``, the shard-aware order a streamed
artifact is read in (shards permuted, rows shuffled within windows of ``W`` rows). Every rank gets
disjoint rows and the same number of batches. Within a shuffled batch rows are sorted by position, so
a memory-mapped read walks each file forward; which rows form a batch is random, their order inside
it is not.

Row ids and resume. ``channels=[..., "__row__"]`` adds each row's id (its input position, int64)
beside the training channels. ``state_dict()`` / ``load_state_dict()`` (torchdata's
``StatefulDataLoader`` protocol) resume a killed job at the batch after the last one it was handed:
the state is JSON numbers, checked against the loader before it is used (``BatchLoader``).

Prefetch (``storage.prefetch``). A background thread gathers up to ``prefetch`` batches ahead of the consumer; numpy's
copies release the GIL, so reading overlaps the training step. ``device=`` copies each batch there as
the consumer takes it, on its current stream. To a CUDA device the batches are gathered into pinned
memory by default (``pin_memory=None``), so the copy is asynchronous: the host goes on to the next
batch while the GPU runs the queued step. With ``pin_memory=False`` each copy waits for the kernels
queued before it. Measured on an H100 (``benchmarks/loader_cuda.py``, ``benchmarks/RESULTS.md``),
with the numbers for a side copy stream that was tried and not kept.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from core.errors import DataError
from storage import npy
from storage.artifact_files import ROW_COLUMN, arrow_to_numpy, read_shard
from storage.media import item_specs, open_media_columns
from storage.order import Order, resume_point, state_dict
from storage.prefetch import prefetched
from storage.size_checks import check_row_items, check_split
from storage.split_binary import read_chunk

# ---- column sources ------------------------------------------------------------------------------

def _np_dtype(torch_name: str) -> np.dtype:
    return np.dtype(torch_name.removeprefix("torch."))


class SplitColumns:
    """Random access to one split's columns as numpy arrays (memory-mapped ``.npy`` or decoded Parquet).

    Arrays are opened lazily and dropped on pickling, so a dataset can be sent to DataLoader
    worker processes (each maps the files itself).
    """

    def __init__(self, root: Path, feature_spec: dict, split: str, prefer: str = "npy", num_rows: int | None = None):
        if split not in feature_spec.get("source_spec", {}):
            raise DataError(f"{root}: no split {split!r}; splits are {list(feature_spec.get('source_spec', {}))}")
        self.root = Path(root)
        self.split = split
        self.specs: dict[str, dict] = feature_spec["feature_spec"]
        chunks = feature_spec["source_spec"][split]
        self.npy: dict[str, str] = {}
        self.parquet: list[str] = []
        self.media: dict[str, dict] = {}  # lazy media columns: their slots decode through storage.media
        self.binary: dict[str, dict] = {}  # NVIDIA's split_binary layout (storage.split_binary)
        for chunk in chunks:
            if chunk["type"] == "npy":
                for name, file in zip(chunk["features"], chunk["files"], strict=True):
                    self.npy[name] = file
            elif chunk["type"] == "parquet":
                self.parquet = list(chunk["files"])
            elif chunk["type"] == "media":
                self.media.update(dict.fromkeys(chunk["features"], chunk))
            elif chunk["type"] == "split_binary":
                self.binary.update(dict.fromkeys(chunk["features"], chunk))
        if prefer == "parquet" and self.parquet:
            self.npy = {}
        elif prefer not in ("npy", "parquet"):
            raise ValueError(f"prefer must be 'npy' or 'parquet', got {prefer!r}")
        self.format = "npy" if self.npy else "parquet" if self.parquet or not self.binary else "split_binary"
        self._arrays: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self._num_rows = num_rows
        self._chunks = chunks
        self._sized = False  # the files' headers and footers were held against the manifest's rows

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_arrays"] = {}
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def array(self, name: str) -> np.ndarray:
        arr = self._arrays.get(name)
        if arr is not None:
            return arr
        with self._lock:
            if name not in self._arrays:
                self._arrays.update(self._with_media(self._open([name])))
        return self._arrays[name]

    def preload(self, names: list[str]) -> None:
        with self._lock:
            todo = [n for n in names if n not in self._arrays]
            if todo:
                self._arrays.update(self._with_media(self._open(todo)))

    def _with_media(self, arrays: dict[str, np.ndarray]) -> dict:
        if not self.media:
            return arrays
        return open_media_columns(self.root, self.media, arrays)

    def _check_sizes(self) -> None:
        """Before a row count is believed or a file decoded: the files this reads hold the manifest's rows, as
        their headers and footers say (``storage.size_checks``; no row read)."""
        if self._sized:
            return
        if self.format == "npy":  # one header: every other file is held to the same count when it is mapped
            name, file = next(iter(self.npy.items()))
            shape = None if name in self.media else self.specs.get(name, {}).get("shape")
            npy.check_file(self.root / file, self._num_rows, shape if isinstance(shape, list) else None, name)
        else:
            check_split(self.root, {"feature_spec": self.specs, "source_spec": {self.split: self._chunks}},
                        self.split, self._num_rows, formats=(self.format,))
        self._sized = True

    def _open(self, names: list[str]) -> dict[str, np.ndarray]:
        self._check_sizes()
        unknown = [n for n in names if n not in self.specs]
        if unknown:
            raise DataError(f"{self.root}: no column(s) {unknown} in feature_spec.yaml; columns are {list(self.specs)}")
        if self.format == "npy":
            out = {}
            for name in names:
                if name not in self.npy:
                    raise DataError(f"{self.root}: split {self.split!r} has no .npy file for column {name!r}")
                path = self.root / self.npy[name]
                shape = None if name in self.media else self.specs.get(name, {}).get("shape")
                check = {"rows": self._num_rows, "feature": name, "row_shape": shape if isinstance(shape, list) else None}
                try:  # a plain ndarray view of the map: np.memmap's slicing hooks cost more than small copies
                    arr = np.asarray(npy.load(path, mmap_mode="r", **check))
                except ValueError:  # an empty array cannot be memory-mapped
                    arr = npy.load(path, **check)
                except OSError as exc:
                    raise DataError(f"{path}: cannot read ({exc})") from exc
                out[name] = arr
            return out
        if self.format == "split_binary":  # memory-mapped views of NVIDIA's files
            missing = [n for n in names if n not in self.binary]
            if missing:
                raise DataError(f"{self.root}: split {self.split!r} has no split_binary file for {missing}")
            return {n: read_chunk(self.root, self.binary[n], self._num_rows, [n])[n] for n in names}
        if not self.parquet:
            raise DataError(f"{self.root}: split {self.split!r} has neither .npy files nor Parquet shards")
        tables = [read_shard(self.root / f, names, memory_map=True) for f in self.parquet]
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        return {name: np.ascontiguousarray(arrow_to_numpy(table.column(name))) for name in names}

    def num_rows(self) -> int:
        self._check_sizes()
        if self._num_rows is None:
            self._num_rows = len(self.array(next(iter(self.specs))))
        return self._num_rows


# ---- channel plans -------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChannelPlan:
    """How one channel's batch is built: ``single`` column, ``stack`` along dim 1, or a ``dict``."""

    name: str
    columns: tuple[str, ...]
    kind: str  # single | stack | dict
    dtype: np.dtype
    shape: tuple[int, ...]  # per-row shape of the yielded tensor (single/stack)


STACKED = ("numerical", "categorical")  # channels always yielded n x k (see the module docstring)


def plan_channels(feature_spec: dict, channels: list[str] | None = None) -> list[ChannelPlan]:
    """How each channel of ``channels`` (default: every channel of ``channel_spec``) is built. ``__row__``
    (``ROW_COLUMN``) may be asked for beside the training channels: each row's id, an int64 ``n`` tensor."""
    spec = item_specs(feature_spec)  # a lazy media column yields its decoded items, not its slots
    channel_spec: dict[str, list[str]] = feature_spec.get("channel_spec") or {}
    if channels is not None:
        unknown = [c for c in channels if c not in channel_spec and c != ROW_COLUMN]
        if unknown:
            raise DataError(f"no channel(s) {unknown} in feature_spec.yaml; channels are "
                            f"{[*channel_spec, ROW_COLUMN]}")
        if ROW_COLUMN in channels and ROW_COLUMN not in channel_spec and ROW_COLUMN not in spec:
            raise DataError(f"no {ROW_COLUMN} column in this artifact's feature_spec.yaml: it was published before "
                            f"row ids; publish it again to read them")
        channel_spec = {c: channel_spec.get(c, [ROW_COLUMN]) for c in channels}
    plans = []
    for name, cols in channel_spec.items():
        if not cols:
            continue
        for c in cols:  # every batch is n x this shape: bounded before the first is allocated
            check_row_items(spec[c]["shape"], f"feature_spec.yaml: column '{c}'")
        dtypes = [_np_dtype(spec[c]["dtype"]) for c in cols]
        shapes = [tuple(spec[c]["shape"]) for c in cols]
        if len(cols) == 1 and name not in STACKED:
            plans.append(ChannelPlan(name, tuple(cols), "single", dtypes[0], shapes[0]))
        elif len(set(shapes)) == 1:
            plans.append(ChannelPlan(name, tuple(cols), "stack", np.result_type(*dtypes), (len(cols), *shapes[0])))
        else:
            plans.append(ChannelPlan(name, tuple(cols), "dict", dtypes[0], ()))
    return plans


def _pin_available() -> bool:
    import torch  # slow to import: imported when the first tensor is made

    return torch.cuda.is_available()


def _empty(shape: tuple[int, ...], dtype: np.dtype, pin: bool):
    """A torch tensor and its numpy view: gathers write straight into the tensor's memory.

    Unpinned buffers come from numpy, which asks for transparent huge pages on large allocations:
    a fresh large batch then costs a handful of page faults instead of thousands (torch's CPU
    allocator does not, and pinned memory comes from torch's caching host allocator anyway).
    """
    import torch  # slow to import: imported when the first tensor is made

    if pin:
        tensor = torch.from_numpy(np.empty(0, dtype=dtype)).new_empty(shape, pin_memory=True)
        return tensor, tensor.numpy()
    view = np.empty(shape, dtype=dtype)
    return torch.from_numpy(view), view


@dataclass(frozen=True)
class Runs:
    """Row positions as runs of consecutive rows ``[starts[i], stops[i])``: one slice copy per run."""

    starts: np.ndarray
    stops: np.ndarray

    def __len__(self) -> int:
        return int((self.stops - self.starts).sum())


def _copy_rows(src: np.ndarray, index, out: np.ndarray) -> None:
    if isinstance(index, slice):
        np.copyto(out, src[index], casting="unsafe")
    elif isinstance(index, Runs):
        pos = 0
        for a, b in zip(index.starts.tolist(), index.stops.tolist(), strict=True):
            np.copyto(out[pos:pos + b - a], src[a:b], casting="unsafe")
            pos += b - a
    elif out.dtype == src.dtype and out.flags.c_contiguous:
        np.take(src, index, axis=0, out=out, mode="clip")
    else:
        np.copyto(out, np.take(src, index, axis=0), casting="unsafe")


def gather(columns: SplitColumns, plans: list[ChannelPlan], index, pin: bool = False) -> dict[str, Any]:
    """One batch: ``index`` is a slice, ``Runs`` or an int64 array of row positions."""
    n = (index.stop - index.start) if isinstance(index, slice) else len(index)
    batch: dict[str, Any] = {}
    for plan in plans:
        if plan.kind == "single":
            tensor, view = _empty((n, *plan.shape), plan.dtype, pin)
            _copy_rows(columns.array(plan.columns[0]), index, view)
            batch[plan.name] = tensor
        elif plan.kind == "stack":  # k x n x ... buffer, one contiguous copy per column; yielded as n x k x ...
            tensor, view = _empty((plan.shape[0], n, *plan.shape[1:]), plan.dtype, pin)
            for j, col in enumerate(plan.columns):
                _copy_rows(columns.array(col), index, view[j])
            batch[plan.name] = tensor.transpose(0, 1)
        else:
            parts = {}
            for col in plan.columns:
                src = columns.array(col)
                tensor, view = _empty((n, *src.shape[1:]), src.dtype, pin)
                _copy_rows(src, index, view)
                parts[col] = tensor
            batch[plan.name] = parts
    return batch


MIN_RUN = 4096  # rows per run on average below which one np.take beats a slice copy per run (measured)


def as_index(rows: np.ndarray):
    """Positions as the cheapest index: a slice (one run), ``Runs`` (long runs) or the array itself."""
    if len(rows) < 2:
        return slice(int(rows[0]), int(rows[0]) + 1) if len(rows) else slice(0, 0)
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    if not len(breaks):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    if len(rows) >= MIN_RUN * (len(breaks) + 1):
        starts = rows[np.concatenate(([0], breaks))]
        ends = rows[np.concatenate((breaks - 1, [len(rows) - 1]))] + 1
        return Runs(starts.astype(np.int64), ends.astype(np.int64))
    return rows


# ---- the loader ----------------------------------------------------------------------------------

def _to_device(batch: dict, device, non_blocking: bool) -> dict:
    return {k: (_to_device(v, device, non_blocking) if isinstance(v, dict) else v.to(device, non_blocking=non_blocking))
            for k, v in batch.items()}


class EmptyColumns:
    """Zero-row arrays of the split's columns (the empty last batch of a rank, when nothing is mapped)."""

    def __init__(self, feature_spec: dict):
        self.specs = item_specs(feature_spec)

    def array(self, name: str) -> np.ndarray:
        spec = self.specs[name]
        return np.empty((0, *spec["shape"]), dtype=_np_dtype(spec["dtype"]))


class BatchLoader:
    """An iterable of batches over one split; ``len()`` is the number of batches per epoch, the same on
    every rank (``storage.order``).

    Iterating twice gives the same order; call ``set_epoch(e)`` (as with ``DistributedSampler``) for a
    new shuffle each epoch. ``state_dict()`` / ``load_state_dict()`` resume an epoch where a killed job
    left it (torchdata's ``StatefulDataLoader`` protocol): the state counts the batches this loader
    handed to its consumer (not those the prefetch thread had ready), and the next iteration after
    ``load_state_dict`` starts at the batch after them, in the same order. ``set_epoch`` with the
    state's epoch keeps that position; another epoch starts at its first batch.

    ``stream`` (``storage.shard_stream.SplitStream``): the split's rows come from its shards on a store,
    window by window of the shard-aware order (``shuffle_window``), instead of from ``columns``.
    """

    def __init__(self, columns: SplitColumns | None, feature_spec: dict, batch_size: int = 4096,
                 shuffle: bool = True, seed: int = 0, prefetch: int = 4, drop_last: bool = False, rank: int = 0,
                 world_size: int = 1, pin_memory: bool | None = None, device=None, epoch: int = 0,
                 channels: list[str] | None = None, shuffle_block: int = 1, shuffle_window: int | None = None,
                 shard_rows: int | None = None, stream=None, artifact_id: str | None = None,
                 split: str | None = None):
        self.columns = columns
        self.stream = stream
        self.feature_spec = feature_spec
        self.plans = plan_channels(feature_spec, channels)
        self.num_rows = stream.num_rows if stream is not None else columns.num_rows()
        if stream is not None and shuffle_window is None:
            raise ValueError("a streamed split is read in the shard-aware order: give a shuffle_window")
        self.order = Order(self.num_rows, batch_size, shuffle, seed, rank, world_size, drop_last, shuffle_block,
                           shuffle_window, shard_rows)
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.drop_last, self.rank, self.world_size = drop_last, rank, world_size
        self.shuffle_block, self.shuffle_window = shuffle_block, self.order.window
        self.prefetch = prefetch
        self.artifact_id = artifact_id
        self.split = split if split is not None else getattr(columns, "split", None)
        self.device = device
        if pin_memory is None:  # pinned when the batches go to a CUDA device: copies can then be asynchronous
            pin_memory = device is not None and str(device).startswith("cuda")
        self.pin_memory = bool(pin_memory) and _pin_available()
        self._epoch = int(epoch)
        self._done = 0  # batches of the epoch handed to the consumer
        self._resume = False  # the next iteration starts at batch _done (load_state_dict)

    # ---- epochs and state ----------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self._epoch

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self.set_epoch(epoch)

    def set_epoch(self, epoch: int) -> None:
        if int(epoch) != self._epoch:
            self._epoch, self._done, self._resume = int(epoch), 0, False

    def __len__(self) -> int:
        return self.order.num_batches

    def state_dict(self) -> dict:
        """Where this loader is (``storage.order.state_dict``): JSON numbers and strings, for
        ``load_state_dict`` in a new process."""
        return state_dict(self.order, self.artifact_id, self.split, self._epoch, self._done)

    def load_state_dict(self, state: dict) -> None:
        """Resume at the batch after the state's last one; a state made for another artifact, split, seed,
        world size or other order setting is refused, naming what differs (``storage.order.resume_point``)."""
        self._epoch, self._done = resume_point(state, self.order, self.artifact_id, self.split)
        self._resume = True

    # ---- batches -------------------------------------------------------------------------------
    def _names(self) -> list[str]:
        return list(dict.fromkeys(c for p in self.plans for c in p.columns))

    def _produce(self, epoch: int, start: int) -> Iterator[dict]:
        rows = self.order.rows(epoch)
        bounds = self.order.bounds(len(rows)).tolist()
        if self.stream is not None:
            yield from self._produce_streamed(epoch, rows, bounds, start)
            return
        self.columns.preload(self._names())
        shuffled = self.order.shuffle
        for i in range(start, len(bounds) - 1):
            lo, hi = bounds[i], bounds[i + 1]
            if shuffled:
                index = as_index(np.sort(rows[lo:hi]))
            else:  # input order: every batch is a run of consecutive rows
                index = slice(int(rows[lo]), int(rows[lo]) + hi - lo) if hi > lo else slice(0, 0)
            yield gather(self.columns, self.plans, index, self.pin_memory)

    def _next_shards(self, epoch: int) -> list[int]:
        """The shards of epoch ``epoch + 1``'s first window (fetched while this epoch ends)."""
        rows = self.order.rows(epoch + 1)[:self.order.window]
        return np.unique(rows // self.order.shard_rows).tolist()

    def _produce_streamed(self, epoch: int, rows: np.ndarray, bounds: list[int], start: int) -> Iterator[dict]:
        """Batches from the window buffers of ``self.stream``, which hold each window's rows in reading
        order (each batch's rows sorted by position, as from local files): a batch is a slice of its window."""
        if start >= len(bounds) - 1:
            return
        if self.order.shuffle:  # each batch's rows by position, as a local read gives them
            rows = rows.copy()
            for i in range(start, len(bounds) - 1):
                rows[bounds[i]:bounds[i + 1]].sort()
        window = self.order.window
        starts = self.order.windows(len(rows))
        first = bounds[start] // window
        windows = self.stream.windows(rows, starts, first, self._names(), then=lambda: self._next_shards(epoch))
        j, columns = first - 1, None
        try:
            for i in range(start, len(bounds) - 1):
                lo, hi = bounds[i], bounds[i + 1]
                if hi == lo:  # a rank's empty last batch (storage.order)
                    yield gather(EmptyColumns(self.feature_spec), self.plans, slice(0, 0), self.pin_memory)
                    continue
                while j < lo // window:
                    columns = next(windows)
                    j += 1
                offset = int(starts[j])
                yield gather(columns, self.plans, slice(lo - offset, hi - offset), self.pin_memory)
        finally:
            windows.close()

    def __iter__(self) -> Iterator[dict]:
        device = self.device
        if device is not None:
            import torch  # slow to import: imported when the first tensor is made

            device = torch.device(device)
            if device.type == "cpu":
                device = None
        non_blocking = self.pin_memory  # asynchronous on the consumer's current stream: the host does not wait
        epoch, start = self._epoch, (self._done if self._resume else 0)
        self._done, self._resume = start, False
        for batch in prefetched(lambda: self._produce(epoch, start), self.prefetch):
            self._done += 1  # counted when handed over: state_dict() in the loop body includes this batch
            yield batch if device is None else _to_device(batch, device, non_blocking)


def first_row(batch: dict) -> dict:
    """Row 0 of a batch (``dict[channel -> tensor]``, nested dicts too), without the batch dimension."""
    return {k: (first_row(v) if isinstance(v, dict) else v[0]) for k, v in batch.items()}
