"""Where the biLM runs: each sentence of a Doc, or fixed windows when it has none.

The biLM was trained on sentences; running it per sentence keeps memory
bounded on long documents and makes each token's vectors depend only on its
own segment, which is what makes the output cacheable.
"""
from typing import List, Sequence, Tuple

from spacy.tokens import Doc

Segment = Tuple[int, int, int]  # (doc index, start token, end token)


def doc_segments(doc: Doc, max_length: int) -> List[Tuple[int, int]]:
    """Token ranges covering the doc: its sentences (if set), cut to ``max_length``."""
    if len(doc) == 0:
        return []
    if doc.has_annotation("SENT_START"):
        bounds = [(sent.start, sent.end) for sent in doc.sents]
    else:
        bounds = [(0, len(doc))]
    ranges = []
    for start, end in bounds:
        for window_start in range(start, end, max_length):
            ranges.append((window_start, min(window_start + max_length, end)))
    return ranges


def batch_segments(docs: Sequence[Doc], max_length: int) -> Tuple[List[Segment], List[Tuple[str, ...]]]:
    """All segments of a batch of docs, and each segment's token texts."""
    segments: List[Segment] = []
    texts: List[Tuple[str, ...]] = []
    for index, doc in enumerate(docs):
        words = [token.text for token in doc]
        for start, end in doc_segments(doc, max_length):
            segments.append((index, start, end))
            texts.append(tuple(words[start:end]))
    return segments, texts
