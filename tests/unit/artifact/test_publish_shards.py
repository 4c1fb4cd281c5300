"""Parallel publish writers (tasks/publish/shards.py): the shard and row-group plan depends only on row
counts, and the files written by per-shard / per-part tasks are byte-identical for any partitioning."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.publish import shards
from tasks.runtime.frame import to_arrow, write_ipc


def _table(lo: int, hi: int) -> pa.Table:
    rows = np.arange(lo, hi)
    return pa.table({"x": pa.array(rows * 3 % 17, pa.int32()),
                     "v": to_arrow(np.stack([rows, -rows], axis=1).astype(np.float32))})


def read_part_like(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table`` as publish's writers read a part: with its input rows as ``__row__`` (tasks.publish.rows)."""
    return table.append_column(pa.field("__row__", pa.int64(), nullable=False), pa.array(rows, pa.int64()))


def _parts(folder: Path, sizes: list[int]) -> list[Path]:
    folder.mkdir(parents=True)
    parts, lo = [], 0
    for i, size in enumerate(sizes):
        write_ipc(_table(lo, lo + size), folder / f"part-{i:05d}.arrow")
        np.save(folder / f"rows-{i:05d}.npy", np.arange(lo, lo + size, dtype=np.int64))  # input rows, as encode
        parts.append(folder / f"part-{i:05d}.arrow")
        lo += size
    return parts


def _cut(n: int, cuts: list[int]) -> list[int]:
    bounds = sorted({0, n, *(c % (n + 1) for c in cuts)})
    return [b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True)] or [0]


def _publish(parts: list[Path], out: Path, shard_rows: int, row_group_rows: int) -> dict[str, str]:
    """What publish does for one split, run serially: every shard, every npy column; file -> sha256."""
    out.mkdir()
    sizes = shards.part_sizes(parts)
    described = {}
    for k, groups in enumerate(shards.shard_plan(sum(sizes), shard_rows, row_group_rows)):
        name = f"part-{k:05d}.parquet"
        described.update(shards.write_parquet_shard([shards.pieces(parts, sizes, lo, hi) for lo, hi in groups],
                                                    str(out / name), name))
    targets = {}
    for name, shape, dtype in (("x", (), np.dtype("int32")), ("v", (2,), np.dtype("float32"))):
        start = shards.create_npy(out / f"{name}.npy", dtype, (sum(sizes), *shape))
        targets[name] = (str(out / f"{name}.npy"), dtype.str, start, dtype.itemsize * int(np.prod(shape)))
    offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    for i in reversed(range(len(parts))):  # any order: each part's rows land at their offset
        shards.write_npy_rows(str(parts[i]), offsets[i], targets)
    for name in ("x", "v"):
        described.update(shards.hash_file(targets[name][0], f"{name}.npy"))
    for rel, info in described.items():  # the description is the file's
        assert info == {"sha256": hashlib.sha256((out / rel).read_bytes()).hexdigest(),
                        "bytes": (out / rel).stat().st_size}
    return {rel: info["sha256"] for rel, info in described.items()}


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 300), cuts_a=st.lists(st.integers(0, 300), max_size=6),
       cuts_b=st.lists(st.integers(0, 300), max_size=6), shard_rows=st.integers(1, 120),
       row_group_rows=st.integers(1, 50))
def test_files_depend_only_on_rows_never_on_partitioning(tmp_path_factory, n, cuts_a, cuts_b, shard_rows,
                                                         row_group_rows):
    tmp = tmp_path_factory.mktemp("shards")
    a = _publish(_parts(tmp / "pa", _cut(n, cuts_a)), tmp / "a", shard_rows, row_group_rows)
    b = _publish(_parts(tmp / "pb", _cut(n, cuts_b)), tmp / "b", shard_rows, row_group_rows)
    assert a == b

    whole = _table(0, n)
    n_shards = -(-n // shard_rows)
    assert sorted(r for r in a if r.endswith(".parquet")) == [f"part-{k:05d}.parquet" for k in range(n_shards)]
    block = min(shard_rows, row_group_rows)
    read = []
    for k in range(n_shards):
        meta = pq.ParquetFile(tmp / "a" / f"part-{k:05d}.parquet").metadata
        lo = k * shard_rows
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        starts = np.cumsum([lo, *sizes[:-1]])
        # each row group starts at a shard start or a multiple of the block, and spans at most one block
        assert all(s == lo or s % block == 0 for s in starts), (starts, block)
        assert all(size <= block for size in sizes)
        assert sum(sizes) == min(shard_rows, n - lo)
        read.append(pq.read_table(tmp / "a" / f"part-{k:05d}.parquet"))
    assert pa.concat_tables(read).equals(read_part_like(whole, np.arange(n)))
    x = np.load(tmp / "a" / "x.npy")
    v = np.load(tmp / "a" / "v.npy")
    assert x.dtype == np.int32 and np.array_equal(x, whole.column("x").to_numpy())
    assert v.shape == (n, 2) and np.array_equal(v[:, 0], np.arange(n, dtype=np.float32))


def test_plan_cuts_row_groups_at_block_multiples_and_shard_ends():
    assert shards.shard_plan(10, 7, 3) == [[(0, 3), (3, 6), (6, 7)], [(7, 9), (9, 10)]]
    assert shards.shard_plan(10, 4, 8) == [[(0, 4)], [(4, 8)], [(8, 10)]]
    assert shards.shard_plan(0, 4, 8) == []


def test_pieces_cover_a_range_across_parts(tmp_path):
    parts = [Path("a"), Path("b"), Path("c")]
    assert shards.pieces(parts, [3, 0, 5], 2, 6) == [("a", 2, 3), ("c", 0, 3)]


def _encodings(path: Path) -> dict[str, set[str]]:
    meta = pq.ParquetFile(path).metadata
    out: dict[str, set[str]] = {}
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            col = meta.row_group(g).column(c)
            out.setdefault(col.path_in_schema, set()).update(col.encodings)
    return out


def test_wide_id_columns_and_row_numbers_are_written_without_a_dictionary(tmp_path):
    """Ids whose cardinality cannot fit one dictionary page, and ``__row__``, are written plain; the other
    columns keep their dictionary; the values read back are the parts' values."""
    wide = shards.DICTIONARY_PAGE_BYTES // 4 + 1  # int32 ids: one more than a dictionary page holds
    n = 3000
    rows = np.arange(n, dtype=np.int64)
    table = pa.table({"small": pa.array(rows % 7, pa.int32()), "wide": pa.array(rows * 97 % wide, pa.int32())})
    folder = tmp_path / "parts"
    folder.mkdir()
    write_ipc(table, folder / "part-00000.arrow")
    np.save(folder / "rows-00000.npy", rows)
    columns = {"small": {"dtype": "torch.int32", "shape": [], "feature": "small", "cardinality": 7},
               "wide": {"dtype": "torch.int32", "shape": [], "feature": "wide", "cardinality": wide},
               "__row__": {"dtype": "torch.int64", "shape": [], "feature": "__row__"}}
    dictionary = shards.dictionary_columns(columns)
    assert dictionary == ["small"]
    parts = [folder / "part-00000.arrow"]
    path = tmp_path / "shard.parquet"
    shards.write_parquet_shard([shards.pieces(parts, [n], 0, n)], str(path), "shard.parquet", dictionary)
    encodings = _encodings(path)
    assert any("DICTIONARY" in e for e in encodings["small"]), encodings
    assert not any("DICTIONARY" in e for e in encodings["wide"] | encodings["__row__"]), encodings
    back = pq.read_table(path)
    assert back.column("wide").to_pylist() == table.column("wide").to_pylist()
    assert back.column("__row__").to_numpy().tolist() == rows.tolist()
    # without the list every column is dictionary-encoded (what the writer did before)
    shards.write_parquet_shard([shards.pieces(parts, [n], 0, n)], str(tmp_path / "all.parquet"), "all.parquet")
    assert all(any("DICTIONARY" in e for e in v) for v in _encodings(tmp_path / "all.parquet").values())
