"""The word vectors a continuous-output (vmf) head predicts, one row per vocabulary word.

Read from a spaCy pipeline directory (its ``vocab/``) or a ``vocab/``
directory itself, e.g. ``en_core_web_md``'s 300-d vectors. A word is looked
up as it is, then lower-cased; words without a vector get a zero row, which
the head leaves out of its loss (as it does the sentence boundaries).
"""

from pathlib import Path
from typing import Tuple, Union

import numpy

from ..errors import PretrainDataError
from .vocab import Vocabulary


def load_spacy_vectors(path: Union[str, Path]):
    from spacy.vocab import Vocab

    path = Path(path)
    vocab_dir = path / "vocab" if (path / "vocab").is_dir() else path
    if not (vocab_dir / "vectors").exists():
        raise PretrainDataError(
            f"paths.output_vectors: {path} holds no spaCy vectors (expected {vocab_dir / 'vectors'}): "
            "give a spaCy pipeline directory with vectors, e.g. en_core_web_md"
        )
    vectors = Vocab().from_disk(vocab_dir).vectors
    if vectors.shape[0] == 0:
        raise PretrainDataError(f"paths.output_vectors: {vocab_dir} has an empty vector table")
    return vectors


def target_vectors(path: Union[str, Path], vocab: Vocabulary) -> Tuple[numpy.ndarray, float]:
    """``(len(vocab), width)`` float32 rows and the share of vocabulary words that have a vector."""
    vectors = load_spacy_vectors(path)
    table = numpy.asarray(vectors.data, dtype=numpy.float32)
    out = numpy.zeros((len(vocab), table.shape[1]), dtype=numpy.float32)
    found = 0
    for i, word in enumerate(vocab.words):
        row = vectors.find(key=word)
        if row < 0:
            row = vectors.find(key=word.lower())
        if row >= 0 and numpy.any(table[row]):
            out[i] = table[row]
            found += 1
    if found == 0:
        raise PretrainDataError(
            f"paths.output_vectors: {path} has a vector for none of the {len(vocab)} vocabulary words"
        )
    return out, found / len(vocab)
