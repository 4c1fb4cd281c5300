"""category's ids per row from each distinct value's id: hashed into buckets, or gathered by a dictionary's
codes (each distinct value looked up or hashed once, not each row)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import string_hash
from tasks.features.category_options import UNK


def hash_ids(arr: pa.Array, buckets: int, offset: int) -> np.ndarray:
    """``offset + hash mod buckets`` per value; nulls and the literal ``<UNK>`` -> 0 (each distinct value hashed once)."""
    if len(arr) == 0:
        return np.zeros(0, np.int32)
    encoded = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    distinct = encoded.dictionary
    ids_of = (offset + string_hash.buckets(string_hash.hash_strings(distinct), buckets)).astype(np.int32)
    ids_of[pc.equal(distinct, UNK).to_numpy(zero_copy_only=False)] = 0
    return ids_by_code(ids_of, encoded.indices)


def ids_by_code(ids_of: np.ndarray, codes: pa.Array, missing: int = 0) -> np.ndarray:
    """Each row's id from its distinct value's (``ids_of[code]``); a missing value (null code) -> ``missing``.

    The codes are read from their Arrow buffer as NumPy integers, and a null's slot (its value undefined)
    is pointed at ``missing``, appended to ``ids_of``: one gather. Arrow's ``fill_null`` of the codes
    costs more than the gather itself."""
    if len(codes) == 0:
        return np.zeros(0, np.int32)
    table = np.append(np.asarray(ids_of, np.int32), np.int32(missing))
    dtype = np.dtype(codes.type.to_pandas_dtype())
    raw = np.frombuffer(codes.buffers()[1], dtype=dtype, count=codes.offset + len(codes))[codes.offset:]
    if codes.null_count:
        raw = np.where(codes.is_valid().to_numpy(zero_copy_only=False), raw, len(ids_of))
    return table[raw]
