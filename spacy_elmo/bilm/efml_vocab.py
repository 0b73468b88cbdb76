"""ELMoForManyLangs' run-time vocabulary: token text -> the row of ids its token encoder
reads (``EfmlVocab``), as EFML 0.0.4.post2 makes it, and the checks a vocabulary passes
(the special entries EFML needs, ids inside the embedding). The dictionary files are
``spacy_elmo/formats/efml_dictionaries.py``'s; a saved pipeline carries the same maps.

- A token longer than ``max_characters_per_token - 2`` characters (code points) is
  cut to that length, for its word-dictionary lookup too. A token whose (cut) text is
  ``<bos>`` or ``<eos>`` is that sentence marker.
- A token's characters are ``[id of <eow>, chars..., id of <bow>, <pad>...]``: EFML
  swaps the two word-boundary ids (``bow_id, eow_id = <eow>, <bow>``); unknown
  characters and words are ``<oov>``; the char CNN runs over the whole padded width.
"""

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy

from ..errors import ElmoWeightsError

# The two vocabularies, named as their dictionary files (the messages name them so).
CHAR_DIC = "char.dic"
WORD_DIC = "word.dic"
BOS, EOS, BOW, EOW, OOV, PAD = "<bos>", "<eos>", "<bow>", "<eow>", "<oov>", "<pad>"
# The entries EFML needs in each vocabulary.
CHAR_SPECIALS = (BOW, EOW, OOV, PAD, BOS, EOS)
WORD_SPECIALS = (OOV, PAD)
# Token rows kept by a vocabulary's lookup cache before it starts afresh.
ROW_CACHE_SIZE = 200_000


class EfmlVocab:
    """Token text -> the row of ids the token encoder reads: ``[word id, char ids...]``,
    each shifted by +1 so that 0 means batch padding (a word-only model has no char ids,
    a char-only model a constant word column)."""

    def __init__(self, chars: Optional[Dict[str, int]], words: Optional[Dict[str, int]], max_chars: int):
        self.chars, self.words, self.max_chars = chars, words, max_chars
        if chars is not None:
            # EFML's create_one_batch: `bow_id, eow_id = ... ('<eow>', '<bow>', ...)`: swapped.
            self.start, self.end = chars[EOW], chars[BOW]
            self.char_oov, self.char_pad = chars[OOV], chars[PAD]
        if words is not None:
            self.word_oov = words[OOV]
        self.width = 1 + (max_chars if chars is not None else 0)
        self._rows: Dict[str, Tuple[int, ...]] = {}

    def token_row(self, token: str) -> Tuple[int, ...]:
        """A text token's row: cut to ``max_chars - 2`` characters first, as EFML's read_list."""
        row = self._rows.get(token)
        if row is None:
            if len(self._rows) >= ROW_CACHE_SIZE:
                self._rows.clear()
            cut = token[: self.max_chars - 2] if len(token) + 2 > self.max_chars else token
            row = self._rows[token] = self.row(cut)
        return row

    def row(self, text: str) -> Tuple[int, ...]:
        word = self.words.get(text, self.word_oov) + 1 if self.words is not None else 1
        if self.chars is None:
            return (word,)
        ids = [self.char_pad] * self.max_chars
        ids[0] = self.start
        if text in (BOS, EOS):
            ids[1], ids[2] = self.chars[text], self.end
        else:
            for k, char in enumerate(text):
                ids[k + 1] = self.chars.get(char, self.char_oov)
            ids[len(text) + 1] = self.end
        return (word, *(i + 1 for i in ids))

    def batch_ids(self, sentences: Sequence[Sequence[str]]) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """``(ids (batch, max_len + 2, width), lengths)`` with the markers, 0 at padding."""
        lengths = numpy.asarray([len(s) + 2 for s in sentences], dtype=numpy.int64)
        ids = numpy.zeros((len(sentences), int(lengths.max()) if len(sentences) else 2, self.width), dtype=numpy.int64)
        bos, eos = self.row(BOS), self.row(EOS)
        for k, tokens in enumerate(sentences):
            ids[k, : lengths[k]] = [bos, *(self.token_row(t) for t in tokens), eos]
        return ids, lengths


def checked_vocab(chars: Any, words: Any, dims: Tuple[int, int], max_chars: int, source: str) -> EfmlVocab:
    """The vocabularies a saved biLM carries (``dims``: its network's char_dim and word_dim;
    a 0 leaves that vocabulary out), checked as the dictionary files are."""
    lexicons: List[Optional[Dict[str, int]]] = []
    for lexicon, needed, dim, name in (
        (chars, CHAR_SPECIALS, dims[0], CHAR_DIC),
        (words, WORD_SPECIALS, dims[1], WORD_DIC),
    ):
        if not dim:
            lexicons.append(None)
            continue
        ok = isinstance(lexicon, dict) and all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in lexicon.items()
        )
        if not ok or len(set(lexicon.values())) != len(lexicon):
            raise ElmoWeightsError(f"{source}: its {name} vocabulary is not a map of tokens to distinct ids")
        check_specials(lexicon, f"{source}'s {name}", needed, len(lexicon))
        lexicons.append(lexicon)
    return EfmlVocab(lexicons[0], lexicons[1], max_chars)


def check_specials(lexicon: Dict[str, int], path: Union[str, Path], names: Sequence[str], rows: int) -> None:
    """EFML needs these entries; every id must index the embedding's ``rows``."""
    missing = [name for name in names if name not in lexicon]
    if missing:
        raise ElmoWeightsError(f"{path}: lacks the special entries {', '.join(missing)} that ELMoForManyLangs needs")
    outside = [token for token, index in lexicon.items() if index >= rows]
    if outside:
        raise ElmoWeightsError(
            f"{path}: {outside[0]!r} has id {lexicon[outside[0]]}, outside the embedding's {rows} rows"
        )
