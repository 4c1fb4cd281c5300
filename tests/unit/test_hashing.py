"""Golden values: changing the hashing changes every cache key and artifact id, so it must be deliberate."""

import hashlib
import io

from storage.cache import cache_key
from storage.hashing import hash_stream, stable_hash


def test_stable_hash_is_typed():
    values = [1, 1.0, "1", True, None, [1], {"1": 1}, b"1"]
    assert len({stable_hash(v) for v in values}) == len(values)


def test_stable_hash_ignores_dict_order():
    assert stable_hash({"a": 1, "b": [1, 2]}) == stable_hash({"b": [1, 2], "a": 1})


def test_golden_values():
    assert stable_hash("prepflow") == "62bc2a2811d5333c578a7f929e509a8d"
    assert stable_hash({"a": 1, "b": [1.5, "x", None, True]}) == "89b19b0bdde95af61f6ccc913acdde3e"
    assert cache_key("split", "split-1", ["abc"], {"seed": 42}) == "bd96481944896364e176bfd4b9505b80"


def test_stream_hash_is_sha256_of_the_bytes():
    data = b"a,b\n1,2\n" * 500_000  # several 1 MiB chunks
    assert hash_stream(io.BytesIO(data)) == hashlib.sha256(data).hexdigest()


def test_dataset_fingerprint_is_remembered_only_while_the_file_is_unchanged(tmp_path, monkeypatch):
    """``prepflow run`` fingerprints the dataset to look for a published artifact and ingest needs it again:
    the second call reads nothing; a rewrite with the same size and mtime (ctime still moves) reads again,
    and a file modified within MEMO_SETTLED_S is never remembered."""
    import os

    from tasks import ingest

    path = tmp_path / "d.csv"
    path.write_bytes(b"a,b\n1,2\n")
    st = path.stat()
    reads = []
    real = ingest.hash_stream
    monkeypatch.setattr(ingest, "hash_stream", lambda fh: reads.append(1) or real(fh))
    monkeypatch.setattr(ingest, "_memo", {})

    assert ingest.fingerprint(str(path)) == hashlib.sha256(b"a,b\n1,2\n").hexdigest()
    assert ingest.fingerprint(str(path)) == hashlib.sha256(b"a,b\n1,2\n").hexdigest()
    assert len(reads) == 2  # just written: not settled, not remembered

    import time

    time.sleep(0.2)  # the file settles: its ctime is now older than the (lowered) threshold
    monkeypatch.setattr(ingest, "MEMO_SETTLED_S", 0.1)
    ingest.fingerprint(str(path))
    ingest.fingerprint(str(path))
    assert len(reads) == 3  # remembered

    path.write_bytes(b"a,b\n1,3\n")  # one byte, same size, mtime put back: ctime moves anyway
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert ingest.fingerprint(str(path)) == hashlib.sha256(b"a,b\n1,3\n").hexdigest()
    assert len(reads) == 4
