"""Which rows each rank reads in an epoch, and in which batches (``storage.loader``, ``storage.shard_stream``).

Everything here is a pure function of numbers, no I/O: ``Order(...).rows(epoch)`` is one rank's row
positions for an epoch, in the order it reads them, cut into ``num_batches`` batches by ``bounds``.

The epoch's sequence. All ``n`` row positions of the split, in one of two orders:

* ``window=None`` (the default for a local artifact): input order, or a permutation seeded by
  ``(seed, epoch)`` of single rows (``block=1``) or of blocks of ``block`` consecutive rows;
* ``window=W`` (shard-aware, the default for a streamed ``s3://`` artifact): the split's shards (row
  ranges of ``shard_rows`` rows, as the publisher cuts them) permuted by ``(seed, epoch)``, their rows
  concatenated. Each rank's part of that sequence (below) is then shuffled within consecutive windows
  of ``W`` rows (``W`` rounded up to a multiple of ``batch_size``, so no batch straddles two windows),
  seeded by ``(seed, epoch, rank)``, row by row or by blocks of ``block`` rows. A rank so reads about
  ``1/world_size`` of the shards (plus at most a few shared at its edges), one window of shards at a
  time: MosaicML Streaming's ``py1b`` idea (shuffle shards, then samples inside fixed blocks of the
  shard-ordered sequence), applied per rank so that a window never spans two ranks.

Ranks. With ``B = batch_size`` and ``w = world_size`` every rank gets the same number ``K`` of
batches, and no row is read by two ranks:

* ``drop_last=True``: ``K = n // (w * B)`` batches of ``B`` rows; rank ``r`` reads positions
  ``[r * K * B, (r + 1) * K * B)`` of the sequence; the last ``n - w * K * B`` (< ``w * B``) rows of
  the sequence are not read this epoch (another subset each shuffled epoch);
* ``drop_last=False``: ``K = ceil(n / (w * B))``; the sequence is cut into ``w`` contiguous spans, rank
  ``r``'s of ``(K - 1) * B + t_r`` rows, where the ``t_r`` share out the ``T = n - w * (K - 1) * B``
  rows left after ``K - 1`` full batches per rank (``t_r = (r + 1) * T // w - r * T // w``: they differ
  by at most one). Every row is read exactly once; a rank's last batch holds ``t_r`` rows, and is
  empty (0 rows) on some ranks when ``T`` is smaller than ``w``: use ``drop_last=True`` where a step
  cannot take that. When ``w * B`` divides ``n``, rank ``r`` reads ``[r * n / w, (r + 1) * n / w)``.

Batches are consecutive runs of a rank's span. ``world_size=1`` gives the usual ``ceil(n / B)`` (or
``n // B``) batches.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from core.errors import ConfigError

STATE_VERSION = 1


def _check(n: int, batch_size: int, rank: int, world_size: int, block: int, window: int | None,
           shard_rows: int | None) -> None:
    if n < 0:
        raise ValueError(f"the number of rows must be >= 0, got {n}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size) and world_size >= 1; got rank={rank}, "
                         f"world_size={world_size}")
    if block < 1:
        raise ValueError(f"shuffle_block must be at least 1, got {block}")
    if window is not None:
        if window < 1:
            raise ValueError(f"shuffle_window must be at least 1 row, got {window}")
        if shard_rows is None or shard_rows < 1:
            raise ValueError(f"a shuffle_window needs the artifact's shard size (shard_rows), got {shard_rows}")


def num_batches(n: int, world_size: int, batch_size: int, drop_last: bool) -> int:
    """Batches per rank per epoch (the same on every rank)."""
    per_round = world_size * batch_size
    return n // per_round if drop_last else -(-n // per_round)


def rank_span(n: int, world_size: int, rank: int, batch_size: int, drop_last: bool) -> tuple[int, int]:
    """The range of the epoch's sequence that ``rank`` reads (see the module docstring)."""
    k = num_batches(n, world_size, batch_size, drop_last)
    if drop_last:
        span = k * batch_size
        return rank * span, (rank + 1) * span
    if k == 0:
        return 0, 0
    full = (k - 1) * batch_size
    tail = n - world_size * full
    start = rank * full + rank * tail // world_size
    return start, (rank + 1) * full + (rank + 1) * tail // world_size


def permutation(n: int, rng: np.random.Generator, block: int) -> np.ndarray:
    """A permutation of ``range(n)`` of single rows (``block=1``) or of blocks of ``block`` rows."""
    if block <= 1:
        return rng.permutation(n)
    blocks = rng.permutation(-(-n // block))
    order = (blocks[:, None] * block + np.arange(block)).reshape(-1)
    return order[order < n] if n % block else order


def shard_sequence(n: int, shard_rows: int, shuffle: bool, seed: int, epoch: int) -> np.ndarray:
    """All row positions, shard by shard, the shards permuted by ``(seed, epoch)`` (input order without shuffle)."""
    if not shuffle:
        return np.arange(n, dtype=np.int64)
    num_shards = -(-n // shard_rows)
    shards = np.random.default_rng([seed, epoch]).permutation(num_shards)
    starts = shards * shard_rows
    sizes = np.minimum(starts + shard_rows, n) - starts
    return ranges_to_rows(starts, sizes)


def ranges_to_rows(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + k) for s, k in zip(starts, sizes)])``, vectorized."""
    sizes = np.asarray(sizes, dtype=np.int64)
    total = int(sizes.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    keep = sizes > 0
    starts, sizes = np.asarray(starts, dtype=np.int64)[keep], sizes[keep]
    steps = np.ones(total, dtype=np.int64)
    heads = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    steps[0] = starts[0]
    steps[heads[1:]] = starts[1:] - (starts[:-1] + sizes[:-1] - 1)
    return np.cumsum(steps)


@dataclass(frozen=True)
class Order:
    """One rank's epoch orders over a split of ``n`` rows (see the module docstring)."""

    n: int
    batch_size: int
    shuffle: bool = True
    seed: int = 0
    rank: int = 0
    world_size: int = 1
    drop_last: bool = False
    block: int = 1
    window: int | None = None  # rows; None: the whole-split order
    shard_rows: int | None = None  # the shards' size, for the shard-aware order

    def __post_init__(self) -> None:
        _check(self.n, self.batch_size, self.rank, self.world_size, self.block, self.window, self.shard_rows)
        if self.window is not None:  # a multiple of batch_size: a batch never straddles two windows
            object.__setattr__(self, "window", -(-self.window // self.batch_size) * self.batch_size)

    @property
    def num_batches(self) -> int:
        return num_batches(self.n, self.world_size, self.batch_size, self.drop_last)

    def settings(self) -> dict:
        """The settings that decide the order, as JSON numbers (a loader's state records them)."""
        out = asdict(self)
        out["rows"] = out.pop("n")
        out["shuffle_block"] = out.pop("block")
        out["shuffle_window"] = out.pop("window")
        return out

    def sequence(self, epoch: int) -> np.ndarray:
        """The epoch's sequence of all ``n`` positions, before it is cut among the ranks."""
        if self.window is not None:
            return shard_sequence(self.n, self.shard_rows, self.shuffle, self.seed, epoch)
        if not self.shuffle:
            return np.arange(self.n, dtype=np.int64)
        return permutation(self.n, np.random.default_rng([self.seed, epoch]), self.block)

    def rows(self, epoch: int) -> np.ndarray:
        """This rank's row positions for ``epoch``, in reading order (``bounds`` cuts them into batches)."""
        start, stop = rank_span(self.n, self.world_size, self.rank, self.batch_size, self.drop_last)
        if not self.shuffle:
            return np.arange(start, stop, dtype=np.int64)
        rows = self.sequence(epoch)[start:stop].astype(np.int64, copy=False)
        if self.window is not None and self.shuffle:
            rng = np.random.default_rng([self.seed, epoch, 1, self.rank])
            rows = rows.copy()
            for start in range(0, len(rows), self.window):
                part = rows[start:start + self.window]
                part[:] = part[permutation(len(part), rng, self.block)]
        return rows

    def bounds(self, num_rows: int | None = None) -> np.ndarray:
        """Batch ``i`` is ``rows[bounds[i]:bounds[i + 1]]`` (``num_rows``: the length of ``rows``)."""
        k = self.num_batches
        if num_rows is None:
            start, stop = rank_span(self.n, self.world_size, self.rank, self.batch_size, self.drop_last)
            num_rows = stop - start
        cuts = np.minimum(np.arange(k + 1, dtype=np.int64) * self.batch_size, num_rows)
        if k:
            cuts[-1] = num_rows
        return cuts

    def windows(self, num_rows: int) -> np.ndarray:
        """The first row of each window of the rank's list (shard-aware order), and ``num_rows`` last."""
        if self.window is None:
            raise ValueError("the whole-split order has no windows")
        return np.append(np.arange(0, num_rows, self.window, dtype=np.int64), num_rows)


# ---- resume states ---------------------------------------------------------------------------------

def state_dict(order: Order, artifact_id: str | None, split: str | None, epoch: int, batches: int) -> dict:
    """A loader's place as JSON numbers and strings: ``batches`` of ``epoch`` handed out, ``rows`` the rows
    they held on this rank, and the settings that decide the order."""
    bounds = order.bounds()
    return {"version": STATE_VERSION, "artifact_id": artifact_id, "split": split, "epoch": int(epoch),
            "batches": int(batches), "rows": int(bounds[min(batches, len(bounds) - 1)]), "order": order.settings()}


def resume_point(state: dict, order: Order, artifact_id: str | None, split: str | None) -> tuple[int, int]:
    """``(epoch, batches)`` of a state made by ``state_dict``, once it is checked against this loader: a
    state for another artifact, split or order setting (seed, world size, ...) is refused in one line
    naming what differs. The rank may differ: ranks step together, so any rank's state resumes them all."""
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION or not isinstance(state.get("order"), dict):
        raise ConfigError(f"not a prepflow loader state (version {STATE_VERSION}): {str(state)[:200]}")
    differs = [f"{key} {state.get(key)!r} in the state, {mine!r} here"
               for key, mine in (("artifact_id", artifact_id), ("split", split)) if state.get(key) != mine]
    differs += [f"{key} {state['order'].get(key)!r} in the state, {mine!r} here"
                for key, mine in order.settings().items() if key != "rank" and state["order"].get(key) != mine]
    if differs:
        raise ConfigError("this loader state is not for this loader: " + "; ".join(differs))
    epoch, batches = state.get("epoch"), state.get("batches")
    if not (type(epoch) is int and epoch >= 0 and type(batches) is int and 0 <= batches <= order.num_batches):
        raise ConfigError(f"loader state: epoch {epoch!r} and batches {batches!r} must be whole numbers, batches "
                          f"at most {order.num_batches}")
    return epoch, batches
