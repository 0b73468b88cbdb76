"""The word vocabulary of the LM softmax: ``<S>``, ``</S>``, ``<UNK>``, then the
training words by falling frequency (ties by first appearance), as bilm-tf's
vocabulary files. The order matters: the sampled and adaptive softmaxes assume
frequent words come first."""

from pathlib import Path
from typing import Dict, List, Sequence, Union

import numpy

from ..bilm.char_ids import BOS_TOKEN, EOS_TOKEN
from ..errors import PretrainDataError
from ..files.atomic import write_text_atomic
from ..files.text_lines import iter_utf8_lines

UNK_TOKEN = "<UNK>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
UNK_ID = 2


class Vocabulary:
    def __init__(self, words: Sequence[str]):
        self.words: List[str] = list(words)
        if tuple(self.words[:3]) != SPECIAL_TOKENS:
            raise PretrainDataError(f"a vocabulary must start with {list(SPECIAL_TOKENS)}, got {self.words[:3]}")
        self.index: Dict[str, int] = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            seen = set()
            dup = next(w for w in self.words if w in seen or seen.add(w))  # type: ignore[func-returns-value]
            raise PretrainDataError(f"the vocabulary lists {dup!r} twice")

    def __len__(self) -> int:
        return len(self.words)

    @classmethod
    def build(
        cls, types: Sequence[str], counts: numpy.ndarray, min_count: int = 1, max_size: int = 50000
    ) -> "Vocabulary":
        """From corpus type counts (``counts[i]`` for ``types[i]``); types are
        in order of first appearance, so a stable sort breaks ties by it."""
        order = numpy.argsort(-counts, kind="stable")
        words = list(SPECIAL_TOKENS)
        for index in order:
            if len(words) >= max_size or counts[index] < min_count:
                break
            if types[index] not in SPECIAL_TOKENS:
                words.append(types[index])
        return cls(words)

    def ids(self, types: Sequence[str]) -> numpy.ndarray:
        """Vocabulary id of each type (``<UNK>`` for words outside it)."""
        get = self.index.get
        return numpy.fromiter((get(t, UNK_ID) for t in types), dtype=numpy.int64, count=len(types))

    def to_file(self, path: Union[str, Path]) -> None:
        write_text_atomic(path, "".join(w + "\n" for w in self.words))

    @classmethod
    def from_file(cls, path: Union[str, Path]) -> "Vocabulary":
        path = Path(path)
        if not path.is_file():
            raise PretrainDataError(f"vocabulary file not found: {path}")
        words = [line.strip() for line in iter_utf8_lines(path, PretrainDataError) if line.strip()]
        try:
            return cls(words)
        except PretrainDataError as err:
            raise PretrainDataError(f"{path}: {err}") from err
