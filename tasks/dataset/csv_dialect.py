"""csv_dialect: how a delimited text file is written, found from the file itself (as DuckDB's sniffer and
polars do), and the byte streams ingest parses.

* **Compression** from the name: ``.gz`` (gzip), ``.zst``/``.zstd`` (zstd), ``.bz2`` (bzip2), decompressed
  by pyarrow's codecs while reading; ``.xz`` by Python's lzma.
* **Row terminator** from the first ``SNIFF_BYTES`` (decompressed): LF, CRLF, or CR alone (old Mac
  files). In a file with LF line ends a carriage return that is not followed by LF is *data* (pandas'
  ``to_csv`` writes a bare CR inside an unquoted field unquoted); in a CR file an LF is data.
* **Delimiter** sniffed among comma, tab, semicolon and pipe: the candidate that splits the sampled rows
  into the same number (>= 2) of fields most consistently, then the one with the most fields (ties: the
  extension's, ``.tsv`` -> tab, else the order above). A config's ``preprocessing.csv.delimiter`` wins.
* **Quote**: ``"`` (doubled inside a quoted field, RFC 4180), as pyarrow reads it.

pyarrow's CSV reader stays the parser for every file: it treats both CR and LF as row ends, so a file
whose data holds the other character (``needs_escape``: a whole-file scan, ``memchr`` speed on a local
file, since a stray character can be anywhere) is read through ``escaped_stream``: those characters are
swapped for a private-use code point absent from the file, parsed by pyarrow, and swapped back in the
string columns (``unescape``). Only that rare path holds the (decompressed) file in memory.
"""

from __future__ import annotations

import contextlib
import csv
import io
import lzma
import mmap
import os
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.errors import DataError
from storage.fs import is_url, open_input, strip_file_scheme
from tasks.dataset import csv_limits

SNIFF_BYTES = 1 << 20  # decompressed bytes the terminator and the delimiter are sniffed from
SNIFF_ROWS = 200  # rows the delimiter is judged on
DELIMITERS = (",", "\t", ";", "|")
DELIMITER_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe"}
TERMINATOR_NAMES = {"\n": "LF", "\r\n": "CRLF", "\r": "CR"}
QUOTE = '"'
COMPRESSION = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2", ".xz": "xz"}
# Stand-ins for a CR/LF that is data: private-use code points, the first one absent from the file is used.
ESCAPES = ("\ue000", "\ue001", "\ue002", "\uf8ff")
SCAN_BLOCK = 1 << 26  # bytes per numpy step of the whole-file CR check


@dataclass(frozen=True)
class Dialect:
    delimiter: str
    terminator: str  # "\n", "\r\n" or "\r": how rows end
    delimiter_source: str  # "sniffed", "config" or "extension"
    compression: str | None = None
    quote: str = QUOTE

    @property
    def data_char(self) -> str:
        """The line-break character that is data, not a row end, in this file."""
        return "\n" if self.terminator == "\r" else "\r"

    def describe(self) -> str:
        name = DELIMITER_NAMES.get(self.delimiter, repr(self.delimiter))
        packed = f", {self.compression}-compressed" if self.compression else ""
        return (f"read with delimiter {name} ({self.delimiter_source}), rows ending in "
                f"{TERMINATOR_NAMES[self.terminator]}, quote {self.quote}{packed}")


def compression_of(path: str) -> str | None:
    name = str(path).lower().split("?")[0]
    return next((codec for suffix, codec in COMPRESSION.items() if name.endswith(suffix)), None)


# ---- byte streams ---------------------------------------------------------------------------------

def _local(path: str) -> str | None:
    if is_url(path) and not str(path).startswith("file://"):
        return None
    local = strip_file_scheme(str(path))
    return local if os.path.isfile(local) else None


@contextlib.contextmanager
def raw_stream(path: str):
    """The file's bytes as read: a local file as an Arrow ``OSFile`` (the CSV reader's threads read it
    without taking the GIL), a URL through fsspec (``storage.fs.open_input``)."""
    local = _local(path)
    if local is not None:
        with pa.OSFile(local) as fh:
            yield fh
        return
    with open_input(path) as fh:
        yield fh


@contextlib.contextmanager
def open_stream(path: str):
    """The file's decompressed bytes (a readable file object)."""
    codec = compression_of(path)
    with raw_stream(path) as fh:
        if codec is None:
            yield fh
        elif codec == "xz":
            with lzma.open(fh if not isinstance(fh, pa.NativeFile) else _PyFile(fh)) as unpacked:
                yield unpacked
        else:
            with pa.CompressedInputStream(fh, codec) as unpacked:
                yield unpacked


class _PyFile(io.RawIOBase):
    """An Arrow native file as a Python binary file (for lzma)."""

    def __init__(self, fh):
        self._fh = fh

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._fh.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def head(path: str, size: int = SNIFF_BYTES) -> bytes:
    """The first ``size`` decompressed bytes (fewer for a shorter file)."""
    try:
        with open_stream(path) as fh:
            chunks, got = [], 0
            while got < size:
                chunk = fh.read(size - got)
                if not chunk:
                    break
                chunks.append(bytes(chunk))
                got += len(chunk)
    except (OSError, EOFError, pa.ArrowInvalid) as exc:
        if isinstance(exc, FileNotFoundError):
            raise DataError(f"{path}: dataset file not found") from None
        raise DataError(f"{path}: cannot read as {compression_of(path) or 'plain'} text ({exc})") from None
    return b"".join(chunks)


# ---- sniffing -------------------------------------------------------------------------------------

def sniff_terminator(sample: bytes) -> str:
    """LF, CRLF or CR, from the line breaks outside quoted fields (a quoted field's line breaks are data).
    When both a CR alone and an LF are outside quotes, one of them is data (pandas' ``to_csv`` writes a
    tweet's bare CR unquoted; an old Mac file may hold an unquoted LF): the terminator whose rows cut
    most consistently into the header's field count wins, then the header's own line end."""
    data = np.frombuffer(sample, dtype=np.uint8)
    outside = np.cumsum(data == ord('"')) % 2 == 0  # quote parity: a doubled quote toggles twice
    is_lf, is_cr = (data == 10) & outside, (data == 13) & outside
    crlf_at = is_cr[:-1] & is_lf[1:]
    crlf = int(np.count_nonzero(crlf_at))
    lf = int(np.count_nonzero(is_lf)) - crlf
    cr = int(np.count_nonzero(is_cr)) - crlf
    lf_kind = "\r\n" if crlf > lf else "\n"
    if not cr:
        return lf_kind
    if not lf + crlf:
        return "\r"
    by_cr, by_lf = _row_consistency(sample, "\r"), _row_consistency(sample, lf_kind)
    if by_cr != by_lf:
        return "\r" if by_cr > by_lf else lf_kind
    lone_cr = is_cr.copy()
    lone_cr[:-1] &= ~is_lf[1:]
    first_break = int(np.flatnonzero(is_lf | lone_cr)[0])
    return "\r" if lone_cr[first_break] else lf_kind


def _row_consistency(sample: bytes, terminator: str) -> tuple[float, int]:
    """(share of the sample's rows with the header's field count (>= 2), how many rows that is), for the
    best delimiter: the more rows agree, the likelier the terminator."""
    lines = sample_rows(sample, terminator)
    complete = lines[:-1] if len(lines) > 1 else lines
    best = (0.0, 0)
    for delimiter in DELIMITERS:
        counts = _field_counts(complete, delimiter)
        if counts and counts[0] >= 2:
            agree = sum(1 for c in counts if c == counts[0])
            best = max(best, (agree / len(counts), agree))
    return best


def sample_rows(sample: bytes, terminator: str, limit: int = SNIFF_ROWS) -> list[str]:
    """Whole rows of the sample as text with ``\\n`` row ends (a data CR/LF replaced by a private-use
    character), the last, possibly cut, row dropped when the sample does not end the file."""
    text = sample.decode("utf-8-sig", errors="replace")
    if terminator == "\r":
        text = text.replace("\n", ESCAPES[0]).replace("\r", "\n")
    else:
        text = text.replace("\r\n", "\n").replace("\r", ESCAPES[0])
    lines = text.split("\n")
    return lines[: min(len(lines), limit + 1)]


def _field_counts(lines: list[str], delimiter: str) -> list[int]:
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter, quotechar=QUOTE)
    counts = []
    try:
        for record in reader:
            if record:
                counts.append(len(record))
    except csv.Error:
        pass
    return counts


def sniff_delimiter(lines: list[str], preferred: str = ",") -> str | None:
    """The candidate that cuts most rows into the header's field count (>= 2 fields), then the one with
    the most fields; None when none gives two fields (a one-column file)."""
    complete = lines[:-1] if len(lines) > 1 else lines  # the last piece may be cut by the sample's end
    best, best_score = None, None
    for delimiter in sorted(DELIMITERS, key=lambda d: d != preferred):
        counts = _field_counts(complete, delimiter)
        if not counts or counts[0] < 2:
            continue
        consistent = sum(1 for c in counts if c == counts[0]) / len(counts)
        score = (consistent, counts[0])
        if best_score is None or score > best_score:
            best, best_score = delimiter, score
    return best


def sniff(path: str, fmt: str = "csv", delimiter: str | None = None, sample: bytes | None = None) -> Dialect:
    """The file's dialect; ``delimiter``: the config's override."""
    sample = head(path) if sample is None else sample
    terminator = sniff_terminator(sample)
    preferred = "\t" if fmt == "tsv" else ","
    if delimiter is not None:
        return Dialect(delimiter, terminator, "config", compression_of(path))
    sniffed = sniff_delimiter(sample_rows(sample, terminator), preferred)
    if sniffed is None:
        return Dialect(preferred, terminator, "extension", compression_of(path))
    return Dialect(sniffed, terminator, "sniffed", compression_of(path))


def header(path: str, fmt: str = "csv", delimiter: str | None = None,
           sample: bytes | None = None, limit: int | None = None) -> tuple[list[str], Dialect]:
    """The header's column names and the dialect (errors name the file); ``sample``: the file's ``head``,
    if the caller has it already; ``limit``: the longest header line (``csv_limits.header_bytes``)."""
    sample = head(path) if sample is None else sample
    if not sample.strip():
        raise DataError(f"{path}: the file is empty; expected a header line and data rows")
    sample = _whole_header(path, sample, csv_limits.header_bytes() if limit is None else limit)
    dialect = sniff(path, fmt, delimiter, sample)
    body = sample[3:] if sample.startswith(b"\xef\xbb\xbf") else sample
    first = re.split(rb"\r\n|\n" if dialect.terminator != "\r" else rb"\r", body, maxsplit=1)[0]
    try:
        first.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: line 1 (header): not UTF-8 (byte 0x{first[exc.start]:02x} at offset "
                        f"{exc.start}); re-save the file as UTF-8") from None
    lines = sample_rows(body, dialect.terminator, 1)
    try:
        names = next(csv.reader([lines[0]], delimiter=dialect.delimiter, quotechar=QUOTE), [])
    except csv.Error as exc:
        raise DataError(f"{path}: line 1 (header): malformed CSV ({exc}; {dialect.describe()})") from None
    return [n.replace(ESCAPES[0], dialect.data_char) for n in names], dialect


_LINE_BREAK = re.compile(rb"[\r\n]")


def _whole_header(path: str, sample: bytes, limit: int) -> bytes:
    """``sample``, read further (up to ``limit`` bytes) when it ends inside the first line; a first line
    longer than ``limit`` is refused before a column name is taken from it."""
    bom = 3 if sample.startswith(b"\xef\xbb\xbf") else 0
    found = _LINE_BREAK.search(sample, bom)
    if found is None and len(sample) >= SNIFF_BYTES and len(sample) - bom <= limit:  # it may go on
        sample = head(path, limit + bom + 1)
        found = _LINE_BREAK.search(sample, bom)
    if (found.start() if found is not None else len(sample)) - bom > limit:
        raise DataError(csv_limits.header_too_long(path, limit))
    return sample


# ---- data line-break characters -----------------------------------------------------------------

def _has_data_cr(view: np.ndarray, next_byte: int | None) -> bool:
    """Whether a CR in ``view`` is not followed by LF (``next_byte``: the byte after the view)."""
    at = np.flatnonzero(view == 13)
    if not len(at):
        return False
    following = np.empty(len(at), dtype=np.uint8)
    inside = at + 1 < len(view)
    following[inside] = view[at[inside] + 1]
    following[~inside] = 10 if next_byte is None else next_byte  # a CR ending the file ends a row
    return bool((following != 10).any())


def needs_escape(path: str, dialect: Dialect) -> bool:
    """Whether the file holds a line-break character that is data (a CR not followed by LF in an LF or
    CRLF file, an LF in a CR file): pyarrow would cut a row there. A whole-file scan: on a plain local
    file one ``memchr`` pass over the mapped file when it holds no CR at all (the usual case)."""
    target = b"\n" if dialect.terminator == "\r" else b"\r"
    local = _local(path) if dialect.compression is None else None
    if local is not None:
        if os.path.getsize(local) == 0:
            return False
        # the map is only searched, never viewed by numpy: a numpy view kept alive past the ``with`` (a frame
        # held by another thread, as Dask's worker profiler does) made closing the map fail (BufferError)
        with open(local, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if mm.find(target) < 0:
                return False
        if target == b"\n":
            return True
    with open_stream(path) as fh:
        previous = b""
        while True:
            chunk = bytes(fh.read(SCAN_BLOCK))
            block = previous + chunk
            if not block:
                return False
            if target == b"\n":
                if b"\n" in block:
                    return True
            elif chunk and _has_data_cr(np.frombuffer(block[:-1], dtype=np.uint8), block[-1]):
                return True
            elif not chunk:
                return _has_data_cr(np.frombuffer(block, dtype=np.uint8), None)
            if not chunk:
                return False
            previous = block[-1:]


def escaped_bytes(path: str, dialect: Dialect) -> tuple[bytes, str]:
    """The decompressed file with every data CR (LF in a CR file) replaced by a private-use character
    that does not occur in it; returns (bytes, that character)."""
    with open_stream(path) as fh:
        data = bytes(fh.read())
    escape = next((e for e in ESCAPES if e.encode() not in data), None)
    if escape is None:
        raise DataError(f"{path}: holds carriage returns inside values and every stand-in character "
                        f"{[hex(ord(e)) for e in ESCAPES]}; cannot read it ({dialect.describe()})")
    pattern = rb"\n" if dialect.terminator == "\r" else rb"\r(?!\n)"
    return re.sub(pattern, escape.encode(), data), escape


def unescape(table: pa.Table, escape: str, data_char: str) -> pa.Table:
    """Put the data CR/LF back into the string columns."""
    columns = []
    for col in table.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            col = pc.replace_substring(col, escape, data_char)
        columns.append(col)
    return pa.Table.from_arrays(columns, names=table.column_names)
