"""Reading pretraining text into sentences of token-type ids.

Inputs: text files with one whitespace-tokenised sentence per line
(``lines``), raw text split and tokenised by spaCy (``paragraphs``: blank
lines separate paragraphs), ``.spacy`` DocBins, or directories of them (every
non-hidden file, recursively, in sorted order).

Every distinct token string becomes a *type*; sentences are stored as int32
arrays of type ids, and each type's character ids are computed once.
"""

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import numpy

from ..bilm.char_ids import BOS_TOKEN, EOS_TOKEN, MAX_CHARACTERS_PER_TOKEN, token_char_ids
from ..errors import PretrainDataError
from ..files.hashing import update_sha256
from ..files.text_lines import iter_utf8_lines

if TYPE_CHECKING:  # spaCy is imported only when a corpus needs splitting
    from spacy.language import Language

BOS_TYPE, EOS_TYPE = 0, 1


def input_files(path: Union[str, Path]) -> List[Path]:
    path = Path(path)
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not files:
            raise PretrainDataError(f"{path}: the directory holds no files")
        return files
    raise PretrainDataError(f"input text not found: {path}")


def inputs_sha256(path: Union[str, Path]) -> str:
    """One digest of every input file's name and bytes: a resumed run checks its text is unchanged."""
    digest = hashlib.sha256()
    for file in input_files(path):
        digest.update(file.name.encode("utf8") + b"\0")
        update_sha256(digest, file)
    return digest.hexdigest()


def split_long(tokens: Sequence[str], max_length: int) -> Iterator[List[str]]:
    """A sentence, cut into pieces of at most ``max_length`` tokens (nothing is dropped)."""
    for start in range(0, len(tokens), max_length):
        yield list(tokens[start : start + max_length])


class Corpus:
    """Sentences as type ids, plus the type table (shared by train and dev)."""

    def __init__(self, max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN):
        self.max_chars = max_characters_per_token
        self.types: List[str] = [BOS_TOKEN, EOS_TOKEN]
        self._type_ids: Dict[str, int] = {BOS_TOKEN: BOS_TYPE, EOS_TOKEN: EOS_TYPE}
        self._char_rows: List[Sequence[int]] = [token_char_ids(t, self.max_chars) for t in self.types]
        self._type_chars: Optional[numpy.ndarray] = None

    def encode(self, tokens: Sequence[str]) -> numpy.ndarray:
        ids = self._type_ids
        out = numpy.empty(len(tokens), dtype=numpy.int32)
        for i, token in enumerate(tokens):
            index = ids.get(token)
            if index is None:
                index = ids[token] = len(self.types)
                self.types.append(token)
                self._char_rows.append(token_char_ids(token, self.max_chars))
                self._type_chars = None
            out[i] = index
        return out

    @property
    def type_chars(self) -> numpy.ndarray:
        """``(n_types, max_chars)`` int16 char ids of every type."""
        if self._type_chars is None:
            self._type_chars = numpy.asarray(self._char_rows, dtype=numpy.int16)
        return self._type_chars

    def read(
        self,
        path: Union[str, Path],
        text_format: str = "auto",
        lang: str = "en",
        max_sentence_length: int = 100,
        max_sentences: int = 0,
        role: str = "training",
    ) -> List[numpy.ndarray]:
        """Sentences of every file under ``path``, as type-id arrays."""
        sentences: List[numpy.ndarray] = []
        for file in input_files(path):
            for tokens in read_file_sentences(file, text_format, lang):
                for piece in split_long(tokens, max_sentence_length):
                    sentences.append(self.encode(piece))
                    if max_sentences and len(sentences) >= max_sentences:
                        return sentences
        if not sentences:
            raise PretrainDataError(f"{path}: no sentences in the {role} text (the input is empty or blank)")
        return sentences

    def type_counts(self, sentences: Iterable[numpy.ndarray]) -> numpy.ndarray:
        counts = numpy.zeros(len(self.types), dtype=numpy.int64)
        for sentence in sentences:
            numpy.add.at(counts, sentence, 1)
        return counts


def read_file_sentences(path: Path, text_format: str, lang: str) -> Iterator[List[str]]:
    if path.suffix == ".spacy":
        yield from _docbin_sentences(path)
    elif text_format in ("auto", "lines"):
        for line in iter_utf8_lines(path, PretrainDataError):
            tokens = line.split()
            if tokens:
                yield tokens
    elif text_format == "paragraphs":
        yield from _paragraph_sentences(path, lang)
    else:
        raise PretrainDataError(f"unknown text format {text_format!r} for {path}")


def _docbin_sentences(path: Path) -> Iterator[List[str]]:
    import spacy
    from spacy.tokens import DocBin

    try:
        docbin = DocBin().from_disk(path)
    except Exception as err:  # srsly/msgpack raise various errors for a bad file
        raise PretrainDataError(f"{path}: not a readable .spacy DocBin ({type(err).__name__}: {err})") from err
    vocab = spacy.blank("xx").vocab
    for doc in docbin.get_docs(vocab):
        spans = doc.sents if doc.has_annotation("SENT_START") else [doc[:]]
        for span in spans:
            tokens = [t.text for t in span if not t.is_space]
            if tokens:
                yield tokens


def _paragraphs(path: Path) -> Iterator[str]:
    lines: List[str] = []
    for line in iter_utf8_lines(path, PretrainDataError):
        if line.strip():
            lines.append(line.strip())
        elif lines:
            yield " ".join(lines)
            lines = []
    if lines:
        yield " ".join(lines)


def _paragraph_sentences(path: Path, lang: str) -> Iterator[List[str]]:
    nlp = _sentence_splitter(lang)
    texts = (piece for paragraph in _paragraphs(path) for piece in split_paragraph(paragraph, nlp.max_length))
    for doc in nlp.pipe(texts, batch_size=64):
        for sent in doc.sents:
            tokens = [t.text for t in sent if not t.is_space]
            if tokens:
                yield tokens


# Where a paragraph over spaCy's max_length is cut: after a sentence end if there is one.
_SENTENCE_END = re.compile(r"[.!?]['\")\]]*\s")


def split_paragraph(text: str, max_length: int) -> Iterator[str]:
    """``text`` in pieces of at most ``max_length`` characters (spaCy refuses longer ones, E088),
    each cut after the piece's last sentence end, else at its last space: a 47 MB line becomes
    ~1 MB pieces whose sentences are whole but for at most one at each cut. Nothing is dropped."""
    start = 0
    while len(text) - start > max_length:
        window = text[start : start + max_length]
        ends = [m.end() for m in _SENTENCE_END.finditer(window)]
        cut = ends[-1] if ends else window.rfind(" ") + 1 or max_length
        yield window[:cut]
        start += cut
    yield text[start:]


def _sentence_splitter(lang: str) -> "Language":
    import spacy

    try:
        nlp = spacy.blank(lang)
    except Exception as err:
        raise PretrainDataError(f"corpus.lang {lang!r} is not a spaCy language code: {err}") from err
    nlp.add_pipe("sentencizer")
    return nlp
