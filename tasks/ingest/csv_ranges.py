"""Partition-parallel ingest of CSV/TSV: one file, a folder of files or a glob (``day_*.tsv``), a large
file cut into byte ranges read by Dask tasks (on the workers of a cluster).

The flow process only plans. Per file it reads the first ``csv_dialect.SNIFF_BYTES`` (the dialect and
the header, as the single-file reader does), checks the columns, and cuts the bytes after the header
into ranges of ``range_bytes``: ``[header_end + k * range_bytes, header_end + (k + 1) * range_bytes)``.
A task reads its range with pyarrow's CSV reader, with the options of ``tasks.ingest.stage``'s reader
(``read_options``), and writes Arrow IPC parts of up to ``PART_ROWS`` rows. A range owns the rows
that *start* inside it (the standard rule): its task moves the range's start forward to the byte after
the first row terminator at or after ``start - 1`` and its end the same way, so consecutive ranges meet
exactly and every row is read once, whatever the range size. The row numbers (``__row__``) come from the
row counts the tasks return: once every range is read, the flow renames the parts into row order
(``part-NNNNN.arrow``) and one task per range writes its parts' final ``__row__`` values in place
(``number_rows``: the int64 buffer of each record batch, found through the memory-mapped file and
rewritten with ``pwrite``). So the cached parts hold the same rows, values and row numbers as the
single-reader ingest, and everything after ingest (so the artifact) is the same for any range size.

**Quoted newlines.** pyarrow reads a newline inside a quoted field as data; a range boundary cut inside
such a field would split the row. The rule: a file is cut into ranges only if *no byte of it is the
quote character* (``"``) after the header (quoted header names are allowed: ``_splittable``). The flow
checks the sampled head; each range task checks its own bytes
(``bytes.find``, memchr speed) before parsing and, finding a quote, reports it instead of reading. The
ranges cover the file without gaps, so a quote anywhere is seen, and the file is then read whole by
one task (``tasks.ingest.stage.read_batches``: the single reader, quotes and all). This is safe because
without a quote character a row terminator can only end a row; it is conservative (a file with quotes
that hold no newline is read by one task). The same for a line-break character that is data (a CR not
followed by LF in an LF/CRLF file, an LF in a CR file: ``csv_dialect.needs_escape``), which only the
single reader's escaping handles. Compressed files are not splittable: one task per file.

Errors name the file and the byte range: bytes that cannot be read, a row that does not fit the header
(located by line, as the single reader does: the lines before the range are counted only then), a
value that is not a number; an infinity names the file's row, known once the counts are in. The stage's
cache entry is then never written, so nothing is published.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from dask import delayed

from core.errors import DataError
from storage.arrow_blocks import fixed_blocks
from storage.fs import filesystem, write_at
from tasks.config.constants import ROW
from tasks.dataset import csv_dialect, csv_limits
from tasks.dataset.files import dataset_files, readable
from tasks.ingest import csv_lines
from tasks.ingest import spec as ingest_spec
from tasks.ingest.common import check_columns, dictionary_encoded, first_infinity, normalize_batch
from tasks.runtime.dask_run import compute
from tasks.runtime.frame import write_ipc
from tasks.runtime.outputs import Ingested

RANGE_BYTES = 64 << 20  # bytes per range task (a range's bytes and its parsed table are in memory at once)
NULL_VALUES = ["", "NA", "N/A", "NaN", "nan", "null", "NULL", "None"]
TAIL_BYTES = 1 << 16  # read past a range's end this much at a time to find the end of its last row


BLOCK_LIMIT = (1 << 31) - 1  # pyarrow's largest block: a row (a cell) must fit in one


def straddles(exc: Exception) -> bool:
    """pyarrow's CSV reader met a row longer than its block (1 MB by default): "straddling object straddles
    two block boundaries"."""
    return "straddl" in str(exc)


def read_csv_whole(source, size: int, read_options: pacsv.ReadOptions | None = None,
                   line_limit: int | None = None, **kwargs) -> pa.Table:
    """``pyarrow.csv.read_csv`` of ``source``; a row longer than the default block (a multi-megabyte text
    cell) is read again with one block as large as the data: only such files pay for the single-block
    parse, and only when no line is longer than ``line_limit`` (``csv_limits.line_bytes``; checked in
    chunks first: else the first error is raised again, for ``locate_problem`` to name the line).
    ``source()`` opens a fresh input for each try (a failed read may have read ahead in the one it had)."""
    options = read_options or pacsv.ReadOptions()
    try:
        with source() as fh:
            return pacsv.read_csv(fh, read_options=options, **kwargs)
    except pa.ArrowInvalid as exc:
        if not straddles(exc) or size + 1 <= options.block_size:
            raise
        if line_limit is not None and size > line_limit:
            with source() as fh:
                if csv_lines.first_long_line(fh, line_limit) is not None:
                    raise
    bigger = pacsv.ReadOptions(column_names=options.column_names, block_size=min(size + 1, BLOCK_LIMIT))
    with source() as fh:
        return pacsv.read_csv(fh, read_options=bigger, **kwargs)


def _pa_type(kind: str) -> pa.DataType:
    return pa.float64() if kind == "float64" else pa.string()


def read_options(spec, dialect: csv_dialect.Dialect) -> tuple[pacsv.ParseOptions, pacsv.ConvertOptions]:
    """The parse and convert options of every CSV read: the single reader's and the range tasks'."""
    convert = pacsv.ConvertOptions(
        column_types={c: _pa_type(k) for c, k in spec.columns.items()},
        include_columns=list(spec.columns),
        strings_can_be_null=True,
        null_values=NULL_VALUES,
    )
    parse = pacsv.ParseOptions(delimiter=dialect.delimiter, quote_char=dialect.quote, newlines_in_values=True)
    return parse, convert


def locate_problem(path: str, source, dialect: csv_dialect.Dialect, spec, arrow_message: str,
                   names: list[str] | None = None, first_line: int = 1, offset: int = 0, where: str = "",
                   limit: int | None = None) -> DataError:
    """Slow path: the line and column pyarrow choked on. ``source()``: a context manager of a binary stream
    of the file's bytes from its header (``names`` None), or of a range's bytes starting at line
    ``first_line`` and byte ``offset`` of the file (``names``: the header's); ``where``: appended to how
    the file was read (the byte range). The stream is read line by line (``csv_lines.lines``): a line
    longer than ``limit`` (``csv_limits.line_bytes``) is the error, found holding at most that much. A
    value error names the 0-based row (``__row__``) when the bytes start at the header (a range's first
    row is not known here: quoted line breaks in other ranges), and the line as an editor counts it."""
    limit = csv_limits.line_bytes() if limit is None else limit
    how = dialect.describe() + where
    quotes = [0]
    previous = csv.field_size_limit(max(limit, 1 << 17))  # Python's csv refuses fields over 128 KB by default
    try:
        with source() as fh:
            texts = _texts(path, fh, dialect, limit, names is None, first_line, offset, quotes)
            found = _first_problem(path, texts, dialect, spec, names, first_line, where)
    except csv_lines.LineTooLong as exc:
        return DataError(csv_limits.line_too_long(path, first_line + exc.index, limit, how))
    except _Found as exc:
        return exc.error
    finally:
        csv.field_size_limit(previous)
    if found is not None:
        return found
    if quotes[0] % 2:
        return DataError(f"{path}: unbalanced quote character (\") somewhere in the file ({how})")
    if straddles(Exception(arrow_message)):  # a row longer than the streaming reader's block
        return DataError(f"{path}: a row is longer than the CSV reader's block ({arrow_message}; {how}); "
                         "a local file under 128 MiB is read with blocks as large as the file: copy it to a local "
                         "disk, or store the table as Parquet")
    return DataError(f"{path}: cannot parse as CSV ({how}): {arrow_message}")


class _Found(Exception):
    def __init__(self, error: DataError):
        self.error = error


def _texts(path: str, fh, dialect: csv_dialect.Dialect, limit: int, bom: bool, first_line: int, offset: int,
           quotes: list[int]):
    """The stream's lines as text ending in ``\n`` for Python's csv reader (a data CR/LF replaced by a
    private-use character, as ``csv_dialect.sample_rows`` does); a line that is not UTF-8 is the error."""
    term = b"\r" if dialect.terminator == "\r" else b"\n"
    escape = csv_dialect.ESCAPES[0]
    for i, (at, raw) in enumerate(csv_lines.lines(fh, term, limit)):
        try:
            text = raw.decode("utf-8-sig" if bom and i == 0 else "utf-8")
        except UnicodeDecodeError as exc:
            raise _Found(DataError(f"{path}: line {first_line + i}: not UTF-8 (byte 0x{raw[exc.start]:02x} at "
                                   f"offset {offset + at + exc.start}); re-save the file as UTF-8")) from None
        if term == b"\r":
            text = text.replace("\n", escape)
        else:
            text = text.removesuffix("\r").replace("\r", escape)
        quotes[0] += text.count('"')
        yield text + "\n"


def _first_problem(path: str, texts, dialect: csv_dialect.Dialect, spec, names: list[str] | None,
                   first_line: int, where: str) -> DataError | None:
    """The first ragged row, malformed quoting or value that is not a number in ``texts``, None if none."""
    how = dialect.describe() + where
    reader = csv.reader(texts, delimiter=dialect.delimiter, quotechar=dialect.quote, strict=True)
    try:
        header = next(reader) if names is None else list(names)
        row = -1  # the record's 0-based row in the file (pyarrow skips blank lines too)
        for record in reader:
            line = first_line - 1 + reader.line_num
            if not record:  # a blank line
                continue
            row += 1
            if len(record) != len(header):
                return DataError(f"{path}: line {line}: expected {len(header)} fields, got {len(record)} "
                                 f"(ragged row or an unbalanced quote; {how})")
            for col, kind in spec.columns.items():
                if kind != "float64":
                    continue
                value = record[header.index(col)].strip()
                if value in NULL_VALUES:
                    continue
                try:
                    float(value)
                except ValueError:
                    at = f"row {row} (line {line})" if names is None else f"line {line}"
                    return DataError(f"{path}: {at}, column '{col}': expected a number, got {value!r}"
                                     f"{' (' + where.lstrip(', ') + ')' if where else ''}")
    except StopIteration:
        return None
    except csv.Error as exc:
        return DataError(f"{path}: line {first_line - 1 + reader.line_num}: malformed CSV ({exc}; {how})")
    return None


# ---- plan ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Unit:
    """What one task reads: a byte range of a file, or (``whole``) the file through the single reader."""

    file: int  # the file's position in the dataset
    path: str  # as the dataset names it (for messages)
    source: str  # where a task reads it (an absolute local path or a URL)
    names: tuple[str, ...]  # the header's column names
    dialect: csv_dialect.Dialect
    start: int  # planned byte range [start, stop) of the file (whole: 0, size)
    stop: int
    size: int  # the file's size in bytes
    whole: bool


def _size(source: str) -> int | None:
    local = csv_dialect._local(source)
    if local is not None:
        return os.path.getsize(local)
    try:
        return int(filesystem(source).size(source))
    except Exception:  # a file system that cannot tell: the file is read whole
        return None


def _header_end(sample: bytes, dialect: csv_dialect.Dialect) -> int | None:
    """The byte after the header row's terminator (None: the sample holds no whole header row)."""
    term = b"\r" if dialect.terminator == "\r" else b"\n"
    at = sample.find(term)
    return None if at < 0 else at + 1


def _splittable(sample: bytes, header_end: int, dialect: csv_dialect.Dialect) -> bool:
    """Nothing in the sampled head that a cut could break: no quote character after the header, no data
    CR/LF. Quoted header names are fine when the header row holds an even number of quote characters: its
    terminator is then outside quotes (RFC 4180 doubles a quote inside a quoted field), so it ends the row."""
    quote = dialect.quote.encode()
    if dialect.compression is not None or quote in sample[header_end:] or sample[:header_end].count(quote) % 2:
        return False
    return not _data_break(sample, dialect, ends_file=False)


def _data_break(data: bytes, dialect: csv_dialect.Dialect, ends_file: bool = True) -> bool:
    """Whether ``data`` holds a line-break character that is data (``csv_dialect.needs_escape``'s rule)."""
    if dialect.terminator == "\r":
        return b"\n" in data
    if not ends_file:  # a sample may end between CR and LF
        data = data[:-1] if data.endswith(b"\r") else data
    return data.count(b"\r") != data.count(b"\r\n")


def plan(files: list[str], spec, range_bytes: int) -> list[Unit]:
    """Every file's units in dataset order; reads each file's head only (``csv_dialect.SNIFF_BYTES``)."""
    units: list[Unit] = []
    for i, path in enumerate(files):
        source = readable(path)
        sample = csv_dialect.head(path)
        names, dialect = csv_dialect.header(path, spec.format, spec.delimiter, sample=sample, limit=spec.header_bytes)
        check_columns(path, names, spec.columns)
        size = _size(source) if dialect.compression is None else None
        start = _header_end(sample, dialect)
        if size is None or start is None or size - start <= range_bytes or not _splittable(sample, start, dialect):
            units.append(Unit(i, path, source, tuple(names), dialect, 0, size or 0, size or 0, True))
            continue
        for a in range(start, size, range_bytes):
            units.append(Unit(i, path, source, tuple(names), dialect, a, min(a + range_bytes, size), size, False))
    return units


# ---- the tasks -------------------------------------------------------------------------------------------

def _row_end(fh, at: int, size: int, term: bytes, limit: int | None = None) -> int:
    """The byte after the first row terminator at or after byte ``at`` (``size`` if none); ``LineTooLong``
    when none is within ``limit`` bytes (the line holding ``at`` is longer: it is not scanned to its end)."""
    last = size if limit is None else min(size, at + limit + 1)
    while at < last:
        fh.seek(at)
        chunk = fh.read(min(TAIL_BYTES, last - at))
        if not chunk:
            return size
        found = chunk.find(term)
        if found >= 0:
            return at + found + 1
        at += len(chunk)
    if last < size:
        raise csv_lines.LineTooLong(None, at)
    return size


def owned_bytes(unit: Unit, limit: int | None = None) -> tuple[int, int, bytes]:
    """The rows a range owns: (first byte, end byte, the bytes between); ``LineTooLong`` (with a byte of
    the file inside that line) when the row crossing the range's start or end is longer than ``limit``."""
    term = b"\r" if unit.dialect.terminator == "\r" else b"\n"
    with csv_dialect.raw_stream(unit.source) as fh:
        first = _row_end(fh, unit.start - 1, unit.size, term, limit) if unit.start > 0 else 0
        if first >= unit.stop:  # no row starts inside the range
            return first, first, b""
        end = unit.size if unit.stop >= unit.size else _row_end(fh, unit.stop - 1, unit.size, term, limit)
        fh.seek(first)
        data = bytes(fh.read(end - first))
    if len(data) != end - first:
        raise OSError(f"read {len(data)} of {end - first} bytes")
    return first, end, data


def _lines_before(unit: Unit, offset: int) -> int:
    """Row terminators in the file before byte ``offset`` (an error's line number; read only then)."""
    term = b"\r" if unit.dialect.terminator == "\r" else b"\n"
    count = 0
    with csv_dialect.raw_stream(unit.source) as fh:
        at = 0
        while at < offset:
            chunk = bytes(fh.read(min(1 << 24, offset - at)))
            if not chunk:
                break
            count += chunk.count(term)
            at += len(chunk)
    return count


def _read_range(unit: Unit, spec) -> tuple[pa.Table | None, str]:
    """A range's rows (None: the file must be read whole) and the range's description."""
    try:
        first, end, data = owned_bytes(unit, spec.line_bytes)
    except OSError as exc:
        raise DataError(f"{unit.path}: byte range {unit.start}-{unit.stop}: cannot read ({exc})") from None
    except csv_lines.LineTooLong as exc:
        # every range the line crosses finds it: the message names the line alone, whichever task reports
        raise DataError(csv_limits.line_too_long(unit.path, _lines_before(unit, exc.offset) + 1, spec.line_bytes,
                                                 unit.dialect.describe())) from None
    where = f", byte range {first}-{end}"
    if not data:
        return pa.table({c: pa.array([], type=_pa_type(k)) for c, k in spec.columns.items()}), where
    if unit.dialect.quote.encode() in data or _data_break(data, unit.dialect):
        return None, where
    parse, convert = read_options(spec, unit.dialect)
    try:
        table = read_csv_whole(lambda: pa.BufferReader(data), len(data),
                               pacsv.ReadOptions(column_names=list(unit.names)), spec.line_bytes,
                               parse_options=parse, convert_options=convert)
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise locate_problem(unit.path, lambda: pa.BufferReader(data), unit.dialect, spec, str(exc),
                             list(unit.names), _lines_before(unit, first) + 1, first, where,
                             spec.line_bytes) from None
    return table, where


def read_unit(unit: Unit, spec, out_dir: str, read_whole) -> dict:
    """Read a unit and write its rows as ``unit-<unit>-<k>.arrow`` parts of up to ``PART_ROWS`` rows, their
    ``__row__`` counted from 0 in the unit (``number_rows`` writes the final ones). Returns the part
    names and row counts, and the first infinity found; ``fallback`` True (nothing written) when a range
    holds a quote or a data line break, so that the file is read whole."""
    where = ""
    if unit.whole:  # streamed: a large compressed file is never in memory at once
        tables = _named_as_given(unit, (normalize_batch(b, spec) for b in read_whole(unit.source, spec)))
    else:
        table, where = _read_range(unit, spec)
        if table is None:
            return {"fallback": True, "parts": [], "rows": 0, "infinity": None, "where": where}
        tables = [normalize_batch(table, spec)]
    parts, rows, infinity = [], 0, None
    for k, block in enumerate(fixed_blocks(tables, ingest_spec.PART_ROWS, combine=False)):
        if infinity is None and (found := first_infinity(block, spec)) is not None:
            infinity = (rows + found[0], found[1], found[2])
        name = f"unit-{unit.file:05d}-{unit.start:015d}-{k:05d}.arrow"
        numbers = pa.array(np.arange(rows, rows + block.num_rows, dtype=np.int64))
        write_ipc(dictionary_encoded(block, spec).append_column(ROW, numbers), Path(out_dir) / name)
        parts.append((name, block.num_rows))
        rows += block.num_rows
    return {"fallback": False, "parts": parts, "rows": rows, "infinity": infinity, "where": where}


def _named_as_given(unit: Unit, tables):
    """``tables``, with the file named as the dataset names it in an error (the task reads ``unit.source``)."""
    try:
        yield from tables
    except DataError as exc:
        if unit.source == unit.path:
            raise
        raise DataError(str(exc).replace(unit.source, unit.path)) from None


def row_buffers(path: str) -> list[tuple[int, int]]:
    """(byte offset in the file, rows) of the ``__row__`` int64 values of each record batch of an
    uncompressed Arrow IPC file (its buffers are read in place from the mapped file)."""
    out = []
    with pa.memory_map(path) as source:
        whole = source.read_buffer()
        base, size = whole.address, whole.size
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            column = reader.get_batch(i).column(ROW)
            validity, values = column.buffers()
            if validity is not None and column.null_count:
                raise ValueError(f"{path}: {ROW} holds nulls")
            at = values.address - base + column.offset * 8
            if not 0 <= at <= size - 8 * len(column):  # not read in place (a compressed file)
                raise ValueError(f"{path}: {ROW} is not stored in place")
            out.append((at, len(column)))
    return out


def number_rows(parts: list[str], first_row: int) -> None:
    """Write ``first_row, first_row + 1, ...`` as the ``__row__`` values of ``parts`` (in order), in place.
    Idempotent: a retried task writes the same bytes."""
    row = first_row
    for part in parts:
        for at, n in row_buffers(part):
            write_at(part, np.arange(row, row + n, dtype="<i8"), at)
            row += n


def write_parts(dataset: str, spec, out_dir: Path, read_whole, range_bytes: int | None = None) -> int:
    """Every unit of a CSV/TSV dataset read by its own task, the parts named ``out_dir/part-NNNNN.arrow`` in
    row order with their final ``__row__``; returns the row count. ``read_whole(path, spec)``: the
    single reader (``tasks.ingest.stage.read_batches``), passed in so that this module does not import it;
    ``range_bytes``: default ``RANGE_BYTES``."""

    files = dataset_files(dataset)
    units = plan(files, spec, range_bytes or RANGE_BYTES)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = str(out_dir)
    results = compute([delayed(read_unit, pure=False)(u, spec, out, read_whole) for u in units])
    redo = sorted({u.file for u, r in zip(units, results, strict=True) if r["fallback"]})
    if redo:  # a quote or a data line break in a range: the file is read whole
        for u, r in zip(units, results, strict=True):
            if u.file in redo:
                for name, _ in r["parts"]:
                    (out_dir / name).unlink()
        wholes = {f: next(u for u in units if u.file == f) for f in redo}
        wholes = {f: Unit(u.file, u.path, u.source, u.names, u.dialect, 0, u.size, u.size, True)
                  for f, u in wholes.items()}
        again = dict(zip(redo, compute([delayed(read_unit, pure=False)(wholes[f], spec, out, read_whole)
                                        for f in redo]), strict=True))
        pairs = [(u, r) for u, r in zip(units, results, strict=True) if u.file not in redo]
        pairs += [(wholes[f], again[f]) for f in redo]
        pairs.sort(key=lambda p: (p[0].file, p[0].start))
        units, results = [p[0] for p in pairs], [p[1] for p in pairs]
    file_rows: dict[int, int] = {}
    for u, r in zip(units, results, strict=True):
        if r["infinity"] is not None:
            i, name, value = r["infinity"]
            row = file_rows.get(u.file, 0) + i
            raise DataError(f"{u.path}: row {row}, column '{name}': got {value}; infinities are not allowed in "
                            f"number columns{' (' + r['where'].lstrip(', ') + ')' if r['where'] else ''}")
        file_rows[u.file] = file_rows.get(u.file, 0) + r["rows"]
    total = sum(r["rows"] for r in results)
    if total == 0:
        raise DataError(f"{dataset}: the dataset has a header but no data rows")
    tasks, first, index = [], 0, 0
    for r in results:
        if not r["rows"]:
            continue
        names = []
        for name, _ in r["parts"]:
            final = Ingested.part_file(out_dir, index)
            os.replace(out_dir / name, final)
            names.append(str(final))
            index += 1
        tasks.append(delayed(number_rows, pure=False)(names, first))
        first += r["rows"]
    compute(tasks)
    return total


def handles(spec) -> bool:
    """Whether this module ingests the dataset: CSV or TSV (one file, a folder or a glob)."""
    return spec.format in ("csv", "tsv")
