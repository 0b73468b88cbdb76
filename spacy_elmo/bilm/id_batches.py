"""Sentences in length batches as the biLM reads them, and each batch's output split back
into its sentences: the one encoding path of ``embed_batch``, the component and ``embed``
(``ElmoBiLM.id_batches`` makes the batches, a caller runs each)."""

from typing import Any, Iterator, List, NamedTuple, Sequence, Tuple

import numpy

# Stateless batches group length-sorted sentences into batches of at most this many padded
# positions (and this many rows): big enough for efficient matmuls, small enough to bound
# memory on long inputs.
MAX_BATCH_POSITIONS = 4096
MAX_BATCH_ROWS = 128


class IdsBatch(NamedTuple):
    """One batch of sentences as the biLM reads them: ``rows`` are the sentences' indices,
    one per batch row; ``ids``/``lengths`` what ``forward`` takes (``ElmoBiLM.batch_ids``)."""

    rows: List[int]
    ids: numpy.ndarray
    lengths: numpy.ndarray

    def sentences(self, layers: Any, copy: bool = True) -> Iterator[Tuple[int, Any]]:
        """``(sentence index, (L+1, n, 2P) layers)`` for each row of the batch's
        ``(L+1, B, T, 2P)`` output (numpy, or cupy through thinc), boundaries dropped:
        each a C-contiguous copy (so no batch stays alive behind a cached result), or
        with ``copy=False`` a view (autograd's outputs, kept for the backward pass)."""
        for row, index in enumerate(self.rows):
            sentence = sentence_layers(layers, row, self.lengths[row])
            yield index, sentence.copy() if copy else sentence


def sentence_layers(layers: Any, row: int, length: int) -> Any:
    """Row ``row`` of a batch's ``(L+1, B, T, 2P)`` layers without its boundary tokens
    (``<S>`` first, ``</S>`` at ``length - 1``, ``length`` counting both): the sentence's
    ``(L+1, n, 2P)``, a view."""
    return layers[:, row, 1 : length - 1]


def length_batches(lengths: Sequence[int]) -> List[List[int]]:
    """Sentence indices grouped into batches of similar length (longest first),
    each within ``MAX_BATCH_POSITIONS`` padded positions and ``MAX_BATCH_ROWS`` rows."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: List[List[int]] = []
    current: List[int] = []
    for index in order:
        width = lengths[current[0]] + 2 if current else lengths[index] + 2
        if current and (width * (len(current) + 1) > MAX_BATCH_POSITIONS or len(current) >= MAX_BATCH_ROWS):
            groups.append(current)
            current = []
        current.append(index)
    if current:
        groups.append(current)
    return groups
