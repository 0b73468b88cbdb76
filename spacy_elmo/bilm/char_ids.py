"""Token text -> ELMo character ids, byte for byte as bilm-tf and AllenNLP.

A token becomes ``[BOW, utf-8 bytes (at most max_chars - 2)..., EOW, PAD...]``
and every id is shifted by +1 so that 0 can mean "no token here" (batch
padding). The sentence boundary tokens ``<S>`` and ``</S>`` have ids of their
own; a token whose text is literally ``<S>`` or ``</S>`` maps to them.
"""

from functools import lru_cache
from typing import Sequence, Tuple

import numpy

MAX_CHARACTERS_PER_TOKEN = 50

# Raw ids, before the +1 shift (bytes are 0..255).
BOS_CHAR = 256
EOS_CHAR = 257
BOW_CHAR = 258
EOW_CHAR = 259
PAD_CHAR = 260
# Rows of the character embedding at inference: 261 raw ids + the padding row 0.
N_CHARACTERS = 262

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _boundary_ids(char: int, max_chars: int) -> Tuple[int, ...]:
    ids = [PAD_CHAR] * max_chars
    ids[0], ids[1], ids[2] = BOW_CHAR, char, EOW_CHAR
    return tuple(i + 1 for i in ids)


@lru_cache(maxsize=200_000)
def token_char_ids(token: str, max_chars: int = MAX_CHARACTERS_PER_TOKEN) -> Tuple[int, ...]:
    """The shifted character ids of one token, a tuple of ``max_chars`` ints."""
    if token == BOS_TOKEN:
        return _boundary_ids(BOS_CHAR, max_chars)
    if token == EOS_TOKEN:
        return _boundary_ids(EOS_CHAR, max_chars)
    # "ignore" drops what cannot be encoded (lone surrogates); the cut may split
    # a multi-byte character, exactly as the reference implementations do.
    encoded = token.encode("utf-8", "ignore")[: max_chars - 2]
    ids = [PAD_CHAR] * max_chars
    ids[0] = BOW_CHAR
    ids[1 : len(encoded) + 1] = encoded
    ids[len(encoded) + 1] = EOW_CHAR
    return tuple(i + 1 for i in ids)


def sentence_char_ids(tokens: Sequence[str], max_chars: int = MAX_CHARACTERS_PER_TOKEN) -> numpy.ndarray:
    """``(len(tokens) + 2, max_chars)`` int64 ids of ``<S> tokens... </S>``."""
    rows = [token_char_ids(BOS_TOKEN, max_chars)]
    rows.extend(token_char_ids(token, max_chars) for token in tokens)
    rows.append(token_char_ids(EOS_TOKEN, max_chars))
    return numpy.asarray(rows, dtype=numpy.int64)


def batch_char_ids(
    sentences: Sequence[Sequence[str]], max_chars: int = MAX_CHARACTERS_PER_TOKEN
) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """Padded ids of a batch, boundaries included.

    Returns ``(ids, lengths)``: ids ``(batch, max_len + 2, max_chars)`` int64
    with 0 at padded positions, lengths ``(batch,)`` counting the boundaries.
    """
    lengths = numpy.asarray([len(s) + 2 for s in sentences], dtype=numpy.int64)
    width = int(lengths.max()) if len(sentences) else 2
    ids = numpy.zeros((len(sentences), width, max_chars), dtype=numpy.int64)
    for row, tokens in enumerate(sentences):
        ids[row, : lengths[row]] = sentence_char_ids(tokens, max_chars)
    return ids, lengths
