"""A worker's share of media decoding (tasks.media_cache.decoding._decode_slots): each item decoded, its tensor (or
the codec's fill for a failure or a known error) written at its slot of a store file, in one write."""

from __future__ import annotations

import numpy as np

from storage import media
from storage.media_image import ImageCodec
from tasks.media_cache.decoding import _decode_slots
from tests.unit.media.test_media_pipeline import make_image


def test_slots_are_decoded_and_written_at_their_offset(tmp_path):
    for i in range(3):
        make_image(tmp_path / f"p{i}.png", i)
    (tmp_path / "bad.png").write_bytes(b"\x89PNG not really")
    codec = ImageCodec(height=6, width=5, num_channels=3)
    sources = [str(tmp_path / n) for n in ("p0.png", "bad.png", "p1.png", "p2.png")]
    sha = [media.sha256_bytes((tmp_path / n).read_bytes()) for n in ("p0.png", "bad.png", "p1.png", "p2.png")]
    items = [(sources[0], sha[0], None), (sources[1], sha[1], None), (None, None, "file not found"),
             (sources[3], sha[3], None)]
    store = np.lib.format.open_memmap(tmp_path / "store.npy", mode="w+", dtype=codec.dtype, shape=(6, *codec.shape))
    store[:] = 7  # what the slots not in this task hold
    store.flush()
    slot_bytes = int(np.prod(codec.shape)) * codec.dtype.itemsize
    out = _decode_slots(codec, items, (str(tmp_path / "store.npy"), int(store.offset) + 1 * slot_bytes))
    assert [r[0] is None for r in out] == [True, False, True, True] and isinstance(out[1][0], str)
    got = np.load(tmp_path / "store.npy")
    assert (got[0] == 7).all() and (got[5] == 7).all()  # outside the task's slots: untouched
    assert np.array_equal(got[1], codec.decode((tmp_path / "p0.png").read_bytes())[0])
    assert np.array_equal(got[2], codec.fill()) and np.array_equal(got[3], codec.fill())  # failure, known error
    assert np.array_equal(got[4], codec.decode((tmp_path / "p2.png").read_bytes())[0])
    changed = [(sources[0], "0" * 64, None)]  # a file that is not the one hashed is a failure, not stale data
    assert "changed" in _decode_slots(codec, changed, None)[0][0]
