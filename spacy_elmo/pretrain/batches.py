"""Batches of about ``batch_size`` tokens, the same on every run with the same seed.

Each epoch shuffles the sentences with a generator seeded by (seed, epoch),
sorts them by length within pools of ~50 batches (little padding), cuts
batches by token count and shuffles the batch order. A data position is just
(epoch, batch index), so a resumed run picks up exactly where it stopped.
"""

from typing import List, Sequence, Union

import numpy
import torch

from .corpus import BOS_TYPE, EOS_TYPE

POOL_BATCHES = 50


def epoch_batches(
    lengths: Union[Sequence[int], numpy.ndarray], batch_tokens: int, seed: int, epoch: int
) -> List[numpy.ndarray]:
    """Sentence indices per batch; each batch holds at most ``batch_tokens``
    tokens (a longer sentence gets a batch of its own)."""
    lengths = numpy.asarray(lengths)
    rng = numpy.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    mean_length = max(1.0, float(lengths.mean())) if len(lengths) else 1.0
    pool_size = max(1, int(POOL_BATCHES * batch_tokens / mean_length))
    batches: List[numpy.ndarray] = []
    for start in range(0, len(order), pool_size):
        pool = order[start : start + pool_size]
        pool = pool[numpy.argsort(lengths[pool], kind="stable")]
        current: List[int] = []
        tokens = 0
        for index in pool:
            if current and tokens + lengths[index] > batch_tokens:
                batches.append(numpy.asarray(current))
                current, tokens = [], 0
            current.append(int(index))
            tokens += int(lengths[index])
        if current:
            batches.append(numpy.asarray(current))
    rng.shuffle(batches)  # type: ignore[arg-type]
    return batches


def make_batch(sentences: Sequence[numpy.ndarray], type_chars: numpy.ndarray, type_words: numpy.ndarray):
    """Tensors for ``BidirectionalLM``: the batch's distinct types' char ids,
    each position's index among them, vocabulary ids and lengths (with ``<S>``/``</S>``)."""
    lengths = numpy.asarray([len(s) + 2 for s in sentences], dtype=numpy.int64)
    positions = numpy.full((len(sentences), int(lengths.max())), BOS_TYPE, dtype=numpy.int64)
    for row, sentence in enumerate(sentences):
        positions[row, 1 : len(sentence) + 1] = sentence
        positions[row, len(sentence) + 1] = EOS_TYPE
    unique, inverse = numpy.unique(positions, return_inverse=True)
    return (
        torch.from_numpy(type_chars[unique].astype(numpy.int64)),
        torch.from_numpy(inverse.reshape(positions.shape)),
        torch.from_numpy(type_words[positions]),
        torch.from_numpy(lengths),
    )
