"""bag: like set, but each column holds how often its token occurs in the row (float32).

Same vocabulary and metadata as set (``idx2str``, ``str2idx``, ``str2freq``, ``vocab_size``,
``max_set_size``); column 1 counts the row's tokens outside the vocabulary (``<UNK>``).

``symbols: ludwig`` (set by ``compatibility: ludwig``) is Ludwig's bag vocabulary (``create_vocabulary``
with its special symbols): ``<EOS>``, ``<SOS>``, ``<PAD>``, ``<UNK>`` at ids 0-3, then the ``most_common``
tokens by count, equal counts in first-occurrence order, as for sequence; ``max_set_size`` the largest
row + 2, as Ludwig stores it (rows are not wrapped); column 3 counts the tokens outside the vocabulary.
"""

from __future__ import annotations

from tasks.features.set import SetFeature, SetPreprocessing
from tasks.features.token_ids import LUDWIG_SPECIALS


class BagPreprocessing(SetPreprocessing):
    pass


class BagFeature(SetFeature):
    type_name = "bag"
    Preprocessing = BagPreprocessing
    out_dtype = "float32"
    binary = False

    def ludwig_specials(self) -> list[str]:
        return list(LUDWIG_SPECIALS)
