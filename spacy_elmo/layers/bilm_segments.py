"""Where the biLM runs: each sentence of a Doc, or overlapping windows when it has none.

The biLM was trained on sentences; running it per sentence keeps memory
bounded on long documents and makes each token's vectors depend only on its
own segment, which is what makes the output cacheable. A run longer than
``max_length`` (a doc without sentence boundaries, an overlong sentence) goes
in overlapping windows, each token taking its vectors from the window it is
most central in (``bilm.windows``).
"""

from typing import List, NamedTuple, Sequence, Tuple

from spacy.tokens import Doc

from ..bilm.windows import Window, strided_windows


class Segment(NamedTuple):
    doc: int  # index of the doc in the batch
    window: Window  # tokens the biLM runs on, and its own tokens, which take its output


def doc_segments(doc: Doc, max_length: int) -> List[Window]:
    """Windows covering the doc: its sentences (if set), in overlapping windows of at most ``max_length``."""
    if len(doc) == 0:
        return []
    if doc.has_annotation("SENT_START"):
        bounds = [(sent.start, sent.end) for sent in doc.sents]
    else:
        bounds = [(0, len(doc))]
    return [window for start, end in bounds for window in strided_windows(start, end, max_length)]


def batch_segments(docs: Sequence[Doc], max_length: int) -> Tuple[List[Segment], List[Tuple[str, ...]]]:
    """All segments of a batch of docs, and each segment's token texts."""
    segments: List[Segment] = []
    texts: List[Tuple[str, ...]] = []
    for index, doc in enumerate(docs):
        words = [token.text for token in doc]
        for window in doc_segments(doc, max_length):
            segments.append(Segment(index, window))
            texts.append(tuple(words[window.start : window.end]))
    return segments, texts
