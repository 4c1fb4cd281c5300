"""Golden values: changing the hashing changes every cache key and artifact id, so it must be deliberate."""

import hashlib
import io

from storage.cache import cache_key
from storage.hashing import hash_stream, stable_hash
from tasks.dataset import fingerprint as dataset_fingerprint


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


def test_a_run_reads_the_dataset_once_for_its_fingerprint(tmp_path, monkeypatch):
    """``prepflow run`` hashes the dataset to look for a published artifact and hands the fingerprint down
    (``RunContext.fingerprint``): ingest does not read the file again for it."""
    from storage.cache import StageCache
    from tasks.config.loader import parse_config
    from tasks.dataset import fingerprint
    from tasks.ingest import stage as ingest
    from tasks.runtime.context import RunContext

    path = tmp_path / "d.csv"
    path.write_bytes(b"a,b\n1,2\n3,4\n")
    reads = []
    real = fingerprint.hash_stream
    monkeypatch.setattr(fingerprint, "hash_stream", lambda fh: reads.append(1) or real(fh))
    config = parse_config({"input_features": [{"name": "a", "type": "number"}, {"name": "b", "type": "number"}]})

    fp = dataset_fingerprint.fingerprint(str(path))
    from tasks.runtime.cached import run_node

    result = run_node(ingest.NODE, RunContext(config, str(path), StageCache(tmp_path / "c"), fingerprint=fp), [])
    assert len(reads) == 1 and result.fingerprint == hashlib.sha256(path.read_bytes()).hexdigest()
    run_node(ingest.NODE, RunContext(config, str(path), StageCache(tmp_path / "c2")), [])  # no fingerprint given: hashed
    assert len(reads) == 2
