"""bag: like set, but each column holds how often its token occurs in the row (float32).

Same vocabulary and metadata as set (``idx2str``, ``str2idx``, ``str2freq``, ``vocab_size``,
``max_set_size``); column 1 counts the row's tokens outside the vocabulary (``<UNK>``).
"""

from __future__ import annotations

from tasks.features.set import SetFeature, SetPreprocessing


class BagPreprocessing(SetPreprocessing):
    pass


class BagFeature(SetFeature):
    type_name = "bag"
    Preprocessing = BagPreprocessing
    out_dtype = "float32"
    binary = False
